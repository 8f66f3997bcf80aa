//! Closed sets shared by the registry, the prompt and the actions: approval tiers and tool types.

crate::closed_set! {
    /// When a tool call runs: at once, when the user allowed it, or after approval.
    pub enum Tier as "approval tier" {
        /// Runs immediately.
        Auto = "auto",
        /// The user decides whether it needs approval.
        UserConfigurable = "user_configurable",
        /// Always proposed, never run directly.
        RequiresApproval = "requires_approval",
    }
}

impl Tier {
    /// A stored tier read where a decision must be made: anything unknown is the
    /// safest tier, so a drifted value can never make a write run unchecked.
    /// (`loadout check` reports the unknown value.)
    pub fn or_safest(text: &str) -> Tier {
        text.parse().unwrap_or(Tier::RequiresApproval)
    }
}

crate::closed_set! {
    /// What carries out a tool call.
    pub enum ToolType as "tool type" {
        /// Compiled into this binary.
        Builtin = "builtin",
        /// An HTTP API reached through a connector.
        Api = "api",
        /// An MCP server reached through a connector.
        Mcp = "mcp",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tier_round_trips_through_its_stored_text() {
        for tier in Tier::ALL {
            assert_eq!(tier.as_str().parse::<Tier>(), Ok(*tier));
        }
    }

    #[test]
    fn an_unknown_tier_names_the_known_ones() {
        let err = "sometimes".parse::<Tier>().expect_err("unknown");
        assert_eq!(
            err.to_string(),
            r#"unknown approval tier "sometimes"; use one of auto, user_configurable, requires_approval"#
        );
    }

    #[test]
    fn an_unknown_stored_tier_is_treated_as_the_safest() {
        assert_eq!(Tier::or_safest("AUTO"), Tier::RequiresApproval);
    }
}
