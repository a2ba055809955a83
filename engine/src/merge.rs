//! `serverlab-load --merge FILE...`: the outputs of several engines that ran one test together
//! (each generator's complete JSON Lines: interval lines, emit lines, one summary) made into
//! one output of the same shape. Nothing is averaged: counts add up, HdrHistograms are added
//! and their percentiles read again, so a merged p99 is the p99 of every sample of every
//! generator; rates are the summed counts over the longest duration, since the generators
//! started at one instant.

use std::path::Path;

use hdrhistogram::Histogram;

use crate::emits::EmitLog;
use crate::report::{
    decode_histogram, encode_histogram, round3, EmitLine, IntervalLine, Percentiles, Summary,
};
use crate::stats::{Snapshot, Timing, Window};

/// One engine's output, or several merged.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub intervals: Vec<IntervalLine>,
    pub emits: Vec<EmitLine>,
    pub summary: Summary,
}

/// Why outputs could not be merged; one line meant for the user.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MergeError(String);

/// Reads every file and merges them, in the order given.
pub fn merge_files(paths: &[impl AsRef<Path>]) -> Result<Output, MergeError> {
    let mut named = Vec::new();
    for path in paths {
        let path = path.as_ref();
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| MergeError(format!("{name}: {e}")))?;
        let output = Output::parse(&text).map_err(|e| MergeError(format!("{name}: {e}")))?;
        named.push((name, output));
    }
    merge(&named)
}

impl Output {
    /// One engine's `--json` output: interval and emit lines, then exactly one summary line.
    pub fn parse(text: &str) -> Result<Output, String> {
        let (mut intervals, mut emits, mut summary) = (Vec::new(), Vec::new(), None);
        for (index, line) in text.lines().enumerate() {
            let at = |why: String| format!("line {}: {why}", index + 1);
            if line.trim().is_empty() {
                continue;
            }
            if summary.is_some() {
                return Err(at("a line after the summary".into()));
            }
            let value: serde_json::Value =
                serde_json::from_str(line).map_err(|e| at(e.to_string()))?;
            let kind = value
                .get("type")
                .and_then(|t| t.as_str())
                .unwrap_or_default()
                .to_string();
            let shape = |e: serde_json::Error| at(format!("not an engine's {kind} line: {e}"));
            match kind.as_str() {
                "interval" => intervals.push(serde_json::from_value(value).map_err(shape)?),
                "emit" => emits.push(serde_json::from_value(value).map_err(shape)?),
                "summary" => summary = Some(serde_json::from_value(value).map_err(shape)?),
                // Its lines before and after count from different starts: a spread load
                // warms up in a run apart and measures without a warm-up phase.
                "measure" => {
                    return Err(at(
                        "a measure line: a run with a warm-up phase (warmup_max_s) is not merged"
                            .into(),
                    ))
                }
                other => return Err(at(format!("unknown line type {other:?}"))),
            }
        }
        let summary = summary.ok_or("no summary line: not a complete engine output")?;
        Ok(Output {
            intervals,
            emits,
            summary,
        })
    }
}

/// Merges named outputs (the names only label what is wrong, or invalid, in which input).
pub fn merge(named: &[(String, Output)]) -> Result<Output, MergeError> {
    let Some((_, first)) = named.first() else {
        return Err(MergeError("nothing to merge".into()));
    };
    for (name, output) in named {
        let s = &output.summary;
        if s.version != first.summary.version {
            return Err(MergeError(format!(
                "{name}: output version {} differs from the first input's {}",
                s.version, first.summary.version
            )));
        }
        if s.plan.interval_ms != first.summary.plan.interval_ms {
            return Err(MergeError(format!(
                "{name}: interval_ms {} differs from the first input's {}: intervals cannot be merged one by one",
                s.plan.interval_ms, first.summary.plan.interval_ms
            )));
        }
    }
    let groups = group_names(&first.summary);
    for (name, output) in named {
        let theirs = group_names(&output.summary);
        if theirs != groups {
            return Err(MergeError(format!(
                "{name}: client groups {theirs:?} differ from the first input's {groups:?}: groups are merged by name"
            )));
        }
    }
    let mut merged = Output {
        intervals: merge_intervals(named)?,
        emits: merge_emits(named)?,
        summary: merge_summaries(named)?,
    };
    for group in groups {
        let part = merge(&group_part(named, &group)?)?;
        for (line, own) in merged.intervals.iter_mut().zip(part.intervals) {
            line.groups.insert(group.clone(), own);
        }
        let mut summary = part.summary;
        // The process's CPU is not split by group (`Summary::groups`).
        summary.floor_us = None;
        merged.summary.groups.insert(group, summary);
    }
    Ok(merged)
}

/// The names of an output's client groups, in order (none without groups).
fn group_names(summary: &Summary) -> Vec<String> {
    summary.groups.keys().cloned().collect()
}

/// One client group's part of each output: its interval lines and its summary, as an
/// output of its own, named after its input and the group.
fn group_part(
    named: &[(String, Output)],
    group: &str,
) -> Result<Vec<(String, Output)>, MergeError> {
    named
        .iter()
        .map(|(name, output)| {
            let name = format!("{name}: groups[{group}]");
            let lines = output.intervals.iter().enumerate().map(|(k, line)| {
                line.groups.get(group).cloned().ok_or_else(|| {
                    MergeError(format!("{name}: interval {} has no line of its own", k + 1))
                })
            });
            let part = Output {
                intervals: lines.collect::<Result<_, _>>()?,
                emits: Vec::new(),
                summary: output.summary.groups[group].clone(),
            };
            Ok((name, part))
        })
        .collect()
}

/// Interval k of every generator together: counts summed, each generator's running total
/// carried past its last line, rps recomputed from the summed answers, the percentiles read
/// again from the generators' interval histograms added up.
fn merge_intervals(named: &[(String, Output)]) -> Result<Vec<IntervalLine>, MergeError> {
    let longest = named
        .iter()
        .map(|(_, o)| o.intervals.len())
        .max()
        .unwrap_or(0);
    let mut totals = vec![0u64; named.len()];
    let mut window = Window::default();
    (0..longest)
        .map(|k| {
            let nothing = Snapshot::default();
            window.reset();
            let mut line = IntervalLine::between(&nothing, &nothing, 0.0, 0.0, &window);
            for (total, (name, output)) in totals.iter_mut().zip(named) {
                let Some(l) = output.intervals.get(k) else {
                    continue;
                };
                line.elapsed_s = line.elapsed_s.max(l.elapsed_s);
                line.interval_s = line.interval_s.max(l.interval_s);
                line.completed += l.completed;
                line.answered += l.answered;
                line.ok += l.ok;
                line.errors.add(&l.errors);
                line.open_connections += l.open_connections;
                line.traffic.add(&l.traffic);
                line.events += l.events;
                l.add_window_into(&mut window)
                    .map_err(|e| MergeError(format!("{name}: interval {}: {e}", k + 1)))?;
                *total = l.completed_total;
            }
            line.completed_total = totals.iter().sum();
            line.rps = round3(line.answered as f64 / line.interval_s.max(1e-9));
            line.set_window(&window);
            Ok(line)
        })
        .collect()
}

/// Emit records per (event, seq): deliveries summed, sampled places pooled, duration ranges
/// widened, the earliest `created_ms` (all on the server's clock), delay histograms added,
/// the earliest first and latest last arrival, the longest drain.
fn merge_emits(named: &[(String, Output)]) -> Result<Vec<EmitLine>, MergeError> {
    let mut log = EmitLog::default();
    for (name, output) in named {
        let theirs = EmitLog::from_lines(output.emits.iter().cloned())
            .map_err(|e| MergeError(format!("{name}: {e}")))?;
        log.merge(theirs);
    }
    Ok(log.into_lines())
}

fn merge_summaries(named: &[(String, Output)]) -> Result<Summary, MergeError> {
    let mut merged = named[0].1.summary.clone();
    let mut io = Vec::new();
    let mut waits = Vec::new();
    let mut invalid_reasons = Vec::new();
    let mut scheduled: Option<f64> = None;
    for (index, (name, output)) in named.iter().enumerate() {
        let s = &output.summary;
        invalid_reasons.extend(s.invalid_reasons.iter().map(|r| format!("{name}: {r}")));
        for part in s.io_backend.split('+').filter(|p| !p.is_empty()) {
            if !io.contains(&part) {
                io.push(part);
            }
        }
        if !waits.contains(&s.wait.as_str()) {
            waits.push(s.wait.as_str());
        }
        if let Some(rate) = s.intended_rate {
            *scheduled.get_or_insert(0.0) += rate * s.duration_s;
        }
        if index > 0 {
            add_summary(&mut merged, s);
        }
    }
    merged.valid = named.iter().all(|(_, o)| o.summary.valid);
    merged.invalid_reasons = invalid_reasons;
    merged.io_backend = io.join("+");
    merged.wait = waits.join("+");
    let duration = merged.duration_s.max(1e-9);
    merged.rps = round3(merged.attempts.answered as f64 / duration);
    merged.achieved_rate = round3(merged.attempts.started as f64 / duration);
    merged.intended_rate = scheduled.map(|n| round3(n / duration));
    merged.client_cpu_s = round3(merged.client_cpu_user_s + merged.client_cpu_system_s);
    add_histograms(&mut merged, named)?;
    Ok(merged.with_floor())
}

/// Adds `s`'s counts into `merged`; spans and instants take the widest.
fn add_summary(merged: &mut Summary, s: &Summary) {
    merged.stopped_early |= s.stopped_early;
    merged.generators += s.generators;
    merged.attempts.add(&s.attempts);
    merged.errors.add(&s.errors);
    for (class, n) in &s.status {
        *merged.status.entry(class.clone()).or_default() += n;
    }
    merged.duration_s = merged.duration_s.max(s.duration_s);
    merged.events.add(&s.events);
    merged.traffic.add(&s.traffic);
    merged.client_cpu_user_s = round3(merged.client_cpu_user_s + s.client_cpu_user_s);
    merged.client_cpu_system_s = round3(merged.client_cpu_system_s + s.client_cpu_system_s);
    merged.spin_cpu_s = round3(merged.spin_cpu_s + s.spin_cpu_s);
    merged.threads += s.threads;
    merged.paths = merged.paths.max(s.paths);
    merged.started_at_ms = merged.started_at_ms.min(s.started_at_ms);
    merged.start_late_ms = merged.start_late_ms.max(s.start_late_ms);
    if merged.clock_offset_ms != s.clock_offset_ms {
        merged.clock_offset_ms = None;
    }
}

/// Each histogram of the merged summary is the sum of the inputs' (decoded, added,
/// encoded again), and its percentiles are read from that sum.
fn add_histograms(merged: &mut Summary, named: &[(String, Output)]) -> Result<(), MergeError> {
    let mut sums: Vec<Option<Histogram<u64>>> = vec![None; Timing::N];
    for (name, output) in named {
        let mut timings = output.summary.timings.clone();
        for (sum, (_, text)) in sums.iter_mut().zip(timings.pairs_mut()) {
            let h = decode_histogram(text)
                .map_err(|e| MergeError(format!("{name}: summary histogram {e}")))?;
            match sum {
                Some(sum) => sum
                    .add(&h)
                    .map_err(|e| MergeError(format!("{name}: histogram out of range: {e:?}")))?,
                None => *sum = Some(h),
            }
        }
    }
    for (sum, (percentiles, text)) in sums.into_iter().zip(merged.timings.pairs_mut()) {
        let sum = sum.expect("one input at least");
        *percentiles = Percentiles::of(&sum);
        *text = encode_histogram(&sum);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hdr::record_us;
    use crate::plan::Plan;
    use crate::report::SummaryInput;
    use crate::stats::{Attempts, ErrorKind, Errors, Histograms};

    /// One generator's output: its latency and connect samples, and its counts.
    fn run(latencies: &[u64], connects: &[u64], duration_s: f64, intervals: &[u64]) -> Output {
        let mut h = Histograms::default();
        for &us in latencies {
            h.record(Timing::Latency, us);
            h.record(Timing::Service, us / 2);
        }
        for &us in connects {
            h.record(Timing::Connect, us);
        }
        let n = latencies.len() as u64;
        let mut snapshot = Snapshot {
            attempts: Attempts {
                requests: n,
                answered: n,
                started: n + 1,
                ok: n - 1,
            },
            errors: Errors::from_counts(&ErrorKind::ALL.map(|k| u64::from(k == ErrorKind::Status))),
            status_classes: [0, n - 1, 0, 1, 0],
            ..Default::default()
        };
        snapshot.traffic.bytes_read = 100 * n;
        let mut plan = Plan::for_target("http://127.0.0.1:1/");
        let rate = n as f64 / duration_s;
        plan.pacer = crate::plan::PacerSpec::Open(crate::plan::OpenSpec::at(rate));
        let summary = Summary::build(SummaryInput {
            snapshot: &snapshot,
            histograms: &h,
            duration_s,
            intended_rate: Some(n as f64 / duration_s),
            cpu: (0.25, 0.125),
            invalid_reasons: Vec::new(),
            stopped_early: false,
            started_at_ms: 1_700_000_000_000.0,
            start_late_ms: 0.0,
            paths: 1,
            plan: &plan,
            threads: 2,
            io_backend: "epoll".into(),
            wait: Default::default(),
            warmup: None,
        });
        let mut prev = Snapshot::default();
        let intervals = intervals
            .iter()
            .enumerate()
            .map(|(k, &completed)| {
                let mut now = Snapshot {
                    open_connections: 3,
                    ..Default::default()
                };
                now.attempts.requests = prev.attempts.requests + completed;
                now.attempts.answered = prev.attempts.answered + completed;
                // This interval's answers all took the run's first latency.
                let mut window = Window::default();
                for _ in 0..completed {
                    record_us(&mut window.latency, latencies[0]);
                }
                let line = IntervalLine::between(&prev, &now, k as f64 + 1.0, 1.0, &window);
                prev = now;
                line
            })
            .collect();
        Output {
            intervals,
            emits: Vec::new(),
            summary,
        }
    }

    fn named(outputs: Vec<Output>) -> Vec<(String, Output)> {
        let names = (0..).map(|i| format!("generator-{i}.jsonl"));
        names.zip(outputs).collect()
    }

    /// `whole` with client groups: each named group holds one of `parts`, lines and summary.
    fn grouped(mut whole: Output, parts: Vec<(&str, Output)>) -> Output {
        for (name, part) in parts {
            for (line, own) in whole.intervals.iter_mut().zip(part.intervals) {
                line.groups.insert(name.into(), own);
            }
            whole.summary.groups.insert(name.into(), part.summary);
        }
        whole
    }

    #[test]
    fn groups_merge_by_name_each_from_its_own_counts_and_histograms() {
        let (fast, slow): (Vec<u64>, Vec<u64>) =
            ((1..=50).collect(), (1..=5).map(|i| i * 90_000).collect());
        let generator = |extra: u64| {
            let fast_more: Vec<u64> = fast.iter().map(|us| us + extra).collect();
            let both: Vec<u64> = fast_more.iter().chain(&slow).copied().collect();
            grouped(
                run(&both, &[], 2.0, &[3, 2]),
                vec![
                    ("fast", run(&fast_more, &[], 2.0, &[3, 2])),
                    ("slow", run(&slow, &[], 2.0, &[1, 1])),
                ],
            )
        };
        let merged = merge(&named(vec![generator(0), generator(1_000)])).unwrap();
        let slow_group = &merged.summary.groups["slow"];
        assert_eq!(slow_group.attempts.answered, 10);
        assert_eq!(
            slow_group.timings.latency_us.p50,
            merge(&named(vec![
                run(&slow, &[], 2.0, &[1, 1]),
                run(&slow, &[], 2.0, &[1, 1])
            ]))
            .unwrap()
            .summary
            .timings
            .latency_us
            .p50
        );
        let fast_group = &merged.summary.groups["fast"];
        assert_eq!(fast_group.attempts.answered, 100);
        assert!(
            fast_group.timings.latency_us.max < 2_000,
            "no slow sample in the fast group"
        );
        assert_eq!(fast_group.floor_us, None);
        assert_eq!(merged.intervals[0].groups["fast"].completed, 6);
        assert_eq!(merged.intervals[1].groups["slow"].completed, 2);
    }

    #[test]
    fn outputs_whose_groups_differ_are_refused_by_name() {
        let plain = run(&[10], &[], 1.0, &[1]);
        let with = grouped(plain.clone(), vec![("a", plain.clone())]);
        let err = merge(&named(vec![with, plain])).unwrap_err().to_string();
        assert_eq!(
            err,
            "generator-1.jsonl: client groups [] differ from the first input's [\"a\"]: groups are merged by name"
        );
    }

    #[test]
    fn merged_percentiles_are_those_of_one_histogram_holding_every_sample() {
        let a: Vec<u64> = (1..=900).map(|i| i * 7).collect();
        let b: Vec<u64> = (1..=100).map(|i| 40_000 + i * 1_000).collect();
        let merged = merge(&named(vec![
            run(&a, &[5, 9], 2.0, &[]),
            run(&b, &[700], 2.5, &[]),
        ]))
        .unwrap()
        .summary;
        let mut both = Histograms::default();
        for &us in a.iter().chain(&b) {
            both.record(Timing::Latency, us);
        }
        let (merged, both) = (merged.timings, &both[Timing::Latency]);
        assert_eq!(merged.latency_us, Percentiles::of(both));
        // Averaging the two p99s would say about 37 ms; every sample together says 130 ms.
        assert_eq!(merged.latency_us.p99, both.value_at_quantile(0.99));
        assert!(merged.latency_us.p99 > 100_000, "{:?}", merged.latency_us);
        let decoded = decode_histogram(&merged.histogram).unwrap();
        assert_eq!(&decoded, both);
        assert_eq!((merged.connect_us.count, merged.connect_us.max), (3, 700));
        assert_eq!(merged.service_us.count, 1000);
        assert_eq!(
            merged.event_delay_us,
            Percentiles::default(),
            "empty stays empty"
        );
    }

    #[test]
    fn counts_add_and_rates_come_from_the_sums_over_the_longest_run() {
        let a = run(&[10; 300], &[], 2.0, &[]);
        let b = run(&[10; 100], &[], 2.5, &[]);
        let s = merge(&named(vec![a, b])).unwrap().summary;
        let a = s.attempts;
        assert_eq!(
            (a.requests, a.answered, a.started, a.ok),
            (400, 400, 402, 398)
        );
        assert_eq!(
            (s.errors.status, s.status["2xx"], s.status["4xx"]),
            (2, 398, 2)
        );
        assert_eq!(
            (s.traffic.bytes_read, s.threads, s.generators),
            (40_000, 4, 2)
        );
        assert_eq!(s.duration_s, 2.5);
        assert_eq!(s.rps, 160.0);
        assert_eq!(s.achieved_rate, 160.8);
        // 150/s for 2 s and 40/s for 2.5 s: 400 arrivals over 2.5 s.
        assert_eq!(s.intended_rate, Some(160.0));
        assert_eq!((s.client_cpu_s, s.client_cpu_user_s), (0.75, 0.5));
        assert_eq!(s.io_backend, "epoll");
        assert!(s.valid);
    }

    #[test]
    fn merged_rates_count_answers_and_never_failed_attempts() {
        let a = run(&[10; 300], &[], 2.0, &[]);
        let mut b = run(&[10; 100], &[], 2.0, &[]);
        b.summary.attempts.answered = 0;
        b.summary.errors.connect = 100;
        let s = merge(&named(vec![a, b])).unwrap().summary;
        let a = s.attempts;
        assert_eq!((a.requests, a.answered, s.errors.connect), (400, 300, 100));
        assert_eq!(s.rps, 150.0);
    }

    #[test]
    fn any_invalid_input_makes_the_merge_invalid_with_its_reasons() {
        let a = run(&[10; 3], &[], 1.0, &[]);
        let mut b = run(&[10; 3], &[], 1.0, &[]);
        b.summary.valid = false;
        b.summary.invalid_reasons = vec!["3 connects found no free local port".into()];
        b.summary.io_backend = "io_uring".into();
        b.summary.clock_offset_ms = Some(-12.5);
        b.summary.started_at_ms -= 2.0;
        b.summary.start_late_ms = 40.0;
        let s = merge(&named(vec![a, b])).unwrap().summary;
        assert!(!s.valid);
        assert_eq!(
            s.invalid_reasons,
            vec!["generator-1.jsonl: 3 connects found no free local port"]
        );
        assert_eq!(s.io_backend, "epoll+io_uring");
        assert_eq!(s.clock_offset_ms, None, "offsets differ");
        assert_eq!(
            (s.started_at_ms, s.start_late_ms),
            (1_699_999_999_998.0, 40.0)
        );
    }

    #[test]
    fn intervals_merge_one_by_one_and_carry_a_finished_generators_total() {
        let a = run(&[10; 6], &[], 3.0, &[1, 2, 3]);
        let b = run(&[1000; 4], &[], 2.0, &[4, 5]);
        let lines = merge(&named(vec![a, b])).unwrap().intervals;
        let got: Vec<_> = lines
            .iter()
            .map(|l| {
                (
                    l.elapsed_s,
                    l.completed,
                    l.completed_total,
                    l.open_connections,
                )
            })
            .collect();
        assert_eq!(got, vec![(1.0, 5, 5, 6), (2.0, 7, 12, 6), (3.0, 3, 15, 3)]);
        assert_eq!(lines[1].rps, 7.0);
    }

    #[test]
    fn interval_percentiles_merge_from_the_added_histograms_not_averaged() {
        // Interval 1: one answer of 10 µs (a) and four of 1000 µs (b): the median of the
        // five is 1000 µs, where averaging the two medians would say 505.
        let a = run(&[10; 6], &[], 3.0, &[1, 2, 3]);
        let b = run(&[1000; 4], &[], 2.0, &[4, 5]);
        let lines = merge(&named(vec![a, b])).unwrap().intervals;
        let p50 = |k: usize| lines[k].latency_p50_us;
        assert_eq!((p50(0), lines[0].latency_p99_us), (Some(1000), Some(1000)));
        assert_eq!(p50(2), Some(10), "only a answered in interval 3");
        let mut window = Window::default();
        lines[0].add_window_into(&mut window).unwrap();
        assert_eq!(window.latency.len(), 5);
        assert_eq!(lines[0].event_delay_p50_us, None);
    }

    #[test]
    fn interval_cycles_merge_per_seq_across_generators() {
        let (mut a, mut b) = (run(&[10; 2], &[], 1.0, &[2]), run(&[10; 2], &[], 1.0, &[2]));
        let tick = |seq, received, created_ms, max_delay_us| crate::emits::CycleTick {
            event: "e1".into(),
            seq,
            total: 10,
            received,
            created_ms,
            max_delay_us,
        };
        a.intervals[0].cycles = vec![tick(1, 3, 1000, 4000), tick(2, 1, 2000, 900)];
        b.intervals[0].cycles = vec![tick(1, 6, 999, 7000)];
        b.intervals[0].cycles_unlisted = 2;
        let lines = merge(&named(vec![a, b])).unwrap().intervals;
        assert_eq!(
            lines[0].cycles,
            vec![tick(1, 9, 999, 7000), tick(2, 1, 2000, 900)]
        );
        assert_eq!(lines[0].cycles_unlisted, 2);
    }

    #[test]
    fn an_interval_histogram_that_does_not_decode_is_named_in_a_merge_error() {
        let a = run(&[10; 2], &[], 1.0, &[2]);
        let mut b = run(&[10; 2], &[], 1.0, &[2]);
        b.intervals[0].latency_histogram = "not base64!".into();
        let err = merge(&named(vec![a, b])).unwrap_err().to_string();
        assert!(
            err.starts_with("generator-1.jsonl: interval 1: latency_histogram: not base64"),
            "{err}"
        );
    }

    /// One generator's emit line of seq `seq`: `delays` (µs) arrived from `arrived_ms` on, one
    /// a millisecond, and the engine read them at most `drain_us` after the kernel had them.
    fn emit_line(seq: u64, created_ms: u64, places: Vec<[u64; 2]>, delays: &[u64]) -> EmitLine {
        let mut h = crate::hdr::new_histogram();
        delays.iter().for_each(|&us| record_us(&mut h, us));
        EmitLine {
            kind: "emit".into(),
            event: "e1".into(),
            seq,
            total: 4,
            received: delays.len() as u64,
            created_ms,
            duration_ms: crate::report::MinMax {
                min: places[0][1],
                max: places[places.len() - 1][1],
            },
            places,
            delay_histogram: encode_histogram(&h),
            first_arrival_ms: created_ms as f64 + 0.5,
            last_arrival_ms: created_ms as f64 + delays.len() as f64,
            drain_us: Some(delays[0] / 10),
            drain_samples: delays.len() as u64,
        }
    }

    #[test]
    fn emit_records_merge_per_event_and_seq() {
        let mut a = run(&[10], &[], 1.0, &[]);
        a.emits = vec![emit_line(7, 1000, vec![[1, 0], [3, 2]], &[3000, 90_000])];
        let mut b = run(&[10], &[], 1.0, &[]);
        b.emits = vec![
            emit_line(7, 999, vec![[2, 1], [4, 5]], &[400_000, 5000]),
            emit_line(8, 2000, vec![[1, 0]], &[1000]),
        ];
        let emits = merge(&named(vec![a, b])).unwrap().emits;
        assert_eq!(emits.len(), 2);
        let e = &emits[0];
        assert_eq!((e.seq, e.received, e.created_ms, e.total), (7, 4, 999, 4));
        assert_eq!((e.duration_ms.min, e.duration_ms.max), (0, 5));
        assert_eq!(e.places, vec![[1, 0], [2, 1], [3, 2], [4, 5]]);
        assert_eq!((emits[1].seq, emits[1].received), (8, 1));
        // The generators' delays as one histogram; the widest arrivals; the longest drain.
        let mut all = crate::hdr::new_histogram();
        for us in [3000, 90_000, 400_000, 5000] {
            record_us(&mut all, us);
        }
        let delays = decode_histogram(&e.delay_histogram).unwrap();
        assert_eq!(delays, all);
        assert_eq!(delays.value_at_quantile(0.5), all.value_at_quantile(0.5));
        assert_eq!((e.first_arrival_ms, e.last_arrival_ms), (999.5, 1002.0));
        assert_eq!((e.drain_us, e.drain_samples), (Some(40_000), 4));
    }

    #[test]
    fn an_emit_line_whose_delays_do_not_decode_is_refused_by_name() {
        let mut a = run(&[10], &[], 1.0, &[]);
        a.emits = vec![emit_line(7, 1000, vec![[1, 0]], &[3000])];
        let mut b = run(&[10], &[], 1.0, &[]);
        b.emits = vec![emit_line(7, 1000, vec![[1, 0]], &[3000])];
        b.emits[0].delay_histogram = "bm90IGEgaGlzdG9ncmFt".into();
        let err = merge(&named(vec![a, b])).unwrap_err().to_string();
        assert!(
            err.starts_with("generator-1.jsonl: emit line e1 seq 7: "),
            "{err}"
        );
    }

    #[test]
    fn an_output_reads_back_as_it_was_written() {
        let mut out = run(&[10, 20, 30], &[4], 1.0, &[1, 2]);
        out.summary.clock_offset_ms = Some(3.25);
        let text: String = out
            .intervals
            .iter()
            .map(|l| serde_json::to_string(l).unwrap() + "\n")
            .chain([serde_json::to_string(&out.summary).unwrap() + "\n"])
            .collect();
        assert_eq!(Output::parse(&text).unwrap(), out);
        let alone = merge(&named(vec![out.clone()])).unwrap();
        assert_eq!(alone, out, "merging one output changes nothing");
    }

    #[test]
    fn malformed_outputs_are_refused_with_the_line_at_fault() {
        let summary = serde_json::to_string(&run(&[10], &[], 1.0, &[]).summary).unwrap();
        for (text, why) in [
            ("", "no summary line"),
            (
                "{\"type\": \"interval\"}\n",
                "line 1: not an engine's interval line",
            ),
            ("not json\n", "line 1:"),
            (
                "{\"type\": \"hello\"}\n",
                "line 1: unknown line type \"hello\"",
            ),
            (
                "{\"type\": \"measure\", \"elapsed_s\": 8.5}\n",
                "line 1: a measure line: a run with a warm-up phase",
            ),
            (
                &format!("{summary}\n{summary}\n"),
                "line 2: a line after the summary",
            ),
        ] {
            let err = Output::parse(text).unwrap_err();
            assert!(err.starts_with(why), "{text:?}: {err}");
        }
        let mut other = run(&[10], &[], 1.0, &[]);
        other.summary.plan.interval_ms = 250;
        let err = merge(&named(vec![run(&[10], &[], 1.0, &[]), other])).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("generator-1.jsonl: interval_ms"),
            "{err}"
        );
    }
}
