//! Work that takes CPU in proportion to what a caller sent (a line diff of two
//! large texts, a policy compiled and its tests run) runs here, off the async
//! workers: at most [`slots`] jobs at once (one fewer than the cores, at least
//! one), so a flood of such requests queues behind itself while every other
//! request is still answered.

use std::sync::OnceLock;

use tokio::sync::Semaphore;

use crate::error::{Error, Result};

/// How many heavy jobs run at once.
pub fn slots() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get().saturating_sub(1))
        .unwrap_or(1)
        .max(1)
}

fn gate() -> &'static Semaphore {
    static GATE: OnceLock<Semaphore> = OnceLock::new();
    GATE.get_or_init(|| Semaphore::new(slots()))
}

/// Runs `job` on the blocking pool once a slot is free; its result. A job that
/// panicked is an internal error, never a crashed worker.
pub async fn run<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    let _slot = gate()
        .acquire()
        .await
        .map_err(|_| Error::internal("the CPU gate is closed"))?;
    tokio::task::spawn_blocking(job)
        .await
        .map_err(Error::internal)
}

/// Runs `job` once a slot is free, on a thread of its own with a stack of
/// `stack` bytes: for work that recurses as deep as its input nests (Cedar's
/// parser and validator), whose input was bounded to fit that stack.
pub async fn deep<T: Send + 'static>(
    stack: usize,
    job: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    let _slot = gate()
        .acquire()
        .await
        .map_err(|_| Error::internal("the CPU gate is closed"))?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("loadout-deep".to_owned())
        .stack_size(stack)
        .spawn(move || {
            // The receiver is gone only when the request was dropped.
            let _ = tx.send(job());
        })
        .map_err(Error::internal)?;
    // A job that panicked drops its sender: an internal error.
    rx.await
        .map_err(|_| Error::internal("a CPU job ended without an answer"))
}

/// Runs `job` on a thread with a stack of `stack` bytes and waits for it, from
/// code that is not async (the CLI's checks); `None` when the thread could not
/// start or the job panicked.
pub fn deep_blocking<T: Send>(stack: usize, job: impl FnOnce() -> T + Send) -> Option<T> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("loadout-deep".to_owned())
            .stack_size(stack)
            .spawn_scoped(scope, job)
            .ok()?
            .join()
            .ok()
    })
}
