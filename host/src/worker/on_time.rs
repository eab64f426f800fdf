//! The runtime that starts executions claimed ahead of their time (cron ticks, delayed jobs:
//! `store::READY_AHEAD`), apart from the one that delivers the backlog.
//!
//! A claimed-ahead attempt sleeps until its time and then starts. On the process's main
//! runtime, while a backlog drains, both of its threads never sleep: they take their turns
//! on the cores like any busy thread, beside PostgreSQL's backends when the database shares
//! the machine, and a timer that expires waits for its thread's next turn and then behind
//! the tasks queued on it. The soak (docs/benchmarks.md, "Soak") measured it: on two cores
//! saturated by a drain, per-second cron ticks started 15–37 ms late at p99 — and 8–10 ms
//! with the worker's process alone at a higher priority (`renice -10`), the rest unchanged.
//! The threads of this runtime sleep until a start is due; the kernel's scheduler runs a
//! thread that wakes from a sleep ahead of the busy ones, so the start waits for a core only
//! briefly, without a priority the process would need privileges to take.
//!
//! It lives as long as the process: connections an attempt opens here (the database pool's,
//! a transport's) are registered with its I/O driver and reused by tasks of either runtime.
//! Its threads are as many as the main runtime's, so a burst of ticks due at one instant
//! (thousands of cron jobs on one schedule) has the same cores to run on.

use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle, Runtime};

static ON_TIME: OnceLock<Runtime> = OnceLock::new();

/// The on-time runtime, started on first use.
pub fn handle() -> &'static Handle {
    ON_TIME
        .get_or_init(|| {
            let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
            Builder::new_multi_thread()
                .worker_threads(threads)
                .thread_name("taskexec-on-time")
                .enable_all()
                .build()
                .expect("the on-time runtime starts")
        })
        .handle()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    /// Work spawned here runs while the calling runtime's threads are all busy: the point of
    /// having it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_start_runs_while_the_main_runtime_is_busy() {
        let (sent, received) = std::sync::mpsc::channel();
        let start = super::handle().spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            sent.send(Instant::now()).expect("the test waits");
        });
        // The test's only runtime thread is kept busy, never yielding, until the start ran.
        let deadline = Instant::now() + Duration::from_secs(10);
        let started = loop {
            if let Ok(at) = received.try_recv() {
                break at;
            }
            assert!(Instant::now() < deadline, "the on-time start did not run while the caller's runtime was busy");
            std::hint::spin_loop();
        };
        assert!(started <= Instant::now());
        start.await.expect("the start ends");
    }
}
