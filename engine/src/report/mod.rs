//! Output: the lines `--json` prints (one JSON object per line) and the human summary. These
//! types are the contract with the orchestrator; `schema/output.schema.json` is generated from
//! them. One file per concern: the interval line (`types`), the summary line and how a run
//! makes it (`summary`), the wrk-like text (`human`) and the schema (`schema`). Below them:
//! the counts and timings both lines carry are named once in `crate::metrics`, and the
//! histogram codec is `crate::hdr`, since emit lines encode histograms too.

mod human;
mod schema;
mod summary;
mod types;

pub use crate::emits::{EmitLine, MinMax};
pub use crate::hdr::Percentiles;
pub use crate::hdr::{decode_histogram, encode_histogram};
pub use crate::metrics::{Attempts, Errors, Events, Timings, Traffic};
pub(crate) use crate::stats::round3;
pub use schema::output_schema;
pub use summary::{Summary, SummaryInput, WaitUsed};
pub use types::{GroupWindow, IntervalLine, MeasureLine, WarmupEnd};

/// Output format version; raised when a field changes meaning or disappears.
///
/// 2: `rps` counts answered attempts (`answered`), never failed ones; `floor_us` is per answer.
/// 3: emit lines carry each cycle's delay histogram, first and last arrival and the engine's
/// drain time, and come from every push transport; push plans stamp every read, so their
/// `notice_us` is measured; the summary adds the long poll's `resubscribe_gap_us`.
/// 4: TLS: `tls_handshake_us` (and its histogram), the counts `tls_handshakes` and
/// `tls_resumed` beside `connections_opened`, and the error kinds `tls_handshake` and
/// `tls_alert`; the summary's plan holds `tls` for a TLS target.
/// 5: HTTP/2: the error kinds `h2_goaway` and `h2_reset`; the summary's plan holds `http2`
/// for an HTTP/2 plan, whose every stream is one request.
/// 6: the error kinds of a server the engine survives (issue 33): `tls_handshake_timeout`,
/// `tls_record`, `h2_limit`, `h2_header_timeout`, `h2_settings_flood`, `h2_ping_flood`.
/// 7: interval lines carry their interval's latency and push event delay: `latency_p50_us`,
/// `latency_p99_us`, `event_delay_p50_us`, `event_delay_p99_us` (null when the interval had
/// none) and the histograms they were read from, `latency_histogram` and
/// `event_delay_histogram`, which `--merge` adds.
/// 8: emit lines come during the run, as each cycle settles (no delivery of it for 10 s, or
/// twice the emit interval seen), and every cycle is printed (no cap at the newest 10,000);
/// a cycle may have more than one line (a delivery that came after its line was printed),
/// which a reader adds up as `--merge` does: counts and histograms add, spans and maxima
/// widen.
/// 9: interval lines carry the push emit cycles whose deliveries they received, `cycles`
/// (per event and seq: deliveries, the server's total, created, the longest delay), and
/// `cycles_unlisted`, so that a reader follows cycles as they happen.
/// 10: the summary's `streams_opened` (the HTTP/2 attacks' streams, issue 35).
/// 11: a plan's warm-up phase (`warmup_max_s`): the `measure` line and the summary's `warmup`.
/// 12: errors by gRPC status (`grpc_deadline_exceeded` ... `grpc_no_status`, issue 36), and
///     `events.grpc_deadlines` (read as 0 where absent).
pub const OUTPUT_VERSION: u32 = 12;
