//! Langfuse's `{{variable}}` prompts and loadout's `$placeholder` templates, each
//! way: for the Langfuse-compatible prompt API (a template shown in Langfuse's
//! syntax) and for `loadout import langfuse` (a Langfuse prompt kept as a template).
//!
//! Langfuse's clients fill `{{name}}` (spaces inside the braces allowed) with the
//! values the application passes to `compile`. loadout fills only its own
//! placeholders ([`KNOWN_PLACEHOLDERS`]), and its lint refuses any other name. So a
//! `{{name}}` becomes `${name}` only when loadout fills `name`; any other `{{...}}`
//! is kept as written, for the Langfuse client's `compile` to fill as it did before,
//! and is reported. Every `$` of the Langfuse text is doubled, so it stays a dollar.

use super::lint::KNOWN_PLACEHOLDERS;
use super::template::{self, PlaceholderKind};

/// A Langfuse prompt's text as a loadout template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converted {
    pub template: String,
    /// Variables that became loadout placeholders, in text order.
    pub converted: Vec<String>,
    /// `{{...}}` kept as written (not a placeholder loadout fills), in text order.
    pub kept: Vec<String>,
}

/// `text` (Langfuse's syntax) as a loadout template: see the module.
pub fn to_template(text: &str) -> Converted {
    let mut out = Converted {
        template: String::with_capacity(text.len() + 16),
        converted: Vec::new(),
        kept: Vec::new(),
    };
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        push_escaped(&mut out.template, &rest[..open]);
        let inside = &rest[open + 2..];
        let Some(close) = inside.find("}}") else {
            push_escaped(&mut out.template, &rest[open..]);
            return out;
        };
        let name = inside[..close].trim();
        if KNOWN_PLACEHOLDERS.contains(&name) {
            out.template.push_str("${");
            out.template.push_str(name);
            out.template.push('}');
            out.converted.push(name.to_owned());
        } else {
            push_escaped(&mut out.template, &rest[open..open + 2 + close + 2]);
            out.kept.push(format!("{{{{{}}}}}", &inside[..close]));
        }
        rest = &inside[close + 2..];
    }
    push_escaped(&mut out.template, rest);
    out
}

fn push_escaped(out: &mut String, text: &str) {
    for (i, part) in text.split('$').enumerate() {
        if i > 0 {
            out.push_str("$$");
        }
        out.push_str(part);
    }
}

/// A loadout template in Langfuse's syntax: each placeholder becomes `{{name}}`,
/// `$$` a dollar; a `$` that starts no placeholder stays (loadout keeps it too).
pub fn from_template(template: &str) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut at = 0;
    for found in template::placeholders(template) {
        out.push_str(&template[at..found.start]);
        match found.kind {
            PlaceholderKind::Escaped | PlaceholderKind::Invalid => out.push('$'),
            PlaceholderKind::Named | PlaceholderKind::Braced => {
                out.push_str("{{");
                out.push_str(found.name);
                out.push_str("}}");
            }
        }
        at = found.end;
    }
    out.push_str(&template[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_variable_becomes_a_placeholder_and_any_other_is_kept_and_reported() {
        let got = to_template("Hi {{ customer }}, it is {{current_time}}. $5 off {{identity}}");
        assert_eq!(
            got.template,
            "Hi {{ customer }}, it is ${current_time}. $$5 off ${identity}"
        );
        assert_eq!(got.converted, ["current_time", "identity"]);
        assert_eq!(got.kept, ["{{ customer }}"]);
    }

    #[test]
    fn dollars_inside_kept_braces_and_unclosed_braces_stay_dollars() {
        let got = to_template("{{a$b}} and {{ unclosed $x");
        assert_eq!(got.template, "{{a$$b}} and {{ unclosed $$x");
        assert_eq!(got.kept, ["{{a$b}}"]);
        assert!(got.converted.is_empty());
    }

    #[test]
    fn a_converted_template_renders_back_to_the_langfuse_text() {
        for text in [
            "plain",
            "costs $5 and $$",
            "{{identity}}\n\n{{soul}} for {{user}}",
            "{{#section}}{{/section}} {{",
            "",
        ] {
            let converted = to_template(text);
            assert!(template::is_valid(&converted.template) || text.contains("{{"));
            assert_eq!(from_template(&converted.template), text, "{text:?}");
        }
    }

    #[test]
    fn a_template_in_langfuse_syntax() {
        assert_eq!(
            from_template("$identity ${soul} $$5 $ {x} $channel_guidance."),
            "{{identity}} {{soul}} $5 $ {x} {{channel_guidance}}."
        );
    }
}
