//! Per-emit records for every push transport (seed 004: emit duration against place in the
//! emit list, requests per emit cycle; issue 19: each cycle's delivery delays, arrivals and
//! the engine's drain time, so that a test's delay percentiles can be taken over the cycles
//! of its window alone). Each worker aggregates the deliveries it received per (event, seq);
//! a cycle that has settled (no delivery of it in any worker for `settle_time`) leaves the
//! workers' logs during the run, merged into one record and printed as its emit line
//! (`take_settled`); the rest are merged at the end, and generators' emit lines by
//! `--merge`, exactly: counts add, delay buckets add, spans and maxima widen. A delivery that
//! comes after its cycle's line was printed starts a new record, printed as a further line
//! for the same (event, seq), which readers add up the same way (`from_lines`, and the
//! orchestrator's reader): nothing is lost or counted twice. Memory is bounded whatever the
//! run length: a worker holds the cycles of the last settle time (at most `MAX_HELD_SEQS`
//! seqs), at most `MAX_PLACES` sampled places per cycle, and the delays of a cycle as
//! (bucket, count) pairs, one per HdrHistogram bucket that a delivery fell in (a cycle's
//! deliveries span few buckets).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::hdr::round3;
use crate::hdr::{decode_histogram, encode_histogram, new_histogram, MAX_US};

/// Smallest and largest of a set of values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MinMax {
    pub min: u64,
    pub max: u64,
}

/// One emit cycle of one event as this run's clients received it (long poll and comet),
/// printed once the cycle has settled, or before the summary line for those that had not.
/// A cycle may have more than one line (a delivery that came after its line was printed):
/// its lines add up as `--merge` adds generators' lines (counts add, histograms add, spans
/// and maxima widen, places join up to 200).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EmitLine {
    /// Always `"emit"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The event name.
    pub event: String,
    pub seq: u64,
    /// The server's `connections.total`: subscribers in the cycle's snapshot.
    pub total: u64,
    /// Deliveries of this cycle that reached this run's clients.
    pub received: u64,
    /// The server's `response.event.timings.created` (cycle start, ms since the epoch).
    pub created_ms: u64,
    /// The server's `response.event.timings.duration` over the deliveries received.
    pub duration_ms: MinMax,
    /// Sampled `[place, duration_ms]` pairs: places 1, 1+k, 1+2k… with k = ceil(total/200),
    /// at most 200, by place.
    pub places: Vec<[u64; 2]>,
    /// Each delivery's delay as `event_delay_us` measures it (the server's `created` to the
    /// arrival, read on the server's clock, millisecond grain), in microseconds, as an
    /// HdrHistogram in the summary's encoding: added over cycles or generators, it gives
    /// the percentiles of exactly those deliveries.
    pub delay_histogram: String,
    /// The cycle's first and last arrival at this run's clients, on the server's clock (this
    /// host's plus `clock_offset_ms`), Unix milliseconds.
    pub first_arrival_ms: f64,
    pub last_arrival_ms: f64,
    /// The engine's drain time of the cycle, in microseconds: the longest any of the cycle's
    /// deliveries waited in this host's kernel (its receive stamp, `SO_TIMESTAMPNS`) before
    /// the engine read it. When a burst lands at once, its last-read delivery waits for the
    /// engine to read all the others first, so this is how long the engine took to drain it;
    /// when the server trickles its sends, the engine keeps up and this stays small. It is
    /// the engine's share alone: the span from the first delivery's kernel stamp to the last
    /// read would also hold the server's own spread of sends (its emit duration). A maximum,
    /// not a p99, because it merges exactly (the largest of the workers' and generators')
    /// and bounds what the engine added to any delivery's delay in the cycle. Null when no
    /// delivery of the cycle carried a stamp.
    pub drain_us: Option<u64>,
    /// Deliveries of the cycle whose read carried a kernel stamp (what `drain_us` is over).
    pub drain_samples: u64,
}

/// Sampled `[place, duration_ms]` pairs kept per (event, seq).
pub const MAX_PLACES: usize = 200;
/// A cycle with no delivery for this long (or twice the emit interval seen, if longer) has
/// settled: its record leaves the log.
pub const SETTLE_MIN: Duration = Duration::from_secs(10);
/// Seqs the workers hold at most (a run emitting faster than this many cycles per settle
/// time): the older ones leave the log unsettled, as a line that a later one may add to.
pub const MAX_HELD_SEQS: usize = 1_000;

/// One delivery as the server described it.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    pub event: &'a str,
    pub seq: u64,
    pub created_ms: u64,
    pub duration_ms: u64,
    /// `(place, total)` in the emit list, when the server said.
    pub place: Option<(u64, u64)>,
    /// When it arrived, on the server's clock (Unix ms), and its delay in microseconds.
    pub arrival_ms: f64,
    pub delay_us: u64,
    /// How long its bytes waited in the kernel before the engine read them, when the read
    /// carried the kernel's receive stamp.
    pub read_delay_us: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
struct EmitRecord {
    total: u64,
    received: u64,
    created_ms: u64,
    duration_ms: MinMax,
    places: Vec<[u64; 2]>,
    delays: Delays,
    arrivals: (f64, f64),
    drain_us: Option<u64>,
    drain_samples: u64,
    /// When the newest delivery came (this host's monotonic clock): what settling reads.
    last_at: Instant,
}

/// Delays in microseconds as `(bucket, count)` pairs by bucket, each bucket the lowest
/// value of its HdrHistogram bucket at the summary's bounds and precision: what a histogram
/// would hold, kept in the few buckets a cycle uses rather than a whole histogram each.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Delays(Vec<(u64, u64)>);

/// Bits of exact value below a bucket's shift: 3 significant digits take 2,048 sub-buckets.
const SUB_BUCKET_BITS: u32 = 11;

/// The lowest value of `us`'s bucket in a histogram of bounds (1, `MAX_US`), 3 digits.
fn bucket_of(us: u64) -> u64 {
    let us = us.clamp(1, MAX_US);
    let shift = (64 - (us | ((1 << SUB_BUCKET_BITS) - 1)).leading_zeros()) - SUB_BUCKET_BITS;
    (us >> shift) << shift
}

impl Delays {
    pub fn record_n(&mut self, us: u64, n: u64) {
        let bucket = bucket_of(us);
        match self.0.binary_search_by_key(&bucket, |&(b, _)| b) {
            Ok(i) => self.0[i].1 += n,
            Err(i) => self.0.insert(i, (bucket, n)),
        }
    }

    fn absorb(&mut self, other: &Delays) {
        for &(bucket, n) in &other.0 {
            self.record_n(bucket, n);
        }
    }

    /// The delays as a histogram (into `scratch`, emptied first), encoded.
    fn encode(&self, scratch: &mut Histogram<u64>) -> String {
        scratch.reset();
        for &(bucket, n) in &self.0 {
            scratch.saturating_record_n(bucket, n);
        }
        encode_histogram(scratch)
    }

    /// Reads what `encode` wrote (an empty text: no delay).
    pub fn decode(text: &str) -> Result<Delays, String> {
        let mut delays = Delays::default();
        if text.is_empty() {
            return Ok(delays);
        }
        let h = decode_histogram(text)?;
        for v in h.iter_recorded() {
            delays.record_n(
                h.lowest_equivalent(v.value_iterated_to()),
                v.count_at_value(),
            );
        }
        Ok(delays)
    }
}

/// Emit records keyed by seq, then event name (a subscription names at most 16 events).
#[derive(Debug, Default)]
pub struct EmitLog {
    by_seq: BTreeMap<u64, Vec<(String, EmitRecord)>>,
    /// Per event: the newest cycle's `created_ms` seen and its gap to the one before (the
    /// emit interval seen), which the settle time follows.
    intervals: Vec<(String, u64, u64)>,
}

impl EmitLog {
    pub fn observe(&mut self, d: &Delivery) {
        self.observe_at(d, Instant::now());
    }

    fn observe_at(&mut self, d: &Delivery, now: Instant) {
        let events = self.by_seq.entry(d.seq).or_default();
        let known = events.iter().position(|(name, _)| name == d.event);
        let i = known.unwrap_or_else(|| {
            events.push((d.event.to_string(), EmitRecord::first(d, now)));
            events.len() - 1
        });
        events[i].1.add(d, now);
        if known.is_none() {
            self.saw_cycle(d.event, d.created_ms);
        }
    }

    fn saw_cycle(&mut self, event: &str, created_ms: u64) {
        match self.intervals.iter_mut().find(|(name, ..)| name == event) {
            Some((_, newest, gap)) if created_ms > *newest => {
                *gap = created_ms - *newest;
                *newest = created_ms;
            }
            Some(_) => {}
            None => self.intervals.push((event.to_string(), created_ms, 0)),
        }
    }

    /// How long a cycle of this log goes without a delivery before it has settled:
    /// `SETTLE_MIN`, or twice the longest emit interval seen, if longer.
    fn settle_time(&self) -> Duration {
        let gap_ms = self.intervals.iter().map(|&(_, _, gap)| gap).max();
        SETTLE_MIN.max(Duration::from_millis(2 * gap_ms.unwrap_or(0)))
    }

    pub fn merge(&mut self, other: EmitLog) {
        for (seq, events) in other.by_seq {
            for (name, record) in events {
                self.merge_record(seq, name, record);
            }
        }
    }

    /// Whether the log holds no record.
    pub fn is_empty(&self) -> bool {
        self.by_seq.is_empty()
    }

    fn merge_record(&mut self, seq: u64, event: String, record: EmitRecord) {
        let mine = self.by_seq.entry(seq).or_default();
        match mine.iter_mut().find(|(n, _)| *n == event) {
            Some((_, existing)) => existing.absorb(record),
            None => mine.push((event, record)),
        }
    }

    /// A log holding the records of output lines (another engine's, to merge with).
    pub fn from_lines(lines: impl IntoIterator<Item = EmitLine>) -> Result<EmitLog, String> {
        let mut log = EmitLog::default();
        for line in lines {
            let delays = Delays::decode(&line.delay_histogram)
                .map_err(|e| format!("emit line {} seq {}: {e}", line.event, line.seq))?;
            let record = EmitRecord {
                total: line.total,
                received: line.received,
                created_ms: line.created_ms,
                duration_ms: line.duration_ms,
                places: line.places,
                delays,
                arrivals: (line.first_arrival_ms, line.last_arrival_ms),
                drain_us: line.drain_us,
                drain_samples: line.drain_samples,
                last_at: Instant::now(),
            };
            log.merge_record(line.seq, line.event, record);
        }
        Ok(log)
    }

    /// The records as output lines, by seq then event name, places in order.
    pub fn into_lines(self) -> Vec<EmitLine> {
        let mut lines = Vec::new();
        let mut scratch = new_histogram();
        for (seq, mut events) in self.by_seq {
            events.sort_by(|a, b| a.0.cmp(&b.0));
            for (event, mut r) in events {
                r.places.sort_unstable();
                lines.push(EmitLine {
                    kind: "emit".into(),
                    event,
                    seq,
                    total: r.total,
                    received: r.received,
                    created_ms: r.created_ms,
                    duration_ms: r.duration_ms,
                    places: r.places,
                    delay_histogram: r.delays.encode(&mut scratch),
                    first_arrival_ms: round3(r.arrivals.0),
                    last_arrival_ms: round3(r.arrivals.1),
                    drain_us: r.drain_us,
                    drain_samples: r.drain_samples,
                });
            }
        }
        lines
    }

    /// Takes out the records whose (event, seq) `busy` does not hold, or whose seq is at
    /// most `floor`, into `out`.
    fn take_out(&mut self, busy: &BTreeSet<(u64, String)>, floor: Option<u64>, out: &mut EmitLog) {
        for (&seq, events) in self.by_seq.iter_mut() {
            let (held, settled) = std::mem::take(events).into_iter().partition(|(name, _)| {
                floor.is_none_or(|floor| seq > floor) && busy.contains(&(seq, name.clone()))
            });
            *events = held;
            for (name, record) in settled {
                out.merge_record(seq, name, record);
            }
        }
        self.by_seq.retain(|_, events| !events.is_empty());
    }
}

/// The cycles that have settled in every worker's log (no delivery of them for the longest
/// settle time of the logs), and the oldest beyond `MAX_HELD_SEQS` held seqs: taken out of
/// the logs and merged, one record per (event, seq). Each log is locked for the call.
pub fn take_settled(logs: &[Mutex<EmitLog>], now: Instant) -> EmitLog {
    let mut logs: Vec<_> = logs
        .iter()
        .map(|log| log.lock().unwrap_or_else(PoisonError::into_inner))
        .collect();
    let settle = logs.iter().map(|log| log.settle_time()).max();
    let settle = settle.unwrap_or(SETTLE_MIN);
    let (mut busy, mut held) = (BTreeSet::new(), BTreeSet::new());
    for log in &logs {
        for (&seq, events) in &log.by_seq {
            held.insert(seq);
            for (name, record) in events {
                if now.saturating_duration_since(record.last_at) < settle {
                    busy.insert((seq, name.clone()));
                }
            }
        }
    }
    let floor = held.iter().rev().nth(MAX_HELD_SEQS).copied();
    let mut out = EmitLog::default();
    for log in &mut logs {
        log.take_out(&busy, floor, &mut out);
    }
    out
}

impl EmitRecord {
    fn first(d: &Delivery, now: Instant) -> EmitRecord {
        EmitRecord {
            total: d.place.map_or(0, |(_, total)| total),
            received: 0,
            created_ms: d.created_ms,
            duration_ms: MinMax {
                min: d.duration_ms,
                max: d.duration_ms,
            },
            places: Vec::new(),
            delays: Delays::default(),
            arrivals: (d.arrival_ms, d.arrival_ms),
            drain_us: None,
            drain_samples: 0,
            last_at: now,
        }
    }

    fn add(&mut self, d: &Delivery, now: Instant) {
        self.last_at = now;
        self.received += 1;
        self.delays.record_n(d.delay_us, 1);
        self.arrivals = (
            self.arrivals.0.min(d.arrival_ms),
            self.arrivals.1.max(d.arrival_ms),
        );
        if let Some(waited) = d.read_delay_us {
            self.drain_us = Some(self.drain_us.map_or(waited, |d| d.max(waited)));
            self.drain_samples += 1;
        }
        self.duration_ms.min = self.duration_ms.min.min(d.duration_ms);
        self.duration_ms.max = self.duration_ms.max.max(d.duration_ms);
        if let Some((place, total)) = d.place {
            self.total = self.total.max(total);
            if sampled(place, self.total) && self.places.len() < MAX_PLACES {
                self.places.push([place, d.duration_ms]);
            }
        }
    }

    fn absorb(&mut self, other: EmitRecord) {
        self.total = self.total.max(other.total);
        self.received += other.received;
        self.created_ms = self.created_ms.min(other.created_ms);
        self.duration_ms.min = self.duration_ms.min.min(other.duration_ms.min);
        self.duration_ms.max = self.duration_ms.max.max(other.duration_ms.max);
        let room = MAX_PLACES.saturating_sub(self.places.len());
        self.places.extend(other.places.into_iter().take(room));
        self.delays.absorb(&other.delays);
        self.arrivals = (
            self.arrivals.0.min(other.arrivals.0),
            self.arrivals.1.max(other.arrivals.1),
        );
        self.drain_us = self.drain_us.max(other.drain_us);
        self.drain_samples += other.drain_samples;
        self.last_at = self.last_at.max(other.last_at);
    }
}

/// One emit cycle's deliveries received within one interval, on that interval's line (long
/// poll, comet, SSE and WebSocket; replayed SSE deliveries are not a cycle's), so that a
/// reader follows cycles as they happen: an (event, seq)'s `received` added over the lines
/// so far is its deliveries so far, and over the whole run its emit line's `received`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CycleTick {
    /// The event name.
    pub event: String,
    pub seq: u64,
    /// The server's `connections.total` (the largest any of these deliveries said).
    pub total: u64,
    /// Deliveries of the cycle received in this interval.
    pub received: u64,
    /// The server's `response.event.timings.created` (cycle start, ms since the epoch).
    pub created_ms: u64,
    /// The longest delay (`event_delay_us`) of these deliveries, µs.
    pub max_delay_us: u64,
}

/// Cycles listed on one interval line at most; a run emitting more seqs than this within one
/// interval has the deliveries of its oldest counted in `cycles_unlisted`.
pub const MAX_INTERVAL_CYCLES: usize = 256;

/// The cycles of one interval (a worker's, or their sum): bounded by `MAX_INTERVAL_CYCLES`
/// seqs, the newest kept, the dropped ones' deliveries counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IntervalCycles {
    by_seq: BTreeMap<u64, Vec<CycleTick>>,
    /// Deliveries of cycles dropped to keep the bound.
    pub unlisted: u64,
}

impl IntervalCycles {
    pub fn observe(&mut self, d: &Delivery) {
        self.add(
            CycleTick {
                event: String::new(),
                seq: d.seq,
                total: d.place.map_or(0, |(_, total)| total),
                received: 1,
                created_ms: d.created_ms,
                max_delay_us: d.delay_us,
            },
            d.event,
        );
    }

    /// Adds `tick` (named `event`: a delivery's name is borrowed until it is kept).
    fn add(&mut self, tick: CycleTick, event: &str) {
        let events = self.by_seq.entry(tick.seq).or_default();
        match events.iter_mut().find(|t| t.event == event) {
            Some(mine) => {
                mine.total = mine.total.max(tick.total);
                mine.received += tick.received;
                mine.created_ms = mine.created_ms.min(tick.created_ms);
                mine.max_delay_us = mine.max_delay_us.max(tick.max_delay_us);
            }
            None => events.push(CycleTick {
                event: event.to_string(),
                ..tick
            }),
        }
        while self.by_seq.len() > MAX_INTERVAL_CYCLES {
            let (_, dropped) = self.by_seq.pop_first().expect("over the bound");
            self.unlisted += dropped.iter().map(|t| t.received).sum::<u64>();
        }
    }

    /// Adds another interval's (or worker's) cycles into these: received summed, totals and
    /// delays the largest, `created_ms` the earliest.
    pub fn absorb(&mut self, ticks: impl IntoIterator<Item = CycleTick>, unlisted: u64) {
        for mut tick in ticks {
            let event = std::mem::take(&mut tick.event);
            self.add(tick, &event);
        }
        self.unlisted += unlisted;
    }

    /// The cycles by seq then event name.
    pub fn ticks(&self) -> Vec<CycleTick> {
        let mut ticks: Vec<CycleTick> = self.by_seq.values().flatten().cloned().collect();
        ticks.sort_by(|a, b| (a.seq, &a.event).cmp(&(b.seq, &b.event)));
        ticks
    }

    pub fn clear(&mut self) {
        self.by_seq.clear();
        self.unlisted = 0;
    }
}

/// A deterministic stride over the emit list: places 1, 1+k, 1+2k… with k chosen so that
/// at most `MAX_PLACES` of a list of `total` are kept, whichever worker received them.
fn sampled(place: u64, total: u64) -> bool {
    let stride = total.div_ceil(MAX_PLACES as u64).max(1);
    place >= 1 && (place - 1).is_multiple_of(stride)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(seq: u64, place: u64, total: u64) -> Delivery<'static> {
        Delivery {
            event: "e1",
            seq,
            created_ms: 1000 + seq,
            duration_ms: place / 10,
            place: Some((place, total)),
            arrival_ms: 2000.5 + place as f64,
            delay_us: 1000 * (1000 + place),
            read_delay_us: (place % 2 == 1).then_some(place * 7),
        }
    }

    #[test]
    fn a_long_emit_list_is_sampled_by_stride() {
        let mut log = EmitLog::default();
        for place in 1..=1000 {
            log.observe(&delivery(7, place, 1000));
        }
        let lines = log.into_lines();
        assert_eq!(lines.len(), 1);
        let line = &lines[0];
        assert_eq!(
            (line.total, line.received, line.created_ms),
            (1000, 1000, 1007)
        );
        assert_eq!((line.duration_ms.min, line.duration_ms.max), (0, 100));
        assert_eq!(line.places.len(), 200);
        assert_eq!(line.places[0], [1, 0]);
        assert_eq!(line.places[1], [6, 0]);
        assert_eq!(line.places[199], [996, 99]);
    }

    #[test]
    fn workers_merge_into_one_record_per_seq() {
        let (mut a, mut b) = (EmitLog::default(), EmitLog::default());
        for place in 1..=4 {
            let log = if place % 2 == 0 { &mut a } else { &mut b };
            log.observe(&delivery(1, place, 4));
        }
        a.merge(b);
        let lines = a.into_lines();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].received, 4);
        assert_eq!(lines[0].places, vec![[1, 0], [2, 0], [3, 0], [4, 0]]);
    }

    /// Two workers' logs, as the coordinator shares them.
    fn two_logs() -> [Mutex<EmitLog>; 2] {
        [Mutex::default(), Mutex::default()]
    }

    fn observe(log: &Mutex<EmitLog>, d: &Delivery, at: Instant) {
        log.lock().unwrap().observe_at(d, at);
    }

    fn held(log: &Mutex<EmitLog>) -> Vec<u64> {
        log.lock().unwrap().by_seq.keys().copied().collect()
    }

    #[test]
    fn a_settled_cycle_leaves_every_workers_log_as_one_record() {
        let logs = two_logs();
        let t0 = Instant::now();
        for place in 1..=4 {
            observe(&logs[(place % 2) as usize], &delivery(1, place, 4), t0);
        }
        observe(&logs[0], &delivery(2, 1, 4), t0 + Duration::from_secs(5));
        // Seq 1 has settled in worker 0 only as long as worker 1 has a delivery of it.
        observe(&logs[1], &delivery(1, 5, 5), t0 + Duration::from_secs(3));
        let early = take_settled(&logs, t0 + SETTLE_MIN + Duration::from_secs(2));
        assert!(early.is_empty(), "seq 1 had a delivery 9 s before");
        let settled = take_settled(&logs, t0 + SETTLE_MIN + Duration::from_secs(3));
        let lines = settled.into_lines();
        assert_eq!(
            lines
                .iter()
                .map(|l| (l.seq, l.received))
                .collect::<Vec<_>>(),
            [(1, 5)]
        );
        assert_eq!((held(&logs[0]), held(&logs[1])), (vec![2], vec![]));
    }

    #[test]
    fn a_late_delivery_is_a_further_line_that_adds_up_to_the_whole_cycle() {
        let logs = two_logs();
        let t0 = Instant::now();
        let mut whole = EmitLog::default();
        for place in 1..=6 {
            let d = delivery(4, place, 6);
            let late = place == 6;
            let at = t0 + if late { SETTLE_MIN * 2 } else { Duration::ZERO };
            if late {
                let first = take_settled(&logs, at).into_lines();
                assert_eq!(first.iter().map(|l| l.received).collect::<Vec<_>>(), [5]);
                observe(&logs[1], &d, at);
                let second = take_settled(&logs, at + SETTLE_MIN).into_lines();
                assert_eq!(second.iter().map(|l| l.received).collect::<Vec<_>>(), [1]);
                let read = EmitLog::from_lines(first.into_iter().chain(second)).unwrap();
                whole.observe_at(&d, at);
                assert_eq!(read.into_lines(), whole.into_lines());
                assert!(held(&logs[0]).is_empty() && held(&logs[1]).is_empty());
                return;
            }
            observe(&logs[(place % 2) as usize], &d, at);
            whole.observe_at(&d, at);
        }
        unreachable!("the late delivery returns");
    }

    #[test]
    fn the_held_cycles_stay_bounded_over_ten_thousand_cycles() {
        let logs = two_logs();
        let t0 = Instant::now();
        let (mut printed, mut most_held) = (0, 0);
        // One cycle a second, each reaching both workers; a settle pass a second.
        for seq in 1..=10_000u64 {
            let now = t0 + Duration::from_secs(seq);
            for (worker, log) in logs.iter().enumerate() {
                let mut d = delivery(seq, worker as u64 + 1, 2);
                d.created_ms = 1000 * seq;
                observe(log, &d, now);
            }
            for line in take_settled(&logs, now).into_lines() {
                assert_eq!((line.seq, line.received), (printed + 1, 2));
                printed += 1;
            }
            most_held = most_held.max(held(&logs[0]).len().max(held(&logs[1]).len()));
        }
        // Settle 10 s at one cycle a second (the interval seen, 1 s, doubled is less).
        assert_eq!(most_held, 10);
        assert_eq!(printed, 10_000 - 10);
    }

    #[test]
    fn a_slow_emitter_holds_its_cycles_for_twice_its_interval() {
        let logs = [Mutex::default()];
        let t0 = Instant::now();
        for seq in 1..=3u64 {
            let mut d = delivery(seq, 1, 1);
            d.created_ms = 30_000 * seq;
            observe(&logs[0], &d, t0 + Duration::from_secs(30 * seq));
        }
        // 30 s between cycles: a 60 s settle time; seq 3 came 59 s before.
        let taken = take_settled(&logs, t0 + Duration::from_secs(90 + 59)).into_lines();
        assert_eq!(taken.iter().map(|l| l.seq).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(held(&logs[0]), [3]);
    }

    #[test]
    fn beyond_the_held_seqs_the_oldest_leave_unsettled() {
        let logs = [Mutex::default()];
        let now = Instant::now();
        for seq in 1..=(MAX_HELD_SEQS as u64 + 5) {
            observe(&logs[0], &delivery(seq, 1, 1), now);
        }
        let taken = take_settled(&logs, now).into_lines();
        assert_eq!(
            taken.iter().map(|l| l.seq).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
        assert_eq!(held(&logs[0]).len(), MAX_HELD_SEQS);
    }

    /// Delays from `delays`, as one cycle's deliveries split between two workers by `split`.
    fn split_logs(delays: &[u64], split: impl Fn(usize) -> bool) -> (EmitLog, EmitLog) {
        let (mut a, mut b) = (EmitLog::default(), EmitLog::default());
        for (i, &us) in delays.iter().enumerate() {
            let mut d = delivery(3, i as u64 + 1, delays.len() as u64);
            d.delay_us = us;
            d.arrival_ms = 5000.0 + i as f64;
            d.read_delay_us = Some(us / 100);
            let log = if split(i) { &mut a } else { &mut b };
            log.observe(&d);
        }
        (a, b)
    }

    #[test]
    fn two_workers_cycle_records_merge_to_one_histogram_of_every_delay() {
        // Skewed shares: one worker got the fast deliveries, the other the slow tail.
        let delays: Vec<u64> = (0..3000u64)
            .map(|i| 1000 * (5 + i % 40 + if i % 97 == 0 { 4000 } else { 0 }))
            .collect();
        let (mut a, b) = split_logs(&delays, |i| delays[i] < 30_000);
        a.merge(b);
        let merged = a.into_lines();
        let mut all = new_histogram();
        for &us in &delays {
            crate::hdr::record_us(&mut all, us);
        }
        let got = decode_histogram(&merged[0].delay_histogram).unwrap();
        assert_eq!(got, all, "the merge is the histogram of every delay");
        for q in [0.5, 0.99, 0.999] {
            assert_eq!(got.value_at_quantile(q), all.value_at_quantile(q));
        }
        let line = &merged[0];
        assert_eq!(
            (line.first_arrival_ms, line.last_arrival_ms),
            (5000.0, 7999.0)
        );
        assert_eq!((line.drain_us, line.drain_samples), (Some(40_440), 3000));
    }

    #[test]
    fn emit_lines_read_back_and_merge_as_the_records_did() {
        let delays: Vec<u64> = (1..=500u64).map(|i| i * 12_000).collect();
        let (a, b) = split_logs(&delays, |i| i % 3 == 0);
        let (mut direct, lines_b) = (EmitLog::default(), b.into_lines());
        direct.merge(EmitLog::from_lines(a.into_lines()).unwrap());
        let mut via_lines = direct;
        via_lines.merge(EmitLog::from_lines(lines_b).unwrap());
        let line = &via_lines.into_lines()[0];
        let (whole, _) = split_logs(&delays, |_| true);
        let want = &whole.into_lines()[0];
        assert_eq!(line.delay_histogram, want.delay_histogram);
        assert_eq!((line.received, line.drain_us), (500, Some(60_000)));
        assert!(EmitLog::from_lines([EmitLine {
            delay_histogram: "not base64!".into(),
            ..want.clone()
        }])
        .is_err());
    }

    #[test]
    fn buckets_are_the_histograms_own() {
        let h = new_histogram();
        for us in (0..40)
            .map(|k| 1u64 << k)
            .flat_map(|p| [p - 1, p, p + 1, p * 3 / 2])
        {
            let clamped = us.clamp(1, MAX_US);
            assert_eq!(bucket_of(us), h.lowest_equivalent(clamped), "{us}");
        }
    }

    #[test]
    fn an_intervals_cycles_add_up_per_seq_and_keep_only_the_newest() {
        let (mut a, mut b) = (IntervalCycles::default(), IntervalCycles::default());
        for place in 1..=5 {
            let mut d = delivery(4, place, 5);
            d.delay_us = 1000 * place;
            if place % 2 == 0 { &mut a } else { &mut b }.observe(&d);
        }
        a.absorb(b.ticks(), b.unlisted);
        let ticks = a.ticks();
        assert_eq!(ticks.len(), 1);
        let t = &ticks[0];
        assert_eq!(
            (
                t.event.as_str(),
                t.seq,
                t.total,
                t.received,
                t.created_ms,
                t.max_delay_us
            ),
            ("e1", 4, 5, 5, 1004, 5000)
        );
        for seq in 10..(10 + MAX_INTERVAL_CYCLES as u64 + 2) {
            a.observe(&delivery(seq, 1, 1));
        }
        let ticks = a.ticks();
        assert_eq!(ticks.len(), MAX_INTERVAL_CYCLES);
        assert_eq!(ticks[0].seq, 12, "the oldest seqs go first");
        assert_eq!(
            a.unlisted,
            5 + 2,
            "seq 4's five deliveries, seqs 10 and 11's one each"
        );
        a.clear();
        assert_eq!((a.ticks().len(), a.unlisted), (0, 0));
    }

    #[test]
    fn a_cycle_read_without_stamps_has_no_drain_time() {
        let mut log = EmitLog::default();
        let mut d = delivery(1, 1, 1);
        d.read_delay_us = None;
        log.observe(&d);
        let line = &log.into_lines()[0];
        assert_eq!((line.drain_us, line.drain_samples), (None, 0));
    }
}
