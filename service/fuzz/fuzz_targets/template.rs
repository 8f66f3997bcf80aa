//! Feeds arbitrary UTF-8 to every engine entry point and checks that they
//! never panic and agree with each other and with the placeholder scan.

#![no_main]

// The engine is one dependency-free file: include it rather than build the whole service instrumented.
#[path = "../../src/prompt/template.rs"]
mod template;

use template::{ErrorKind, PlaceholderKind, Values};
use libfuzzer_sys::fuzz_target;

// Values that themselves look like placeholders, to catch any re-expansion.
const VALUES: [(&str, &str); 5] = [
    ("a", "1"),
    ("name", "$a ${name} $$"),
    ("K", "kelvin"),
    ("_", ""),
    ("s", "\u{17F}"),
];

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let safe = template::safe_substitute(text, &VALUES);
    let strict = template::substitute(text, &VALUES);
    let ids = template::identifiers(text);
    let valid = template::is_valid(text);
    let found: Vec<_> = template::placeholders(text).collect();

    if !text.contains('$') {
        assert_eq!(safe, text);
        assert_eq!(strict.as_deref(), Ok(text));
        assert!(ids.is_empty());
        assert!(valid);
        assert!(found.is_empty());
    }

    // Rebuild every answer from the placeholder scan alone.
    let mut expected_safe = String::new();
    let mut expected_ids: Vec<&str> = Vec::new();
    let mut first_problem = None;
    let mut previous_end = 0;
    for p in &found {
        assert!(p.start >= previous_end && p.end > p.start && p.end <= text.len());
        assert!(text.is_char_boundary(p.start) && text.is_char_boundary(p.end));
        let gap = &text[previous_end..p.start];
        assert!(!gap.contains('$'), "a `$` was skipped");
        expected_safe.push_str(gap);
        let matched = &text[p.start..p.end];
        match p.kind {
            PlaceholderKind::Escaped => {
                assert_eq!(matched, "$$");
                expected_safe.push('$');
            }
            PlaceholderKind::Named | PlaceholderKind::Braced => {
                let bytes = p.name.as_bytes();
                assert!(!bytes.is_empty() && !bytes[0].is_ascii_digit());
                assert!(
                    bytes
                        .iter()
                        .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
                );
                if p.kind == PlaceholderKind::Named {
                    assert_eq!(&matched[1..], p.name);
                } else {
                    assert_eq!(matched, format!("${{{}}}", p.name));
                }
                match Values::get(&VALUES, p.name) {
                    Some(value) => expected_safe.push_str(value),
                    None => {
                        expected_safe.push_str(matched);
                        first_problem.get_or_insert((ErrorKind::UnknownPlaceholder, p));
                    }
                }
                if !expected_ids.contains(&p.name) {
                    expected_ids.push(p.name);
                }
            }
            PlaceholderKind::Invalid => {
                assert_eq!(matched, "$");
                assert!(p.name.is_empty());
                expected_safe.push('$');
                first_problem.get_or_insert((ErrorKind::InvalidPlaceholder, p));
            }
        }
        let (line, column) = template::line_col(text, p.start);
        assert!(line >= 1 && column >= 1);
        previous_end = p.end;
    }
    let tail = &text[previous_end..];
    assert!(!tail.contains('$'), "a trailing `$` was skipped");
    expected_safe.push_str(tail);

    assert_eq!(safe, expected_safe);
    assert_eq!(ids, expected_ids);
    assert_eq!(
        valid,
        found.iter().all(|p| p.kind != PlaceholderKind::Invalid)
    );
    match (&strict, first_problem) {
        (Ok(out), None) => assert_eq!(*out, safe),
        (Err(error), Some((kind, p))) => {
            assert_eq!(error.kind, kind);
            assert_eq!(error.name, p.name);
            assert_eq!(
                (error.line, error.column),
                template::line_col(text, p.start)
            );
            let _ = error.to_string();
        }
        (strict, problem) => panic!("substitute {strict:?} but first problem {problem:?}"),
    }

    // Offsets that are out of range or inside a character must not panic.
    for offset in [
        0,
        text.len() / 3,
        text.len() / 2,
        text.len(),
        text.len() + 3,
        usize::MAX,
    ] {
        let _ = template::line_col(text, offset);
    }
});
