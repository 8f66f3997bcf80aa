//! A prompt in Langfuse's shape (its `TextPrompt`), for the Langfuse-compatible
//! read API (`http::langfuse`): tools that read prompts from Langfuse read loadout's.
//!
//! - The name is `AGENT/CHANNEL` for the agent's prompt rendered for that channel
//!   (loadout's text: what `GET /v1/agents/{agent}/prompt` serves with no user), or
//!   `AGENT` for the agent's template itself in Langfuse's `{{variable}}` syntax
//!   (the application's `compile` fills it, as it did with Langfuse).
//! - `version` is a revision number; otherwise `label` (`production` when absent)
//!   names the revision, as Langfuse's does: any label Langfuse allows is looked up,
//!   and one the agent does not have (or loadout cannot hold) is 404, never 400. A label's running rollout serves its
//!   base: a Langfuse client names no subject.
//! - `config` is the revision's model settings for the channel (Langfuse users keep
//!   `model` and `temperature` there); `labels` are the labels at that revision.
//!
//! Nothing is invented: an agent without a template (the built-in assembly) has no
//! `AGENT` prompt, and a name loadout cannot hold is not found.

use serde::Serialize;
use serde_json::Value;

use super::{Pick, Prompts, RenderRequest};
use crate::error::{Error, Result};
use crate::prompt::mustache;
use crate::releases::PRODUCTION;
use crate::releases::model::Parameters;

/// Which prompt a Langfuse client asks for.
pub struct Wanted<'a> {
    /// The prompt's name, as sent (decoded).
    pub name: &'a str,
    pub version: Option<i32>,
    pub label: Option<&'a str>,
}

/// Langfuse's `TextPrompt`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TextPrompt {
    pub name: String,
    /// The revision's number.
    pub version: i32,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub prompt: String,
    pub config: Config,
    pub labels: Vec<String>,
    pub tags: Vec<String>,
    /// loadout's revisions carry no message.
    pub commit_message: Option<String>,
}

/// The model settings served for the channel, flat as Langfuse users keep them.
#[derive(Debug, Default, Serialize)]
pub struct Config {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(flatten)]
    pub parameters: Parameters,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<Value>,
}

/// 404 for a prompt loadout does not have.
fn no_prompt(name: &str, why: &str) -> Error {
    Error::not_found(format!("no prompt named {name:?}: {why}"))
}

/// `AGENT` or `AGENT/CHANNEL`.
pub fn split(name: &str) -> Result<(&str, Option<&str>)> {
    let (agent, channel) = match name.split_once('/') {
        Some((agent, channel)) => (agent, Some(channel)),
        None => (name, None),
    };
    let valid = crate::vocab::valid_name(agent) && channel.is_none_or(crate::vocab::valid_name);
    if !valid {
        return Err(no_prompt(
            name,
            "loadout's prompts are named AGENT (its template) or AGENT/CHANNEL (rendered)",
        ));
    }
    Ok((agent, channel))
}

/// The agent's prompt `wanted` names, as a Langfuse client reads it. `tenant` and
/// `member`: the key's (a render with no user reads no tenant data, but a policy
/// may hide a tool's section from the key's member).
pub async fn prompt(
    state: &Prompts<'_>,
    tenant: &str,
    member: &str,
    wanted: Wanted<'_>,
) -> Result<TextPrompt> {
    let (agent, channel) = split(wanted.name)?;
    let label = wanted.label.unwrap_or(PRODUCTION);
    let pick = match wanted.version {
        Some(number) => Pick {
            served: super::revision(state, agent, number).await?,
            rollout: None,
        },
        // Langfuse looks a label up and finds none: no label loadout cannot hold is there.
        None if !crate::vocab::valid_label(label) => {
            return Err(crate::releases::serve::label_not_found(agent, label));
        }
        None => super::pick(state, agent, label, None).await?,
    };
    let served = &pick.served;
    let text = match channel {
        Some(channel) => {
            let request = RenderRequest {
                channel: Some(channel.to_owned()),
                now: Some(state.clock.now()),
                ..Default::default()
            };
            let viewer = super::Viewer {
                tenant,
                member,
                user: None,
            };
            super::render(state, viewer, &pick, label, request)
                .await?
                .text
        }
        None => match served.agent.agent.prompt_template.as_deref() {
            Some(template) if !template.trim().is_empty() => mustache::from_template(template),
            _ => {
                return Err(no_prompt(
                    wanted.name,
                    "the agent renders loadout's built-in assembly, not a template; ask for AGENT/CHANNEL",
                ));
            }
        },
    };
    let config = served
        .model
        .as_ref()
        .map(|m| {
            let m = m.resolve(channel);
            Config {
                model: m.model,
                parameters: m.parameters,
                response_schema: m.response_schema,
            }
        })
        .unwrap_or_default();
    let labels = crate::releases::read::labels_at(state.db, served.id).await?;
    Ok(TextPrompt {
        name: wanted.name.to_owned(),
        version: served.number,
        kind: "text",
        prompt: text,
        config,
        labels,
        tags: Vec::new(),
        commit_message: None,
    })
}
