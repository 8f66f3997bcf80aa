//! JSON as promptfoo compares and finds it: deep equality where numbers are
//! numbers (`1` equals `1.0`, as in JavaScript), a subset test for `tool-call`'s
//! arguments, and the objects `contains-json` finds in a reply's text.

use serde_json::Value;

use crate::evals::yaml;

/// How far past an opening brace an object is looked for (promptfoo's
/// `maxJsonLength`; it counts UTF-16 units, this counts bytes).
const MAX_OBJECT_BYTES: usize = 100_000;
/// The most text scanned, and parsed, while looking for objects in one reply:
/// promptfoo's search is quadratic on a run of braces, this stops early instead.
const MAX_SEARCH_BYTES: usize = 4 * 1024 * 1024;

/// Node's `isDeepStrictEqual` on parsed JSON: objects by keys whatever their order,
/// numbers by value.
pub fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)))
        }
        _ => a == b,
    }
}

/// Whether `actual` holds `expected`: every key of an expected object is in the
/// actual object with a value that holds the expected one; a list holds a list
/// of the same length whose items it holds one by one (so `{"tasks": [{"title":
/// "x"}]}` is held by a call that also sends each task's other fields); anything
/// else is [`equal`].
pub fn contains(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Object(a), Value::Object(e)) => e
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|w| contains(w, v))),
        (Value::Array(a), Value::Array(e)) => {
            a.len() == e.len() && a.iter().zip(e).all(|(w, v)| contains(w, v))
        }
        _ => equal(actual, expected),
    }
}

/// promptfoo's `extractJsonObjects`: from each `{`, the shortest text whose
/// braces balance (braces inside strings count too, as there) read as JSON or
/// YAML; an object found is kept and the search goes on after it. Text that ends
/// with braces open is closed with `}`s and tried once. promptfoo also turns `//`
/// comments into YAML ones first; loadout does not.
pub fn objects(text: &str) -> Vec<Value> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut work = 0usize;
    let mut i = 0;
    while i < bytes.len() && work < MAX_SEARCH_BYTES {
        if bytes[i] != b'{' {
            i += 1;
            continue;
        }
        let end = (i + MAX_OBJECT_BYTES).min(bytes.len());
        let (mut open, mut close, mut j) = (1usize, 0usize, i + 1);
        let mut next = i + 1;
        while j < end && open > close {
            match bytes[j] {
                b'{' => open += 1,
                b'}' => close += 1,
                _ => {}
            }
            j += 1;
            if open == close || j == bytes.len() || j == i + MAX_OBJECT_BYTES {
                work += j - i;
                if let Some(object) = object_at(text, i, j, open - close) {
                    found.push(object);
                    next = j;
                    break;
                }
                if open == close {
                    break;
                }
            }
        }
        work += j - i;
        i = next;
    }
    found
}

/// The text from `start` to `end` (byte offsets at ASCII braces, or the end),
/// with `missing` closing braces added, read as an object.
fn object_at(text: &str, start: usize, end: usize, missing: usize) -> Option<Value> {
    let slice = text.get(start..end)?;
    let candidate = format!("{slice}{}", "}".repeat(missing));
    let value = serde_json::from_str::<Value>(&candidate)
        .ok()
        .or_else(|| yaml::parse(&candidate).ok())?;
    value.is_object().then_some(value)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn numbers_compare_by_value_and_keys_in_any_order() {
        assert!(equal(
            &json!({"a": 1, "b": [2.0]}),
            &json!({"b": [2], "a": 1.0})
        ));
        assert!(!equal(&json!({"a": 1}), &json!({"a": 1, "b": null})));
    }

    #[test]
    fn a_subset_needs_every_expected_key() {
        let actual = json!({"city": "Paris", "days": 3, "opts": {"unit": "c", "x": 1}});
        assert!(contains(
            &actual,
            &json!({"city": "Paris", "opts": {"unit": "c"}})
        ));
        assert!(!contains(&actual, &json!({"city": "Rome"})));
        assert!(!contains(&json!({"tags": [1, 2]}), &json!({"tags": [1]})));
    }

    #[test]
    fn objects_are_found_in_prose_one_after_another() {
        let found = objects("Here: {\"a\": 1} and then {b: {c: 2}} done");
        assert_eq!(found, vec![json!({"a": 1}), json!({"b": {"c": 2}})]);
    }

    #[test]
    fn an_unclosed_object_at_the_end_is_closed_and_tried() {
        assert_eq!(objects("x {\"a\": {\"b\": 1"), vec![json!({"a": {"b": 1}})]);
    }

    #[test]
    fn text_without_objects_finds_none() {
        assert!(objects("no objects here }} {").is_empty());
    }

    #[test]
    fn a_run_of_braces_is_searched_within_a_bound() {
        let text = "{".repeat(200_000);
        assert!(objects(&text).is_empty());
    }
}
