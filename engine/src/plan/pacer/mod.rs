//! Plan stage: when requests start. Each pacer's settings live in a file of their own here
//! (its spec: the JSON a plan holds, its defaults, its `check`, its command-line flags, the
//! clients it starts and its facts), and `PacerSpec` is the thin enum a plan holds, which
//! only delegates. The clocks the pacers hand the worker (`crate::pacer`: a rate curve,
//! back-to-back slots) sit on the plan's own layer, below every loop.
//!
//! Adding a pacer: its file here (its `PaceFlags` also name the suite keys that set it) and
//! one line in `with_pacers!` below, the one list the plan's enum, the command line, the
//! worker's dispatch and the pacers' facts are made from.
//!
//! A pacer reads the rest of its plan through a `PlanView` only: the plan's types
//! (`super::types`) and rules (`super::validate`) use the pacers, so the pacers use neither.

use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{PlanError, SuiteKey};
use crate::pacer::{BackToBack, Pacer, RateCurve, Scheduled};

/// What a pacer reads of the rest of its plan, made by `Plan::view` (`super::types`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanView {
    pub connections: u64,
    pub requests: Option<u64>,
    pub duration_s: Option<f64>,
    /// Streams each connection carries at once (`Plan::streams`).
    pub streams: u64,
    /// An open loop over a pool of kept-alive connections (`Plan::is_pooled`).
    pub pooled: bool,
    /// Requests each scheduled arrival makes (`Plan::calls_per_arrival`).
    pub calls_per_arrival: u64,
    /// Whether the behaviour opens a new connection for each request.
    pub new_connection_each: bool,
}

/// What a plan may ask of a pacer, each answered by its spec. Defaults are what a pacer
/// with no schedule of its own is: back to back, from `connections` slots, no length.
pub trait Pace {
    /// The rule this pacer's settings break (with the rest of the plan), if any.
    fn check(&self, _plan: &PlanView) -> Result<(), PlanError> {
        Ok(())
    }
    /// Arrivals on a schedule, latency timed from the intended send time.
    fn is_open(&self) -> bool {
        false
    }
    /// The longest span the pacer itself sets (a ramp, or users' ramp-up plus hold).
    fn seconds(&self) -> Option<f64> {
        None
    }
    /// How late this pacer's schedule begins after the start.
    fn offset_s(&self) -> f64 {
        0.0
    }
    /// Requests one arrival makes on its own connection.
    fn calls_per_connection(&self) -> u64 {
        1
    }
    /// `connections` when a plan does not say: 10, like wrk.
    fn default_connections(&self) -> u64 {
        DEFAULT_CONNECTIONS
    }
    /// The highest arrival rate the schedule reaches (open loop).
    fn peak_rate(&self) -> Option<f64> {
        None
    }
    /// The arrival schedule, for a pacer that has one.
    fn curve(&self) -> Option<RateCurve> {
        None
    }
    /// The clients this pacer runs regardless of `connections` (users).
    fn users(&self) -> Option<u64> {
        None
    }
    /// The run's length when the pacer sets it, refused when the plan sets one too.
    fn own_stop(&self, _plan: &PlanView) -> Option<Result<Duration, PlanError>> {
        None
    }
    /// Whether `connections` is the number of connections kept busy, so must be positive.
    fn fills_connections(&self, _plan: &PlanView) -> bool {
        false
    }
    /// Whether the io_uring loop can pace it: slots back to back from the start.
    fn suits_io_uring(&self) -> bool {
        false
    }
    /// Whether the next connection waits for the server's close of the last one.
    fn waits_for_close(&self) -> bool {
        false
    }
    /// Whether a warm-up phase may come before the measured window (`warmup_max_s`): the
    /// window is `duration_s` from a later instant, which a schedule or a ramp, fixed from
    /// the run's start, cannot give.
    fn takes_warmup_phase(&self) -> bool {
        false
    }
    /// How the summary names the run's clients, when not by its connections.
    fn clients_label(&self) -> Option<String> {
        None
    }
    /// Whether so few clients (or so low a rate) run that response time is the point.
    fn latency_bound(&self, plan: &PlanView) -> bool;
    /// How many clients run at once; `None` when each arrival is a client of its own.
    fn concurrency(&self, plan: &PlanView) -> Option<u64>;
    /// One worker's share of the clients, each with its clock.
    fn clients(&self, plan: &PlanView, share: &Share) -> Clients;
}

/// `connections` when neither the plan nor its pacer says.
pub const DEFAULT_CONNECTIONS: u64 = 10;
/// At most this many clients at once make a plain plan latency-bound.
pub const FEW_CONNECTIONS: u64 = 4;
/// At most this arrival rate (per second) makes a plain open-loop plan latency-bound.
pub const LOW_RATE: f64 = 1000.0;

/// One worker's place among the run's workers, and the run's clock.
pub struct Share {
    /// This worker's index, 0-based.
    pub index: u64,
    pub threads: u64,
    /// When the pacers start.
    pub start: Instant,
    /// When the run ends, when it has a length.
    pub end: Option<Instant>,
}

impl Share {
    /// This worker's clients of `total`: every `threads`-th from its own index.
    pub fn mine(&self, total: u64) -> impl Iterator<Item = u64> {
        (self.index..total).step_by(self.threads.max(1) as usize)
    }
}

/// What a worker starts for its share of a pacer's clients.
pub enum Clients {
    /// Slots, each a client looping its behaviour whenever its clock allows.
    Slots(Vec<Box<dyn Pacer>>),
    /// One dispatcher of scheduled arrivals, each a client of its own making `calls`
    /// requests on its own connection.
    Arrivals { pacer: Scheduled, calls: u64 },
}

impl Clients {
    /// `count` slots, each back to back from `at`.
    fn back_to_back(count: impl Iterator<Item = Instant>) -> Clients {
        Clients::Slots(
            count
                .map(|at| Box::new(BackToBack::new(at)) as Box<dyn Pacer>)
                .collect(),
        )
    }
}

/// How a capacity search steps a pacer: what its levels count, and the setting each sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Search {
    /// `rate` (arrivals per second offered) or `clients` (clients ramped and held).
    pub counts: &'static str,
    /// The pacer's setting a step's level goes to.
    pub sets: &'static str,
}

/// One pacer's facts beside its schema, in `with_pacers!`'s order (`plan::facts` lays them
/// out with the schema's).
#[derive(Debug, Clone, Copy)]
pub struct PacerFacts {
    /// The flag that names it ("" for none).
    pub flag: &'static str,
    pub suite_keys: &'static [SuiteKey],
    pub search: Option<Search>,
}

/// How a pacer is asked for from outside a plan: its command-line flags (clap's, flattened
/// into the engine's own) and the spec they make; and, for the orchestrator
/// (`--print-facts`), the suite keys that set it and what a capacity search steps in it.
pub trait PaceFlags: clap::Args {
    /// The flag that names the pacer, for the refusal of two at once ("" for none).
    const NAME: &'static str;
    /// The suite keys that set its settings, the one a refusal most likely means first.
    const SUITE_KEYS: &'static [SuiteKey] = &[];
    /// What a capacity search steps under this pacer, if one may.
    const SEARCH: Option<Search> = None;
    /// The spec asked for, `None` when none of these flags is given.
    fn spec(&self) -> Option<PacerSpec>;
}

/// The plan's side of the list in `with_pacers!`: the enum of pacers, its one delegating
/// match, their modules and their flags.
macro_rules! pacers {
    ($($(#[$doc:meta])* $variant:ident($spec:ident, $flags:ident) in $module:ident,)*) => {
        $(mod $module; pub use $module::*;)*

        /// Every pacer's command-line flags, one group per pacer.
        #[derive(Debug, Clone, clap::Args)]
        pub struct PacerFlags {
            $(#[command(flatten)] pub $module: $flags,)*
        }

        impl PacerFlags {
            /// The specs the flags ask for, in the list's order.
            pub fn chosen(&self) -> Vec<PacerSpec> {
                let mut chosen = Vec::new();
                $(chosen.extend(self.$module.spec());)*
                chosen
            }
            /// The flags that name a pacer, as a refusal lists them.
            pub fn names() -> Vec<&'static str> {
                Self::naming_flags().into_iter().filter(|n| !n.is_empty()).collect()
            }
            /// Each pacer's naming flag in the list's order ("" for a pacer without one).
            pub fn naming_flags() -> Vec<&'static str> {
                vec![$(<$flags as PaceFlags>::NAME,)*]
            }
        }

        /// When requests start.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        pub enum PacerSpec {
            $($(#[$doc])* $variant($spec),)*
        }

        impl PacerSpec {
            /// Every pacer's facts beside its schema, in the list's order.
            pub fn facts() -> Vec<PacerFacts> {
                vec![$(PacerFacts {
                    flag: <$flags as PaceFlags>::NAME,
                    suite_keys: <$flags as PaceFlags>::SUITE_KEYS,
                    search: <$flags as PaceFlags>::SEARCH,
                },)*]
            }
            /// The spec behind the tag, asked for every rule and fact.
            pub fn pace(&self) -> &dyn Pace {
                match self {
                    $(PacerSpec::$variant(spec) => spec,)*
                }
            }
        }
    };
}

/// Every pacer, one line each: its variant, and its spec and flags (defined in the file
/// named `$module` here). `with_pacers!(m)` hands the list to the macro `m`.
macro_rules! with_pacers {
    ($callback:ident) => {
        $callback! {
            /// `connections` slots, each starting its next request as soon as the last one
            /// ended.
            Closed(ClosedSpec, ClosedFlags) in closed,
            /// One connection at a time, the next opened after the last one closed (seed 000
            /// Test 1). `connections` is 1 (its default under this pacer).
            Sequential(SequentialSpec, SequentialFlags) in sequential,
            /// Arrivals at `rate` per second, rising linearly to `ramp_to_rate` over `ramp_s`.
            /// With the `keepalive` behaviour the arrivals are spread over a pool of
            /// `connections` kept-alive connections (wrk2 style); otherwise every arrival opens
            /// a new connection and makes `calls_per_connection` requests on it (httperf
            /// `--num-conns --num-calls`). The whole schedule comes `offset_s` late (one
            /// generator's arrivals interleaved with another's).
            Open(OpenSpec, OpenFlags) in open,
            /// JMeter thread group: `users` users started evenly over `ramp_up_s`, all stopped
            /// at `ramp_up_s + hold_s`, each looping its behaviour (`connections` is ignored).
            /// User k (0-based) starts at `offset_s + k * ramp_up_s / users`.
            Users(UsersSpec, UsersFlags) in users,
        }
    };
}

with_pacers!(pacers);

impl Default for PacerSpec {
    fn default() -> Self {
        PacerSpec::Closed(ClosedSpec {})
    }
}

/// Seconds of a command-line duration (0 when not given).
fn seconds_of(duration: Option<Duration>) -> f64 {
    duration.map_or(0.0, |d| d.as_secs_f64())
}

/// What the pacers' tests share: their flags parsed alone, and a spec read from plan JSON.
#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The pacers' flags alone, as the engine's command line flattens them in.
    #[derive(Debug, Parser)]
    struct OnlyPacers {
        #[command(flatten)]
        pacers: PacerFlags,
    }

    /// The pacers the flags choose; an error when clap refuses them.
    pub fn chosen(flags: &[&str]) -> Result<Vec<PacerSpec>, clap::Error> {
        let args = std::iter::once("serverlab-load").chain(flags.iter().copied());
        Ok(OnlyPacers::try_parse_from(args)?.pacers.chosen())
    }

    /// The spec a plan file's `pacer` makes.
    pub fn from_json(value: serde_json::Value) -> PacerSpec {
        serde_json::from_value(value).unwrap()
    }

    /// Two naming flags choose two pacers, and the refusal names every pacer that has a
    /// naming flag.
    #[test]
    fn two_pacer_flags_choose_two_and_the_names_list_every_naming_flag() {
        let both = chosen(&["-R", "5", "--sequential"]).unwrap();
        assert_eq!(both.len(), 2);
        let names = PacerFlags::names();
        assert!(
            names.contains(&"-R") && names.contains(&"--sequential"),
            "{names:?}"
        );
        assert_eq!(
            names.len(),
            PacerFlags::naming_flags().len() - 1,
            "closed has none"
        );
    }
}
