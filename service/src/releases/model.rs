//! An agent's model settings, versioned with its prompt and tools: the model's
//! name, its parameters (temperature, max tokens, free-form provider options) and
//! an optional response JSON schema, per agent and optionally per channel. loadout
//! serves them and never calls a model: the application passes them on.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::error::{Error, Result};

/// The longest model name.
pub const MAX_MODEL_BYTES: usize = 200;
/// The largest settings, response schema and options included.
pub const MAX_SETTINGS_BYTES: usize = 64 * 1024;

/// The model settings of an agent (`channels` override them per channel).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelSettings {
    /// The model's name as the provider knows it (`gpt-4.1`, `claude-sonnet-4-5`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Parameters::is_empty")]
    pub parameters: Parameters,
    /// The JSON Schema the model's answer must follow (structured output); an object schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub response_schema: Option<Value>,
    /// Per channel: what differs from the agent's settings there.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub channels: BTreeMap<String, ChannelModel>,
}

/// The model's sampling parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Parameters {
    /// 0 to 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// At least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Anything else the provider takes (`reasoning_effort`, `seed`, ...), passed on as given.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    #[schema(value_type = Object)]
    pub provider_options: Map<String, Value>,
}

impl Parameters {
    pub fn is_empty(&self) -> bool {
        self == &Parameters::default()
    }
}

/// A channel's settings: each field given replaces the agent's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChannelModel {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Each parameter given replaces the agent's; provider options are merged by key.
    #[serde(default, skip_serializing_if = "Parameters::is_empty")]
    pub parameters: Parameters,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub response_schema: Option<Value>,
}

/// The settings one channel is served: the agent's with the channel's over them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ServedModel {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Parameters::is_empty")]
    pub parameters: Parameters,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub response_schema: Option<Value>,
}

impl ModelSettings {
    /// Whether nothing is set (stored and served as absent).
    pub fn is_empty(&self) -> bool {
        self == &ModelSettings::default()
    }

    /// What `channel` is served (`None`: the agent's own).
    pub fn resolve(&self, channel: Option<&str>) -> ServedModel {
        let mut served = ServedModel {
            model: self.model.clone(),
            parameters: self.parameters.clone(),
            response_schema: self.response_schema.clone(),
        };
        let Some(over) = channel.and_then(|c| self.channels.get(c)) else {
            return served;
        };
        if over.model.is_some() {
            served.model.clone_from(&over.model);
        }
        if over.response_schema.is_some() {
            served.response_schema.clone_from(&over.response_schema);
        }
        let (p, o) = (&mut served.parameters, &over.parameters);
        p.temperature = o.temperature.or(p.temperature);
        p.max_tokens = o.max_tokens.or(p.max_tokens);
        p.top_p = o.top_p.or(p.top_p);
        for (key, value) in &o.provider_options {
            p.provider_options.insert(key.clone(), value.clone());
        }
        served
    }

    /// 422 `invalid_model_settings` naming the first field out of range;
    /// `channels` are the agent's live channels.
    pub fn check<'a>(&self, channels: impl IntoIterator<Item = &'a str>) -> Result<()> {
        let size = serde_json::to_vec(self).map_or(usize::MAX, |b| b.len());
        if size > MAX_SETTINGS_BYTES {
            return Err(refused(format!(
                "the model settings are {size} bytes; the cap is {} KiB",
                MAX_SETTINGS_BYTES / 1024
            )));
        }
        let live: Vec<&str> = channels.into_iter().collect();
        check_part(
            "",
            self.model.as_deref(),
            &self.parameters,
            self.response_schema.as_ref(),
        )?;
        for (name, over) in &self.channels {
            if !live.contains(&name.as_str()) {
                return Err(refused(format!(
                    "channels.{name}: there is no channel {name:?} (channels: {})",
                    live.join(", ")
                )));
            }
            let at = format!("channels.{name}.");
            check_part(
                &at,
                over.model.as_deref(),
                &over.parameters,
                over.response_schema.as_ref(),
            )?;
        }
        Ok(())
    }

    /// Settings read back from stored text; `None` for none (or empty).
    pub fn parse(text: Option<&str>) -> Result<Option<ModelSettings>> {
        let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
            return Ok(None);
        };
        let settings: ModelSettings = serde_json::from_str(text).map_err(Error::internal)?;
        Ok((!settings.is_empty()).then_some(settings))
    }
}

fn refused(message: String) -> Error {
    Error::refused("invalid_model_settings", message)
}

fn check_part(
    at: &str,
    model: Option<&str>,
    parameters: &Parameters,
    response_schema: Option<&Value>,
) -> Result<()> {
    if let Some(model) = model {
        let fine = !model.trim().is_empty()
            && model.len() <= MAX_MODEL_BYTES
            && !model.chars().any(char::is_control);
        if !fine {
            return Err(refused(format!(
                "{at}model must be a name of 1 to {MAX_MODEL_BYTES} bytes without control characters"
            )));
        }
    }
    if let Some(t) = parameters.temperature
        && !(0.0..=2.0).contains(&t)
    {
        return Err(refused(format!(
            "{at}parameters.temperature must be 0 to 2"
        )));
    }
    if let Some(p) = parameters.top_p
        && !(0.0..=1.0).contains(&p)
    {
        return Err(refused(format!("{at}parameters.top_p must be 0 to 1")));
    }
    if parameters.max_tokens == Some(0) {
        return Err(refused(format!(
            "{at}parameters.max_tokens must be at least 1"
        )));
    }
    if let Some(schema) = response_schema {
        let object = schema.get("type").and_then(Value::as_str) == Some("object");
        if !object {
            return Err(refused(format!(
                "{at}response_schema must be a JSON Schema of an object (\"type\": \"object\")"
            )));
        }
        if let Err(e) = jsonschema::validator_for(schema) {
            return Err(refused(format!(
                "{at}response_schema is not a JSON Schema: {e}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn settings() -> ModelSettings {
        serde_json::from_value(json!({
            "model": "gpt-4.1",
            "parameters": {"temperature": 0.2, "max_tokens": 800, "provider_options": {"seed": 7}},
            "channels": {"voice": {"model": "gpt-4.1-mini", "parameters": {"max_tokens": 200, "provider_options": {"voice": "alloy"}}}}
        }))
        .expect("settings")
    }

    #[test]
    fn a_channel_overrides_what_it_gives_and_keeps_the_rest() {
        let s = settings();
        let voice = s.resolve(Some("voice"));
        assert_eq!(voice.model.as_deref(), Some("gpt-4.1-mini"));
        assert_eq!(voice.parameters.max_tokens, Some(200));
        assert_eq!(voice.parameters.temperature, Some(0.2));
        assert_eq!(voice.parameters.provider_options["seed"], 7);
        assert_eq!(voice.parameters.provider_options["voice"], "alloy");
        assert_eq!(s.resolve(Some("web")).model.as_deref(), Some("gpt-4.1"));
        assert_eq!(s.resolve(None).parameters.max_tokens, Some(800));
    }

    #[test]
    fn values_out_of_range_and_unknown_channels_are_refused_with_the_field() {
        let mut s = settings();
        assert!(s.check(["voice", "web"]).is_ok());
        let why = s.check(["web"]).expect_err("no voice").to_string();
        assert!(why.contains("channels.voice"), "{why}");
        s.parameters.temperature = Some(3.0);
        let why = s.check(["voice"]).expect_err("hot").to_string();
        assert!(why.contains("parameters.temperature"), "{why}");
        s.parameters.temperature = None;
        s.response_schema = Some(json!({"type": "string"}));
        let why = s.check(["voice"]).expect_err("not an object").to_string();
        assert!(why.contains("response_schema"), "{why}");
        let unknown = serde_json::from_value::<ModelSettings>(json!({"modle": "x"}));
        assert!(unknown.is_err());
    }
}
