//! Plan stage: what each request is. Each behaviour's settings live in a file of their own
//! here (its spec: the JSON a plan holds, its defaults, its `check` and its facts), and
//! `BehaviourSpec` is the thin enum a plan holds, which only delegates. The loops that run
//! them sit higher, in `crate::behaviours`: a spec is plan data, which the wire codecs, the
//! sockets and the drivers below the loops read too, so it cannot live beside its loop.
//!
//! Adding a behaviour: its spec file here (with its command-line flags, which `crate::cli`
//! flattens in), its loop's file in `crate::behaviours`, and one line in `with_kinds!`
//! below, the one list of behaviours both sides are made from.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{PlanError, SuiteKey};

/// The first message number a numbering behaviour (syslog) starts from unless told.
pub(super) const FIRST_SEQ: u64 = 1;

/// What a plan may ask of a behaviour, each answered by its spec. Defaults are what most
/// behaviours are: HTTP requests the behaviour builds itself, ending on their own.
pub trait Kind {
    /// Every rule this behaviour's settings break (all of them, not the first).
    fn check(&self) -> Vec<PlanError> {
        Vec::new()
    }
    /// Plain requests: the plan's own method, body and weighted paths make each request.
    fn is_plain(&self) -> bool {
        false
    }
    /// A bare request and its answer, nothing paced or held: what the io_uring loop
    /// drives, and what a latency-bound plan is made of.
    fn is_bare_request(&self) -> bool {
        false
    }
    /// One request and its answer per arrival, timed from the arrival: a bare request or a
    /// gRPC unary call. What a capacity search offers at a stepped open-loop rate.
    fn is_rate_searchable(&self) -> bool {
        self.is_bare_request()
    }
    /// A new connection per request.
    fn new_connection_each(&self) -> bool {
        false
    }
    /// In open loop, arrivals are spread over a pool of kept-alive clients (wrk2 style)
    /// rather than each being a client of its own: bare requests on kept-alive connections,
    /// and gRPC's calls and chat messages on their held streams.
    fn pooled_in_open_loop(&self) -> bool {
        self.is_bare_request() && !self.new_connection_each()
    }
    /// The engine closes a connection of one request once its answer is complete, rather
    /// than asking the server to (`new-connection`'s `close = "client"`).
    fn client_closes(&self) -> bool {
        false
    }
    /// Speaks HTTP to an `http://` target.
    fn needs_http(&self) -> bool {
        true
    }
    /// Sends datagrams (UDP), so holds no connection.
    fn is_datagram(&self) -> bool {
        false
    }
    /// Lasts until the run ends (a stream without `duration_ms`).
    fn is_endless(&self) -> bool {
        false
    }
    /// The events a push behaviour subscribes to.
    fn events(&self) -> Option<&[String]> {
        None
    }
    /// The method this behaviour always sends, whatever the plan's `method` says.
    fn own_method(&self) -> Option<&'static str> {
        None
    }
    /// The first message number (syslog numbers its messages; other behaviours none).
    fn seq_start(&self) -> u64 {
        FIRST_SEQ
    }
    /// A slow reader's pace.
    fn read_pace(&self) -> Option<ReadPace> {
        None
    }
    /// Why HTTP/2 does not carry it, if it does not: only the behaviours that say so are
    /// carried; one that writes its own frames is told to leave the http2 setting out.
    fn http2_refusal(&self) -> Option<&'static str> {
        Some(if self.writes_h2_frames() {
            "rapid-reset, continuation-flood and hpack-bomb write HTTP/2 frames of their own (h2c \
             with prior knowledge on an http:// target, ALPN h2 on https://): give it no http2 \
             setting"
        } else {
            "HTTP/2 carries keepalive and new-connection requests, long poll, comet and SSE; \
             not this behaviour"
        })
    }
    /// The path its requests go to when a suite names none (`None`: no HTTP, or none).
    fn path(&self) -> Option<&'static str> {
        None
    }
    /// The suite keys that set its settings, as `--print-facts` tells the orchestrator.
    fn suite_keys(&self) -> &'static [SuiteKey] {
        &[]
    }
    /// An attack (issue 35): its connections are held, reset or cut, so a run of none
    /// answered is no failure (no `NO ANSWER`, exit code 0).
    fn is_attack(&self) -> bool {
        false
    }
    /// Makes full TLS handshakes: needs a TLS target whose sessions do not resume.
    fn full_tls_handshakes(&self) -> bool {
        false
    }
    /// Writes HTTP/2 frames of its own (no `http2` setting: h2c with prior knowledge on an
    /// `http://` target, ALPN `h2` over TLS).
    fn writes_h2_frames(&self) -> bool {
        false
    }
    /// Runs on HTTP/2 alone (gRPC): a plan without an `http2` setting is refused.
    fn needs_http2(&self) -> bool {
        false
    }
}

/// A behaviour's command-line flags (clap's, flattened into the engine's own) and the spec
/// they make, from the spec's own defaults where a flag is not given.
pub trait Flags: clap::Args {
    /// The flag that names the behaviour, for the refusal of two at once.
    const NAME: &'static str;
    /// The spec asked for, `None` when none of these flags is given.
    fn spec(&self, shared: &SharedFlags) -> Result<Option<BehaviourSpec>, PlanError>;
}

/// Flags more than one behaviour reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct SharedFlags {
    /// `--push-ms`: a long poll's timeout, a comet or SSE stream's length.
    pub push_ms: Option<u64>,
    /// `--sequential`: one connection at a time, so a new connection per request.
    pub sequential: bool,
}

/// No flags: a behaviour chosen by default, or only by a plan file.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct NoFlags {}

impl Flags for NoFlags {
    const NAME: &'static str = "";
    fn spec(&self, _: &SharedFlags) -> Result<Option<BehaviourSpec>, PlanError> {
        Ok(None)
    }
}

/// The plan's side of the list in `with_kinds!`: the enum of behaviours, its one delegating
/// match, their spec modules and their flags.
macro_rules! kinds {
    ($($(#[$doc:meta])* $variant:ident($spec:ident, $flags:ident) in $module:ident,)*) => {
        $(mod $module; pub use $module::*;)*

        /// Every behaviour's command-line flags, one group per behaviour.
        #[derive(Debug, Clone, clap::Args)]
        pub struct BehaviourFlags {
            $(#[command(flatten)] pub $module: $flags,)*
        }

        impl BehaviourFlags {
            /// The specs the flags ask for, in the list's order.
            pub fn chosen(&self, shared: &SharedFlags) -> Result<Vec<BehaviourSpec>, PlanError> {
                let mut chosen = Vec::new();
                $(chosen.extend(self.$module.spec(shared)?);)*
                Ok(chosen)
            }
            /// The flags that name a behaviour, as a refusal lists them.
            pub fn names() -> Vec<&'static str> {
                [$(<$flags as Flags>::NAME,)*].into_iter().filter(|n| !n.is_empty()).collect()
            }
        }

        /// What each request is.
        // Kinds are spelt as suites spell them (`new-connection`), so one name means one
        // behaviour from a suite to a summary.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
        pub enum BehaviourSpec {
            $($(#[$doc])* $variant($spec),)*
        }

        impl BehaviourSpec {
            /// The spec behind the tag, asked for every rule and fact.
            pub fn kind(&self) -> &dyn Kind {
                match self {
                    $(BehaviourSpec::$variant(spec) => spec,)*
                }
            }
            /// Every behaviour with its default settings and its spec's JSON schema, in the
            /// list's order: what `--print-facts` lays out (`plan::facts`, which uses this
            /// file and is not used by it).
            pub fn defaults() -> Vec<(BehaviourSpec, serde_json::Value)> {
                vec![$((
                    BehaviourSpec::$variant(<$spec>::default()),
                    serde_json::to_value(schemars::schema_for!($spec)).unwrap_or_default(),
                ),)*]
            }
        }
    };
}

/// Every behaviour, one line each: its variant, its spec and flags (defined in the file
/// named `$module` here) and, by the same name, its loop's file in `crate::behaviours`.
/// `with_kinds!(m)` hands the list to the macro `m`: `kinds!` above makes the plan's side of
/// it, and `crate::behaviours` its loops, so adding a behaviour is one line here.
macro_rules! with_kinds {
    ($callback:ident) => {
        $callback! {
            /// Requests on a kept-alive connection.
            Keepalive(KeepaliveSpec, NoFlags) in keepalive,
            /// A new connection per request, closed by the side `close` names.
            NewConnection(NewConnectionSpec, NewConnectionFlags) in new_connection,
            /// `POST` the target (normally `/push`) as a long poll and re-subscribe after every
            /// answer.
            Longpoll(LongpollSpec, LongpollFlags) in longpoll,
            /// `POST` a comet subscription and read its ndjson stream, checking `seq` per event.
            Comet(CometSpec, CometFlags) in comet,
            /// `GET` the target (normally `/sse`) as a Server-Sent Events stream of `events`,
            /// with `heartbeat_ms` and `duration_ms` passed in the query when given; a dropped
            /// stream is opened again with `Last-Event-ID`.
            Sse(SseSpec, SseFlags) in sse,
            /// Upgrade `GET` the target (normally `/ws`) to a WebSocket and subscribe to
            /// `events`; with `publish`, the run's first `clients` clients also publish every
            /// `every_ms`.
            Websocket(WebsocketSpec, WebsocketFlags) in websocket,
            /// `POST` a body of `bytes` bytes trickled at `bytes_per_s`.
            SlowUpload(SlowUploadSpec, SlowUploadFlags) in slow_upload,
            /// Small receive buffer and reads of at most `read_bytes` every `read_interval_ms`.
            SlowReader(SlowReaderSpec, SlowReaderFlags) in slow_reader,
            /// Syslog messages numbered from `seq_start` on; one message counts as one request.
            Syslog(SyslogSpec, SyslogFlags) in syslog,
            /// Slowloris: a request's header lines trickled, one every `interval_ms`, the
            /// header section never ended.
            Slowloris(SlowlorisSpec, SlowlorisFlags) in slowloris,
            /// Connections opened and left: nothing sent, each held until the run ends.
            Idle(IdleSpec, IdleFlags) in idle,
            /// HTTP/2 Rapid Reset (CVE-2023-44487): streams opened with HEADERS and reset at
            /// once with RST_STREAM(CANCEL), `streams_per_s` a connection, each connection
            /// carrying `streams_per_connection`.
            RapidReset(RapidResetSpec, RapidResetFlags) in rapid_reset,
            /// HTTP/2 CONTINUATION flood: a request's header block never ended, CONTINUATION
            /// frames of `frame_bytes` written `frames_per_s` a connection.
            ContinuationFlood(ContinuationFloodSpec, ContinuationFloodFlags) in continuation_flood,
            /// TLS handshake flood: full handshakes on new connections, each abandoned after
            /// the ServerHello or after the Finished (`abandon`).
            HandshakeFlood(HandshakeFloodSpec, HandshakeFloodFlags) in handshake_flood,
            /// HPACK bomb: requests referencing one stored ~4 KB header field `references`
            /// times each, `streams_per_s` a connection.
            HpackBomb(HpackBombSpec, HpackBombFlags) in hpack_bomb,
            /// WebSocket oversized message: after the upgrade, one frame announcing
            /// `announced_bytes` of payload, trickled at `bytes_per_s` or never sent.
            WsOversized(WsOversizedSpec, WsOversizedFlags) in ws_oversized,
            /// WebSocket endless fragments: a text frame without FIN, then continuation
            /// frames of `frame_bytes`, `frames_per_s` a connection, never the final one.
            WsFragments(WsFragmentsSpec, WsFragmentsFlags) in ws_fragments,
            /// WebSocket ping flood: pings `pings_per_s` a connection, pongs counted.
            WsPingFlood(WsPingFloodSpec, WsPingFloodFlags) in ws_ping_flood,
            /// gRPC unary calls (spec §16) on HTTP/2: `Perf`, or `Echo` of `echo_bytes`.
            GrpcUnary(GrpcUnarySpec, GrpcUnaryFlags) in grpc_unary,
            /// gRPC `Subscribe` streams (spec §16) on HTTP/2, held, of `events`; with
            /// `duration_ms`, each stream's deadline.
            GrpcStream(GrpcStreamSpec, GrpcStreamFlags) in grpc_stream,
            /// gRPC `Chat` (spec §16) on HTTP/2: one held stream per client, a message of
            /// `echo_bytes` bytes of data per exchange, timed to its echo.
            GrpcChat(GrpcChatSpec, GrpcChatFlags) in grpc_chat,
        }
    };
}
pub(crate) use with_kinds;

with_kinds!(kinds);

impl BehaviourSpec {
    /// The behaviour's name as plans, suites and summaries spell it (`grpc-unary`).
    pub fn name(&self) -> String {
        let tagged = serde_json::to_value(self).unwrap_or_default();
        tagged["kind"].as_str().unwrap_or_default().to_string()
    }
}

impl Default for BehaviourSpec {
    fn default() -> Self {
        BehaviourSpec::Keepalive(KeepaliveSpec {})
    }
}

/// A refusal of a behaviour setting: every one is about the plan's `behaviour` field.
fn refuse(why: impl Into<String>) -> PlanError {
    PlanError::Contradiction("behaviour", why.into())
}

/// Each of `kind`'s keys whose value lies outside 1..=its most, refused in one line
/// ("KIND KEY must be 1..=MOST"): the attacks' rates and counts are bounded alike.
fn out_of_range(kind: &str, bounds: &[(&str, u64, u64)]) -> Vec<PlanError> {
    bounds
        .iter()
        .filter(|(_, value, most)| !(1..=*most).contains(value))
        .map(|(key, _, most)| refuse(format!("{kind} {key} must be 1..={most}")))
        .collect()
}

/// Events named on the command line, the empty name dropped (`--longpoll ""` polls none).
fn non_empty(events: &[String]) -> Vec<String> {
    events.iter().filter(|e| !e.is_empty()).cloned().collect()
}

/// Event names of a subscription: at most 16, each `^[A-Za-z0-9_.-]{1,64}$`.
fn check_events(events: &[String], errors: &mut Vec<PlanError>) {
    if events.len() > 16 {
        errors.push(refuse("at most 16 events per subscription"));
    }
    for name in events {
        let ok = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        if !ok {
            errors.push(refuse(format!(
                "event name {name:?} does not match ^[A-Za-z0-9_.-]{{1,64}}$"
            )));
        }
    }
}

/// SSE and WebSocket subscriptions name at least one event (the spec's 1 to 16), each once.
fn check_stream_events(events: &[String], errors: &mut Vec<PlanError>) {
    if events.is_empty() {
        errors.push(refuse(
            "sse, websocket and grpc-stream subscribe to 1 to 16 events",
        ));
    }
    if events
        .iter()
        .enumerate()
        .any(|(i, e)| events[..i].contains(e))
    {
        errors.push(refuse("an event is named twice"));
    }
    check_events(events, errors);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_behaviour_check_returns_every_error_not_the_first() {
        let spec = SseSpec {
            events: vec!["e1".into(), "e1".into(), "a b".into()],
            heartbeat_ms: Some(5),
            duration_ms: Some(0),
        };
        let errors = spec.check();
        assert_eq!(errors.len(), 4, "{errors:?}");
        assert!(errors.iter().all(|e| e.field() == "behaviour"));
    }

    #[test]
    fn every_kind_is_asked_through_the_enum() {
        let poll = BehaviourSpec::Longpoll(LongpollSpec {
            events: vec!["e1".into()],
            duration_ms: 0,
        });
        assert_eq!(poll.kind().own_method(), Some("POST"));
        assert_eq!(poll.kind().check().len(), 1);
        assert!(BehaviourSpec::default().kind().is_bare_request());
        let syslog = BehaviourSpec::Syslog(SyslogSpec::default());
        assert!(!syslog.kind().needs_http());
        assert!(!syslog.kind().is_datagram());
        let udp = SyslogSpec {
            transport: SyslogTransport::Udp,
            ..SyslogSpec::default()
        };
        assert!(BehaviourSpec::Syslog(udp).kind().is_datagram());
        assert_eq!(syslog.kind().seq_start(), 1);
    }
}
