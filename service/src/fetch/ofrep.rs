//! An agent's prompt, tools and model settings as OpenFeature flags, evaluated as
//! OFREP 0.3 specifies (`http::ofrep` carries them), so that a team's OpenFeature
//! providers read what loadout serves.
//!
//! Flag keys (`:` never appears in a name, so a key splits one way):
//! - `AGENT:prompt:CHANNEL`: the rendered prompt, a string;
//! - `AGENT:tools:FORMAT` (`openai`, `anthropic`, `mcp`): the tool list, an object
//!   as `GET /v1/agents/{agent}/tools` answers it;
//! - `AGENT:model` and `AGENT:model:CHANNEL`: the model settings, an object.
//!
//! The context: `targetingKey` is the user (their instructions are rendered, and
//! a running rollout splits on it), `label` the label (`production` when absent),
//! `tz` the time zone; other attributes are ignored. The `variant` is the revision
//! served; the `reason` `STATIC`, `SPLIT` (a rollout runs and split this user), or
//! `DISABLED` with no value (the agent has no such label, or the revision no model
//! settings: the provider serves its code default).

use std::collections::BTreeMap;

use entity::agent_configurations as agents;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use serde::Serialize;
use serde_json::Value;

use super::{Pick, Prompts, RenderRequest, Viewer};
use crate::error::{Error, Kind, Result};
use crate::registry::formats::Format;

/// Agents one bulk evaluation covers at most; a key that reaches more names one
/// in `context.agent`.
pub const MAX_AGENTS: usize = 50;

/// What a flag key names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flag {
    Prompt(String),
    Tools(Format),
    Model(Option<String>),
}

/// A parsed flag key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub agent: String,
    pub flag: Flag,
}

impl Key {
    /// The key in its text form.
    pub fn text(&self) -> String {
        match &self.flag {
            Flag::Prompt(channel) => format!("{}:prompt:{channel}", self.agent),
            Flag::Tools(format) => format!("{}:tools:{format}", self.agent),
            Flag::Model(None) => format!("{}:model", self.agent),
            Flag::Model(Some(channel)) => format!("{}:model:{channel}", self.agent),
        }
    }
}

/// `key` as a flag, or `None` when it names none of loadout's.
pub fn parse_key(key: &str) -> Option<Key> {
    let mut parts = key.split(':');
    let agent = parts.next().filter(|a| crate::vocab::valid_name(a))?;
    let kind = parts.next()?;
    let rest = parts.next();
    if parts.next().is_some() {
        return None;
    }
    let flag = match (kind, rest) {
        ("prompt", Some(channel)) if crate::vocab::valid_name(channel) => {
            Flag::Prompt(channel.to_owned())
        }
        ("tools", Some(format)) => Flag::Tools(format.parse().ok()?),
        ("model", None) => Flag::Model(None),
        ("model", Some(channel)) if crate::vocab::valid_name(channel) => {
            Flag::Model(Some(channel.to_owned()))
        }
        _ => return None,
    };
    Some(Key {
        agent: agent.to_owned(),
        flag,
    })
}

/// The evaluation context loadout reads.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub targeting_key: Option<String>,
    pub label: Option<String>,
    pub tz: Option<String>,
    /// Bulk only: the one agent to evaluate, for a key that reaches every agent.
    pub agent: Option<String>,
}

impl Context {
    /// The context object as sent: the attributes loadout reads must be strings;
    /// anything else is ignored (OFREP contexts carry whatever the app knows).
    pub fn read(context: Option<&serde_json::Map<String, Value>>) -> Result<Self> {
        let Some(context) = context else {
            return Ok(Self::default());
        };
        let text = |name: &str| -> Result<Option<String>> {
            match context.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(Error::invalid(format!("context.{name} must be a string"))),
            }
        };
        let found = Self {
            targeting_key: text("targetingKey")?.filter(|k| !k.is_empty()),
            label: text("label")?,
            tz: text("tz")?,
            agent: text("agent")?,
        };
        if let Some(user) = &found.targeting_key {
            crate::error::check_id("targetingKey", user)?;
        }
        if let Some(label) = &found.label {
            crate::error::check_label(label)?;
        }
        super::parse_tz(found.tz.as_deref())?;
        Ok(found)
    }

    fn label(&self) -> &str {
        self.label.as_deref().unwrap_or(crate::releases::PRODUCTION)
    }
}

/// A scalar of a flag's `metadata` (OFREP allows no nesting).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Scalar {
    Text(String),
    Number(i64),
}

/// One flag's evaluation, as OFREP's `evaluationSuccess`.
#[derive(Debug, Clone, Serialize)]
pub struct Evaluation {
    pub key: String,
    /// Absent: use the code default (`DISABLED`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    pub reason: &'static str,
    pub variant: String,
    pub metadata: BTreeMap<&'static str, Scalar>,
}

/// One flag that could not be evaluated, as OFREP's `evaluationFailure` (or
/// `flagNotFound`).
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub key: String,
    #[serde(rename = "errorCode")]
    pub error_code: &'static str,
    #[serde(rename = "errorDetails")]
    pub error_details: String,
}

impl Failure {
    /// loadout's error as OFREP's: a missing agent, channel or revision is
    /// `FLAG_NOT_FOUND`, bad input `INVALID_CONTEXT`, the rest `GENERAL`.
    pub fn of(key: &str, error: &Error) -> Self {
        let error_code = match error.kind {
            Kind::NotFound => "FLAG_NOT_FOUND",
            Kind::Invalid => "INVALID_CONTEXT",
            _ => "GENERAL",
        };
        let error_details = match error.kind {
            Kind::Internal => "the flag could not be evaluated".to_owned(),
            _ => error.message.clone(),
        };
        Self {
            key: key.to_owned(),
            error_code,
            error_details,
        }
    }
}

/// Who asks and with what.
pub struct Asking<'a> {
    pub viewer: Viewer<'a>,
    pub context: &'a Context,
    pub now: chrono::DateTime<chrono::Utc>,
}

/// Evaluates one flag for `asking`.
pub async fn evaluate(state: &Prompts<'_>, asking: &Asking<'_>, key: &Key) -> Result<Evaluation> {
    let label = asking.context.label();
    let subject = asking.context.targeting_key.as_deref();
    super::agent(state, &key.agent).await?;
    let pick = match super::pick(state, &key.agent, label, subject).await {
        Ok(pick) => pick,
        Err(e) if e.code == "label_not_found" => return Ok(disabled(key, label, None)),
        Err(e) => return Err(e),
    };
    evaluate_picked(state, asking, key, &pick).await
}

async fn evaluate_picked(
    state: &Prompts<'_>,
    asking: &Asking<'_>,
    key: &Key,
    pick: &Pick,
) -> Result<Evaluation> {
    let label = asking.context.label();
    let user = asking.context.targeting_key.as_deref();
    let viewer = Viewer {
        user,
        ..asking.viewer
    };
    let value = match &key.flag {
        Flag::Prompt(channel) => {
            let request = RenderRequest {
                channel: Some(channel.clone()),
                user_id: user.map(str::to_owned),
                tz: asking.context.tz.clone(),
                now: Some(asking.now),
                ..Default::default()
            };
            let view = super::render(state, viewer, pick, label, request).await?;
            Value::String(view.text)
        }
        Flag::Tools(format) => {
            let shown = super::visible(state, pick, viewer).await?;
            let view = super::tools(pick, label, *format, &shown);
            serde_json::to_value(view).map_err(Error::internal)?
        }
        Flag::Model(channel) => {
            if let Some(channel) = channel {
                pick.served
                    .channels
                    .get(channel)
                    .map_err(|e| Error::not_found(e.to_string()))?;
            }
            match super::model_for(pick, channel.as_deref()) {
                Some(model) => serde_json::to_value(model).map_err(Error::internal)?,
                None => return Ok(disabled(key, label, Some(pick))),
            }
        }
    };
    let reason = match (pick.rollout, user) {
        (Some(_), Some(_)) => "SPLIT",
        _ => "STATIC",
    };
    Ok(Evaluation {
        key: key.text(),
        value: Some(value),
        reason,
        variant: pick.served.number.to_string(),
        metadata: metadata(key, label, Some(pick)),
    })
}

fn disabled(key: &Key, label: &str, pick: Option<&Pick>) -> Evaluation {
    Evaluation {
        key: key.text(),
        value: None,
        reason: "DISABLED",
        variant: "disabled".to_owned(),
        metadata: metadata(key, label, pick),
    }
}

fn metadata(key: &Key, label: &str, pick: Option<&Pick>) -> BTreeMap<&'static str, Scalar> {
    let mut metadata = BTreeMap::from([
        ("agent", Scalar::Text(key.agent.clone())),
        ("label", Scalar::Text(label.to_owned())),
    ]);
    if let Some(pick) = pick {
        metadata.insert("revision", Scalar::Number(pick.served.number.into()));
        if let Some(rollout) = pick.rollout {
            metadata.insert("rollout", Scalar::Number(rollout.id.into()));
            let side = serde_json::to_value(rollout.side)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            metadata.insert("side", Scalar::Text(side));
        }
    }
    metadata
}

/// Every flag of `agent`, for a bulk evaluation: each channel's prompt and model
/// settings, the agent's model settings, each format's tools. A label the agent
/// lacks makes every flag `DISABLED`, over the channels configured now.
pub async fn agent_flags(
    state: &Prompts<'_>,
    asking: &Asking<'_>,
    agent: &str,
) -> Result<Vec<std::result::Result<Evaluation, Failure>>> {
    let label = asking.context.label();
    let subject = asking.context.targeting_key.as_deref();
    let pick = match super::pick(state, agent, label, subject).await {
        Ok(pick) => Some(pick),
        Err(e) if e.code == "label_not_found" => None,
        Err(e) => return Err(e),
    };
    let channels: Vec<String> = match &pick {
        Some(pick) => pick.served.channels.names().map(str::to_owned).collect(),
        None => super::channels(state)
            .await?
            .names()
            .map(str::to_owned)
            .collect(),
    };
    let mut keys: Vec<Flag> = Vec::new();
    keys.extend(channels.iter().cloned().map(Flag::Prompt));
    keys.extend([Format::Openai, Format::Anthropic, Format::Mcp].map(Flag::Tools));
    keys.push(Flag::Model(None));
    keys.extend(channels.into_iter().map(|c| Flag::Model(Some(c))));
    let mut out = Vec::with_capacity(keys.len());
    for flag in keys {
        let key = Key {
            agent: agent.to_owned(),
            flag,
        };
        let Some(pick) = &pick else {
            out.push(Ok(disabled(&key, label, None)));
            continue;
        };
        out.push(
            evaluate_picked(state, asking, &key, pick)
                .await
                .map_err(|e| Failure::of(&key.text(), &e)),
        );
    }
    Ok(out)
}

/// The live agents' names, at most `most`, by name: what a bulk evaluation covers
/// for a key that reaches every agent.
pub async fn agent_names(state: &Prompts<'_>, most: usize) -> Result<Vec<String>> {
    let names = agents::Entity::find()
        .select_only()
        .column(agents::Column::Name)
        .filter(agents::Column::DeletedAt.is_null())
        .order_by_asc(agents::Column::Name)
        .limit(u64::try_from(most).unwrap_or(u64::MAX))
        .into_tuple()
        .all(state.db)
        .await?;
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_splits_one_way_and_round_trips() {
        for text in [
            "assistant:prompt:web",
            "my.agent:tools:anthropic",
            "a-b:model",
            "a_b:model:voice.v2",
        ] {
            let key = parse_key(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(key.text(), text);
        }
        assert_eq!(
            parse_key("assistant:prompt:web").unwrap().flag,
            Flag::Prompt("web".into())
        );
        for bad in [
            "assistant",
            "assistant:prompt",
            "assistant:tools:xml",
            "assistant:prompt:web:x",
            "Assistant:model",
            ":model",
            "assistant:other:web",
        ] {
            assert_eq!(parse_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_context_reads_strings_and_refuses_other_types_for_its_attributes() {
        let object = |v: Value| v.as_object().cloned().unwrap();
        let read = Context::read(Some(&object(serde_json::json!({
            "targetingKey": "u1", "label": "staging", "plan": 3, "tz": "Europe/Berlin"
        }))))
        .unwrap();
        assert_eq!(read.targeting_key.as_deref(), Some("u1"));
        assert_eq!(read.label(), "staging");
        let empty = Context::read(Some(&object(serde_json::json!({"targetingKey": ""})))).unwrap();
        assert_eq!(empty.targeting_key, None);
        assert_eq!(empty.label(), "production");
        for bad in [
            serde_json::json!({"targetingKey": 5}),
            serde_json::json!({"label": "Not A Label"}),
            serde_json::json!({"tz": "Mars/Olympus"}),
        ] {
            let error = Context::read(Some(&object(bad.clone()))).unwrap_err();
            assert_eq!(error.kind, Kind::Invalid, "{bad}");
        }
    }
}
