//! Per-emit records for every push transport (seed 004: emit duration against place in the
//! emit list, requests per emit cycle; issue 19: each cycle's delivery delays, arrivals and
//! the engine's drain time, so that a test's delay percentiles can be taken over the cycles
//! of its window alone). Each worker aggregates the deliveries it received per (event, seq);
//! the workers' logs are merged at the end, and generators' emit lines by `--merge`, exactly:
//! counts add, delay buckets add, spans and maxima widen. Memory is bounded whatever the run
//! length: at most `MAX_SEQS` seqs are kept (the newest), at most `MAX_PLACES` sampled places
//! per seq, and the delays of a seq as (bucket, count) pairs, one per HdrHistogram bucket
//! that a delivery fell in (a cycle's deliveries span few buckets).

use std::collections::BTreeMap;

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
/// printed before the summary line. At most the newest 10,000 seqs are reported.
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
/// Seqs kept; older ones are dropped first.
pub const MAX_SEQS: usize = 10_000;

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
}

impl EmitLog {
    pub fn observe(&mut self, d: &Delivery) {
        let events = self.by_seq.entry(d.seq).or_default();
        let record = match events.iter().position(|(name, _)| name == d.event) {
            Some(i) => &mut events[i].1,
            None => {
                events.push((d.event.to_string(), EmitRecord::first(d)));
                &mut events.last_mut().expect("just pushed").1
            }
        };
        record.add(d);
        self.trim();
    }

    pub fn merge(&mut self, other: EmitLog) {
        for (seq, events) in other.by_seq {
            for (name, record) in events {
                self.merge_record(seq, name, record);
            }
        }
        self.trim();
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
            };
            log.merge_record(line.seq, line.event, record);
        }
        log.trim();
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

    fn trim(&mut self) {
        while self.by_seq.len() > MAX_SEQS {
            self.by_seq.pop_first();
        }
    }
}

impl EmitRecord {
    fn first(d: &Delivery) -> EmitRecord {
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
        }
    }

    fn add(&mut self, d: &Delivery) {
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

    #[test]
    fn only_the_newest_seqs_are_kept() {
        let mut log = EmitLog::default();
        for seq in 1..=(MAX_SEQS as u64 + 50) {
            log.observe(&delivery(seq, 1, 1));
        }
        let lines = log.into_lines();
        assert_eq!(lines.len(), MAX_SEQS);
        assert_eq!(lines[0].seq, 51);
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
