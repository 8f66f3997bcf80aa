//! Renders a template that is not saved, for one or every channel, with its lint
//! report. Nothing is written.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::Result;
use crate::fetch::{self, Prompts, RenderRequest};
use crate::prompt::builder::Source;
use crate::prompt::lint;

/// The body of `POST .../prompt/preview`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviewRequest {
    /// The candidate; `null` previews the built-in assembly.
    pub template: Option<String>,
    /// One channel, or every channel when absent.
    pub channel: Option<String>,
    pub user_id: Option<String>,
    pub tz: Option<String>,
    #[serde(default)]
    pub memory_notes: Vec<String>,
    pub last_message_at: Option<DateTime<Utc>>,
    /// Render as of this moment (`$current_time`, the session section); now when absent.
    #[serde(default)]
    pub now: Option<DateTime<Utc>>,
}

/// One channel's render of the candidate.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChannelRender {
    pub channel: String,
    pub text: String,
    pub source: Source,
}

/// The candidate's lint report and renders.
#[derive(Debug, Serialize, ToSchema)]
pub struct Preview {
    pub agent: String,
    pub lint: Vec<lint::Problem>,
    pub renders: Vec<ChannelRender>,
}

/// Lints and renders the candidate; a `user_id`'s instructions are `tenant`'s.
pub async fn preview(
    prompts: &Prompts<'_>,
    max_template_bytes: usize,
    tenant: &str,
    name: &str,
    request: PreviewRequest,
) -> Result<Preview> {
    let problems = match &request.template {
        Some(text) => super::template::lint(prompts.db, max_template_bytes, text).await?,
        None => Vec::new(),
    };
    let loaded = fetch::agent(prompts, name).await?;
    if let Some(text) = &request.template {
        fetch::check_worst_case(prompts, text, &loaded.agent).await?;
    }
    let candidate = loaded.clone_with_template(request.template.clone());
    // The working copy's channels: a preview shows the next save, not a revision.
    let known = fetch::channels(prompts).await?;
    let channels: Vec<String> = match &request.channel {
        Some(channel) => vec![channel.clone()],
        None => known.names().map(str::to_owned).collect(),
    };
    let mut renders = Vec::with_capacity(channels.len());
    for channel in channels {
        let one = fetch::rendered(
            prompts,
            tenant,
            &candidate,
            &known,
            RenderRequest {
                channel: Some(channel),
                user_id: request.user_id.clone(),
                conversation_id: None,
                tz: request.tz.clone(),
                memory_notes: request.memory_notes.clone(),
                last_message_at: request.last_message_at,
                now: request.now,
            },
        )
        .await?;
        renders.push(ChannelRender {
            channel: one.provenance.channel,
            text: one.text,
            source: one.provenance.source,
        });
    }
    Ok(Preview {
        agent: name.to_owned(),
        lint: problems,
        renders,
    })
}
