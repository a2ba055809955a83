//! A bound on connection threads. Each thread costs about four memory maps (its stack,
//! the signal stack std gives it, and their guard pages) and one kernel task; past the
//! system's limits, starting a thread aborts the process. So, like a classic bounded
//! thread-per-connection server, the acceptor waits for a free thread when the budget is
//! spent, and further clients wait in the listen backlog instead of crashing the server.

use crate::clock::lock;
use std::sync::{Condvar, Mutex};
use std::thread;

const MAPS_PER_THREAD: usize = 4;
/// Memory maps kept free for the heap, libraries and large buffers.
const RESERVED_MAPS: usize = 8192;
/// Descriptors a connection holds (its socket; a file being sent is on a responder's
/// account), and a reserve for listeners, responders' files and the rest.
const FILES_PER_CONNECTION: usize = 1;
const RESERVED_FILES: usize = 2048;

pub struct ThreadBudget {
    limit: usize,
    running: Mutex<usize>,
    freed: Condvar,
}

/// Holds one unit of the budget for as long as its thread runs.
struct Slot(&'static ThreadBudget);

impl Drop for Slot {
    fn drop(&mut self) {
        *lock(&self.0.running) -= 1;
        self.0.freed.notify_one();
    }
}

impl ThreadBudget {
    pub fn new(limit: usize) -> ThreadBudget {
        ThreadBudget {
            limit: limit.max(1),
            running: Mutex::new(0),
            freed: Condvar::new(),
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Starts `work` on a new thread once the budget allows. If the thread cannot be
    /// started anyway, `work` is dropped (closing whatever socket it owns).
    pub fn spawn(&'static self, stack_size: usize, work: impl FnOnce() + Send + 'static) {
        {
            let mut running = lock(&self.running);
            while *running >= self.limit {
                running = self
                    .freed
                    .wait(running)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            *running += 1;
        }
        let slot = Slot(self);
        let _ = thread::Builder::new()
            .stack_size(stack_size)
            .spawn(move || {
                let _slot = slot;
                work();
            });
    }
}

fn read_number(path: &str) -> Option<usize> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// What this machine can hold: the tightest of memory maps, kernel tasks and descriptors,
/// less what the other threads of the server use.
pub fn automatic_limit(other_threads: usize) -> usize {
    let maps = read_number("/proc/sys/vm/max_map_count").unwrap_or(65_530);
    let by_maps = maps.saturating_sub(RESERVED_MAPS) / MAPS_PER_THREAD;
    let tasks = read_number("/proc/sys/kernel/pid_max")
        .unwrap_or(32_768)
        .min(read_number("/proc/sys/kernel/threads-max").unwrap_or(usize::MAX));
    // Other processes on the machine need tasks too.
    let by_tasks = tasks * 3 / 4;
    let files = rlimit::Resource::NOFILE
        .get()
        .map_or(1024, |(soft, _)| soft as usize);
    let by_files = files.saturating_sub(RESERVED_FILES) / FILES_PER_CONNECTION;
    by_maps
        .min(by_tasks)
        .min(by_files)
        .saturating_sub(other_threads)
        .max(16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn never_runs_more_threads_than_the_limit() {
        let budget: &'static ThreadBudget = Box::leak(Box::new(ThreadBudget::new(2)));
        let running: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let peak: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let (done_tx, done_rx) = mpsc::channel();
        for _ in 0..8 {
            let done = done_tx.clone();
            budget.spawn(64 * 1024, move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                thread::sleep(Duration::from_millis(20));
                running.fetch_sub(1, Ordering::SeqCst);
                done.send(()).unwrap();
            });
        }
        for _ in 0..8 {
            done_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        }
        assert_eq!(peak.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn automatic_limit_is_positive_and_bounded_by_tasks() {
        let limit = automatic_limit(10);
        assert!(limit >= 16);
        assert!(limit <= read_number("/proc/sys/kernel/pid_max").unwrap_or(usize::MAX));
    }
}
