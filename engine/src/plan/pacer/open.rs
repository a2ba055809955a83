//! Plan stage: the `open` pacer: arrivals on a schedule (`rate` per second, rising linearly
//! to `ramp_to_rate` over `ramp_s`), latency timed from each arrival's intended send time.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    seconds_of, Clients, Pace, PaceFlags, PacerSpec, PlanView, Search, Share, LOW_RATE,
};
use crate::pacer::{Pacer, RateCurve, Scheduled};
use crate::plan::{PlanError, SuiteKey};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenSpec {
    pub rate: f64,
    #[serde(default)]
    pub ramp_to_rate: Option<f64>,
    #[serde(default)]
    pub ramp_s: f64,
    #[serde(default = "default_calls")]
    pub calls_per_connection: u64,
    #[serde(default)]
    pub offset_s: f64,
}

fn default_calls() -> u64 {
    1
}

impl Pace for OpenSpec {
    fn check(&self, plan: &PlanView) -> Result<(), PlanError> {
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(PlanError::NotPositive("pacer", "rate"));
        }
        if self.calls_per_connection == 0 {
            return Err(PlanError::NotPositive("pacer", "calls per connection"));
        }
        if let Some(to) = self.ramp_to_rate {
            let ramp_s = self.ramp_s;
            if !(to.is_finite() && to > 0.0 && ramp_s.is_finite() && ramp_s > 0.0) {
                return Err(PlanError::NotPositive("pacer", "ramp_to_rate and ramp_s"));
            }
        }
        if plan.pooled && plan.connections as f64 > self.peak() * 60.0 {
            return Err(PlanError::Contradiction(
                "connections",
                "each pooled connection would wait over a minute between requests; lower -c"
                    .into(),
            ));
        }
        Ok(())
    }
    fn is_open(&self) -> bool {
        true
    }
    fn seconds(&self) -> Option<f64> {
        Some(self.ramp_s)
    }
    fn offset_s(&self) -> f64 {
        self.offset_s
    }
    fn calls_per_connection(&self) -> u64 {
        self.calls_per_connection
    }
    fn peak_rate(&self) -> Option<f64> {
        Some(self.peak())
    }
    fn curve(&self) -> Option<RateCurve> {
        let offset = Duration::from_secs_f64(self.offset_s);
        Some(match self.ramp_to_rate {
            Some(to) => RateCurve {
                from: self.rate,
                to,
                ramp: Duration::from_secs_f64(self.ramp_s),
                offset,
            },
            None => RateCurve {
                offset,
                ..RateCurve::fixed(self.rate)
            },
        })
    }
    fn fills_connections(&self, plan: &PlanView) -> bool {
        plan.pooled
    }
    fn latency_bound(&self, _: &PlanView) -> bool {
        self.peak() <= LOW_RATE
    }
    fn concurrency(&self, plan: &PlanView) -> Option<u64> {
        plan.pooled
            .then(|| plan.connections * plan.streams)
    }
    fn clients(&self, plan: &PlanView, share: &Share) -> Clients {
        let curve = self.curve().unwrap_or(RateCurve::fixed(self.rate));
        if !plan.pooled {
            let pacer = Scheduled::new(share.start, curve, share.index, share.threads, share.end);
            let calls = plan.calls_per_arrival;
            return Clients::Arrivals { pacer, calls };
        }
        // A pool's slots take the schedule's arrivals in turn, `streams` to a connection.
        let (pool, streams) = (plan.connections, plan.streams);
        let slots = share
            .mine(pool)
            .flat_map(|connection| (0..streams).map(move |k| connection * streams + k))
            .map(|first| {
                let pacer = Scheduled::new(share.start, curve, first, pool * streams, share.end);
                Box::new(pacer) as Box<dyn Pacer>
            });
        Clients::Slots(slots.collect())
    }
}

impl OpenSpec {
    /// A fixed rate from the start.
    pub fn at(rate: f64) -> OpenSpec {
        OpenSpec {
            rate,
            ramp_to_rate: None,
            ramp_s: 0.0,
            calls_per_connection: default_calls(),
            offset_s: 0.0,
        }
    }

    /// The highest arrival rate the schedule reaches.
    fn peak(&self) -> f64 {
        self.rate.max(self.ramp_to_rate.unwrap_or(0.0))
    }
}

/// `-R RATE` with `--ramp-to`, `--ramp` and `--calls`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OpenFlags {
    /// Open loop: arrivals per second (latency from the intended send time)
    #[arg(short = 'R', long)]
    pub rate: Option<f64>,
    /// Open loop: let the rate rise linearly to this over --ramp
    #[arg(long, requires = "rate")]
    pub ramp_to: Option<f64>,
    /// Open loop: the length of the rate ramp (e.g. 30s)
    #[arg(long, value_parser = crate::plan::parse_duration, requires = "ramp_to")]
    pub ramp: Option<Duration>,
    /// Open loop with a new connection per arrival: requests per connection (httperf --num-calls)
    #[arg(long, requires = "rate")]
    pub calls: Option<u64>,
}

impl PaceFlags for OpenFlags {
    const NAME: &'static str = "-R";
    /// `ramp_s` is the ramp's (`ramp_up_s`), else the whole run's (`duration_s`): the planner
    /// shapes it, and only for a ramp (`rate_end`).
    const SUITE_KEYS: &'static [SuiteKey] = &[
        SuiteKey::same("rate", "rate"),
        SuiteKey::same("rate_end", "ramp_to_rate"),
        SuiteKey::same("calls_per_connection", "calls_per_connection"),
        SuiteKey::derived("ramp_up_s", "ramp_s"),
    ];
    /// A request capacity search offers a higher rate at each step.
    const SEARCH: Option<Search> = Some(Search {
        counts: "rate",
        sets: "rate",
    });
    fn spec(&self) -> Option<PacerSpec> {
        let rate = self.rate?;
        Some(PacerSpec::Open(OpenSpec {
            ramp_to_rate: self.ramp_to,
            ramp_s: seconds_of(self.ramp),
            calls_per_connection: self.calls.unwrap_or(default_calls()),
            ..OpenSpec::at(rate)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{chosen, from_json};
    use super::*;
    use serde_json::json;

    /// `-R` and its settings' flags make the spec a plan file makes from the same settings,
    /// with the spec's own defaults for the rest.
    #[test]
    fn the_open_flags_make_the_spec_its_plan_json_makes() {
        let cases: [(&[&str], serde_json::Value); 2] = [
            (&["-R", "500"], json!({"kind": "open", "rate": 500.0})),
            (
                &["-R", "100", "--ramp-to", "300", "--ramp", "2s", "--calls", "3"],
                json!({"kind": "open", "rate": 100.0, "ramp_to_rate": 300.0, "ramp_s": 2.0,
                       "calls_per_connection": 3}),
            ),
        ];
        for (flags, plan) in cases {
            assert_eq!(chosen(flags).unwrap(), vec![from_json(plan)], "{flags:?}");
        }
    }

    /// A setting's flag without the flag that names its pacer (or setting) is refused.
    #[test]
    fn an_open_setting_without_its_naming_flag_is_refused() {
        for flags in [&["--ramp-to", "5"][..], &["--calls", "2"], &["-R", "5", "--ramp", "1s"]] {
            assert!(chosen(flags).is_err(), "{flags:?}");
        }
    }

    #[test]
    fn an_offset_shifts_the_whole_schedule() {
        let pacer = |offset_s: f64| OpenSpec {
            ramp_to_rate: Some(300.0),
            ramp_s: 2.0,
            offset_s,
            ..OpenSpec::at(100.0)
        };
        let plain = pacer(0.0).curve().unwrap();
        let late = pacer(0.005).curve().unwrap();
        for k in [0u64, 1, 7, 399, 400, 401, 5000] {
            let shift = late.arrival_time(k) - plain.arrival_time(k);
            assert!((shift - 0.005).abs() < 1e-9, "k={k}: {shift}");
        }
        assert_eq!(late.arrivals_by(0.004), 0.0);
        assert!((late.arrivals_by(3.005) - plain.arrivals_by(3.0)).abs() < 1e-6);
    }

    #[test]
    fn two_halves_offset_by_one_gap_make_the_whole_schedule() {
        // A generator of two runs arrivals 0, 2, 4 … of the whole; the other 1, 3, 5 …
        let whole = RateCurve::fixed(200.0);
        let half = |offset_s: f64| {
            OpenSpec {
                offset_s,
                ..OpenSpec::at(100.0)
            }
            .curve()
            .unwrap()
        };
        let (a, b) = (half(0.0), half(1.0 / 200.0));
        for k in 0..50u64 {
            assert!((a.arrival_time(k) - whole.arrival_time(2 * k)).abs() < 1e-9);
            assert!((b.arrival_time(k) - whole.arrival_time(2 * k + 1)).abs() < 1e-9);
        }
    }
}
