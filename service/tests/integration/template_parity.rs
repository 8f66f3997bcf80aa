//! Property test: the engine against CPython's own `string.Template`.
//!
//! Spawns `python3 tests/python/template_oracle.py` once, streams generated
//! templates to it as JSON lines and compares every answer with the engine.
//! `PARITY_SEED` and `PARITY_CASES` override the seed and the case count.
//! A missing `python3` fails the test: parity that is not checked is not parity.

use loadout::prompt::template::{self, ErrorKind, PlaceholderKind, Values};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

const DEFAULT_SEED: u64 = 0x5EED_7E3A_1A7E_0311;
const DEFAULT_CASES: usize = 25_000;
const MAX_REPORTED_FAILURES: usize = 20;

/// splitmix64: tiny, deterministic and good enough to drive case generation.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

// `k`/`K` and `s`/`S` are here so that an engine wrongly folding the Kelvin
// sign or the long s into ASCII would hit a known name and show a difference.
const NAMES: &[&str] = &[
    "a",
    "b",
    "k",
    "K",
    "s",
    "S",
    "name",
    "Name",
    "x_1",
    "_",
    "__",
    "soul",
    "A1",
    "z9_",
    "long_identifier_9",
];
const SEPARATORS: &[&str] = &[
    "\n", "\r", "\r\n", "\u{0b}", "\u{0c}", "\u{1c}", "\u{1d}", "\u{1e}", "\u{85}", "\u{2028}",
    "\u{2029}",
];
const NON_ASCII: &[&str] = &[
    "é", "\u{212A}", "\u{17F}", "漢", "😀", "\u{130}", "\u{131}", "ß", "\u{FB00}",
];
const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
const VALUE_PIECES: &[&str] = &[
    "$", "a", "$a", "${name}", "$$", "x", " ", "\n", "é", "{", "}", "$k", "${", "\r\n", "漢",
];

fn push_token(rng: &mut Rng, out: &mut String) {
    match rng.below(100) {
        0..=17 => out.push('$'),
        18..=23 => out.push('{'),
        24..=29 => out.push('}'),
        30..=33 => out.push('_'),
        34..=45 => out.push(LETTERS[rng.below(LETTERS.len())] as char),
        46..=51 => out.push((b'0' + rng.below(10) as u8) as char),
        52..=61 => out.push_str(rng.pick(NAMES)),
        62..=65 => out.push(' '),
        66..=75 => out.push_str(rng.pick(SEPARATORS)),
        76..=83 => out.push_str(rng.pick(NON_ASCII)),
        84..=89 => {
            out.push_str("${");
            out.push_str(rng.pick(NAMES));
            out.push('}');
        }
        90..=94 => {
            out.push('$');
            out.push_str(rng.pick(NAMES));
        }
        _ => out.push_str("$$"),
    }
}

fn generate_template(rng: &mut Rng) -> String {
    // Mostly short templates, where the edge cases are dense; a few long ones.
    let tokens = if rng.below(20) == 0 {
        rng.below(300)
    } else {
        rng.below(25)
    };
    let mut out = String::new();
    for _ in 0..tokens {
        push_token(rng, &mut out);
    }
    out
}

fn generate_values(rng: &mut Rng) -> Vec<(String, String)> {
    let mut values = Vec::new();
    for name in NAMES {
        if rng.below(2) == 0 {
            let mut value = String::new();
            for _ in 0..rng.below(6) {
                value.push_str(rng.pick(VALUE_PIECES));
            }
            values.push((name.to_string(), value));
        }
    }
    values
}

// ---- minimal JSON -------------------------------------------------------

fn json_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(c),
            _ => {
                // Everything else as \u escapes keeps the pipe pure ASCII.
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

fn request_line(id: usize, template: &str, values: &[(String, String)]) -> String {
    let mut out = format!("{{\"id\":{id},\"t\":");
    json_string(template, &mut out);
    out.push_str(",\"v\":[");
    for (i, (name, value)) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('[');
        json_string(name, &mut out);
        out.push(',');
        json_string(value, &mut out);
        out.push(']');
    }
    out.push_str("]}\n");
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Number(i64),
    Str(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    fn field(&self, key: &str) -> &Json {
        match self {
            Json::Object(fields) => fields
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v)
                .unwrap_or(&Json::Null),
            _ => &Json::Null,
        }
    }

    fn str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            other => panic!("expected a JSON string, got {other:?}"),
        }
    }

    fn num(&self) -> usize {
        match self {
            Json::Number(n) => usize::try_from(*n).expect("non-negative number"),
            other => panic!("expected a JSON number, got {other:?}"),
        }
    }

    fn array(&self) -> &[Json] {
        match self {
            Json::Array(items) => items,
            other => panic!("expected a JSON array, got {other:?}"),
        }
    }
}

struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn parse(text: &str) -> Json {
        let mut parser = Parser {
            bytes: text.as_bytes(),
            pos: 0,
        };
        let value = parser.value();
        parser.skip_space();
        assert_eq!(parser.pos, parser.bytes.len(), "trailing JSON in {text:?}");
        value
    }

    fn skip_space(&mut self) {
        while self.pos < self.bytes.len() && self.bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn eat(&mut self, expected: u8) {
        self.skip_space();
        assert_eq!(
            self.bytes.get(self.pos),
            Some(&expected),
            "JSON: expected {:?} at {}",
            expected as char,
            self.pos
        );
        self.pos += 1;
    }

    fn value(&mut self) -> Json {
        self.skip_space();
        match self.bytes[self.pos] {
            b'"' => Json::Str(self.string()),
            b'[' => {
                self.pos += 1;
                let mut items = Vec::new();
                self.skip_space();
                if self.bytes[self.pos] == b']' {
                    self.pos += 1;
                    return Json::Array(items);
                }
                loop {
                    items.push(self.value());
                    self.skip_space();
                    let b = self.bytes[self.pos];
                    self.pos += 1;
                    match b {
                        b',' => continue,
                        b']' => return Json::Array(items),
                        _ => panic!("JSON: bad array at {}", self.pos),
                    }
                }
            }
            b'{' => {
                self.pos += 1;
                let mut fields = Vec::new();
                self.skip_space();
                if self.bytes[self.pos] == b'}' {
                    self.pos += 1;
                    return Json::Object(fields);
                }
                loop {
                    self.skip_space();
                    let key = self.string();
                    self.eat(b':');
                    fields.push((key, self.value()));
                    self.skip_space();
                    let b = self.bytes[self.pos];
                    self.pos += 1;
                    match b {
                        b',' => continue,
                        b'}' => return Json::Object(fields),
                        _ => panic!("JSON: bad object at {}", self.pos),
                    }
                }
            }
            b't' => self.word("true", Json::Bool(true)),
            b'f' => self.word("false", Json::Bool(false)),
            b'n' => self.word("null", Json::Null),
            _ => {
                let start = self.pos;
                while self.pos < self.bytes.len()
                    && (self.bytes[self.pos] == b'-' || self.bytes[self.pos].is_ascii_digit())
                {
                    self.pos += 1;
                }
                let digits =
                    std::str::from_utf8(&self.bytes[start..self.pos]).expect("ASCII digits");
                Json::Number(digits.parse().expect("JSON: integer"))
            }
        }
    }

    fn word(&mut self, word: &str, value: Json) -> Json {
        assert!(self.bytes[self.pos..].starts_with(word.as_bytes()));
        self.pos += word.len();
        value
    }

    fn hex4(&mut self) -> u32 {
        let hex = std::str::from_utf8(&self.bytes[self.pos..self.pos + 4]).expect("ASCII hex");
        self.pos += 4;
        u32::from_str_radix(hex, 16).expect("JSON: \\u escape")
    }

    fn string(&mut self) -> String {
        self.eat(b'"');
        let mut out = String::new();
        loop {
            let start = self.pos;
            while !matches!(self.bytes[self.pos], b'"' | b'\\') {
                self.pos += 1;
            }
            out.push_str(std::str::from_utf8(&self.bytes[start..self.pos]).expect("a UTF-8 run"));
            let b = self.bytes[self.pos];
            self.pos += 1;
            if b == b'"' {
                return out;
            }
            let escape = self.bytes[self.pos];
            self.pos += 1;
            match escape {
                b'"' => out.push('"'),
                b'\\' => out.push('\\'),
                b'/' => out.push('/'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'n' => out.push('\n'),
                b'r' => out.push('\r'),
                b't' => out.push('\t'),
                b'u' => {
                    let first = self.hex4();
                    let code = if (0xD800..0xDC00).contains(&first) {
                        assert_eq!(&self.bytes[self.pos..self.pos + 2], b"\\u");
                        self.pos += 2;
                        let second = self.hex4();
                        0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                    } else {
                        first
                    };
                    out.push(char::from_u32(code).expect("JSON: lone surrogate"));
                }
                other => panic!("JSON: bad escape {:?}", other as char),
            }
        }
    }
}

// ---- comparison ----------------------------------------------------------

#[derive(Debug, PartialEq)]
enum Strict {
    Ok(String),
    Error {
        kind: ErrorKind,
        name: String,
        line: usize,
        column: usize,
    },
}

type Found = (String, String, usize, usize);

struct EngineAnswer {
    safe: String,
    strict: Strict,
    identifiers: Vec<String>,
    valid: bool,
    placeholders: Vec<Found>,
}

fn kind_name(kind: PlaceholderKind) -> &'static str {
    match kind {
        PlaceholderKind::Escaped => "escaped",
        PlaceholderKind::Named => "named",
        PlaceholderKind::Braced => "braced",
        PlaceholderKind::Invalid => "invalid",
    }
}

fn run_engine(template: &str, values: &(impl Values + ?Sized)) -> EngineAnswer {
    let code_points = |byte: usize| template[..byte].chars().count();
    EngineAnswer {
        safe: template::safe_substitute(template, values),
        strict: match template::substitute(template, values) {
            Ok(text) => Strict::Ok(text),
            Err(e) => Strict::Error {
                kind: e.kind,
                name: e.name,
                line: e.line,
                column: e.column,
            },
        },
        identifiers: template::identifiers(template)
            .into_iter()
            .map(str::to_owned)
            .collect(),
        valid: template::is_valid(template),
        placeholders: template::placeholders(template)
            .map(|p| {
                (
                    kind_name(p.kind).to_owned(),
                    p.name.to_owned(),
                    code_points(p.start),
                    code_points(p.end),
                )
            })
            .collect(),
    }
}

// Rotating through the containers exercises every `Values` impl on the same
// kind of input; they must all agree with Python.
fn run_with_container(case: usize, template: &str, pairs: &[(String, String)]) -> EngineAnswer {
    let borrowed: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    match case % 5 {
        0 => run_engine(template, &pairs.iter().cloned().collect::<HashMap<_, _>>()),
        1 => run_engine(template, &pairs.iter().cloned().collect::<BTreeMap<_, _>>()),
        2 => run_engine(
            template,
            &borrowed.iter().copied().collect::<HashMap<_, _>>(),
        ),
        3 => run_engine(
            template,
            &borrowed.iter().copied().collect::<BTreeMap<_, _>>(),
        ),
        _ => run_engine(template, borrowed.as_slice()),
    }
}

fn python_strict(answer: &Json) -> (Strict, Option<(usize, usize)>) {
    let strict = answer.field("strict");
    match strict.field("kind").str() {
        "ok" => (Strict::Ok(strict.field("text").str().to_owned()), None),
        "key" => (
            Strict::Error {
                kind: ErrorKind::UnknownPlaceholder,
                name: strict.field("name").str().to_owned(),
                line: strict.field("line").num(),
                column: strict.field("column").num(),
            },
            None,
        ),
        "invalid" => (
            Strict::Error {
                kind: ErrorKind::InvalidPlaceholder,
                name: String::new(),
                line: strict.field("line").num(),
                column: strict.field("column").num(),
            },
            Some((
                strict.field("py_line").num(),
                strict.field("py_column").num(),
            )),
        ),
        other => panic!("oracle: unknown strict kind {other:?}"),
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    let Ok(text) = std::env::var(name) else {
        return default;
    };
    let text = text.trim();
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.unwrap_or_else(|_| panic!("{name}={text:?} is not a decimal or 0x-hex number"))
}

#[test]
fn the_engine_matches_cpython_string_template() {
    let seed = env_number("PARITY_SEED", DEFAULT_SEED);
    let cases = usize::try_from(env_number("PARITY_CASES", DEFAULT_CASES as u64))
        .expect("PARITY_CASES fits in usize");
    println!("python parity: seed {seed:#x} ({seed}), {cases} cases");

    let oracle = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/python/template_oracle.py"
    );
    let mut child = Command::new("python3")
        .arg(oracle)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `python3 {oracle}`: {e}. The parity test needs CPython 3.11+ \
                 installed as `python3`; it is deliberately not skipped."
            )
        });

    let mut rng = Rng(seed);
    let generated: Vec<(String, Vec<(String, String)>)> = (0..cases)
        .map(|_| (generate_template(&mut rng), generate_values(&mut rng)))
        .collect();

    // Write from a thread so that neither pipe can fill up and deadlock.
    let mut stdin = child.stdin.take().expect("oracle stdin");
    let requests: Vec<String> = generated
        .iter()
        .enumerate()
        .map(|(id, (t, v))| request_line(id, t, v))
        .collect();
    let writer = std::thread::spawn(move || {
        for line in &requests {
            stdin.write_all(line.as_bytes())?;
        }
        stdin.flush()
        // Dropping stdin closes the pipe, which ends the oracle's loop.
    });

    let mut lines = BufReader::new(child.stdout.take().expect("oracle stdout")).lines();
    let hello = lines
        .next()
        .expect("oracle said nothing (did python3 fail to start? see stderr)")
        .expect("read oracle handshake");
    let hello = Parser::parse(&hello);
    println!(
        "python parity: oracle is CPython {}",
        hello.field("python").str()
    );

    let mut failures = 0;
    let mut outcome_counts = [0usize; 3];
    let mut python_message_disagreements = 0;
    let mut placeholder_count = 0;
    for (id, (template, pairs)) in generated.iter().enumerate() {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("oracle stopped before case {id}"))
            .expect("read oracle answer");
        let answer = Parser::parse(&line);
        assert_eq!(answer.field("id").num(), id, "oracle answers out of order");
        if let Json::Str(error) = answer.field("oracle_error") {
            panic!("oracle error on case {id} template {template:?} values {pairs:?}: {error}");
        }

        let engine = run_with_container(id, template, pairs);
        let (python, python_message) = python_strict(&answer);
        let python_safe = answer.field("safe").str();
        let python_ids: Vec<String> = answer
            .field("ids")
            .array()
            .iter()
            .map(|n| n.str().to_owned())
            .collect();
        let python_valid = answer.field("valid") == &Json::Bool(true);
        let python_placeholders: Vec<Found> = answer
            .field("ph")
            .array()
            .iter()
            .map(|p| {
                let p = p.array();
                (
                    p[0].str().to_owned(),
                    p[1].str().to_owned(),
                    p[2].num(),
                    p[3].num(),
                )
            })
            .collect();

        outcome_counts[match python {
            Strict::Ok(_) => 0,
            Strict::Error {
                kind: ErrorKind::UnknownPlaceholder,
                ..
            } => 1,
            Strict::Error { .. } => 2,
        }] += 1;
        placeholder_count += python_placeholders.len();
        if let (
            Some(message),
            Strict::Error {
                line: true_line,
                column: true_column,
                ..
            },
        ) = (python_message, &python)
            && message != (*true_line, *true_column)
        {
            python_message_disagreements += 1;
        }

        let mut problems = Vec::new();
        if engine.safe != python_safe {
            problems.push(format!(
                "safe_substitute: engine {:?} python {python_safe:?}",
                engine.safe
            ));
        }
        if engine.strict != python {
            problems.push(format!(
                "substitute: engine {:?} python {python:?}",
                engine.strict
            ));
        }
        if engine.identifiers != python_ids {
            problems.push(format!(
                "identifiers: engine {:?} python {python_ids:?}",
                engine.identifiers
            ));
        }
        if engine.valid != python_valid {
            problems.push(format!(
                "is_valid: engine {} python {python_valid}",
                engine.valid
            ));
        }
        if engine.placeholders != python_placeholders {
            problems.push(format!(
                "placeholders: engine {:?} python {python_placeholders:?}",
                engine.placeholders
            ));
        }
        if !problems.is_empty() {
            failures += 1;
            if failures <= MAX_REPORTED_FAILURES {
                eprintln!(
                    "MISMATCH case {id} (seed {seed:#x})\n  template {template:?}\n  values {pairs:?}"
                );
                for problem in &problems {
                    eprintln!("  {problem}");
                }
            }
        }
    }

    writer
        .join()
        .expect("writer thread")
        .expect("write requests to oracle");
    assert!(
        lines.next().is_none(),
        "oracle sent more answers than asked"
    );
    let status = child.wait().expect("wait for oracle");
    assert!(status.success(), "oracle exited with {status}");

    println!(
        "python parity: {cases} cases, {placeholder_count} placeholders; python outcomes: \
         {} ok, {} KeyError, {} ValueError; {failures} mismatches",
        outcome_counts[0], outcome_counts[1], outcome_counts[2]
    );
    println!(
        "python parity: Python's own ValueError line/col differed from the true position \
         in {python_message_disagreements} of {} cases",
        outcome_counts[2]
    );
    assert_eq!(
        failures, 0,
        "{failures} of {cases} cases differ from CPython (seed {seed:#x}); first ones above"
    );
    // Guard against a generator change that silently stops covering a branch.
    assert!(
        cases < 1000 || outcome_counts.iter().all(|&n| n > cases / 20),
        "generator no longer covers every outcome: {outcome_counts:?}"
    );
}
