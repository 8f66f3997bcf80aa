//! Evaluations: a revision run against a real model on a dataset of cases, as a
//! release check and in the console.
//!
//! - `cases`: a dataset's cases (loadout's shape), and `promptfoo`: promptfoo's
//!   test format read into it; `kinds`: the assertion types scored and their
//!   values' shapes; `yaml`: YAML read with budgets; `assertions`: scoring a reply;
//!   `compare`: a candidate against its base on the same cases (pass rates,
//!   McNemar's exact test).
//! - `chat`: the OpenAI-compatible Chat Completions client, over the one outbound
//!   client and its address check.

pub mod assertions;
pub mod cases;
pub mod compare;
pub mod kinds;
pub mod promptfoo;
pub mod yaml;
