//! Wall-clock helpers, and the lock helper every module shares.

use std::cell::RefCell;
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, the spec's timestamp unit.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

thread_local! {
    /// (unix second, formatted Date value): formatting once a second per thread keeps the
    /// date off the hot path without a shared lock.
    static DATE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

/// Appends the current IMF-fixdate for the `Date` header.
pub fn append_http_date(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let second = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    DATE.with(|cell| {
        let mut cached = cell.borrow_mut();
        if cached.0 != second {
            *cached = (second, httpdate::fmt_http_date(now));
        }
        out.extend_from_slice(cached.1.as_bytes());
    });
}

/// Locks a mutex even if another thread panicked while holding it: the data guarded here
/// (queues, lists, counters) stays usable, and one failed request must not stop the server.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
