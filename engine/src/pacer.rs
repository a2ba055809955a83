//! When the next request of a slot (or the next arrival of a dispatcher) may start. The
//! worker loop is the same for every pacing; only this small trait differs.

use std::time::{Duration, Instant};

pub trait Pacer {
    /// The earliest time the next request may start, or `None` when this pacer is finished.
    fn next(&mut self) -> Option<Instant>;
    /// Whether latency is timed from the returned (intended) time rather than the actual send.
    fn open_loop(&self) -> bool;
}

/// Back to back: the next request starts as soon as the previous one ended.
pub struct BackToBack {
    not_before: Instant,
}

impl BackToBack {
    pub fn new(not_before: Instant) -> Self {
        BackToBack { not_before }
    }
}

impl Pacer for BackToBack {
    fn next(&mut self) -> Option<Instant> {
        Some(self.not_before)
    }
    fn open_loop(&self) -> bool {
        false
    }
}

/// A rate that starts at `from` arrivals/s and rises (or falls) linearly to `to` over `ramp`,
/// then stays at `to`; the whole schedule begins `offset` after the start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateCurve {
    pub from: f64,
    pub to: f64,
    pub ramp: Duration,
    pub offset: Duration,
}

impl RateCurve {
    pub fn fixed(rate: f64) -> Self {
        RateCurve {
            from: rate,
            to: rate,
            ramp: Duration::ZERO,
            offset: Duration::ZERO,
        }
    }

    /// Seconds after the start at which arrival number `k` (0-based) is due: the offset plus
    /// the inverse of the cumulative arrival count N(t) = from·t + (to−from)·t²/(2·ramp)
    /// during the ramp.
    pub fn arrival_time(&self, k: u64) -> f64 {
        self.offset.as_secs_f64() + self.since_offset(k)
    }

    fn since_offset(&self, k: u64) -> f64 {
        let k = k as f64;
        let ramp = self.ramp.as_secs_f64();
        let in_ramp = (self.from + self.to) * ramp / 2.0;
        if ramp == 0.0 || k >= in_ramp {
            return ramp + (k - in_ramp.min(k)) / self.to;
        }
        let a = (self.to - self.from) / (2.0 * ramp);
        if a.abs() < 1e-12 {
            return k / self.from;
        }
        (-self.from + (self.from * self.from + 4.0 * a * k).sqrt()) / (2.0 * a)
    }

    /// Arrivals due in the first `elapsed` seconds after the start.
    pub fn arrivals_by(&self, elapsed: f64) -> f64 {
        let elapsed = (elapsed - self.offset.as_secs_f64()).max(0.0);
        let ramp = self.ramp.as_secs_f64();
        let t_ramp = elapsed.min(ramp);
        let in_ramp = if ramp == 0.0 {
            0.0
        } else {
            self.from * t_ramp + (self.to - self.from) * t_ramp * t_ramp / (2.0 * ramp)
        };
        in_ramp + (elapsed - t_ramp).max(0.0) * self.to
    }
}

/// Arrivals `first, first + stride, first + 2·stride, …` of a rate curve: one slot of a paced
/// pool, or one worker's share of the dispatcher's arrivals.
pub struct Scheduled {
    start: Instant,
    curve: RateCurve,
    next_arrival: u64,
    stride: u64,
    end: Option<Instant>,
}

impl Scheduled {
    pub fn new(
        start: Instant,
        curve: RateCurve,
        first: u64,
        stride: u64,
        end: Option<Instant>,
    ) -> Self {
        Scheduled {
            start,
            curve,
            next_arrival: first,
            stride: stride.max(1),
            end,
        }
    }
}

impl Pacer for Scheduled {
    fn next(&mut self) -> Option<Instant> {
        let at = self.start + Duration::from_secs_f64(self.curve.arrival_time(self.next_arrival));
        if self.end.is_some_and(|end| at >= end) {
            return None;
        }
        self.next_arrival += self.stride;
        Some(at)
    }
    fn open_loop(&self) -> bool {
        true
    }
}

/// One JMeter-style user: starts at its place in the ramp (after `offset`), then loops back
/// to back.
pub fn user_start(
    start: Instant,
    offset: Duration,
    user: u64,
    users: u64,
    ramp_up: Duration,
) -> Instant {
    start + offset + ramp_up.mul_f64(user as f64 / users.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_rate_spaces_arrivals_evenly() {
        let c = RateCurve::fixed(100.0);
        assert!((c.arrival_time(0) - 0.0).abs() < 1e-9);
        assert!((c.arrival_time(250) - 2.5).abs() < 1e-9);
        assert!((c.arrivals_by(3.0) - 300.0).abs() < 1e-9);
    }

    #[test]
    fn ramp_inverts_its_cumulative_count() {
        let c = RateCurve {
            from: 10.0,
            to: 110.0,
            ramp: Duration::from_secs(10),
            offset: Duration::ZERO,
        };
        for k in [0u64, 1, 50, 300, 599, 600, 601, 2000] {
            let t = c.arrival_time(k);
            assert!((c.arrivals_by(t) - k as f64).abs() < 1e-6, "k={k} t={t}");
        }
        assert!((c.arrivals_by(10.0) - 600.0).abs() < 1e-9);
    }

    #[test]
    fn slots_interleave_and_stop_at_the_end() {
        let start = Instant::now();
        let curve = RateCurve::fixed(10.0);
        let end = Some(start + Duration::from_secs(1));
        let mut a = Scheduled::new(start, curve, 0, 2, end);
        let mut b = Scheduled::new(start, curve, 1, 2, end);
        let count = |p: &mut Scheduled| std::iter::from_fn(|| p.next()).count();
        assert_eq!(count(&mut a) + count(&mut b), 10);
    }

    #[test]
    fn users_start_evenly_over_the_ramp_after_their_offset() {
        let s = Instant::now();
        let r = Duration::from_secs(10);
        assert_eq!(user_start(s, Duration::ZERO, 0, 4, r), s);
        assert_eq!(
            user_start(s, Duration::ZERO, 2, 4, r),
            s + Duration::from_secs(5)
        );
        let offset = Duration::from_millis(1250);
        assert_eq!(user_start(s, offset, 0, 4, r), s + offset);
        assert_eq!(
            user_start(s, offset, 3, 4, r),
            s + offset + Duration::from_millis(7500)
        );
    }
}
