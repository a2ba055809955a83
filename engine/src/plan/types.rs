//! What a plan may hold: the types a plan file deserializes into (and the JSON schema is made
//! from), with the rules each kind of pacer and behaviour brings as methods, so that the rest
//! of the engine asks a plan what it is rather than matching its variants again.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    /// `new-connection` requests when the kernel offers it, epoll otherwise.
    #[serde(default)]
    pub io: IoBackend,
    /// How a worker of the epoll loop waits for its sockets. `auto`: spin, then sleep, for a
    /// latency-bound plan when the engine has a CPU to itself; sleep in the kernel otherwise.
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
    /// Busy-poll the sockets for a while after each step, then sleep (epoll loop only).
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
    10
}
fn default_timeout_ms() -> u64 {
    10_000
}
fn default_interval_ms() -> u64 {
    1_000
}

/// When requests start.
// Kinds without settings are empty structs, not unit variants, so that a setting given to a
// kind that takes none (`rate` for `closed`) is refused rather than silently dropped: serde
// ignores extra fields beside the tag of a unit variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum PacerSpec {
    /// `connections` slots, each starting its next request as soon as the last one ended.
    Closed {},
    /// One connection at a time, the next opened after the last one closed (seed 000 Test 1).
    /// `connections` is 1 (its default under this pacer).
    Sequential {},
    /// Arrivals at `rate` per second, rising linearly to `ramp_to_rate` over `ramp_s`.
    /// With the `keepalive` behaviour the arrivals are spread over a pool of `connections`
    /// kept-alive connections (wrk2 style); otherwise every arrival opens a new connection
    /// and makes `calls_per_connection` requests on it (httperf `--num-conns --num-calls`).
    /// The whole schedule comes `offset_s` late (one generator's arrivals interleaved with
    /// another's).
    Open {
        rate: f64,
        #[serde(default)]
        ramp_to_rate: Option<f64>,
        #[serde(default)]
        ramp_s: f64,
        #[serde(default = "default_calls")]
        calls_per_connection: u64,
        #[serde(default)]
        offset_s: f64,
    },
    /// JMeter thread group: `users` users started evenly over `ramp_up_s`, all stopped at
    /// `ramp_up_s + hold_s`, each looping its behaviour (`connections` is ignored). User k
    /// (0-based) starts at `offset_s + k * ramp_up_s / users`.
    Users {
        users: u64,
        ramp_up_s: f64,
        hold_s: f64,
        #[serde(default)]
        offset_s: f64,
    },
}

fn default_calls() -> u64 {
    1
}

impl Default for PacerSpec {
    fn default() -> Self {
        PacerSpec::Closed {}
    }
}

impl PacerSpec {
    /// Arrivals on a schedule, latency timed from the intended send time.
    pub fn is_open(&self) -> bool {
        matches!(self, PacerSpec::Open { .. })
    }

    /// The longest span the pacer itself sets (a ramp, or users' ramp-up plus hold).
    pub fn seconds(&self) -> Option<f64> {
        match self {
            PacerSpec::Open { ramp_s, .. } => Some(*ramp_s),
            PacerSpec::Users {
                ramp_up_s, hold_s, ..
            } => Some(ramp_up_s + hold_s),
            PacerSpec::Closed {} | PacerSpec::Sequential {} => None,
        }
    }

    /// How late this pacer's schedule begins after the start (open loop and users; 0 else).
    pub fn offset_s(&self) -> f64 {
        match self {
            PacerSpec::Open { offset_s, .. } | PacerSpec::Users { offset_s, .. } => *offset_s,
            PacerSpec::Closed {} | PacerSpec::Sequential {} => 0.0,
        }
    }

    /// Requests one arrival makes on its own connection (open loop; 1 otherwise).
    pub fn calls_per_connection(&self) -> u64 {
        match self {
            PacerSpec::Open {
                calls_per_connection,
                ..
            } => *calls_per_connection,
            _ => 1,
        }
    }

    /// `connections` when a plan does not say: 1 for sequential pacing, which runs one
    /// connection at a time, else 10 like wrk.
    pub fn default_connections(&self) -> u64 {
        match self {
            PacerSpec::Sequential {} => 1,
            _ => default_connections(),
        }
    }

    /// The highest arrival rate the schedule reaches (open loop).
    pub fn peak_rate(&self) -> Option<f64> {
        match self {
            PacerSpec::Open {
                rate, ramp_to_rate, ..
            } => Some(rate.max(ramp_to_rate.unwrap_or(0.0))),
            _ => None,
        }
    }
}

/// What each request is.
// Kinds without settings are empty structs, as in `PacerSpec`. Kinds are spelt as suites
// spell them (`new-connection`), so one name means one behaviour from a suite to a summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum BehaviourSpec {
    /// Requests on a kept-alive connection.
    Keepalive {},
    /// A new connection per request (`Connection: close`).
    NewConnection {},
    /// `POST` the target (normally `/push`) as a long poll and re-subscribe after every answer.
    Longpoll {
        events: Vec<String>,
        duration_ms: u64,
    },
    /// `POST` a comet subscription and read its ndjson stream, checking `seq` per event.
    Comet {
        events: Vec<String>,
        #[serde(default)]
        duration_ms: Option<u64>,
    },
    /// `GET` the target (normally `/sse`) as a Server-Sent Events stream of `events`, with
    /// `heartbeat_ms` and `duration_ms` passed in the query when given; a dropped stream is
    /// opened again with `Last-Event-ID`.
    Sse {
        events: Vec<String>,
        #[serde(default)]
        heartbeat_ms: Option<u64>,
        #[serde(default)]
        duration_ms: Option<u64>,
    },
    /// Upgrade `GET` the target (normally `/ws`) to a WebSocket and subscribe to `events`;
    /// with `publish`, the run's first `clients` clients also publish every `every_ms`.
    Websocket {
        events: Vec<String>,
        #[serde(default)]
        publish: Option<Publish>,
    },
    /// `POST` a body of `bytes` bytes trickled at `bytes_per_s`.
    SlowUpload { bytes: u64, bytes_per_s: u64 },
    /// Small receive buffer and reads of at most `read_bytes` every `read_interval_ms`.
    SlowReader {
        #[serde(default = "default_rcvbuf")]
        rcvbuf: u32,
        read_bytes: usize,
        read_interval_ms: u64,
    },
    /// Syslog messages numbered from `seq_start` on; one message counts as one request.
    Syslog {
        #[serde(default)]
        transport: SyslogTransport,
        /// TCP framing (RFC 6587); named apart from HTTP's message framing (issue 21).
        #[serde(default)]
        syslog_framing: SyslogFraming,
        /// The mean message size: each message's shape scales it (`crate::syslogmsg`).
        #[serde(default = "default_message_bytes")]
        message_bytes: usize,
        #[serde(default = "default_seq_start")]
        seq_start: u64,
    },
}

/// WebSocket publishers: how often, and how many of the run's clients.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Publish {
    pub every_ms: u64,
    #[serde(default = "default_publishers")]
    pub clients: u64,
}

fn default_publishers() -> u64 {
    1
}

impl Default for BehaviourSpec {
    fn default() -> Self {
        BehaviourSpec::Keepalive {}
    }
}

fn default_rcvbuf() -> u32 {
    4096
}
pub(crate) fn default_message_bytes() -> usize {
    200
}
pub(crate) fn default_seq_start() -> u64 {
    1
}

/// How a slow reader reads: its receive buffer, and at most `bytes` per read every `interval`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadPace {
    pub rcvbuf: u32,
    pub bytes: usize,
    pub interval: std::time::Duration,
}

impl BehaviourSpec {
    /// Plain requests: the plan's own method, body and weighted paths make each request.
    /// The other behaviours build their requests themselves.
    pub fn is_plain(&self) -> bool {
        matches!(
            self,
            BehaviourSpec::Keepalive {}
                | BehaviourSpec::NewConnection {}
                | BehaviourSpec::SlowReader { .. }
        )
    }

    /// Everything but syslog speaks HTTP to an `http://` target.
    pub fn needs_http(&self) -> bool {
        !matches!(self, BehaviourSpec::Syslog { .. })
    }

    /// The plain requests the io_uring loop can drive (a slow reader's paced reads it cannot).
    pub fn suits_io_uring(&self) -> bool {
        matches!(
            self,
            BehaviourSpec::Keepalive {} | BehaviourSpec::NewConnection {}
        )
    }

    /// A comet or SSE stream without `duration_ms`, and a WebSocket, last until the run
    /// ends.
    pub fn is_endless(&self) -> bool {
        matches!(
            self,
            BehaviourSpec::Comet {
                duration_ms: None,
                ..
            } | BehaviourSpec::Sse {
                duration_ms: None,
                ..
            } | BehaviourSpec::Websocket { .. }
        )
    }

    /// The events a push behaviour subscribes to.
    pub fn events(&self) -> Option<&[String]> {
        match self {
            BehaviourSpec::Longpoll { events, .. }
            | BehaviourSpec::Comet { events, .. }
            | BehaviourSpec::Sse { events, .. }
            | BehaviourSpec::Websocket { events, .. } => Some(events),
            _ => None,
        }
    }

    /// The method this behaviour always sends, whatever the plan's `method` says.
    pub fn own_method(&self) -> Option<&'static str> {
        match self {
            BehaviourSpec::Longpoll { .. }
            | BehaviourSpec::Comet { .. }
            | BehaviourSpec::SlowUpload { .. } => Some("POST"),
            _ => None,
        }
    }

    /// Whether sockets want `TCP_NODELAY`: not with a new connection per request, where the
    /// request is one write on a fresh connection that never waits for an ACK anyway.
    pub fn wants_no_delay(&self) -> bool {
        !matches!(self, BehaviourSpec::NewConnection {})
    }

    /// The first syslog message number (1 unless a plan says); other behaviours number none.
    pub fn seq_start(&self) -> u64 {
        match self {
            BehaviourSpec::Syslog { seq_start, .. } => *seq_start,
            _ => default_seq_start(),
        }
    }

    /// A slow reader's pace; `None` for every other behaviour.
    pub fn read_pace(&self) -> Option<ReadPace> {
        match self {
            BehaviourSpec::SlowReader {
                rcvbuf,
                read_bytes,
                read_interval_ms,
            } => Some(ReadPace {
                rcvbuf: *rcvbuf,
                bytes: *read_bytes,
                interval: std::time::Duration::from_millis(*read_interval_ms),
            }),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SyslogTransport {
    #[default]
    Tcp,
    Udp,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SyslogFraming {
    #[default]
    Newline,
    Octet,
}

impl Plan {
    /// Whether the io_uring loop can run this plan: closed-loop plain requests.
    pub fn suits_io_uring(&self) -> bool {
        matches!(self.pacer, PacerSpec::Closed {}) && self.behaviour.suits_io_uring()
    }

    /// Whether the plan's point is response time rather than load: plain requests one
    /// connection at a time, from a handful of connections, or in an open loop at a low rate.
    /// The engine's own wake-up latency would be a large share of what such plans measure.
    pub fn latency_bound(&self) -> bool {
        const FEW_CONNECTIONS: u64 = 4;
        const LOW_RATE: f64 = 1000.0;
        let plain = matches!(
            self.behaviour,
            BehaviourSpec::Keepalive {} | BehaviourSpec::NewConnection {}
        );
        plain
            && match &self.pacer {
                PacerSpec::Sequential {} => true,
                PacerSpec::Closed {} => self.connections <= FEW_CONNECTIONS,
                PacerSpec::Open { .. } => self.pacer.peak_rate().unwrap_or(0.0) <= LOW_RATE,
                PacerSpec::Users { users, .. } => *users <= FEW_CONNECTIONS,
            }
    }

    /// Whether the epoll clients ask the kernel to stamp arrivals: a latency-bound plan's
    /// answers (`notice_us`) and every push delivery (its cycle's drain time).
    pub fn stamps_arrivals(&self) -> bool {
        self.latency_bound() || self.behaviour.events().is_some()
    }

    /// An open loop whose arrivals are spread over a pool of `connections` kept-alive
    /// connections (wrk2 style), rather than each opening its own.
    pub fn is_pooled(&self) -> bool {
        self.pacer.is_open() && matches!(self.behaviour, BehaviourSpec::Keepalive {})
    }

    /// How many clients run at once; `None` when each open-loop arrival is a client of its
    /// own, without bound.
    pub fn concurrency(&self) -> Option<u64> {
        match &self.pacer {
            PacerSpec::Sequential {} => Some(1),
            PacerSpec::Users { users, .. } => Some(*users),
            PacerSpec::Open { .. } if !self.is_pooled() => None,
            PacerSpec::Open { .. } | PacerSpec::Closed {} => Some(self.connections),
        }
    }

    /// Requests each scheduled arrival makes: an arrival of a pooled open loop is one
    /// request, any other makes `calls_per_connection` on its own connection.
    pub fn calls_per_arrival(&self) -> u64 {
        if self.is_pooled() {
            1
        } else {
            self.pacer.calls_per_connection()
        }
    }

    /// Whether a plain request's connection is kept for the next one. A new connection per
    /// request is kept only for the further calls of one open-loop arrival.
    pub fn keeps_alive(&self) -> bool {
        match self.behaviour {
            BehaviourSpec::NewConnection {} => self.pacer.calls_per_connection() > 1,
            _ => true,
        }
    }

    /// Sequential pacing waits for the server's close before the next connection.
    pub fn awaits_close(&self) -> bool {
        matches!(self.pacer, PacerSpec::Sequential {})
    }

    /// The method on the wire: the behaviour's own, else the plan's.
    pub fn wire_method(&self) -> &str {
        self.behaviour.own_method().unwrap_or(&self.method)
    }
}
