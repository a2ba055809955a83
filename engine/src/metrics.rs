//! Recording: every metric the engine keeps, each named once. A count is a variant of an
//! enum (`Attempt`, `Flow`, `Event`, `ErrorKind`) that indexes the workers' live counter
//! arrays; the same line declares its field in the output (`Attempts`, `Traffic`, `Events`,
//! `Errors`), with its wire name and its meaning, so that summing, merging and printing are
//! loops over `ALL`. A timing is a variant of `Timing`, indexing the workers' histograms, and
//! its line declares the summary's two fields for it: the percentiles and the encoded
//! histogram. Adding a metric is one line here, and one where it is recorded.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::hdr::{encode_histogram, Percentiles};

/// A set of counts: the enum naming them (`$Kind`, with `ALL`, `N` and `wire_name`) and the
/// output object holding them (`$Tally`, one `u64` field per count, in the order listed), whose
/// sums and differences are loops over its counts.
macro_rules! tally {
    (
        $(#[doc = $doc:literal])*
        pub struct $Tally:ident, one per $Kind:ident {
            $(
                $(#[doc = $fdoc:literal])*
                $(#[serde($($serde:tt)*)])?
                $field:ident: $Variant:ident,
            )+
        }
    ) => {
        #[doc = concat!("One count of `", stringify!($Tally), "`: the index of its counter.")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $Kind {
            $( $(#[doc = $fdoc])* $Variant, )+
        }

        impl $Kind {
            pub const ALL: [$Kind; [$($Kind::$Variant),+].len()] = [$($Kind::$Variant),+];
            pub const N: usize = $Kind::ALL.len();

            /// The count's name in the output.
            pub fn wire_name(self) -> &'static str {
                match self {
                    $( $Kind::$Variant => stringify!($field), )+
                }
            }
        }

        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
        pub struct $Tally {
            $( $(#[doc = $fdoc])* $(#[serde($($serde)*)])? pub $field: u64, )+
        }

        impl $Tally {
            /// From counts indexed by the kind.
            pub fn from_counts(counts: &[u64; $Kind::N]) -> $Tally {
                $Tally { $( $field: counts[$Kind::$Variant as usize], )+ }
            }

            /// Counts indexed by the kind, as `from_counts` takes them.
            pub fn counts(&self) -> [u64; $Kind::N] {
                [$(self.$field),+]
            }

            /// One count, by its kind.
            pub fn get(&self, kind: $Kind) -> u64 {
                self.counts()[kind as usize]
            }

            /// Every count added up.
            pub fn total(&self) -> u64 {
                self.counts().iter().sum()
            }

            /// Adds `other`'s counts to these.
            pub fn add(&mut self, other: &$Tally) {
                let mut counts = self.counts();
                for (a, b) in counts.iter_mut().zip(other.counts()) {
                    *a += b;
                }
                *self = $Tally::from_counts(&counts);
            }

            /// These counts less `earlier`'s (counts only grow): the counts since `earlier`.
            pub fn since(&self, earlier: &$Tally) -> $Tally {
                let mut counts = self.counts();
                for (a, b) in counts.iter_mut().zip(earlier.counts()) {
                    *a -= b;
                }
                $Tally::from_counts(&counts)
            }
        }
    };
}

tally! {
    /// Attempts and their ends; in the summary's top level.
    pub struct Attempts, one per Attempt {
        /// Finished attempts (answered with any status, or failed). Syslog: messages sent.
        requests: Requests,
        /// Finished attempts with a valid answer, whatever its status (syslog: messages sent).
        /// Failed connects, resets and timeouts are in `errors`, never here.
        answered: Answered,
        /// Attempts begun (`achieved_rate` is these per second).
        started: Started,
        /// Answers with a status below 400.
        ok: Ok,
    }
}

tally! {
    /// Connections and bytes; in the top level of the summary and of interval lines.
    pub struct Traffic, one per Flow {
        connections_opened: ConnectionsOpened,
        bytes_read: BytesRead,
        bytes_written: BytesWritten,
        /// TLS handshakes completed (full and resumed).
        #[serde(default)]
        tls_handshakes: TlsHandshakes,
        /// TLS handshakes that resumed an earlier session (a ticket or a session ID).
        #[serde(default)]
        tls_resumed: TlsResumed,
        /// HTTP/2 streams opened by the engine's own frames (`rapid-reset`, whose every
        /// stream is reset at once, and `continuation-flood`); an h2 or h2c plan's streams
        /// are its attempts (`started`).
        #[serde(default)]
        streams_opened: StreamsOpened,
    }
}

tally! {
    /// Errors by kind. Every kind is always present.
    pub struct Errors, one per ErrorKind {
        /// Connection refused or failed otherwise while connecting.
        connect: Connect,
        /// No complete answer within the timeout.
        timeout: Timeout,
        /// Connection reset or broken pipe.
        reset: Reset,
        /// The server closed before the answer was complete.
        closed: Closed,
        /// Answers with status 400 or above (these are also counted in `requests`).
        status: Status,
        /// Unparseable answer: bad status line or header, header over 64 KiB, bad chunking,
        /// framing that reads two ways (Content-Length with Transfer-Encoding, Content-Length
        /// values that differ), unreadable push event.
        parse: Parse,
        /// No local port left (EADDRNOTAVAIL): the run is invalid.
        ports_exhausted: PortsExhausted,
        /// No file descriptor left (EMFILE/ENFILE): the run is invalid.
        fds_exhausted: FdsExhausted,
        other: Other,
        /// TLS failed on the engine's side in the handshake: an untrusted certificate, no
        /// common version, suite or group, a bad handshake record.
        #[serde(default)]
        tls_handshake: TlsHandshake,
        /// The server sent a fatal TLS alert.
        #[serde(default)]
        tls_alert: TlsAlert,
        /// HTTP/2: the server's GOAWAY ended the stream before its answer was whole.
        #[serde(default)]
        h2_goaway: H2Goaway,
        /// HTTP/2: the server reset the stream (RST_STREAM) before its answer was whole.
        #[serde(default)]
        h2_reset: H2Reset,
        /// TLS: the server did not finish the handshake within the plan's timeout, or had
        /// not after 200 ms when the run ended: a server that never answers the ClientHello.
        #[serde(default)]
        tls_handshake_timeout: TlsHandshakeTimeout,
        /// TLS: a record after a completed handshake that is not TLS or does not decrypt
        /// (garbage on the connection).
        #[serde(default)]
        tls_record: TlsRecord,
        /// HTTP/2: the server broke a limit the engine sets (a header list over 64 KiB, a
        /// frame over 16 KiB, too many CONTINUATION frames); the connection ends.
        #[serde(default)]
        h2_limit: H2Limit,
        /// HTTP/2: a header block (HEADERS or PUSH_PROMISE and their CONTINUATION frames)
        /// not ended within the header-block limit (the plan's timeout, at most 1 s).
        #[serde(default)]
        h2_header_timeout: H2HeaderTimeout,
        /// HTTP/2: more than 100 SETTINGS frames from the server within a second.
        #[serde(default)]
        h2_settings_flood: H2SettingsFlood,
        /// HTTP/2: more than 100 PING frames (not acknowledgements) from the server within a
        /// second.
        #[serde(default)]
        h2_ping_flood: H2PingFlood,
        /// gRPC (`grpc-unary`): calls answered with `grpc-status` 4, DEADLINE_EXCEEDED (the
        /// engine sends the plan's timeout as `grpc-timeout`). These and the kinds below are
        /// answered calls too (in `requests`, HTTP status 200), as a status of 400 or above is.
        #[serde(default)]
        grpc_deadline_exceeded: GrpcDeadlineExceeded,
        /// gRPC: `grpc-status` 8, RESOURCE_EXHAUSTED (a message over the server's limit).
        #[serde(default)]
        grpc_resource_exhausted: GrpcResourceExhausted,
        /// gRPC: `grpc-status` 12, UNIMPLEMENTED (no such method).
        #[serde(default)]
        grpc_unimplemented: GrpcUnimplemented,
        /// gRPC: `grpc-status` 13, INTERNAL.
        #[serde(default)]
        grpc_internal: GrpcInternal,
        /// gRPC: `grpc-status` 14, UNAVAILABLE (a server shedding load).
        #[serde(default)]
        grpc_unavailable: GrpcUnavailable,
        /// gRPC: any other non-zero `grpc-status`.
        #[serde(default)]
        grpc_other: GrpcOther,
        /// gRPC: a call that ended without a `grpc-status` (or with one that is no number),
        /// or whose reply was not one length-prefixed message.
        #[serde(default)]
        grpc_no_status: GrpcNoStatus,
    }
}

tally! {
    /// Server-push counters (zero for other behaviours).
    pub struct Events, one per Event {
        /// Event deliveries received (long-poll event answers plus comet event lines).
        received: Received,
        /// Comet only: events skipped in a stream (sum of `seq` gaps).
        lost: Lost,
        /// A `seq` seen twice in a row by one client.
        duplicated: Duplicated,
        /// A `seq` lower than one already seen by the same client.
        reordered: Reordered,
        longpoll_event_answers: LongpollEventAnswers,
        longpoll_timeout_answers: LongpollTimeoutAnswers,
        /// Comet timeout lines (a stream ended by its `duration_ms`).
        comet_timeout_lines: CometTimeoutLines,
        // Counts added after the first push outputs: read as 0 from those.
        /// SSE heartbeats (comment lines) received.
        #[serde(default)]
        heartbeats: Heartbeats,
        /// Streams opened again after one ended or failed: SSE's with `Last-Event-ID`, and
        /// gRPC Subscribe streams.
        #[serde(default)]
        reconnects: Reconnects,
        /// SSE deliveries the server replayed after a reconnect (`replayed: true`); also in `received`.
        #[serde(default)]
        replayed: Replayed,
        /// SSE gap messages (their missing `seq`s count in `lost`).
        #[serde(default)]
        gaps: Gaps,
        /// SSE timeout messages (a stream ended by its `duration_ms`).
        #[serde(default)]
        sse_timeout_messages: SseTimeoutMessages,
        /// WebSocket publish messages sent.
        #[serde(default)]
        publishes: Publishes,
        /// WebSocket `published` acknowledgements received (`broadcast_rtt_us` counts these).
        #[serde(default)]
        published: Published,
        /// WebSocket pings sent (`ws-ping-flood`).
        #[serde(default)]
        pings: Pings,
        /// WebSocket pongs received (`ws-ping-flood`).
        #[serde(default)]
        pongs: Pongs,
        /// gRPC Subscribe streams (`grpc-stream`) the server ended DEADLINE_EXCEEDED at the
        /// deadline the plan gave them (`duration_ms`, sent as `grpc-timeout`): their
        /// planned end, as `sse_timeout_messages` is an SSE stream's; not an error.
        #[serde(default)]
        grpc_deadlines: GrpcDeadlines,
    }
}

/// The timings: the enum naming them (`$Kind`, with `ALL`, `N` and `wire_name`) and the
/// summary's fields for them (`$Timings`): every timing's percentiles, then every timing's
/// encoded histogram, in the order listed, each field with the meaning given.
macro_rules! timings {
    (
        $(#[doc = $doc:literal])*
        pub struct $Timings:ident, one per $Kind:ident {
            $(
                $(#[doc = $pdoc:literal])*
                $Variant:ident: $percentiles:ident, $histogram:ident = $hdoc:literal,
            )+
        }
    ) => {
        /// One timing: the index of its histogram.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $Kind {
            $( $(#[doc = $pdoc])* $Variant, )+
        }

        impl $Kind {
            pub const ALL: [$Kind; [$($Kind::$Variant),+].len()] = [$($Kind::$Variant),+];
            pub const N: usize = $Kind::ALL.len();

            /// The name of the timing's percentiles in the summary.
            pub fn wire_name(self) -> &'static str {
                match self {
                    $( $Kind::$Variant => stringify!($percentiles), )+
                }
            }
        }

        $(#[doc = $doc])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
        pub struct $Timings {
            $( $(#[doc = $pdoc])* pub $percentiles: Percentiles, )+
            $( #[doc = $hdoc] pub $histogram: String, )+
        }

        impl $Timings {
            /// Every timing's percentiles and encoded histogram, from its histogram.
            pub fn of(histograms: &[hdrhistogram::Histogram<u64>; $Kind::N]) -> $Timings {
                let h = |kind: $Kind| &histograms[kind as usize];
                $Timings {
                    $( $percentiles: Percentiles::of(h($Kind::$Variant)), )+
                    $( $histogram: encode_histogram(h($Kind::$Variant)), )+
                }
            }

            /// Every timing's percentiles beside its encoded histogram, indexed by the kind.
            pub fn pairs_mut(&mut self) -> [(&mut Percentiles, &mut String); $Kind::N] {
                [$( (&mut self.$percentiles, &mut self.$histogram) ),+]
            }
        }
    };
}

timings! {
    /// The summary's timings, in microseconds: percentiles, and the histogram they were read
    /// from (so that a merge adds them up).
    pub struct Timings, one per Timing {
        /// In open loop from the intended send time (corrected for coordinated omission), else
        /// from the actual send; in microseconds.
        Latency: latency_us, histogram =
            "`latency_us` as HdrHistogram V2 + DEFLATE, base64 (standard alphabet, padded).",
        /// From the actual send to the complete answer (the raw service time).
        Service: service_us, service_histogram = "`service_us` in the same encoding.",
        Connect: connect_us, connect_histogram = "`connect_us` in the same encoding.",
        /// From the send to the first byte of the answer.
        FirstByte: first_byte_us, first_byte_histogram = "`first_byte_us` in the same encoding.",
        /// Generator scheduling lag: actual minus intended send time (open loop only).
        Lag: lag_us, lag_histogram = "`lag_us` in the same encoding.",
        /// The engine's own reading delay: from the kernel's receive timestamp of an answer's
        /// bytes to the loop reading them. The io_uring loop samples one kept-alive connection in
        /// 64; the epoll loop stamps every connection of a latency-bound plan (new connections
        /// included) and every read of a push plan's streams, and none of other plans. A latency
        /// can read high by up to this much.
        Notice: notice_us, notice_histogram = "`notice_us` in the same encoding.",
        /// Push: server `created` timestamp to arrival, the arrival read on the server's clock
        /// (this host's plus `clock_offset_ms`), millisecond grain.
        EventDelay: event_delay_us, event_delay_histogram =
            "`event_delay_us` in the same encoding.",
        /// Push: from the subscription request to each event's arrival.
        EventSinceSubscribe: event_since_subscribe_us, event_since_subscribe_histogram =
            "`event_since_subscribe_us` in the same encoding.",
        /// SSE and WebSocket: from the start of the connect to the response head (the `101`).
        Handshake: handshake_us, handshake_histogram = "`handshake_us` in the same encoding.",
        /// TLS: from the TCP connection made to the handshake's end (full or resumed).
        TlsHandshake: tls_handshake_us, tls_handshake_histogram =
            "`tls_handshake_us` in the same encoding.",
        /// WebSocket publish: from sending a publish to the server's `published`
        /// acknowledgement, which follows the cycle's last delivery.
        BroadcastRtt: broadcast_rtt_us, broadcast_rtt_histogram =
            "`broadcast_rtt_us` in the same encoding.",
        /// Long poll: from an answer's arrival to the next poll's request written, when the
        /// client is subscribed to nothing.
        Resubscribe: resubscribe_gap_us, resubscribe_gap_histogram =
            "`resubscribe_gap_us` in the same encoding.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_reads_back_the_counts_it_was_made_from_in_wire_order() {
        let counts: [u64; Event::N] = std::array::from_fn(|k| 10 + k as u64);
        let events = Events::from_counts(&counts);
        assert_eq!(events.counts(), counts);
        let json = serde_json::to_value(events).unwrap();
        for kind in Event::ALL {
            assert_eq!(json[kind.wire_name()], events.get(kind), "{kind:?}");
        }
        let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), Event::N);
    }

    #[test]
    fn tallies_add_and_subtract_count_by_count() {
        let up: [u64; ErrorKind::N] = std::array::from_fn(|i| i as u64 + 1);
        let down: [u64; ErrorKind::N] = std::array::from_fn(|i| (ErrorKind::N - i) as u64);
        let mut a = Errors::from_counts(&up);
        let b = Errors::from_counts(&down);
        a.add(&b);
        let each = ErrorKind::N as u64 + 1;
        assert_eq!(a.counts(), [each; ErrorKind::N]);
        assert_eq!(a.since(&b), Errors::from_counts(&up));
        assert_eq!(
            (a.total(), a.get(ErrorKind::Parse)),
            (each * ErrorKind::N as u64, each)
        );
    }

    #[test]
    fn each_timing_names_its_percentiles_and_its_histogram_in_order() {
        let mut histograms: [_; Timing::N] = std::array::from_fn(|_| crate::hdr::new_histogram());
        for (k, h) in histograms.iter_mut().enumerate() {
            crate::hdr::record_us(h, 1000 * (k as u64 + 1));
        }
        let mut timings = Timings::of(&histograms);
        let json = serde_json::to_value(&timings).unwrap();
        let pairs = Timing::ALL.into_iter().zip(timings.pairs_mut()).enumerate();
        for (k, (kind, (percentiles, histogram))) in pairs {
            // Timing k held one value, (k + 1) ms: its percentiles and its histogram hold it.
            let us = 1000 * (k as u64 + 1);
            assert_eq!(json[kind.wire_name()]["count"], 1, "{kind:?}");
            assert!(percentiles.p50.abs_diff(us) <= us / 500, "{kind:?}");
            let back = crate::hdr::decode_histogram(histogram).unwrap();
            assert_eq!((back.len(), back.max()), (1, percentiles.max), "{kind:?}");
        }
    }
}
