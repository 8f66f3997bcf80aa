//! The stream's frames, encoded once: `id: N` and one `data:` line of compact JSON
//! (serde_json never writes a newline in it), as OFREP's event streams carry them:
//! `type` is `refetchEvaluation` for every change (what OFREP providers act on),
//! `ready` for the frame that says where a new stream starts (which they ignore),
//! and loadout's own fields name what changed.

use axum::body::Bytes;
use serde::Serialize;

/// What a frame's `data` holds.
#[derive(Debug, Default, Serialize)]
pub struct Data<'a> {
    /// `refetchEvaluation` or `ready`.
    #[serde(rename = "type")]
    pub kind: &'a str,
    /// The configuration generation, as a validation token: `"g57"`.
    pub etag: String,
    /// When the change was recorded, in Unix seconds.
    #[serde(rename = "lastModified", skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<i64>,
    pub generation: i64,
    /// The outbox event type (`label.moved`, …), or `everything`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<&'a str>,
    /// The revision the label now serves (a rollout's base).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<i32>,
    /// A rollout's candidate and its share of users, in percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidate: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// The user whose instructions changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<&'a str>,
    /// Why everything is to be fetched again (`history`, `lagged`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'a str>,
}

/// A generation as the stream's ETag.
pub fn etag(generation: i64) -> String {
    format!("\"g{generation}\"")
}

/// The generation an ETag of [`etag`]'s names (quoted or not, `W/` or not).
pub fn generation_of(etag: &str) -> Option<i64> {
    let tag = etag.trim().trim_start_matches("W/").trim_matches('"');
    tag.strip_prefix('g')?.parse().ok().filter(|g| *g >= 0)
}

/// `id: {id}` and the data line.
pub fn encode(id: i64, data: &Data<'_>) -> Bytes {
    // A struct of strings and numbers always serialises.
    let json = serde_json::to_string(data).unwrap_or_else(|_| String::from("{}"));
    Bytes::from(format!("id: {id}\ndata: {json}\n\n"))
}

/// The client's reconnection delay, sent first: one second.
pub fn retry() -> Bytes {
    Bytes::from_static(b"retry: 1000\n\n")
}

/// Everything a key fetches may have changed: fetch it all again.
pub fn everything(cursor: i64, generation: i64, reason: &str) -> Bytes {
    let data = Data {
        kind: "refetchEvaluation",
        etag: etag(generation),
        generation,
        change: Some("everything"),
        reason: Some(reason),
        ..Default::default()
    };
    encode(cursor, &data)
}

/// Where a stream starts: the id to resume from, at this generation.
pub fn ready(after: i64, generation: i64) -> Bytes {
    let data = Data {
        kind: "ready",
        etag: etag(generation),
        generation,
        ..Default::default()
    };
    encode(after, &data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_one_id_and_one_data_line() {
        let frame = everything(7, 42, "history");
        let text = std::str::from_utf8(&frame).unwrap();
        let lines: Vec<&str> = text.trim_end().lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0], "id: 7");
        let data: serde_json::Value =
            serde_json::from_str(lines[1].strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(data["type"], "refetchEvaluation");
        assert_eq!(data["etag"], "\"g42\"");
        assert_eq!(data["change"], "everything");
        assert!(text.ends_with("\n\n"));
    }

    #[test]
    fn an_etag_gives_back_its_generation() {
        assert_eq!(generation_of(&etag(57)), Some(57));
        assert_eq!(generation_of("g57"), Some(57));
        assert_eq!(generation_of("W/\"g3\""), Some(3));
        assert_eq!(generation_of("\"abc\""), None);
        assert_eq!(generation_of("g-1"), None);
    }
}
