//! Evaluations: a revision run against a real model on a dataset of cases, as a
//! release check and in the console.
//!
//! - `cases`: a dataset's cases (loadout's shape, and promptfoo's test format read
//!   into it); `assertions`: scoring a reply; `compare`: a candidate against its
//!   base on the same cases (pass rates, McNemar's exact test).
//! - `chat`: the OpenAI-compatible Chat Completions client, over the one outbound
//!   client and its address check.

pub mod chat;
