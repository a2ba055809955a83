//! Plan stage: what a plan may hold: the types a plan file deserializes into (and the JSON
//! schema is made from), with the rules its pacer and behaviour bring together as methods,
//! so that the rest of the engine asks a plan what it is rather than matching its variants
//! again. Pacers are asked through `PacerSpec::pace` (`super::pacer`), behaviours through
//! `BehaviourSpec::kind` (`super::behaviour`).

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{BehaviourSpec, Http2Spec, PacerSpec, PlanView, TlsSpec};

/// A plan as written in a plan file (JSON). Every field but `target` has a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// `http://127.0.0.1:PORT/path` for HTTP behaviours, `tcp://` or `udp://` `127.0.0.1:PORT`
    /// (or the same `http://` URL) for syslog. Only 127.0.0.0/8, `localhost` and the
    /// addresses in `allowed_hosts` are accepted.
    pub target: String,
    /// IPv4 addresses off loopback that `target` and `sources` may name (a generator host
    /// of a distributed run sending to the server's host). Nothing else off loopback is.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    #[serde(default = "default_method")]
    pub method: String,
    /// Extra request headers, each `"Name: value"`.
    #[serde(default)]
    pub headers: Vec<String>,
    /// Request body sent as is (mutually exclusive with `body_file`).
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub body_file: Option<PathBuf>,
    /// Concurrent connections (closed loop, open-loop keep-alive pool) or the cap on open
    /// connections in an open loop with a new connection per arrival (0 = no cap).
    #[serde(default = "default_connections")]
    pub connections: u64,
    /// Worker threads, each with its own event loop; 0 = one per CPU the process may use.
    #[serde(default)]
    pub threads: usize,
    /// Stop after this many requests (syslog: messages). Exclusive with `duration_s`.
    #[serde(default)]
    pub requests: Option<u64>,
    /// Stop after this many seconds.
    #[serde(default)]
    pub duration_s: Option<f64>,
    /// The run begins with a warm-up phase of at most this many seconds, on the same
    /// connections: a line `measure` on stdin ends it at the next interval boundary (the cap
    /// does, if none comes first). There the run's counts and histograms start again, a
    /// `measure` line is printed, and `duration_s` counts from it. Closed-loop (or
    /// sequential) duration-bound plans only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_max_s: Option<f64>,
    /// Per-request timeout; long poll adds its `duration_ms`, comet applies it between events.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Period of the `interval` output lines.
    #[serde(default = "default_interval_ms")]
    pub interval_ms: u64,
    /// Source addresses: single addresses or ranges `127.0.0.2-127.0.0.250`, used round robin.
    #[serde(default)]
    pub sources: Vec<String>,
    #[serde(default)]
    pub pacer: PacerSpec,
    #[serde(default)]
    pub behaviour: BehaviourSpec,
    /// Plain requests only: each request goes to one of these paths, chosen by weight
    /// (the target's path is then only the fallback of an empty list).
    #[serde(default)]
    pub paths: Vec<WeightedPath>,
    /// A JSON file holding a `paths` list (for file sets of thousands); exclusive with `paths`.
    #[serde(default)]
    pub paths_file: Option<PathBuf>,
    /// Seed of the weighted path choice: the same seed gives the same choices.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// A network namespace (`/var/run/netns/NAME`, as `ip netns add` makes) the engine enters
    /// before it opens any socket: the target's 127.0.0.1 is then that namespace's own.
    #[serde(default)]
    pub netns: Option<String>,
    /// How sockets are driven. `auto`: io_uring for closed-loop `keepalive` and
    /// `new-connection` requests, and sequential ones, when the kernel offers it, epoll
    /// otherwise.
    #[serde(default)]
    pub io: IoBackend,
    /// How a worker waits for its sockets. `auto`: spin, then sleep, for a latency-bound plan
    /// when the engine has a CPU to itself (on the epoll loop, unless `io` asks for io_uring,
    /// where `auto` sleeps); sleep in the kernel otherwise. `spin` spins on either loop.
    #[serde(default)]
    pub wait: WaitMode,
    /// When the pacers start, in Unix milliseconds of this host's clock, so that several
    /// generators start at one instant. Everything else is ready before; an instant already
    /// passed starts the run at once (the summary's `start_late_ms` says by how much).
    #[serde(default)]
    pub start_at_ms: Option<u64>,
    /// The server's clock minus this host's, in milliseconds: added to the local receive time
    /// before a server timestamp is subtracted from it, so delays stay true across hosts.
    #[serde(default)]
    pub clock_offset_ms: f64,
    /// TLS settings, for an `https://` or `wss://` target (absent: cleartext).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
    /// HTTP/2 settings (`h2` over an `https://` target, `h2c` over `http://`); absent:
    /// HTTP/1.1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2: Option<Http2Spec>,
    /// Client groups run at once by this one process (k6's concurrent scenarios): each its
    /// own clients, pacer and window within `duration_s`, its figures kept apart in the
    /// output. The plan's own `pacer`, `behaviour`, `connections`, `method`, `headers`,
    /// `paths`, `target` and `tls` are each group's defaults; the rest (HTTP/2, sources,
    /// threads, io, wait) is the plan's, for every group. Absent: one group, the plan itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<GroupSpec>>,
}

/// One client group of a plan: its name, its window in the run, and what it sets of the
/// plan's per-client parts (absent: the plan's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    /// Unique in the plan, `[a-z0-9_-]{1,32}`: the key of its figures in the output.
    pub name: String,
    /// When its clients start, in seconds from the run's start.
    #[serde(default)]
    pub start_s: f64,
    /// When its clients stop, in seconds from the run's start (absent: the plan's
    /// `duration_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacer: Option<PacerSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behaviour: Option<BehaviourSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Vec<String>>,
    /// Replaces the plan's `paths` and `paths_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<WeightedPath>>,
    /// Its own target (a server's other port or scheme: attacks in clear beside attacks
    /// over TLS in one run). A group that names its target has its own `tls` or none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Its own TLS settings (a handshake flood's resumption off beside a probe's on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
}

impl GroupSpec {
    /// Its stop: `stop_s`, else the run's duration.
    pub fn stop(&self, run_s: f64) -> f64 {
        self.stop_s.unwrap_or(run_s)
    }
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum IoBackend {
    #[default]
    Auto,
    Epoll,
    #[value(name = "io_uring")]
    IoUring,
}

impl IoBackend {
    pub fn name(self) -> &'static str {
        match self {
            IoBackend::Auto => "auto",
            IoBackend::Epoll => "epoll",
            IoBackend::IoUring => "io_uring",
        }
    }
}

/// How a worker waits for its sockets (the summary's `wait` says which ran).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum WaitMode {
    /// Spin for latency-bound plans when the engine has a CPU to itself, else sleep.
    #[default]
    Auto,
    /// Busy-poll the sockets (or the ring) for a while before each sleep.
    Spin,
    /// Sleep in the kernel until a socket is ready.
    Sleep,
}

/// One path of a weighted set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WeightedPath {
    /// Path and query, starting with `/`.
    pub path: String,
    /// Relative popularity: positive and finite.
    pub weight: f64,
}

fn default_seed() -> u64 {
    1
}
fn default_method() -> String {
    "GET".into()
}
fn default_connections() -> u64 {
    super::DEFAULT_CONNECTIONS
}
fn default_timeout_ms() -> u64 {
    10_000
}
fn default_interval_ms() -> u64 {
    1_000
}

impl Plan {
    /// Whether the io_uring loop can run this plan: closed-loop or sequential bare requests.
    pub fn suits_io_uring(&self) -> bool {
        self.pacer.pace().suits_io_uring()
            && self.behaviour.kind().is_bare_request()
            && self.tls.is_none()
            && self.http2.is_none()
    }

    /// Streams each connection carries at once: the HTTP/2 plan's `streams`, else 1.
    pub fn streams(&self) -> u64 {
        self.http2.as_ref().map_or(1, |h2| h2.streams)
    }

    /// Whether the plan's point is response time rather than load: plain requests one
    /// connection at a time, from a handful of connections, or in an open loop at a low rate.
    /// The engine's own wake-up latency would be a large share of what such plans measure.
    pub fn latency_bound(&self) -> bool {
        self.behaviour.kind().is_bare_request() && self.pacer.pace().latency_bound(&self.view())
    }

    /// Whether the epoll clients ask the kernel to stamp arrivals: a latency-bound plan's
    /// answers (`notice_us`) and every push delivery (its cycle's drain time).
    pub fn stamps_arrivals(&self) -> bool {
        self.latency_bound() || self.behaviour.kind().events().is_some()
    }

    /// An open loop whose arrivals are spread over a pool of `connections` kept-alive
    /// connections (wrk2 style), rather than each opening its own.
    pub fn is_pooled(&self) -> bool {
        self.pacer.pace().is_open() && self.behaviour.kind().pooled_in_open_loop()
    }

    /// How many clients run at once; `None` when each open-loop arrival is a client of its
    /// own, without bound.
    pub fn concurrency(&self) -> Option<u64> {
        self.pacer.pace().concurrency(&self.view())
    }

    /// Requests each scheduled arrival makes: an arrival of a pooled open loop is one
    /// request, any other makes `calls_per_connection` on its own connection.
    pub fn calls_per_arrival(&self) -> u64 {
        if self.is_pooled() {
            1
        } else {
            self.pacer.pace().calls_per_connection()
        }
    }

    /// What the pacer reads of this plan: `is_pooled` and `calls_per_arrival` ask the
    /// pacer themselves, so they are answered here, before it is asked the rest.
    pub fn view(&self) -> PlanView {
        PlanView {
            connections: self.connections,
            requests: self.requests,
            duration_s: self.duration_s,
            streams: self.streams(),
            pooled: self.is_pooled(),
            calls_per_arrival: self.calls_per_arrival(),
            new_connection_each: self.behaviour.kind().new_connection_each(),
        }
    }

    /// Whether a plain request's connection is kept for the next one. A new connection per
    /// request is kept only for the further calls of one open-loop arrival.
    pub fn keeps_alive(&self) -> bool {
        !self.behaviour.kind().new_connection_each() || self.pacer.pace().calls_per_connection() > 1
    }

    /// Sequential pacing waits for the server's close before the next connection, unless
    /// the engine closes first (`close = "client"`).
    pub fn awaits_close(&self) -> bool {
        self.pacer.pace().waits_for_close() && !self.behaviour.kind().client_closes()
    }

    /// Whether a plain request says `Connection: close`: on a connection that carries one
    /// request, when the server is the side that closes it.
    pub fn asks_close(&self) -> bool {
        !self.keeps_alive() && !self.behaviour.kind().client_closes()
    }

    /// The plan one group runs: this plan with the group's own parts, lasting the group's
    /// window, without groups or a warm-up.
    pub fn group_plan(&self, group: &GroupSpec) -> Plan {
        let mut plan = self.clone();
        plan.groups = None;
        plan.warmup_max_s = None;
        plan.start_at_ms = None;
        let run_s = self.duration_s.unwrap_or(0.0);
        plan.duration_s = Some(group.stop(run_s) - group.start_s);
        if let Some(pacer) = &group.pacer {
            plan.pacer = pacer.clone();
        }
        if let Some(behaviour) = &group.behaviour {
            plan.behaviour = behaviour.clone();
        }
        plan.connections = group.connections.unwrap_or(plan.connections);
        if let Some(method) = &group.method {
            plan.method = method.clone();
        }
        if let Some(headers) = &group.headers {
            plan.headers = headers.clone();
        }
        if let Some(paths) = &group.paths {
            (plan.paths, plan.paths_file) = (paths.clone(), None);
        }
        if let Some(target) = &group.target {
            // The plan's TLS settings are for the plan's target, not another.
            (plan.target, plan.tls) = (target.clone(), None);
        }
        if let Some(tls) = &group.tls {
            plan.tls = Some(tls.clone());
        }
        plan
    }

    /// The method on the wire: the behaviour's own, else the plan's.
    pub fn wire_method(&self) -> &str {
        self.behaviour.kind().own_method().unwrap_or(&self.method)
    }
}
