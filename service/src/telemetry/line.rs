//! The text log line, formatted by a layer of our own instead of
//! `tracing-subscriber`'s `fmt`, in the same shape:
//!
//! ```text
//! 2026-11-24T05:45:23.123456Z  INFO request{id="4f2-1" method=GET path=/v1/agents/a/prompt}: loadout::http::trace: served status=200 latency_us=41
//! ```
//!
//! Why: the cached fetch writes one such line per request, and `fmt` spent more on
//! it than the rest of the request path did. Here the date and time up to the
//! second are formatted once a second per thread, no colour styling is written
//! around each part, a span's fields are written once when the span opens, and the
//! line is built in a buffer the thread keeps. Strings are written with their
//! escapes (`{:?}`), so a value cannot break a line in two.

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use super::batch::BatchWriter;

/// Writes each event as one text line to the batch writer.
pub struct Lines {
    writer: BatchWriter,
}

impl Lines {
    pub fn new(writer: BatchWriter) -> Self {
        Self { writer }
    }
}

/// A span's fields as they appear inside its braces, written when it opens.
struct SpanFields(String);

/// Writes fields as ` name=value`, the message (if any) to a buffer of its own.
struct Fields<'a> {
    message: Option<&'a mut String>,
    rest: &'a mut String,
}

impl Fields<'_> {
    fn key(&mut self, field: &Field) {
        if !self.rest.is_empty() {
            self.rest.push(' ');
        }
        self.rest.push_str(field.name());
        self.rest.push('=');
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        match self.message.as_deref_mut() {
            Some(message) if field.name() == "message" => message.push_str(value),
            _ => {
                self.key(field);
                let _ = write!(self.rest, "{value:?}");
            }
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.key(field);
        let _ = write!(self.rest, "{value}");
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        let _ = write!(self.rest, "{value}");
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.key(field);
        self.rest.push_str(if value { "true" } else { "false" });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match self.message.as_deref_mut() {
            Some(message) if field.name() == "message" => {
                let _ = write!(message, "{value:?}");
            }
            _ => {
                self.key(field);
                let _ = write!(self.rest, "{value:?}");
            }
        }
    }
}

/// A thread's buffers and its clock: the time up to the second, formatted when the
/// second changes.
#[derive(Default)]
struct Scratch {
    line: String,
    message: String,
    fields: String,
    second: u64,
    stamp: String,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl Scratch {
    /// `2026-11-24T05:45:23.123456Z` into `line`.
    fn timestamp(&mut self) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let second = now.as_secs();
        if second != self.second || self.stamp.is_empty() {
            self.second = second;
            self.stamp.clear();
            let time = chrono::DateTime::from_timestamp(second as i64, 0).unwrap_or_default();
            let _ = write!(self.stamp, "{}", time.format("%Y-%m-%dT%H:%M:%S."));
        }
        self.line.push_str(&self.stamp);
        let _ = write!(self.line, "{:06}Z", now.subsec_micros());
    }
}

impl<S> tracing_subscriber::Layer<S> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut text = String::new();
        attrs.record(&mut Fields {
            message: None,
            rest: &mut text,
        });
        span.extensions_mut().insert(SpanFields(text));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(SpanFields(text)) = extensions.get_mut::<SpanFields>() {
            values.record(&mut Fields {
                message: None,
                rest: text,
            });
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        SCRATCH.with(|scratch| {
            let Ok(mut scratch) = scratch.try_borrow_mut() else {
                return; // an event raised while writing one (a Debug impl logging)
            };
            let scratch = &mut *scratch;
            scratch.line.clear();
            scratch.message.clear();
            scratch.fields.clear();
            scratch.timestamp();
            let meta = event.metadata();
            let _ = write!(scratch.line, " {:>5} ", meta.level().as_str());
            if let Some(scope) = ctx.event_scope(event) {
                let mut any = false;
                for span in scope.from_root() {
                    scratch.line.push_str(span.name());
                    if let Some(SpanFields(text)) = span.extensions().get::<SpanFields>()
                        && !text.is_empty()
                    {
                        scratch.line.push('{');
                        scratch.line.push_str(text);
                        scratch.line.push('}');
                    }
                    scratch.line.push(':');
                    any = true;
                }
                if any {
                    scratch.line.push(' ');
                }
            }
            scratch.line.push_str(meta.target());
            scratch.line.push_str(": ");
            event.record(&mut Fields {
                message: Some(&mut scratch.message),
                rest: &mut scratch.fields,
            });
            scratch.line.push_str(&scratch.message);
            if !scratch.fields.is_empty() {
                if !scratch.message.is_empty() {
                    scratch.line.push(' ');
                }
                scratch.line.push_str(&scratch.fields);
            }
            scratch.line.push('\n');
            self.writer.write_line(scratch.line.as_bytes());
        });
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::layer::SubscriberExt;

    use super::super::batch::tests::Sink;
    use super::*;

    /// The line has fmt's shape: time, level, the span with its fields, the
    /// target, the message, then the event's fields; strings keep their escapes.
    #[test]
    fn a_line_has_the_time_level_spans_target_message_and_fields() {
        let sink = Sink::default();
        let (writer, flush) = super::super::batch::start(sink.clone());
        let subscriber = tracing_subscriber::registry().with(Lines::new(writer));
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("request", id = "7-1", method = %"GET");
            let _entered = span.enter();
            tracing::info!(status = 200u16, note = "two\nlines", ok = true, "served");
            tracing::warn!("no fields");
        });
        drop(flush);
        let text = String::from_utf8(sink.0.lock().expect("sink").clone()).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let (time, rest) = lines[0].split_once(' ').expect("a time");
        assert_eq!(time.len(), "2026-11-24T05:45:23.123456Z".len(), "{time}");
        assert!(
            chrono::DateTime::parse_from_rfc3339(time).is_ok(),
            "{time} is RFC 3339"
        );
        let target = module_path!();
        assert_eq!(
            rest,
            format!(
                " INFO request{{id=\"7-1\" method=GET}}: {target}: served status=200 note=\"two\\nlines\" ok=true"
            )
        );
        assert!(
            lines[1].ends_with(&format!(
                " WARN request{{id=\"7-1\" method=GET}}: {target}: no fields"
            )),
            "{}",
            lines[1]
        );
    }
}
