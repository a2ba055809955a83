//! Per-emit records for long poll and comet (seed 004: emit duration against place in the
//! emit list, requests per emit cycle). Each worker aggregates the deliveries it received
//! per (event, seq); the workers' logs are merged at the end. Memory is bounded whatever the
//! run length: at most `MAX_SEQS` seqs are kept (the newest), and at most `MAX_PLACES`
//! sampled places per seq.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
}

#[derive(Debug, Clone, PartialEq)]
struct EmitRecord {
    total: u64,
    received: u64,
    created_ms: u64,
    duration_ms: MinMax,
    places: Vec<[u64; 2]>,
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
    pub fn from_lines(lines: impl IntoIterator<Item = EmitLine>) -> EmitLog {
        let mut log = EmitLog::default();
        for line in lines {
            let record = EmitRecord {
                total: line.total,
                received: line.received,
                created_ms: line.created_ms,
                duration_ms: line.duration_ms,
                places: line.places,
            };
            log.merge_record(line.seq, line.event, record);
        }
        log.trim();
        log
    }

    /// The records as output lines, by seq then event name, places in order.
    pub fn into_lines(self) -> Vec<EmitLine> {
        let mut lines = Vec::new();
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
        }
    }

    fn add(&mut self, d: &Delivery) {
        self.received += 1;
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
}
