//! Work that takes CPU in proportion to what a caller sent (a line diff of two
//! large texts) runs here, off the async workers: on the blocking pool, at most
//! [`slots`] at once (one fewer than the cores, at least one), so a flood of such
//! requests queues behind itself while every other request is still answered.

use std::sync::OnceLock;

use tokio::sync::Semaphore;

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
pub async fn run<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
) -> crate::error::Result<T> {
    let _slot = gate()
        .acquire()
        .await
        .map_err(|_| crate::error::Error::internal("the CPU gate is closed"))?;
    tokio::task::spawn_blocking(job)
        .await
        .map_err(crate::error::Error::internal)
}
