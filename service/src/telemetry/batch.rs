//! A log writer that never makes a request wait: each line is appended to a shared
//! buffer (one short lock, no allocation once the buffer has grown), and a thread of
//! its own writes the buffer to stderr every [`PERIOD`], or at once when [`Flush`]
//! is dropped at exit.
//!
//! Why not `tracing-appender`'s non-blocking writer: its worker sleeps in a channel
//! `recv` and is woken for every line, so under load each request paid a futex
//! wake and a context switch on a 2-core machine (the cached fetch fell from 0.68
//! to 0.61 of a bare handler with one line per request). Here no one is woken: the
//! writer thread wakes on its own schedule and takes whatever has accumulated.
//!
//! Memory is bounded: past [`MAX_BUFFERED`] bytes waiting (stderr stalled), new
//! lines are dropped and counted, and the count is written once the writer catches up.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the writer thread wakes to write what has accumulated.
pub const PERIOD: Duration = Duration::from_millis(50);
/// The most bytes waiting to be written; later lines are dropped until it drains.
pub const MAX_BUFFERED: usize = 8 * 1024 * 1024;

struct Shared {
    lines: Mutex<Vec<u8>>,
    dropped: AtomicU64,
    stop: AtomicBool,
    wake: Condvar,
}

/// The `MakeWriter` for tracing-subscriber: cheap to clone, one per process.
#[derive(Clone)]
pub struct BatchWriter {
    shared: Arc<Shared>,
}

/// Writes everything still buffered when dropped (keep it until exit).
pub struct Flush {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Starts the writer thread over `out`.
pub fn start(out: impl Write + Send + 'static) -> (BatchWriter, Flush) {
    let shared = Arc::new(Shared {
        lines: Mutex::new(Vec::with_capacity(64 * 1024)),
        dropped: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        wake: Condvar::new(),
    });
    let worker = shared.clone();
    let thread = std::thread::Builder::new()
        .name("loadout-log".into())
        .spawn(move || write_loop(&worker, out))
        .ok();
    (
        BatchWriter {
            shared: shared.clone(),
        },
        Flush { shared, thread },
    )
}

fn write_loop(shared: &Shared, mut out: impl Write) {
    let mut batch = Vec::with_capacity(64 * 1024);
    loop {
        let stopping = {
            let lines = shared.lines.lock().unwrap_or_else(|e| e.into_inner());
            let (mut lines, _) = shared
                .wake
                .wait_timeout(lines, PERIOD)
                .unwrap_or_else(|e| e.into_inner());
            std::mem::swap(&mut *lines, &mut batch);
            shared.stop.load(Ordering::Acquire)
        };
        let dropped = shared.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            let _ = writeln!(
                batch,
                "WARN loadout: {dropped} log lines were dropped: stderr could not keep up"
            );
        }
        if !batch.is_empty() {
            // Nowhere to report a failed write to stderr; the next batch tries again.
            let _ = out.write_all(&batch).and_then(|()| out.flush());
            batch.clear();
        }
        if stopping {
            return;
        }
    }
}

impl BatchWriter {
    /// Appends one whole line (or drops and counts it while the buffer is full).
    pub fn write_line(&self, line: &[u8]) {
        let mut lines = self.shared.lines.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() + line.len() <= MAX_BUFFERED {
            lines.extend_from_slice(line);
        } else {
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Write for BatchWriter {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        self.write_line(line);
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for BatchWriter {
    type Writer = BatchWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Drop for Flush {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A `Write` the test can read back (the line formatter's tests use it too).
    #[derive(Clone, Default)]
    pub(in crate::telemetry) struct Sink(pub(in crate::telemetry) Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("sink").extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_line_is_written_by_exit_in_order() {
        let sink = Sink::default();
        let (writer, flush) = start(sink.clone());
        for i in 0..1000 {
            writer
                .clone()
                .write_all(format!("line {i}\n").as_bytes())
                .expect("write");
        }
        drop(flush);
        let text = String::from_utf8(sink.0.lock().expect("sink").clone()).expect("utf-8");
        let expected: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        assert_eq!(text, expected);
    }

    #[test]
    fn past_the_buffer_limit_lines_are_dropped_and_counted() {
        /// A stderr that never accepts a byte until the test lets it.
        struct Stalled(Arc<Mutex<()>>, Sink);
        impl Write for Stalled {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                let _held = self.0.lock().expect("gate");
                self.1.write(bytes)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let gate = Arc::new(Mutex::new(()));
        let closed = gate.lock().expect("gate");
        let sink = Sink::default();
        let (writer, flush) = start(Stalled(gate.clone(), sink.clone()));
        let line = vec![b'x'; 1024];
        for _ in 0..(MAX_BUFFERED / 1024 * 3) {
            writer.clone().write_all(&line).expect("write");
        }
        drop(closed);
        drop(flush);
        let written = sink.0.lock().expect("sink").len();
        assert!(written <= 2 * MAX_BUFFERED + 200, "{written}");
        let text = String::from_utf8_lossy(&sink.0.lock().expect("sink")).into_owned();
        assert!(text.contains("log lines were dropped"), "no drop notice");
    }
}
