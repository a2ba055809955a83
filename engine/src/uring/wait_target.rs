//! How many completions the loop waits for before it wakes. Every wake costs the generator a
//! sleep and a wake-up, and under a steady stream of answers waking for each one is most of
//! what the loop spends beyond the kernel's TCP work. So it sleeps until a small batch is in:
//! what the last tick's rate says arrives within `WINDOW`, never more than a quarter of the
//! requests in flight. The only timer stays the 20 ms tick: a shorter one would reprogram the
//! CPU's timer on every wait, which on a VM traps to the host and costs more than it saves.
//! A server that slows down suddenly can therefore hold an answer unread until the next tick;
//! the sampled `notice_us` figure shows how long answers really waited.

use std::time::Duration;

/// In steady state an answer waits about this long at most before the loop reads it. Against
/// nginx on two cores: 100 us cut the loop's CPU per request by an eighth and 200 us by a
/// sixth, with answers read a median 60 and 115 us after arrival (6 us when waking for each);
/// latency stays the connections over the throughput, as a closed loop's must.
pub const WINDOW: Duration = Duration::from_micros(200);
/// The batch is at most this fraction (1/N) of the requests in flight, so the server always
/// has most of them to work on and the connections stay busy.
const IN_FLIGHT_SHARE: usize = 4;

#[derive(Debug)]
pub struct WaitTarget {
    seen: usize,
    target: usize,
    budget_spent: bool,
}

impl Default for WaitTarget {
    fn default() -> WaitTarget {
        WaitTarget {
            seen: 0,
            target: 1,
            budget_spent: false,
        }
    }
}

impl WaitTarget {
    /// Completions to wait for.
    pub fn get(&self) -> usize {
        self.target
    }

    pub fn saw(&mut self, completions: usize) {
        self.seen += completions;
    }

    /// Once a tick: the completions seen over `elapsed` set the batch for the next one.
    pub fn retarget(&mut self, elapsed: Duration, in_flight: usize) {
        if self.budget_spent {
            return;
        }
        let expected = self.seen as u128 * WINDOW.as_nanos() / elapsed.as_nanos().max(1);
        let cap = (in_flight / IN_FLIGHT_SHARE).max(1);
        self.target = usize::try_from(expected)
            .unwrap_or(usize::MAX)
            .clamp(1, cap);
        self.seen = 0;
    }

    /// The run's budget is spent: only the last answers are coming, and from now on the loop
    /// wakes for each of them.
    pub fn budget_spent(&mut self) {
        self.budget_spent = true;
        self.target = 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK: Duration = Duration::from_millis(20);

    #[test]
    fn a_fast_stream_is_batched_up_to_a_quarter_of_the_requests_in_flight() {
        let mut target = WaitTarget::default();
        assert_eq!(target.get(), 1, "the first tick wakes for each");
        // 130,000 answers a second: 26 arrive within the 200 us window.
        target.saw(2_600);
        target.retarget(TICK, 1_000);
        assert_eq!(target.get(), 26);
        target.saw(2_600);
        target.retarget(TICK, 100);
        assert_eq!(target.get(), 25, "capped at 100 / 4");
    }

    #[test]
    fn a_slow_stream_or_few_in_flight_wakes_for_each() {
        let mut target = WaitTarget::default();
        target.saw(50); // 2,500 a second: half an answer per window
        target.retarget(TICK, 1_000);
        assert_eq!(target.get(), 1);
        target.saw(1_000_000);
        target.retarget(TICK, 7);
        assert_eq!(target.get(), 1);
        target.retarget(TICK, 1_000);
        assert_eq!(target.get(), 1, "counts start again each tick");
    }

    #[test]
    fn a_late_tick_spreads_the_count_and_a_spent_budget_ends_batching() {
        let mut target = WaitTarget::default();
        target.saw(2_600);
        target.retarget(TICK * 2, 1_000);
        assert_eq!(target.get(), 13);
        target.saw(2_600);
        target.retarget(Duration::ZERO, 1_000);
        assert_eq!(
            target.get(),
            250,
            "no division by zero; the cap still holds"
        );
        target.budget_spent();
        assert_eq!(target.get(), 1);
        target.saw(2_600);
        target.retarget(TICK, 1_000);
        assert_eq!(target.get(), 1, "the last answers never wait for a batch");
    }
}
