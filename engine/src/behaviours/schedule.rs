//! Behaviours stage: the schedule of an attack that writes units (streams, frames, bytes)
//! at a rate on one connection: unit k is due k / `per_s` after the start, and a write
//! carries every unit due, at most `MOST_PER_WRITE` should the engine fall behind.

use std::ops::Range;
use std::time::{Duration, Instant};

/// The least pause between two writes: at high rates units go in batches, one a
/// millisecond.
const TICK: Duration = Duration::from_millis(1);
/// The most units one write carries.
const MOST_PER_WRITE: u64 = 1024;

pub(super) struct Schedule {
    began: Instant,
    per_s: f64,
    total: u64,
    sent: u64,
}

impl Schedule {
    /// Units `0..total` (endless with `None`) at `per_s` from now.
    pub fn new(per_s: f64, total: Option<u64>) -> Schedule {
        Schedule {
            began: Instant::now(),
            per_s,
            total: total.unwrap_or(u64::MAX),
            sent: 0,
        }
    }

    /// Whether every unit is written.
    pub fn done(&self) -> bool {
        self.sent >= self.total
    }

    /// The units due by now and not yet taken (maybe none), taken.
    pub fn take_due(&mut self) -> Range<u64> {
        let due = ((self.began.elapsed().as_secs_f64() * self.per_s) as u64 + 1)
            .min(self.total)
            .min(self.sent + MOST_PER_WRITE)
            .max(self.sent);
        let taken = self.sent..due;
        self.sent = due;
        taken
    }

    /// When the next unit is due (at least a tick from now).
    pub fn next_at(&self) -> Instant {
        let at = self.began + Duration::from_secs_f64(self.sent as f64 / self.per_s);
        at.max(Instant::now() + TICK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_unit_is_due_at_once_and_the_rest_on_their_times() {
        let mut schedule = Schedule::new(10.0, Some(3));
        assert_eq!(schedule.take_due(), 0..1);
        assert_eq!(schedule.take_due(), 1..1);
        assert!(schedule.next_at() >= schedule.began + Duration::from_millis(100));
        schedule.began -= Duration::from_secs(1);
        assert_eq!(schedule.take_due(), 1..3);
        assert!(schedule.done());
    }
}
