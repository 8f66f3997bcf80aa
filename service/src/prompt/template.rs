//! `$placeholder` templates with exactly the semantics of CPython 3.11's
//! `string.Template` (default `delimiter`, `idpattern` and `flags`).
//!
//! Python matches, left to right and without overlap, the pattern
//!
//! ```text
//! \$(?: (?P<escaped>\$) | (?P<named>ID) | {(?P<braced>ID)} | (?P<invalid>) )
//! ID = (?a:[_a-z][_a-z0-9]*)   with re.IGNORECASE
//! ```
//!
//! This module reproduces that with a single hand-written pass: `$` is found
//! with `memchr` (SIMD where the CPU has it) and the few bytes after it are
//! classified by hand. Identifiers are ASCII only, so the Kelvin sign U+212A and
//! the long s U+017F, which Unicode case folding would turn into `k` and `s`,
//! never start or continue a name — that is what Python's `(?a:` buys.
//!
//! Every offset the scanner slices at is next to an ASCII byte (`$`, `{`, `}` or
//! an identifier byte), and an ASCII byte is always a UTF-8 character boundary,
//! so no input can make the slicing panic.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::hash::BuildHasher;
use std::iter::FusedIterator;

/// Where placeholder values come from.
pub trait Values {
    /// The value for `name`, or `None` when the name is unknown.
    fn get(&self, name: &str) -> Option<&str>;
}

/// Owned-string hash maps, with any hasher.
impl<S: BuildHasher> Values for HashMap<String, String, S> {
    fn get(&self, name: &str) -> Option<&str> {
        HashMap::get(self, name).map(String::as_str)
    }
}

/// Owned-string ordered maps.
impl Values for BTreeMap<String, String> {
    fn get(&self, name: &str) -> Option<&str> {
        BTreeMap::get(self, name).map(String::as_str)
    }
}

/// Borrowed-string hash maps, with any hasher.
impl<S: BuildHasher> Values for HashMap<&str, &str, S> {
    fn get(&self, name: &str) -> Option<&str> {
        HashMap::get(self, name).copied()
    }
}

/// Borrowed-string ordered maps.
impl Values for BTreeMap<&str, &str> {
    fn get(&self, name: &str) -> Option<&str> {
        BTreeMap::get(self, name).copied()
    }
}

/// `(name, value)` pairs, searched linearly. When a name appears twice the
/// last pair wins, as it does for `dict(pairs)` in Python and
/// `HashMap::from(pairs)` in Rust, so the same pairs mean the same thing in
/// every container.
impl Values for [(&str, &str)] {
    fn get(&self, name: &str) -> Option<&str> {
        self.iter()
            .rev()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| *value)
    }
}

/// Fixed-size arrays of `(name, value)` pairs, searched like slices.
impl<const N: usize> Values for [(&str, &str); N] {
    fn get(&self, name: &str) -> Option<&str> {
        Values::get(self.as_slice(), name)
    }
}

/// Lookup functions. The values must be `'static` because `Values::get` ties
/// its answer to the lifetime of `self`, and a closure cannot lend out a
/// borrow of its own captures; a bound of `Fn(&str) -> Option<&str>` would tie
/// the answer to the *name* instead, which cannot satisfy the trait.
impl<F> Values for F
where
    F: Fn(&str) -> Option<&'static str>,
{
    fn get(&self, name: &str) -> Option<&str> {
        self(name)
    }
}

/// What a `$` introduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlaceholderKind {
    /// `$$`, which stands for one literal `$`.
    Escaped,
    /// `$name`, the name running as far as identifier characters go.
    Named,
    /// `${name}`.
    Braced,
    /// A `$` followed by anything else, including the end of the text. Only the
    /// `$` itself belongs to it; scanning resumes right after it.
    Invalid,
}

/// One placeholder occurrence, located in the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Placeholder<'a> {
    /// Which of the four forms this is.
    pub kind: PlaceholderKind,
    /// The identifier for `Named` and `Braced`; `""` for `Escaped` and `Invalid`.
    pub name: &'a str,
    /// Byte offset of the `$`.
    pub start: usize,
    /// Byte offset just past the whole match (`start + 1` for `Invalid`).
    pub end: usize,
}

/// Iterator over every placeholder of a template, in template order.
#[derive(Debug, Clone)]
pub struct Placeholders<'a> {
    template: &'a str,
    // Byte offset where the search for the next `$` resumes; always just after
    // an ASCII byte or 0, hence a character boundary.
    pos: usize,
}

impl<'a> Iterator for Placeholders<'a> {
    type Item = Placeholder<'a>;

    fn next(&mut self) -> Option<Placeholder<'a>> {
        let rest = self.template.as_bytes().get(self.pos..)?;
        let Some(offset) = memchr::memchr(b'$', rest) else {
            // Remember exhaustion so later calls do not search the tail again.
            self.pos = self.template.len();
            return None;
        };
        let found = classify(self.template, self.pos + offset);
        self.pos = found.end;
        Some(found)
    }
}

impl FusedIterator for Placeholders<'_> {}

/// Every placeholder occurrence in template order, for a linter to use.
#[must_use]
pub fn placeholders(template: &str) -> Placeholders<'_> {
    Placeholders { template, pos: 0 }
}

fn is_identifier_start(byte: u8) -> bool {
    byte.is_ascii_alphabetic() || byte == b'_'
}

fn is_identifier_continue(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

// The identifier pattern is greedy and nothing after it can force a shorter
// match (a `}` is never an identifier byte), so the longest run is the match.
fn identifier_end(bytes: &[u8], from: usize) -> usize {
    bytes
        .get(from..)
        .and_then(|rest| rest.iter().position(|&b| !is_identifier_continue(b)))
        .map_or(bytes.len(), |length| from + length)
}

// Mirrors the order of Python's alternation: escaped, named, braced, invalid.
fn classify(template: &str, start: usize) -> Placeholder<'_> {
    let bytes = template.as_bytes();
    let after = start + 1;
    let invalid = Placeholder {
        kind: PlaceholderKind::Invalid,
        name: "",
        start,
        end: after,
    };
    match bytes.get(after) {
        Some(b'$') => Placeholder {
            kind: PlaceholderKind::Escaped,
            name: "",
            start,
            end: after + 1,
        },
        Some(&byte) if is_identifier_start(byte) => {
            let end = identifier_end(bytes, after + 1);
            Placeholder {
                kind: PlaceholderKind::Named,
                name: &template[after..end],
                start,
                end,
            }
        }
        Some(b'{') => {
            let open = after + 1;
            if !bytes.get(open).is_some_and(|&b| is_identifier_start(b)) {
                return invalid;
            }
            let close = identifier_end(bytes, open + 1);
            if bytes.get(close) != Some(&b'}') {
                // Python backtracks to the empty `invalid` group here: only the
                // `$` is consumed and `{name` stays literal text.
                return invalid;
            }
            Placeholder {
                kind: PlaceholderKind::Braced,
                name: &template[open..close],
                start,
                end: close + 1,
            }
        }
        _ => invalid,
    }
}

/// Why [`substitute`] refused a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A `$name` or `${name}` whose name has no value (Python raises `KeyError`).
    UnknownPlaceholder,
    /// A `$` that starts no valid placeholder (Python raises `ValueError`).
    InvalidPlaceholder,
}

/// The first problem [`substitute`] met, in template order.
///
/// `line` and `column` are the true 1-based position of the offending `$`,
/// lines split as `str.splitlines` splits them and columns counted in Unicode
/// code points (see [`line_col`]). Python gives no position for `KeyError`; for
/// `ValueError` its message says `line L, col C`, and its arithmetic
/// (`i - len(''.join(lines[:-1]))`) looks 0-based but is in fact 1-based,
/// because `i` is `mo.start('invalid')`, the index just *past* the `$`, so the
/// prefix it splits always ends with that `$`. On CPython 3.11.7 Python's
/// message therefore always agrees with the position reported here; the
/// parity test checks both against an independent computation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubstituteError {
    /// Unknown name or invalid placeholder.
    pub kind: ErrorKind,
    /// The placeholder's name; `""` for [`ErrorKind::InvalidPlaceholder`].
    pub name: String,
    /// 1-based line of the `$`.
    pub line: usize,
    /// 1-based column of the `$`, in code points.
    pub column: usize,
}

impl SubstituteError {
    fn at(template: &str, kind: ErrorKind, found: &Placeholder<'_>) -> Self {
        let (line, column) = line_col(template, found.start);
        SubstituteError {
            kind,
            name: found.name.to_owned(),
            line,
            column,
        }
    }
}

/// Renders as `unknown placeholder $name at line L, column C` or
/// `invalid placeholder at line L, column C`.
impl fmt::Display for SubstituteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ErrorKind::UnknownPlaceholder => write!(
                f,
                "unknown placeholder ${} at line {}, column {}",
                self.name, self.line, self.column
            ),
            ErrorKind::InvalidPlaceholder => write!(
                f,
                "invalid placeholder at line {}, column {}",
                self.line, self.column
            ),
        }
    }
}

/// A plain error with no underlying cause.
impl std::error::Error for SubstituteError {}

/// Room for the template plus a quarter for values, so that the common case of
/// values about as long as the placeholders they replace never reallocates
/// (a reallocation copies everything written so far).
fn output_capacity(template: &str) -> usize {
    template.len().saturating_add(template.len() / 4)
}

/// Like Python's `Template.safe_substitute`: `$$` becomes `$`, known names
/// become their values (inserted literally, never scanned again), and unknown
/// names and invalid `$` are left exactly as written.
#[must_use]
pub fn safe_substitute(template: &str, values: &(impl Values + ?Sized)) -> String {
    // No output can reach usize::MAX bytes, so the limit is never met.
    safe_substitute_within(template, values, usize::MAX).unwrap_or_default()
}

/// A render that would pass its size limit, stopped before it allocated past it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overflow {
    /// The placeholder whose value crossed the limit; `None` when the template's
    /// own text did.
    pub placeholder: Option<String>,
    pub limit: usize,
}

/// [`safe_substitute`] that never holds more than `limit` bytes of output: the
/// buffer starts at most `limit` long and each piece is measured before it is
/// copied, so a template that repeats a large value fails fast instead of
/// allocating its whole expansion.
///
/// # Errors
///
/// [`Overflow`] naming the placeholder that would cross `limit`.
pub fn safe_substitute_within(
    template: &str,
    values: &(impl Values + ?Sized),
    limit: usize,
) -> Result<String, Overflow> {
    let mut out = String::with_capacity(output_capacity(template).min(limit));
    let overflow = |placeholder: Option<&str>| Overflow {
        placeholder: placeholder.map(str::to_owned),
        limit,
    };
    let push = |out: &mut String, piece: &str| -> bool {
        let Some(needed) = out.len().checked_add(piece.len()).filter(|n| *n <= limit) else {
            return false;
        };
        if needed > out.capacity() {
            // Grow by doubling as `String` would, but never past the limit.
            let target = needed.max(out.capacity().saturating_mul(2)).min(limit);
            out.reserve_exact(target - out.len());
        }
        out.push_str(piece);
        true
    };
    // template[..copied] is already represented in `out`; text left verbatim
    // is not copied until the next replacement, so runs are copied whole.
    let mut copied = 0;
    for found in placeholders(template) {
        let replacement = match found.kind {
            PlaceholderKind::Escaped => {
                // Keep the first `$` of `$$` as part of the run before it.
                if !push(&mut out, &template[copied..found.end - 1]) {
                    return Err(overflow(None));
                }
                copied = found.end;
                continue;
            }
            PlaceholderKind::Named | PlaceholderKind::Braced => match values.get(found.name) {
                Some(value) => value,
                None => continue,
            },
            PlaceholderKind::Invalid => continue,
        };
        if !push(&mut out, &template[copied..found.start]) {
            return Err(overflow(None));
        }
        if !push(&mut out, replacement) {
            return Err(overflow(Some(found.name)));
        }
        copied = found.end;
    }
    if !push(&mut out, &template[copied..]) {
        return Err(overflow(None));
    }
    Ok(out)
}

/// Like Python's `Template.substitute`: every placeholder must be valid and
/// known, and the first one in template order that is not becomes the error.
///
/// # Errors
///
/// [`ErrorKind::UnknownPlaceholder`] for a `$name` or `${name}` that `values`
/// does not know, [`ErrorKind::InvalidPlaceholder`] for a `$` that starts no
/// valid placeholder, whichever comes first, with the position of its `$`.
pub fn substitute(
    template: &str,
    values: &(impl Values + ?Sized),
) -> Result<String, SubstituteError> {
    let mut out = String::with_capacity(output_capacity(template));
    let mut copied = 0;
    for found in placeholders(template) {
        let replacement = match found.kind {
            PlaceholderKind::Escaped => {
                out.push_str(&template[copied..found.end - 1]);
                copied = found.end;
                continue;
            }
            PlaceholderKind::Named | PlaceholderKind::Braced => match values.get(found.name) {
                Some(value) => value,
                None => {
                    return Err(SubstituteError::at(
                        template,
                        ErrorKind::UnknownPlaceholder,
                        &found,
                    ));
                }
            },
            PlaceholderKind::Invalid => {
                return Err(SubstituteError::at(
                    template,
                    ErrorKind::InvalidPlaceholder,
                    &found,
                ));
            }
        };
        out.push_str(&template[copied..found.start]);
        out.push_str(replacement);
        copied = found.end;
    }
    out.push_str(&template[copied..]);
    Ok(out)
}

/// Like Python 3.11's `Template.get_identifiers`: the names of `$name` and
/// `${name}` placeholders in first-seen order without duplicates; escaped and
/// invalid `$` are ignored.
#[must_use]
pub fn identifiers(template: &str) -> Vec<&str> {
    let mut names = Vec::new();
    // Python's list membership test is quadratic; a set keeps huge templates
    // with many distinct names linear while preserving first-seen order.
    let mut seen = HashSet::new();
    for found in placeholders(template) {
        if matches!(found.kind, PlaceholderKind::Named | PlaceholderKind::Braced)
            && seen.insert(found.name)
        {
            names.push(found.name);
        }
    }
    names
}

/// Like Python 3.11's `Template.is_valid`: true when no `$` is invalid
/// (unknown names do not matter here).
#[must_use]
pub fn is_valid(template: &str) -> bool {
    placeholders(template).all(|found| found.kind != PlaceholderKind::Invalid)
}

/// [`line_col`] for increasing offsets, each from where the last one left off, so
/// locating n problems in a template is linear rather than n scans from the start.
pub struct LineCounter<'t> {
    template: &'t str,
    offset: usize,
    line: usize,
    column: usize,
    /// The text so far ends with `\r`: a `\n` next is the same line break.
    after_cr: bool,
}

impl<'t> LineCounter<'t> {
    #[must_use]
    pub fn new(template: &'t str) -> Self {
        Self {
            template,
            offset: 0,
            line: 1,
            column: 1,
            after_cr: false,
        }
    }

    /// The (line, column) of `byte_offset`, as [`line_col`] gives it. An offset
    /// before the previous one starts again from the beginning.
    pub fn advance_to(&mut self, byte_offset: usize) -> (usize, usize) {
        let mut end = byte_offset.min(self.template.len());
        while !self.template.is_char_boundary(end) {
            end -= 1;
        }
        if end < self.offset {
            *self = Self::new(self.template);
        }
        for c in self.template[self.offset..end].chars() {
            match c {
                '\n' if self.after_cr => {}
                '\r' | '\n' | '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}'
                | '\u{2028}' | '\u{2029}' => {
                    self.line += 1;
                    self.column = 1;
                }
                _ => self.column += 1,
            }
            self.after_cr = c == '\r';
        }
        self.offset = end;
        (self.line, self.column)
    }
}

/// 1-based (line, column) of a byte offset: lines split exactly as Python's
/// `str.splitlines` (`\n`, `\r`, `\r\n`, `\v` `\x0b`, `\f` `\x0c`, `\x1c`,
/// `\x1d`, `\x1e`, `\x85`, `\u2028`, `\u2029`), column counted in Unicode
/// code points.
///
/// The position is that of the end of `template[..byte_offset]` split on its
/// own, so an offset between the `\r` and `\n` of a `\r\n` is already on the
/// next line. An offset past the end is clamped to the end and one inside a
/// multi-byte character is moved back to that character's start, so no offset
/// panics.
#[must_use]
pub fn line_col(template: &str, byte_offset: usize) -> (usize, usize) {
    LineCounter::new(template).advance_to(byte_offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn kinds(template: &str) -> Vec<(PlaceholderKind, &str, usize, usize)> {
        placeholders(template)
            .map(|p| (p.kind, p.name, p.start, p.end))
            .collect()
    }

    use PlaceholderKind::{Braced, Escaped, Invalid, Named};

    #[test]
    fn a_render_past_its_limit_stops_and_names_the_placeholder() {
        let soul = "x".repeat(1000);
        let values = map(&[("soul", soul.as_str())]);
        let template = "$soul ".repeat(100);
        let err = safe_substitute_within(&template, &values, 10_000).expect_err("over");
        assert_eq!(err.placeholder.as_deref(), Some("soul"));
        assert_eq!(err.limit, 10_000);
        let fits = safe_substitute_within(&template, &values, 100_100).expect("fits");
        assert_eq!(fits, safe_substitute(&template, &values));
        assert!(fits.capacity() <= 100_100, "{}", fits.capacity());
    }

    #[test]
    fn a_template_longer_than_the_limit_overflows_without_a_placeholder() {
        let err = safe_substitute_within(&"a".repeat(11), &map(&[]), 10).expect_err("over");
        assert_eq!(err.placeholder, None);
    }

    #[test]
    fn a_doubled_dollar_becomes_one_dollar() {
        assert_eq!(safe_substitute("cost: $$5", &map(&[])), "cost: $5");
        assert_eq!(substitute("$$", &map(&[])).unwrap(), "$");
        assert_eq!(kinds("$$"), vec![(Escaped, "", 0, 2)]);
    }

    #[test]
    fn three_dollars_are_an_escape_then_an_invalid_dollar() {
        assert_eq!(kinds("$$$"), vec![(Escaped, "", 0, 2), (Invalid, "", 2, 3)]);
        assert_eq!(safe_substitute("$$$", &map(&[])), "$$");
        assert_eq!(
            substitute("$$$", &map(&[])).unwrap_err().kind,
            ErrorKind::InvalidPlaceholder
        );
    }

    #[test]
    fn a_named_placeholder_is_replaced_by_its_value() {
        let values = map(&[("who", "world")]);
        assert_eq!(safe_substitute("hello $who!", &values), "hello world!");
        assert_eq!(substitute("hello $who!", &values).unwrap(), "hello world!");
    }

    #[test]
    fn a_braced_placeholder_is_replaced_by_its_value() {
        let values = map(&[("who", "world")]);
        assert_eq!(safe_substitute("${who}wide", &values), "worldwide");
        assert_eq!(kinds("${who}wide"), vec![(Braced, "who", 0, 6)]);
    }

    #[test]
    fn a_name_runs_through_following_letters_digits_and_underscores() {
        let values = map(&[("a", "1"), ("a1_b", "2")]);
        assert_eq!(safe_substitute("$a1_b-$a.", &values), "2-1.");
        assert_eq!(safe_substitute("$ab", &values), "$ab");
        assert_eq!(kinds("$a1_b-"), vec![(Named, "a1_b", 0, 5)]);
    }

    #[test]
    fn names_are_case_sensitive_but_both_cases_are_identifiers() {
        let values = map(&[("Name", "upper")]);
        assert_eq!(safe_substitute("$Name $name", &values), "upper $name");
        assert_eq!(
            identifiers("$Name $name $_ $_9"),
            vec!["Name", "name", "_", "_9"]
        );
    }

    #[test]
    fn unknown_names_are_kept_verbatim_by_safe_substitute() {
        assert_eq!(safe_substitute("$x ${y} $$", &map(&[])), "$x ${y} $");
    }

    #[test]
    fn an_unknown_name_is_an_error_naming_it_with_its_position() {
        let err = substitute("line one\n  at $soul end", &map(&[])).unwrap_err();
        assert_eq!(
            err,
            SubstituteError {
                kind: ErrorKind::UnknownPlaceholder,
                name: "soul".into(),
                line: 2,
                column: 6,
            }
        );
        assert_eq!(
            err.to_string(),
            "unknown placeholder $soul at line 2, column 6"
        );
    }

    #[test]
    fn the_first_problem_in_template_order_wins() {
        let err = substitute("$ok ${missing} $", &map(&[("ok", "")])).unwrap_err();
        assert_eq!(err.kind, ErrorKind::UnknownPlaceholder);
        assert_eq!(err.name, "missing");
        let err = substitute("$ok $ ${missing}", &map(&[("ok", "")])).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidPlaceholder);
        assert_eq!((err.line, err.column), (1, 5));
        assert_eq!(err.to_string(), "invalid placeholder at line 1, column 5");
    }

    #[test]
    fn a_dollar_before_a_digit_is_invalid() {
        assert_eq!(kinds("$5"), vec![(Invalid, "", 0, 1)]);
        assert_eq!(safe_substitute("$5", &map(&[("5", "five")])), "$5");
        assert!(!is_valid("$5"));
        assert_eq!(
            substitute("ab$5", &map(&[])).unwrap_err(),
            SubstituteError {
                kind: ErrorKind::InvalidPlaceholder,
                name: String::new(),
                line: 1,
                column: 3,
            }
        );
    }

    #[test]
    fn a_dollar_at_the_very_end_is_left_verbatim_by_safe_substitute() {
        assert_eq!(safe_substitute("price $", &map(&[])), "price $");
        assert_eq!(kinds("price $"), vec![(Invalid, "", 6, 7)]);
        assert!(substitute("price $", &map(&[])).is_err());
    }

    #[test]
    fn a_brace_never_closed_is_invalid_and_only_the_dollar_is_consumed() {
        let values = map(&[("a", "A"), ("b", "B")]);
        assert_eq!(kinds("${a"), vec![(Invalid, "", 0, 1)]);
        assert_eq!(safe_substitute("${a", &values), "${a");
        assert_eq!(safe_substitute("${a$b}", &values), "${aB}");
        assert_eq!(safe_substitute("${", &values), "${");
    }

    #[test]
    fn spaces_inside_braces_make_the_placeholder_invalid() {
        let values = map(&[("name", "x")]);
        assert_eq!(safe_substitute("${ name}", &values), "${ name}");
        assert_eq!(safe_substitute("${name }", &values), "${name }");
        assert!(!is_valid("${ name}"));
    }

    #[test]
    fn empty_braces_are_invalid() {
        assert_eq!(kinds("${}"), vec![(Invalid, "", 0, 1)]);
        assert_eq!(safe_substitute("${}", &map(&[])), "${}");
        assert!(!is_valid("${}"));
    }

    #[test]
    fn braces_holding_a_digit_first_name_are_invalid() {
        assert_eq!(kinds("${9a}"), vec![(Invalid, "", 0, 1)]);
    }

    #[test]
    fn ten_thousand_dollars_in_a_row_halve_to_five_thousand() {
        let template = "$".repeat(10_000);
        assert_eq!(safe_substitute(&template, &map(&[])), "$".repeat(5_000));
        assert!(is_valid(&template));
        let odd = "$".repeat(10_001);
        assert_eq!(safe_substitute(&odd, &map(&[])), "$".repeat(5_001));
        assert!(!is_valid(&odd));
        let err = substitute(&odd, &map(&[])).unwrap_err();
        assert_eq!((err.line, err.column), (1, 10_001));
    }

    #[test]
    fn the_kelvin_sign_and_long_s_do_not_start_or_continue_a_name() {
        let values = map(&[("k", "K!"), ("K", "K!"), ("s", "S!"), ("S", "S!")]);
        for template in ["$\u{212A}", "$\u{17F}", "${\u{212A}}", "${\u{17F}}"] {
            assert_eq!(safe_substitute(template, &values), template);
            assert!(!is_valid(template));
        }
        assert_eq!(safe_substitute("$k\u{212A}", &values), "K!\u{212A}");
        assert_eq!(kinds("$s\u{17F}"), vec![(Named, "s", 0, 2)]);
        assert_eq!(
            substitute("\u{212A}$\u{212A}", &values).unwrap_err().column,
            2
        );
    }

    #[test]
    fn other_non_ascii_letters_are_not_identifiers_either() {
        for template in ["$é", "$漢", "$😀", "$\u{130}", "$\u{131}"] {
            assert_eq!(kinds(template), vec![(Invalid, "", 0, 1)]);
        }
    }

    #[test]
    fn values_containing_placeholders_are_not_expanded_again() {
        let values = map(&[("a", "$b ${b} $$"), ("b", "B")]);
        assert_eq!(safe_substitute("$a", &values), "$b ${b} $$");
        assert_eq!(substitute("$a/$b", &values).unwrap(), "$b ${b} $$/B");
    }

    #[test]
    fn identifiers_come_in_first_seen_order_without_duplicates() {
        assert_eq!(
            identifiers("$b ${a} $b $$c ${c} $ $9 ${ d} $a"),
            vec!["b", "a", "c"]
        );
        assert!(identifiers("no dollars").is_empty());
    }

    #[test]
    fn is_valid_ignores_unknown_names_but_not_stray_dollars() {
        assert!(is_valid("$unknown ${x} $$"));
        assert!(is_valid(""));
        assert!(!is_valid("$unknown $"));
        assert!(!is_valid("$-"));
    }

    #[test]
    fn text_without_dollars_is_returned_unchanged() {
        let text = "plain {text} with } braces\r\nand lines";
        assert_eq!(safe_substitute(text, &map(&[])), text);
        assert_eq!(substitute(text, &map(&[])).unwrap(), text);
    }

    #[test]
    fn line_col_counts_code_points_from_one() {
        assert_eq!(line_col("", 0), (1, 1));
        assert_eq!(line_col("aé漢😀$", "aé漢😀".len()), (1, 5));
    }

    #[test]
    fn line_col_breaks_lines_at_every_splitlines_separator() {
        for sep in [
            "\n", "\r", "\r\n", "\u{0b}", "\u{0c}", "\u{1c}", "\u{1d}", "\u{1e}", "\u{85}",
            "\u{2028}", "\u{2029}",
        ] {
            let template = format!("ab{sep}cd{sep}e$");
            let dollar = template.len() - 1;
            assert_eq!(line_col(&template, dollar), (3, 2), "separator {sep:?}");
            let err = substitute(&template, &map(&[])).unwrap_err();
            assert_eq!((err.line, err.column), (3, 2), "separator {sep:?}");
        }
    }

    #[test]
    fn a_carriage_return_line_feed_is_one_break_but_a_line_feed_carriage_return_is_two() {
        assert_eq!(line_col("a\r\nb", 4), (2, 2));
        assert_eq!(line_col("a\n\rb", 4), (3, 2));
        assert_eq!(line_col("a\r\rb", 4), (3, 2));
    }

    #[test]
    fn tabs_and_other_control_characters_do_not_break_lines() {
        assert_eq!(line_col("\t\u{1f}\u{7}\0x", 4), (1, 5));
    }

    #[test]
    fn line_col_never_panics_on_odd_offsets() {
        let text = "a\r\né漢";
        assert_eq!(line_col(text, 2), (2, 1));
        assert_eq!(line_col(text, 4), (2, 1));
        assert_eq!(line_col(text, 5), (2, 2));
        assert_eq!(line_col(text, 6), (2, 2));
        assert_eq!(line_col(text, usize::MAX), (2, 3));
    }

    #[test]
    fn every_values_container_answers_the_same() {
        let template = "$a-${b}-$c";
        let expected = "1-2-$c";
        let owned = map(&[("a", "1"), ("b", "2")]);
        let owned_tree: BTreeMap<String, String> = owned.clone().into_iter().collect();
        let borrowed: HashMap<&str, &str> = HashMap::from([("a", "1"), ("b", "2")]);
        let borrowed_tree: BTreeMap<&str, &str> = BTreeMap::from([("a", "1"), ("b", "2")]);
        let array = [("a", "1"), ("b", "2")];
        let slice: &[(&str, &str)] = &array;
        let lookup = |name: &str| match name {
            "a" => Some("1"),
            "b" => Some("2"),
            _ => None,
        };
        assert_eq!(safe_substitute(template, &owned), expected);
        assert_eq!(safe_substitute(template, &owned_tree), expected);
        assert_eq!(safe_substitute(template, &borrowed), expected);
        assert_eq!(safe_substitute(template, &borrowed_tree), expected);
        assert_eq!(safe_substitute(template, &array), expected);
        assert_eq!(safe_substitute(template, slice), expected);
        assert_eq!(safe_substitute(template, &lookup), expected);
    }

    #[test]
    fn the_last_of_duplicate_pairs_wins_like_a_dict() {
        assert_eq!(
            safe_substitute("$a", &[("a", "first"), ("a", "last")]),
            "last"
        );
    }

    #[test]
    fn placeholders_reports_every_occurrence_in_order() {
        assert_eq!(
            kinds("x$$y$name ${b}$ $"),
            vec![
                (Escaped, "", 1, 3),
                (Named, "name", 4, 9),
                (Braced, "b", 10, 14),
                (Invalid, "", 14, 15),
                (Invalid, "", 16, 17),
            ]
        );
        let mut iter = placeholders("$a");
        assert!(iter.next().is_some());
        assert!(iter.next().is_none());
        assert!(iter.next().is_none());
    }

    #[test]
    fn a_multi_megabyte_template_is_handled_in_one_pass() {
        let chunk = "some text $name, ${other} and $$ dollars\n";
        let template = chunk.repeat(100_000);
        assert!(template.len() > 4_000_000);
        let values = map(&[("name", "N"), ("other", "O")]);
        let out = safe_substitute(&template, &values);
        assert_eq!(out, "some text N, O and $ dollars\n".repeat(100_000));
        assert_eq!(substitute(&template, &values).unwrap(), out);
        assert_eq!(identifiers(&template), vec!["name", "other"]);
        assert!(is_valid(&template));
        assert_eq!(placeholders(&template).count(), 300_000);

        let broken = format!("{template}tail $");
        let err = substitute(&broken, &values).unwrap_err();
        assert_eq!((err.line, err.column), (100_001, 6));
    }
}
