//! `build_agent_prompt`: an agent's prompt for one channel, from plain data.
//!
//! No database here: [`super::load`] reads the rows, this module turns them into
//! text. Two paths:
//! - **template**: the agent's `prompt_template` has non-whitespace text, and is
//!   filled in with [`template::safe_substitute`]. The optional sections arrive
//!   as `"\n## Title\nbody\n"` or `""`, so a template that lists them back to back
//!   (`${memory_notes}${tool_guidance}…`) leaves no empty heading behind.
//! - **built-in**: otherwise, `templates/prompt.md.j2` (minijinja, compiled in,
//!   strict undefined) assembles the sections in a fixed order, leaving out the
//!   empty ones.
//!
//! The same inputs give the same bytes: tools are sorted by name here, whatever
//! order they arrive in, and nothing iterates a hash map.

use crate::vocab::Tier;
use std::fmt::Write as _;
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::Serialize;

use super::template::{self, Values};

const BUILTIN_NAME: &str = "prompt.md.j2";
const BUILTIN_SOURCE: &str = include_str!("../../../templates/prompt.md.j2");

/// Used when an agent's soul is empty.
pub const DEFAULT_SOUL: &str =
    "You are a helpful assistant: clear, accurate and quick to get to the point.";
/// Used when the user has no active instructions for this agent.
pub const NO_INSTRUCTIONS: &str = "The user has not given any standing instructions.";

const ONBOARDING: &str = "This is the first conversation with this user and nothing is known about them yet. Introduce yourself in a sentence or two, ask what they would like help with first, and save what you learn about them to memory as you go.";

/// How long without a message before the prompt says "welcome back".
const AWAY: chrono::TimeDelta = chrono::TimeDelta::hours(24);

/// An agent as the builder needs it.
#[derive(Clone, Debug)]
pub struct Agent {
    pub name: String,
    /// `{"display_name", "role", "description"}`; other shapes are tolerated.
    pub identity: serde_json::Value,
    pub soul: String,
    pub soul_version: i32,
    pub prompt_template: Option<String>,
    pub template_version: i32,
    pub operating_model: String,
    pub interaction_learning: String,
    /// The agent's active tools, in any order.
    pub tools: Vec<Tool>,
}

/// One of the agent's active tools.
#[derive(Clone, Debug)]
pub struct Tool {
    pub name: String,
    pub description: String,
    /// `auto`, `user_configurable` or `requires_approval`; anything else is treated as `requires_approval`.
    pub approval_tier: String,
    pub prompt_section: Option<String>,
}

/// A channel's guidance and which optional sections it gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Channel {
    pub name: String,
    pub guidance: String,
    pub include_operating_model: bool,
    pub include_interaction_learning: bool,
    pub include_session_section: bool,
}

/// The known channels; looking up any other name is an error that lists them.
#[derive(Clone, Debug, Default)]
pub struct Channels(Vec<Channel>);

/// A channel name that no channel row has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown channel {name:?}; known channels: {}", known.join(", "))]
pub struct UnknownChannel {
    pub name: String,
    pub known: Vec<String>,
}

impl Channels {
    pub fn new(mut channels: Vec<Channel>) -> Self {
        channels.sort_by(|a, b| a.name.cmp(&b.name));
        Self(channels)
    }

    pub fn get(&self, name: &str) -> Result<&Channel, UnknownChannel> {
        self.0
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| UnknownChannel {
                name: name.to_owned(),
                known: self.names().map(str::to_owned).collect(),
            })
    }

    /// Channel names, sorted.
    /// The bytes of every channel's guidance together.
    pub fn guidance_bytes(&self) -> usize {
        self.0.iter().map(|c| c.guidance.len()).sum()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|c| c.name.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = &Channel> {
        self.0.iter()
    }
}

pub use crate::vocab::clock::{Clock, FixedClock, SystemClock};

/// Per-request inputs.
#[derive(Clone, Debug)]
pub struct Context {
    pub now: DateTime<Utc>,
    /// The user's IANA time zone; `current_time` is shown in it.
    pub time_zone: Tz,
    /// Notes the caller fetched from memory, in the order to show them.
    pub memory_notes: Vec<String>,
    /// The user's active instructions for this agent, if any.
    pub user_instructions: Option<String>,
    /// When the user last wrote, if known.
    pub last_message_at: Option<DateTime<Utc>>,
}

impl Context {
    /// Now, in UTC, with no user data.
    pub fn at(clock: &dyn Clock) -> Self {
        Self {
            now: clock.now(),
            time_zone: Tz::UTC,
            memory_notes: Vec::new(),
            user_instructions: None,
            last_message_at: None,
        }
    }
}

/// Which path produced a prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Template,
    Builtin,
}

/// Where a rendered prompt came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Provenance {
    pub source: Source,
    pub template_version: i32,
    pub soul_version: i32,
    pub channel: String,
}

/// A prompt and its provenance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RenderedPrompt {
    pub text: String,
    pub provenance: Provenance,
}

/// The built-in assembly failed to render. It is compiled in and covered by
/// tests, so this signals a defect, but it is reported rather than panicked on.
#[derive(Debug, thiserror::Error)]
#[error("the built-in prompt template failed: {0}")]
pub struct BuiltinError(String);

impl From<minijinja::Error> for BuiltinError {
    fn from(error: minijinja::Error) -> Self {
        Self(error.to_string())
    }
}

static BUILTIN: LazyLock<Result<minijinja::Environment<'static>, BuiltinError>> =
    LazyLock::new(|| {
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        env.add_template(BUILTIN_NAME, BUILTIN_SOURCE)?;
        Ok(env)
    });

/// Renders `agent`'s prompt for `channel`, with no size limit (tests, benches, CLI).
pub fn build_agent_prompt(
    agent: &Agent,
    channel: &Channel,
    context: &Context,
) -> Result<RenderedPrompt, BuildError> {
    build_agent_prompt_within(agent, channel, context, usize::MAX)
}

/// Why a prompt could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Builtin(#[from] BuiltinError),
    /// The prompt would pass the size limit; nothing past it was allocated.
    #[error("the rendered prompt would pass {} bytes", .0.limit)]
    TooLarge(template::Overflow),
}

/// Renders `agent`'s prompt for `channel`, never holding more than `limit` bytes.
pub fn build_agent_prompt_within(
    agent: &Agent,
    channel: &Channel,
    context: &Context,
    limit: usize,
) -> Result<RenderedPrompt, BuildError> {
    let sections = Sections::new(agent, channel, context);
    let template = agent
        .prompt_template
        .as_deref()
        .filter(|t| !t.trim().is_empty());
    let (source, text) = match template {
        Some(template) => (
            Source::Template,
            template::safe_substitute_within(template, &sections.placeholders(), limit)
                .map_err(BuildError::TooLarge)?,
        ),
        None => {
            // The built-in assembly holds each section once: measure before rendering.
            let (largest, total) = sections.sizes();
            if total > limit {
                return Err(BuildError::TooLarge(template::Overflow {
                    placeholder: Some(largest.to_owned()),
                    limit,
                }));
            }
            (Source::Builtin, sections.builtin()?)
        }
    };
    Ok(RenderedPrompt {
        text,
        provenance: Provenance {
            source,
            template_version: agent.template_version,
            soul_version: agent.soul_version,
            channel: channel.name.clone(),
        },
    })
}

/// Each section's body, trimmed; an empty body means "leave the section out".
struct Sections<'a> {
    identity: String,
    soul: &'a str,
    channel_guidance: &'a str,
    current_time: String,
    user_instructions: &'a str,
    memory_notes: String,
    tool_guidance: String,
    operating_model: &'a str,
    interaction_learning: &'a str,
    session: Option<(&'static str, String)>,
}

const MEMORY_TITLE: &str = "What you know about the user";
const TOOLS_TITLE: &str = "Tools";
const OPERATING_TITLE: &str = "How you work";
const LEARNING_TITLE: &str = "Learning about the user";

impl<'a> Sections<'a> {
    fn new(agent: &'a Agent, channel: &'a Channel, context: &'a Context) -> Self {
        let soul = agent.soul.trim();
        let instructions = context
            .user_instructions
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty());
        Self {
            identity: identity(&agent.identity),
            soul: if soul.is_empty() { DEFAULT_SOUL } else { soul },
            channel_guidance: channel.guidance.trim(),
            current_time: current_time(context.now, context.time_zone),
            user_instructions: instructions.unwrap_or(NO_INSTRUCTIONS),
            memory_notes: memory_notes(&context.memory_notes),
            tool_guidance: tool_guidance(&agent.tools),
            operating_model: if channel.include_operating_model {
                agent.operating_model.trim()
            } else {
                ""
            },
            interaction_learning: if channel.include_interaction_learning {
                agent.interaction_learning.trim()
            } else {
                ""
            },
            session: if channel.include_session_section {
                session(context, instructions.is_some())
            } else {
                None
            },
        }
    }

    /// The values for the template path.
    fn placeholders(&self) -> Placeholders<'_, 'a> {
        let (session_title, session_body) = self.session.clone().unwrap_or(("", String::new()));
        Placeholders {
            memory_notes: titled(MEMORY_TITLE, &self.memory_notes),
            tool_guidance: titled(TOOLS_TITLE, &self.tool_guidance),
            operating_model: titled(OPERATING_TITLE, self.operating_model),
            interaction_learning: titled(LEARNING_TITLE, self.interaction_learning),
            session_section: titled(session_title, &session_body),
            sections: self,
        }
    }

    /// The largest section's placeholder name, and all sections' bytes together
    /// (titles and separators included, generously).
    fn sizes(&self) -> (&'static str, usize) {
        let session = self.session.as_ref().map_or(0, |(_, body)| body.len());
        let sizes = [
            ("identity", self.identity.len()),
            ("soul", self.soul.len()),
            ("channel_guidance", self.channel_guidance.len()),
            ("current_time", self.current_time.len()),
            ("user_instructions", self.user_instructions.len()),
            ("memory_notes", self.memory_notes.len()),
            ("tool_guidance", self.tool_guidance.len()),
            ("operating_model", self.operating_model.len()),
            ("interaction_learning", self.interaction_learning.len()),
            ("session_section", session),
        ];
        let total = sizes.iter().map(|(_, n)| n + TITLE_ROOM).sum();
        let largest = sizes
            .iter()
            .max_by_key(|(_, n)| *n)
            .map_or("soul", |(name, _)| name);
        (largest, total)
    }

    fn builtin(&self) -> Result<String, BuiltinError> {
        let env = BUILTIN.as_ref().map_err(|e| BuiltinError(e.0.clone()))?;
        let (session_title, session_body) = match &self.session {
            Some((title, body)) => (*title, body.as_str()),
            None => ("", ""),
        };
        let sections: [(&str, &str); 10] = [
            ("", &self.identity),
            ("", self.soul),
            ("Channel", self.channel_guidance),
            ("Current time", &self.current_time),
            ("User instructions", self.user_instructions),
            (MEMORY_TITLE, &self.memory_notes),
            (TOOLS_TITLE, &self.tool_guidance),
            (OPERATING_TITLE, self.operating_model),
            (LEARNING_TITLE, self.interaction_learning),
            (session_title, session_body),
        ];
        Ok(env
            .get_template(BUILTIN_NAME)?
            .render(minijinja::context! { sections })?)
    }
}

/// Room for a section's title, heading marks and blank lines.
const TITLE_ROOM: usize = 64;

/// The most bytes each placeholder can bring, for a template's worst case.
/// Values from the agent and channels are measured; values a render request
/// brings are bounded by the limits the API enforces on them.
#[derive(Clone, Debug)]
pub struct Bounds {
    /// Largest user instructions accepted (the admin and tool limits).
    pub user_instructions: usize,
    /// Largest memory notes a render can carry (the request body limit).
    pub memory_notes: usize,
}

/// The largest text a template can render to for `agent` over every channel and
/// every request: its own bytes plus, for each placeholder it uses, its count times
/// the most that placeholder can bring. Returns the total and the placeholder
/// that contributes most.
pub fn worst_case(
    template: &str,
    agent: &Agent,
    channels: &Channels,
    bounds: &Bounds,
) -> (usize, Option<&'static str>) {
    let most = |name: &str| -> usize {
        let titled = |n: usize| if n == 0 { 0 } else { n + TITLE_ROOM };
        match name {
            "identity" => identity(&agent.identity).len(),
            "soul" => agent.soul.trim().len().max(DEFAULT_SOUL.len()),
            "channel_guidance" => channels
                .0
                .iter()
                .map(|c| c.guidance.trim().len())
                .max()
                .unwrap_or(0),
            "current_time" => 128,
            "user_instructions" => bounds.user_instructions.max(NO_INSTRUCTIONS.len()),
            "memory_notes" => titled(bounds.memory_notes * 2),
            "tool_guidance" => titled(tool_guidance(&agent.tools).len()),
            "operating_model" => titled(agent.operating_model.trim().len()),
            "interaction_learning" => titled(agent.interaction_learning.trim().len()),
            "session_section" => titled(ONBOARDING.len() + 256),
            _ => 0,
        }
    };
    let mut total = template.len();
    let mut by_name: Vec<(&'static str, usize)> = Vec::new();
    for found in template::placeholders(template) {
        let Some(&name) = super::lint::KNOWN_PLACEHOLDERS
            .iter()
            .find(|n| **n == found.name)
        else {
            continue;
        };
        let bytes = most(name);
        total = total.saturating_add(bytes);
        match by_name.iter_mut().find(|(n, _)| *n == name) {
            Some((_, sum)) => *sum = sum.saturating_add(bytes),
            None => by_name.push((name, bytes)),
        }
    }
    let largest = by_name
        .iter()
        .max_by_key(|(_, n)| *n)
        .map(|(name, _)| *name);
    (total, largest)
}

/// `"\n## Title\nbody\n"`, or `""` for an empty body.
fn titled(title: &str, body: &str) -> String {
    if body.is_empty() {
        String::new()
    } else {
        format!("\n## {title}\n{body}\n")
    }
}

/// Placeholder values for the template path, looked up without a map.
struct Placeholders<'s, 'a> {
    sections: &'s Sections<'a>,
    memory_notes: String,
    tool_guidance: String,
    operating_model: String,
    interaction_learning: String,
    session_section: String,
}

impl Values for Placeholders<'_, '_> {
    fn get(&self, name: &str) -> Option<&str> {
        Some(match name {
            "identity" => &self.sections.identity,
            "soul" => self.sections.soul,
            "channel_guidance" => self.sections.channel_guidance,
            "current_time" => &self.sections.current_time,
            "user_instructions" => self.sections.user_instructions,
            "memory_notes" => &self.memory_notes,
            "tool_guidance" => &self.tool_guidance,
            "operating_model" => &self.operating_model,
            "interaction_learning" => &self.interaction_learning,
            "session_section" => &self.session_section,
            _ => return None,
        })
    }
}

/// "You are NAME, ROLE." plus the description. Tolerates any JSON: a string is
/// used as it is, missing or non-string fields are skipped.
fn identity(identity: &serde_json::Value) -> String {
    let field = |key: &str| {
        identity
            .get(key)
            .and_then(serde_json::Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    };
    if let Some(text) = identity.as_str() {
        return text.trim().to_owned();
    }
    let mut out = String::new();
    match (field("display_name"), field("role")) {
        (Some(name), Some(role)) => _ = write!(out, "You are {name}, {role}."),
        (Some(name), None) => _ = write!(out, "You are {name}."),
        (None, Some(role)) => _ = write!(out, "Your role: {role}."),
        (None, None) => {}
    }
    if let Some(description) = field("description") {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(description);
    }
    out
}

/// "Saturday 21 November 2026, 14:05 (Europe/Berlin, UTC+01:00)".
fn current_time(now: DateTime<Utc>, zone: Tz) -> String {
    let local = now.with_timezone(&zone);
    format!(
        "{} ({}, UTC{})",
        local.format("%A %-d %B %Y, %H:%M"),
        zone.name(),
        local.format("%:z")
    )
}

/// One bullet per non-empty note; a note's later lines are indented under it.
fn memory_notes(notes: &[String]) -> String {
    let mut out = String::new();
    for note in notes.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str("- ");
        for (i, line) in note.lines().enumerate() {
            if i > 0 {
                out.push_str("\n  ");
            }
            out.push_str(line.trim_end());
        }
    }
    out
}

/// The active tools' prompt sections (by tool name), then the write actions
/// that wait for the user's approval, so the agent knows what it can propose.
fn tool_guidance(tools: &[Tool]) -> String {
    let mut tools: Vec<&Tool> = tools.iter().collect();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = String::new();
    for section in tools
        .iter()
        .filter_map(|t| t.prompt_section.as_deref())
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(section);
    }
    let always: Vec<&Tool> = tools
        .iter()
        .copied()
        .filter(|t| Tier::or_safest(&t.approval_tier) == Tier::RequiresApproval)
        .collect();
    let maybe: Vec<&Tool> = tools
        .iter()
        .copied()
        .filter(|t| Tier::or_safest(&t.approval_tier) == Tier::UserConfigurable)
        .collect();
    if always.is_empty() && maybe.is_empty() {
        return out;
    }
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str("Write actions are proposals: the user sees a preview and approves or declines before anything happens. If they decline, acknowledge it and move on without asking again.");
    let list = |out: &mut String, heading: &str, tools: &[&Tool]| {
        if tools.is_empty() {
            return;
        }
        out.push_str("\n\n");
        out.push_str(heading);
        for tool in tools {
            _ = write!(out, "\n- {}: {}", tool.name, tool.description.trim());
        }
    };
    list(&mut out, "Always waits for approval:", &always);
    list(
        &mut out,
        "Waits for approval unless the user has chosen to allow it automatically:",
        &maybe,
    );
    out
}

/// Onboarding for a user we know nothing about; "welcome back" after a day away.
fn session(context: &Context, has_instructions: bool) -> Option<(&'static str, String)> {
    let known = has_instructions || context.memory_notes.iter().any(|n| !n.trim().is_empty());
    match context.last_message_at {
        None if !known => Some(("Getting started", ONBOARDING.to_owned())),
        Some(last) if context.now - last >= AWAY => {
            let day = last
                .with_timezone(&context.time_zone)
                .format("%A %-d %B %Y");
            Some((
                "Welcome back",
                format!(
                    "The user's last message was {} ago, on {day}. Open by picking up the thread: mention briefly what changed or fell due while they were away, then follow their lead.",
                    elapsed(context.now - last)
                ),
            ))
        }
        _ => None,
    }
}

/// "a day", "3 days", "2 weeks", "4 months".
fn elapsed(delta: chrono::TimeDelta) -> String {
    let days = delta.num_days();
    let (n, unit) = match days {
        ..14 => (days, "day"),
        14..60 => (days / 7, "week"),
        _ => (days / 30, "month"),
    };
    match n {
        1 => format!("a {unit}"),
        n => format!("{n} {unit}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("timestamp")
            .with_timezone(&Utc)
    }

    fn agent(template: Option<&str>) -> Agent {
        Agent {
            name: "a".into(),
            identity: serde_json::json!({"display_name": "Ada", "role": "an aide"}),
            soul: "Be kind.".into(),
            soul_version: 3,
            prompt_template: template.map(str::to_owned),
            template_version: 7,
            operating_model: "Check tasks first.".into(),
            interaction_learning: "Learn preferences.".into(),
            tools: vec![
                Tool {
                    name: "get_b".into(),
                    description: "Reads b.".into(),
                    approval_tier: "auto".into(),
                    prompt_section: Some("Use get_b.".into()),
                },
                Tool {
                    name: "delete_a".into(),
                    description: "Deletes a.".into(),
                    approval_tier: "requires_approval".into(),
                    prompt_section: Some("Use delete_a rarely.".into()),
                },
            ],
        }
    }

    fn channel(all: bool) -> Channel {
        Channel {
            name: "c".into(),
            guidance: "Be brief.".into(),
            include_operating_model: all,
            include_interaction_learning: all,
            include_session_section: all,
        }
    }

    fn context() -> Context {
        Context::at(&FixedClock(at("2026-11-21T13:05:00Z")))
    }

    #[test]
    fn a_whitespace_only_template_takes_the_builtin_path() {
        let rendered =
            build_agent_prompt(&agent(Some(" \n\t")), &channel(true), &context()).expect("render");
        assert_eq!(rendered.provenance.source, Source::Builtin);
        assert_eq!(rendered.provenance.template_version, 7);
        assert_eq!(rendered.provenance.soul_version, 3);
    }

    #[test]
    fn the_builtin_path_leaves_out_empty_sections_without_blank_lines() {
        let mut bare = agent(None);
        bare.identity = serde_json::Value::Null;
        bare.tools.clear();
        let rendered = build_agent_prompt(&bare, &channel(false), &context()).expect("render");
        assert_eq!(rendered.provenance.source, Source::Builtin);
        assert_eq!(
            rendered.text,
            "Be kind.\n\n## Channel\nBe brief.\n\n## Current time\nSaturday 21 November 2026, 13:05 (UTC, UTC+00:00)\n\n## User instructions\nThe user has not given any standing instructions.\n"
        );
    }

    #[test]
    fn the_template_path_substitutes_and_keeps_unknown_placeholders() {
        let rendered = build_agent_prompt(
            &agent(Some("$soul|$channel_guidance|$nope|${operating_model}")),
            &channel(true),
            &context(),
        )
        .expect("render");
        assert_eq!(rendered.provenance.source, Source::Template);
        assert_eq!(
            rendered.text,
            "Be kind.|Be brief.|$nope|\n## How you work\nCheck tasks first.\n"
        );
    }

    #[test]
    fn a_channel_without_optional_sections_gets_empty_strings() {
        let rendered = build_agent_prompt(
            &agent(Some(
                "[$operating_model][$interaction_learning][$session_section]",
            )),
            &channel(false),
            &context(),
        )
        .expect("render");
        assert_eq!(rendered.text, "[][][]");
    }

    #[test]
    fn tools_are_ordered_by_name_and_approval_actions_listed() {
        let mut reversed = agent(Some("$tool_guidance"));
        reversed.tools.reverse();
        let a = build_agent_prompt(&agent(Some("$tool_guidance")), &channel(true), &context())
            .expect("render");
        let b = build_agent_prompt(&reversed, &channel(true), &context()).expect("render");
        assert_eq!(a.text, b.text);
        let rarely = a
            .text
            .find("Use delete_a rarely.")
            .expect("delete_a section");
        let get_b = a.text.find("Use get_b.").expect("get_b section");
        assert!(rarely < get_b, "{}", a.text);
        assert!(
            a.text
                .contains("Always waits for approval:\n- delete_a: Deletes a.")
        );
        assert!(!a.text.contains("- get_b"));
    }

    #[test]
    fn an_empty_soul_falls_back() {
        let mut quiet = agent(Some("$soul"));
        quiet.soul = "  \n".into();
        let rendered = build_agent_prompt(&quiet, &channel(true), &context()).expect("render");
        assert_eq!(rendered.text, DEFAULT_SOUL);
    }

    #[test]
    fn current_time_is_shown_in_the_users_zone() {
        let mut ctx = context();
        ctx.time_zone = "Asia/Kolkata".parse().expect("zone");
        let rendered = build_agent_prompt(&agent(Some("$current_time")), &channel(true), &ctx)
            .expect("render");
        assert_eq!(
            rendered.text,
            "Saturday 21 November 2026, 18:35 (Asia/Kolkata, UTC+05:30)"
        );
    }

    #[test]
    fn session_section_onboards_new_users_and_welcomes_back_returning_ones() {
        let template = Some("$session_section");
        let new = build_agent_prompt(&agent(template), &channel(true), &context()).expect("render");
        assert!(
            new.text.starts_with("\n## Getting started\n"),
            "{}",
            new.text
        );

        let mut recent = context();
        recent.memory_notes = vec!["Likes tea".into()];
        recent.last_message_at = Some(at("2026-11-21T12:00:00Z"));
        let rendered =
            build_agent_prompt(&agent(template), &channel(true), &recent).expect("render");
        assert_eq!(rendered.text, "");

        let mut away = recent.clone();
        away.last_message_at = Some(at("2026-11-18T09:00:00Z"));
        let rendered = build_agent_prompt(&agent(template), &channel(true), &away).expect("render");
        assert!(
            rendered
                .text
                .contains("last message was 3 days ago, on Wednesday 18 November 2026"),
            "{}",
            rendered.text
        );
    }

    #[test]
    fn memory_notes_become_bullets_with_continuation_lines_indented() {
        assert_eq!(
            memory_notes(&["  one ".into(), "".into(), "two\nlines".into()]),
            "- one\n- two\n  lines"
        );
    }

    #[test]
    fn identity_tolerates_any_json() {
        assert_eq!(identity(&serde_json::json!(null)), "");
        assert_eq!(identity(&serde_json::json!("Plain text.")), "Plain text.");
        assert_eq!(
            identity(&serde_json::json!({"role": "aide", "description": "Helps.", "x": 1})),
            "Your role: aide.\nHelps."
        );
    }

    #[test]
    fn elapsed_reads_naturally() {
        let days = chrono::TimeDelta::days;
        assert_eq!(elapsed(days(1)), "a day");
        assert_eq!(elapsed(days(13)), "13 days");
        assert_eq!(elapsed(days(14)), "2 weeks");
        assert_eq!(elapsed(days(90)), "3 months");
    }

    #[test]
    fn unknown_channels_list_the_known_ones() {
        let channels = Channels::new(vec![
            channel(true),
            Channel {
                name: "a".into(),
                ..channel(false)
            },
        ]);
        let error = channels.get("sms").expect_err("unknown");
        assert_eq!(
            error.to_string(),
            "unknown channel \"sms\"; known channels: a, c"
        );
    }
}
