//! The classification's backstop: a search for an argument the old schema takes
//! and the new one refuses. The rules in [`super`] explain a change; this search
//! checks them by what a caller can send. It generates arguments from the old
//! schema (its types, enums, bounds and their edges, each optional property sent
//! or left out, `null` where admitted), keeps those the old schema's validator
//! takes, and asks the new schema's validator, compiled as the call path compiles
//! it. One refused is a counterexample, so the change is breaking whatever the
//! rules said. Finding none proves nothing, which is why the rules come first.
//!
//! Deterministic (seeded from the two schemas) and bounded: [`TRIES`] arguments a
//! schema pair, nesting to [`MAX_DEPTH`], at most [`MAX_ITEMS`] list items.

use jsonschema::Validator;
use serde_json::{Map, Number, Value};

/// Arguments generated for one schema pair.
pub const TRIES: usize = 300;
/// How deep a generated argument nests; deeper schemas get `null` there.
pub const MAX_DEPTH: usize = 8;
/// The most items a generated list has.
pub const MAX_ITEMS: u64 = 4;

/// Compiles `schema` as the call path does (`execute::arguments::compile`): the
/// draft its `$schema` names (2020-12 otherwise), formats asserted.
fn compile(schema: &Value) -> Option<Validator> {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .ok()
}

/// The first of `tries` generated arguments that `old` takes and `new` refuses.
/// `None` when either schema does not compile (the rules judge that) or none is found.
pub fn counterexample(old: &Value, new: &Value, tries: usize) -> Option<Value> {
    counterexample_seeded(old, new, tries, seed(old, new))
}

/// [`counterexample`] with the generator seeded by `seed`.
pub(super) fn counterexample_seeded(
    old: &Value,
    new: &Value,
    tries: usize,
    seed: u64,
) -> Option<Value> {
    let (before, after) = (compile(old)?, compile(new)?);
    let mut rng = Rng(seed);
    let generator = Generator { root: old };
    (0..tries)
        .map(|_| generator.value(old, &mut rng, 0))
        .find(|argument| before.is_valid(argument) && !after.is_valid(argument))
}

/// FNV-1a over both schemas' text: the same pair always searches the same way.
fn seed(old: &Value, new: &Value) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in old
        .to_string()
        .bytes()
        .chain([0])
        .chain(new.to_string().bytes())
    {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// splitmix64: seeded and deterministic, enough to pick among a schema's values.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` at least 1).
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub(super) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub(super) fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len() as u64) as usize)
    }
}

const TYPES: [&str; 7] = [
    "null", "boolean", "integer", "number", "string", "array", "object",
];

/// Arguments from one schema; `root` resolves local `$ref`s.
struct Generator<'a> {
    root: &'a Value,
}

impl Generator<'_> {
    fn value(&self, schema: &Value, rng: &mut Rng, depth: usize) -> Value {
        let Some(object) = schema.as_object() else {
            return match schema {
                Value::Bool(false) => Value::Null,
                _ => self.any(rng, depth),
            };
        };
        if depth > MAX_DEPTH {
            return Value::Null;
        }
        if let Some(target) = object.get("$ref").and_then(Value::as_str) {
            let resolved = target
                .strip_prefix('#')
                .and_then(|pointer| self.root.pointer(pointer));
            return match resolved {
                Some(resolved) => self.value(resolved, rng, depth + 1),
                None => self.any(rng, depth),
            };
        }
        // A branch of `anyOf`/`oneOf`, or all of `allOf`, merged with the keywords beside them.
        for key in ["anyOf", "oneOf", "allOf"] {
            let Some(branches) = object.get(key).and_then(Value::as_array) else {
                continue;
            };
            let mut merged = object.clone();
            merged.remove(key);
            let chosen: Vec<&Value> = match key {
                "allOf" => branches.iter().collect(),
                _ => rng.pick(branches).into_iter().collect(),
            };
            for branch in chosen {
                if let Some(branch) = branch.as_object() {
                    for (k, v) in branch {
                        merged.entry(k.clone()).or_insert_with(|| v.clone());
                    }
                }
            }
            return self.value(&Value::Object(merged), rng, depth + 1);
        }
        if let Some(c) = object.get("const")
            && rng.chance(90)
        {
            return c.clone();
        }
        if let Some(values) = object.get("enum").and_then(Value::as_array)
            && let Some(v) = rng.pick(values)
            && rng.chance(90)
        {
            return v.clone();
        }
        let named: Vec<&str> = match object.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
            _ => implied(object),
        };
        let chosen = rng.pick(&named).copied().unwrap_or("null");
        match chosen {
            "null" => Value::Null,
            "boolean" => Value::Bool(rng.chance(50)),
            "integer" => self.number(object, rng, true),
            "number" => self.number(object, rng, false),
            "string" => string(object, rng),
            "array" => self.array(object, rng, depth),
            "object" => self.object(object, rng, depth),
            _ => Value::Null,
        }
    }

    /// Any small value (a schema of `true` or without keywords).
    fn any(&self, rng: &mut Rng, depth: usize) -> Value {
        let t = rng.pick(&TYPES[..5]).copied().unwrap_or("null");
        let mut empty = Map::new();
        empty.insert("type".into(), Value::from(t));
        self.value(&Value::Object(empty), rng, depth + 1)
    }

    fn number(&self, schema: &Map<String, Value>, rng: &mut Rng, integer: bool) -> Value {
        let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
        let step = if integer { 1.0 } else { 0.5 };
        let low = bound("minimum")
            .or_else(|| bound("exclusiveMinimum").map(|m| m + step))
            .unwrap_or(-1000.0);
        let high = bound("maximum")
            .or_else(|| bound("exclusiveMaximum").map(|m| m - step))
            .unwrap_or(1000.0);
        let span = (high - low).max(0.0);
        let mut x = match rng.below(7) {
            0 => low,
            1 => high,
            2 => low - step,
            3 => high + step,
            4 => 0.0,
            _ => low + span * (rng.below(1_000_001) as f64 / 1_000_000.0),
        };
        if let Some(m) = bound("multipleOf").filter(|m| *m > 0.0) {
            x = (x / m).round() * m;
        }
        if integer || rng.chance(50) {
            let whole = x.round().clamp(-9.0e15, 9.0e15) as i64;
            return Value::from(whole);
        }
        Number::from_f64(x).map_or(Value::Null, Value::Number)
    }

    fn array(&self, schema: &Map<String, Value>, rng: &mut Rng, depth: usize) -> Value {
        let bound = |key: &str| schema.get(key).and_then(Value::as_u64);
        let low = bound("minItems").unwrap_or(0).min(MAX_ITEMS);
        let high = bound("maxItems").unwrap_or(MAX_ITEMS).min(MAX_ITEMS);
        let n = match rng.below(3) {
            0 => low,
            1 => high,
            _ => low + rng.below(high.saturating_sub(low) + 1),
        };
        let prefix = schema.get("prefixItems").and_then(Value::as_array);
        let items = schema.get("items");
        (0..n as usize)
            .map(|i| match (prefix.and_then(|p| p.get(i)), items) {
                (Some(s), _) | (None, Some(s)) => self.value(s, rng, depth + 1),
                (None, None) => self.any(rng, depth),
            })
            .collect()
    }

    fn object(&self, schema: &Map<String, Value>, rng: &mut Rng, depth: usize) -> Value {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut out = Map::new();
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                if required.contains(&name.as_str()) || rng.chance(50) {
                    out.insert(name.clone(), self.value(property, rng, depth + 1));
                }
            }
        }
        // Names `required` lists without declaring them: anything.
        for name in required {
            if !out.contains_key(name) {
                out.insert(name.to_owned(), self.any(rng, depth));
            }
        }
        Value::Object(out)
    }
}

/// The types a schema without `type` implies by its keywords; all of them when none does.
fn implied(schema: &Map<String, Value>) -> Vec<&'static str> {
    let has = |keys: &[&str]| keys.iter().any(|k| schema.contains_key(*k));
    let mut out = Vec::new();
    if has(&["properties", "required", "additionalProperties"]) {
        out.push("object");
    }
    if has(&[
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "uniqueItems",
    ]) {
        out.push("array");
    }
    if has(&["minLength", "maxLength", "pattern", "format"]) {
        out.push("string");
    }
    if has(&[
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
    ]) {
        out.push("number");
    }
    match out.is_empty() {
        true => TYPES.to_vec(),
        false => out,
    }
}

/// Examples of the formats tools use, valid and plain.
const FORMATS: [(&str, &str); 8] = [
    ("date-time", "2026-12-07T10:00:00Z"),
    ("date", "2026-12-07"),
    ("time", "10:00:00Z"),
    ("email", "a@example.com"),
    ("uri", "https://example.com/a"),
    ("uuid", "0b7f7c38-7f2b-4bd5-8a1e-2d0c3f1e9a11"),
    ("ipv4", "192.0.2.1"),
    ("hostname", "example.com"),
];

fn string(schema: &Map<String, Value>, rng: &mut Rng) -> Value {
    if let Some(format) = schema.get("format").and_then(Value::as_str)
        && let Some((_, example)) = FORMATS.iter().find(|(f, _)| *f == format)
        && rng.chance(70)
    {
        return Value::from(*example);
    }
    let bound = |key: &str| schema.get(key).and_then(Value::as_u64);
    let low = bound("minLength").unwrap_or(0).min(64);
    let high = bound("maxLength").unwrap_or(low + 24).clamp(low, 64);
    let n = match rng.below(5) {
        0 => low,
        1 => high,
        2 => high + 1,
        3 => low.saturating_sub(1),
        _ => low + rng.below(high - low + 1),
    };
    const LETTERS: &[u8] = b"abcxyzABC019 -_.";
    let text: String = (0..n)
        .map(|_| char::from(LETTERS[rng.below(LETTERS.len() as u64) as usize]))
        .collect();
    Value::from(text)
}
