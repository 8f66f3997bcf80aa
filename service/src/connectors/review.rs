//! An operator's decision on a held tool change ([`super::pins`]): accepting
//! applies the held definition through the sync's rules ([`super::sync`]) in a
//! registry write, pinned by its fingerprint; rejecting keeps the pin.

use rmcp::model::Tool;
use serde_json::Value;

use super::pins::{
    ToolChangeKind, ToolChangeState, ToolChangeView, announce, decide_in, find, owners, view,
};
use crate::auth::Principal;
use crate::db::Writer;
use crate::error::{Error, Result};

/// Accepts a pending change: the tool serves the held definition, pinned by its
/// fingerprint, and an added tool is switched on. A registry write through the
/// guard: a `gated` agent gets a revision that waits for sign-off.
pub async fn accept(w: &Writer<'_>, who: &Principal, id: i32) -> Result<ToolChangeView> {
    decide(w, who, id, ToolChangeState::Accepted).await
}

/// Rejects a pending change: the pin stays, and a sync does not hold the same
/// definition again.
pub async fn reject(w: &Writer<'_>, who: &Principal, id: i32) -> Result<ToolChangeView> {
    decide(w, who, id, ToolChangeState::Rejected).await
}

async fn decide(
    w: &Writer<'_>,
    who: &Principal,
    id: i32,
    state: ToolChangeState,
) -> Result<ToolChangeView> {
    let write = w.begin().await?.by(&who.member);
    let change = find(&*write, id).await?;
    if change.state != ToolChangeState::Pending.as_str() {
        return Err(Error::conflict(format!(
            "tool change {id} is {}, not pending",
            change.state
        )));
    }
    let (tool, connector) = owners(&*write, &change).await?;
    if state == ToolChangeState::Accepted {
        let definition: Value = serde_json::from_str(&change.definition)
            .map_err(|e| Error::internal(format!("change {id} holds no tool: {e}")))?;
        let remote: Tool = serde_json::from_value(definition)
            .map_err(|e| Error::internal(format!("change {id} holds no MCP tool: {e}")))?;
        let added = change.kind == ToolChangeKind::Added.as_str();
        super::sync::accept_in(&write, &tool, &connector, &remote, added).await?;
    }
    let decided = decide_in(&*write, change, state, Some(who), write.now()).await?;
    announce(
        &*write,
        &decided,
        &tool,
        &connector,
        Some(&who.member),
        write.now(),
    )
    .await?;
    let answer = view(&*write, decided).await?;
    w.commit(write).await?;
    Ok(answer)
}
