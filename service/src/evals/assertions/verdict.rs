//! One assertion's result on one reply, in promptfoo's terms: pass, a score from
//! 0 to 1, and the reason.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// How one assertion came out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = EvalVerdict)]
pub struct Verdict {
    /// The assertion's type as written (`not-contains`).
    #[serde(rename = "type")]
    pub kind: String,
    /// The assertion's named metric, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    pub pass: bool,
    /// 1 or 0, except for llm-rubric (the judge's score).
    pub score: f64,
    /// promptfoo's wording where it has one ("Assertion passed").
    pub reason: String,
}

impl Verdict {
    /// A deterministic verdict: score 1 when it passes, 0 when not; promptfoo's
    /// reason when it passes, `failed` when not.
    pub fn of(
        kind: &str,
        metric: Option<&str>,
        pass: bool,
        failed: impl FnOnce() -> String,
    ) -> Self {
        Verdict {
            kind: kind.to_owned(),
            metric: metric.map(str::to_owned),
            pass,
            score: if pass { 1.0 } else { 0.0 },
            reason: if pass {
                "Assertion passed".to_owned()
            } else {
                failed()
            },
        }
    }
}
