//! What an executor needs that a tool's schema cannot say, checked when the call is
//! made: a call that could never run is refused at once (422), not at approval, and
//! the limits of the admin routes hold on the action path too.

use serde_json::Value;

use crate::error::{Error, Result, check_size};

/// Refuses a call its executor could not carry out.
pub fn check(tool: &str, user_id: Option<&str>, arguments: &Value) -> Result<()> {
    match tool {
        "update_instructions" => {
            if user_id.is_none() {
                return Err(Error::refused(
                    "missing_context",
                    "update_instructions needs the call's user_id: whose instructions to update",
                ));
            }
            match arguments.get("instructions").and_then(Value::as_str) {
                Some(text) => check_size("instructions", text, crate::vocab::MAX_TEXT_BYTES),
                None => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Kind;
    use serde_json::json;

    #[test]
    fn update_instructions_without_a_user_is_refused() {
        let refused = check("update_instructions", None, &json!({"instructions": "x"}));
        assert_eq!(
            refused.map_err(|e| (e.kind, e.code)),
            Err((Kind::Refused, "missing_context"))
        );
    }

    #[test]
    fn instructions_over_the_admin_limit_are_too_large() {
        let text = "x".repeat(crate::vocab::MAX_TEXT_BYTES + 1);
        let refused = check(
            "update_instructions",
            Some("u"),
            &json!({ "instructions": text }),
        );
        assert_eq!(refused.map_err(|e| e.kind), Err(Kind::TooLarge));
    }

    #[test]
    fn other_tools_have_no_extra_requirements() {
        assert!(check("create_tasks", None, &json!({})).is_ok());
    }
}
