//! The limits a policy text must meet before the Cedar parser sees it.
//!
//! cedar-policy parses with a table-driven LALRPOP parser, but turns the parse
//! tree into its AST, validates, prints and drops it by recursion: 150 nested
//! parentheses (351 bytes) overflowed a request worker's 2 MiB stack and aborted
//! the process. So a text is measured first, by one pass over its tokens with no
//! recursion, and refused past [`MAX_RULES`] policies or a nesting estimate of
//! [`MAX_NESTING`]; what passes is parsed on a thread of [`STACK_BYTES`]
//! (`crate::cpu::deep`), where the fuzz target (`service/fuzz`, which includes
//! this file) and `policies::tests` show every construct at the limit fits.
//!
//! The estimate bounds the depth of any expression the text can parse to: within
//! one pair of brackets, the tokens (a bracket weighing [`BRACKET`]) between two commas (a set's items, a record's
//! fields and a call's arguments are siblings, not nested), plus the deepest
//! bracket inside them, summed down to the innermost bracket. Every node on a path
//! from an AST's root to a leaf comes from a distinct token on that path, so the
//! AST is never deeper than the estimate (times the few nodes Cedar makes of one
//! token, such as `!=` as `!(==)`). Long `&&`, `||` and `+` chains count, since
//! Cedar nests them too.
//!
//! This file depends on nothing but `core` and `std`: the fuzz target includes it.

use std::fmt;

/// The largest policy set an agent may hold, in bytes of text.
pub const MAX_POLICY_BYTES: usize = 256 * 1024;

/// The most policies (`permit`/`forbid` statements) one set may hold.
pub const MAX_RULES: usize = 1000;

/// The largest nesting estimate (see the module's doc) a text may reach.
pub const MAX_NESTING: usize = 2000;

/// The deepest expression a parsed policy may hold (in AST levels, measured on the
/// parsed policy): what a request worker's stack evaluates, prints and drops
/// with room to spare.
pub const MAX_EXPRESSION_DEPTH: usize = 200;

/// What one bracket adds to the estimate: Cedar's parse tree holds about ten
/// levels per bracket (one per precedence level), each converted by recursion,
/// where an operator in a chain takes one or two.
const BRACKET: usize = 8;

/// The stack of the thread a policy is parsed, validated and tested on.
pub const STACK_BYTES: usize = 64 * 1024 * 1024;

/// Why a text was refused before parsing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exceeded {
    /// Over [`MAX_POLICY_BYTES`].
    Bytes(usize),
    /// Over [`MAX_RULES`] policies.
    Rules(usize),
    /// A nesting estimate over [`MAX_NESTING`] in the statement at this byte offset.
    Nesting { estimate: usize, offset: usize },
    /// A parsed expression deeper than [`MAX_EXPRESSION_DEPTH`], in the policy at
    /// this byte offset.
    Depth { depth: usize, offset: usize },
}

impl Exceeded {
    /// The error code a request is refused with.
    pub fn code(&self) -> &'static str {
        match self {
            Exceeded::Bytes(_) | Exceeded::Rules(_) => "policy_too_large",
            Exceeded::Nesting { .. } | Exceeded::Depth { .. } => "policy_too_deep",
        }
    }
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exceeded::Bytes(n) => write!(
                f,
                "the policy is {n} bytes; a policy set holds at most {MAX_POLICY_BYTES}"
            ),
            Exceeded::Rules(n) => write!(
                f,
                "the policy holds more than {MAX_RULES} policies ({n} so far); split the rules or use sets (`[…].contains(…)`)"
            ),
            Exceeded::Nesting { estimate, .. } => write!(
                f,
                "an expression nests or chains too deeply (about {estimate} levels; the limit is {MAX_NESTING}): use fewer brackets, or a set (`[…].contains(…)`) for a long chain of `||`"
            ),
            Exceeded::Depth { depth, .. } => write!(
                f,
                "an expression is nested {depth} levels deep; the limit is {MAX_EXPRESSION_DEPTH}: use a set (`[…].contains(…)`) for a long chain of `||`"
            ),
        }
    }
}

impl Exceeded {
    /// The byte offset the refusal points at (0: the whole text).
    pub fn offset(&self) -> usize {
        match self {
            Exceeded::Bytes(_) | Exceeded::Rules(_) => 0,
            Exceeded::Nesting { offset, .. } | Exceeded::Depth { offset, .. } => *offset,
        }
    }
}

/// What a text that passed holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Measure {
    /// Statements ended by `;` outside any bracket.
    pub rules: usize,
    /// The byte offset of each statement's first token.
    pub starts: Vec<usize>,
    /// The largest nesting estimate.
    pub nesting: usize,
}

/// One open bracket: the tokens of the current comma-separated part, the deepest
/// bracket inside that part, and the deepest part so far.
#[derive(Clone, Copy, Default)]
struct Level {
    tokens: usize,
    inner: usize,
    deepest: usize,
}

impl Level {
    fn part(&self) -> usize {
        self.tokens.saturating_add(self.inner)
    }

    fn close(&self) -> usize {
        self.deepest.max(self.part())
    }
}

/// Measures `text` in one pass (strings and `//` comments skipped as Cedar's lexer
/// does), refusing it at the first limit it passes. Memory is one small record per
/// open bracket, bounded by the text's length.
pub fn measure(text: &str) -> Result<Measure, Exceeded> {
    if text.len() > MAX_POLICY_BYTES {
        return Err(Exceeded::Bytes(text.len()));
    }
    let bytes = text.as_bytes();
    let mut levels: Vec<Level> = vec![Level::default()];
    let mut found = Measure::default();
    let mut statement = 0;
    let mut open_statement = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let start = i;
        i += 1;
        match b {
            b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => continue,
            b'/' if bytes.get(i) == Some(&b'/') => {
                i = line_end(bytes, i);
                continue;
            }
            b'"' => i = string_end(bytes, i),
            b'a'..=b'z' | b'A'..=b'Z' | b'_' | b'0'..=b'9' | b'?' => {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' => {
                if let Some(top) = levels.last_mut() {
                    top.tokens += BRACKET;
                }
                // Each bracket weighs on the one around it: the estimate is at
                // least as large as the brackets open.
                if levels.len().saturating_mul(BRACKET) > MAX_NESTING {
                    return Err(Exceeded::Nesting {
                        estimate: levels.len(),
                        offset: start,
                    });
                }
                levels.push(Level::default());
                continue;
            }
            b')' | b']' | b'}' => {
                // An unmatched closer is the parser's error to report.
                if levels.len() > 1
                    && let Some(closed) = levels.pop()
                    && let Some(top) = levels.last_mut()
                {
                    top.inner = top.inner.max(closed.close());
                }
                continue;
            }
            b',' => {
                if let Some(top) = levels.last_mut() {
                    top.deepest = top.close();
                    top.tokens = 0;
                    top.inner = 0;
                }
                continue;
            }
            b';' if levels.len() == 1 => {
                found.rules += 1;
                if found.rules > MAX_RULES {
                    return Err(Exceeded::Rules(found.rules));
                }
                settle(&mut levels, &mut found, statement)?;
                statement = i;
                open_statement = false;
                continue;
            }
            _ => {
                // An operator: `==`, `&&`, `::` and the like are one token.
                while i < bytes.len() && b"=&|:<>".contains(&bytes[i]) && bytes[i] == b {
                    i += 1;
                }
                if matches!(b, b'!' | b'<' | b'>') && bytes.get(i) == Some(&b'=') {
                    i += 1;
                }
            }
        }
        if let Some(top) = levels.last_mut() {
            top.tokens += 1;
        }
        if !open_statement {
            open_statement = true;
            found.starts.push(start);
        }
    }
    settle(&mut levels, &mut found, statement)?;
    Ok(found)
}

/// Where a `//` comment whose second `/` is just before `i` ends: the line's end.
fn line_end(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && bytes[i] != b'\n' && bytes[i] != b'\r' {
        i += 1;
    }
    i
}

/// Just past the closing quote of a string literal whose body starts at `i` (an
/// escape takes the next byte, whatever it is), or the text's end.
fn string_end(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && bytes[i] != b'"' {
        i += if bytes[i] == b'\\' { 2 } else { 1 };
    }
    (i + 1).min(bytes.len())
}

/// Closes whatever the statement that ended left open, takes its estimate and
/// starts the next statement afresh.
fn settle(levels: &mut Vec<Level>, found: &mut Measure, statement: usize) -> Result<(), Exceeded> {
    let mut estimate = 0;
    while let Some(level) = levels.pop() {
        estimate = level
            .deepest
            .max(level.tokens.saturating_add(level.inner.max(estimate)));
    }
    levels.push(Level::default());
    found.nesting = found.nesting.max(estimate);
    match found.nesting > MAX_NESTING {
        true => Err(Exceeded::Nesting {
            estimate,
            offset: statement,
        }),
        false => Ok(()),
    }
}

/// The names of the groups `text` refers to (`Group::"ops"`, as Cedar's lexer reads
/// it: whitespace and `//` comments may sit between the tokens), for the groups a
/// revision carries. A name that no group could have (one with an escape) is left
/// out; a literal inside a string counts, which only snapshots a group more.
pub fn group_names(text: &str) -> std::collections::BTreeSet<String> {
    let bytes = text.as_bytes();
    let mut found = std::collections::BTreeSet::new();
    // The last two tokens: `Group` then `::` make the next string a group's name.
    let (mut before, mut last) = (Token::Other, Token::Other);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let start = i;
        i += 1;
        let token = match b {
            b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => continue,
            b'/' if bytes.get(i) == Some(&b'/') => {
                i = line_end(bytes, i);
                continue;
            }
            b'"' => {
                i = string_end(bytes, i);
                let inner = text.get(start + 1..i.saturating_sub(1)).unwrap_or("");
                if before == Token::Group && last == Token::Path && !inner.contains('\\') {
                    found.insert(inner.to_owned());
                }
                Token::Other
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                match &text[start..i] {
                    "Group" => Token::Group,
                    _ => Token::Other,
                }
            }
            b':' if bytes.get(i) == Some(&b':') => {
                i += 1;
                Token::Path
            }
            _ => Token::Other,
        };
        (before, last) = (last, token);
    }
    found
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Token {
    Group,
    Path,
    Other,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets_and_semicolons_in_strings_and_comments_count_for_nothing() {
        let deep = "(".repeat(MAX_NESTING);
        let text = format!(
            "// {deep};;;\npermit (principal, action, resource) when {{ context.tenant == \"{deep};\\\"\" }};"
        );
        let measured = measure(&text).expect("within the bounds");
        assert_eq!(measured.rules, 1);
        assert_eq!(
            measured.starts,
            vec![text.find("permit").expect("a policy")]
        );
        assert!(measured.nesting < 40, "{measured:?}");
    }

    #[test]
    fn the_estimate_grows_with_nesting_and_chains_but_not_with_siblings() {
        let at = |expr: &str| {
            measure(&format!(
                "permit (principal, action, resource) when {{ {expr} }};"
            ))
            .expect("measured")
            .nesting
        };
        let set = format!("[{}] == [1]", vec!["1"; 500].join(", "));
        let chain = vec!["true"; 500].join(" || ");
        assert!(at(&set) < 40, "a set's items are siblings: {}", at(&set));
        assert!(at(&chain) >= 999, "a chain nests: {}", at(&chain));
        assert!(at("((((true))))") > at("(true)") + 3 * BRACKET - 1);
        let past = format!("{}true", "!(".repeat(MAX_NESTING / BRACKET + 1));
        assert!(matches!(
            measure(&format!(
                "permit (principal, action, resource) when {{ {past} }};"
            )),
            Err(Exceeded::Nesting { .. })
        ));
    }

    #[test]
    fn size_and_statement_counts_are_refused_past_their_bounds() {
        let one = "permit (principal, action, resource);\n";
        assert_eq!(
            measure(&one.repeat(MAX_RULES)).map(|m| m.rules),
            Ok(MAX_RULES)
        );
        assert_eq!(
            measure(&one.repeat(MAX_RULES + 1)).map(|m| m.rules),
            Err(Exceeded::Rules(MAX_RULES + 1))
        );
        let big = "x".repeat(MAX_POLICY_BYTES + 1);
        assert_eq!(measure(&big), Err(Exceeded::Bytes(MAX_POLICY_BYTES + 1)));
        assert_eq!(Exceeded::Bytes(1).code(), "policy_too_large");
    }

    #[test]
    fn group_names_are_read_as_cedars_lexer_reads_them() {
        let text = "permit (principal in Group :: // a comment\n \"ops\", action, resource)\n\
                    when { principal in [Group::\"a-b\", MyGroup::\"not\"] && \"Group::\\\"quoted\\\"\" == \"x\" };";
        let names: Vec<String> = group_names(text).into_iter().collect();
        assert_eq!(names, vec!["a-b".to_owned(), "ops".to_owned()]);
    }
}
