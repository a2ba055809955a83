//! Output: the summary as wrk-like text, what `serverlab-load` prints without `--json`.

use super::Summary;
use crate::stats::ErrorKind;

impl Summary {
    /// A wrk-like text summary; a run that got no answer says so first.
    pub fn human(&self) -> String {
        [
            self.human_no_answer(),
            self.human_latency(),
            self.human_counts(),
            self.human_rates(),
            self.human_caveats(),
            self.human_groups(),
        ]
        .concat()
    }

    /// A line per client group: its window, answers, rate and latency (none without groups).
    fn human_groups(&self) -> String {
        let mut out = String::new();
        for (name, group) in &self.groups {
            let (l, window) = (&group.timings.latency_us, group.window.as_ref());
            let (start, stop) = window.map_or((0.0, 0.0), |w| (w.start_s, w.stop_s));
            out += &format!(
                "  group {name} [{start} s, {stop} s): {} answered of {}, {:.1}/s, p50 {} p99 {}\n",
                group.attempts.answered,
                group.attempts.requests,
                group.rps,
                fmt_us(l.p50),
                fmt_us(l.p99)
            );
        }
        out
    }

    /// What ran, and its latency percentiles.
    fn human_latency(&self) -> String {
        let l = &self.timings.latency_us;
        let mut out = format!(
            "{} {} with {} thread(s), {}, {}\n",
            self.method(),
            self.plan.target,
            self.threads,
            self.clients(),
            self.io_backend
        );
        out += "  Latency     p50       p90       p99       p99.9     max\n";
        out += &format!(
            "           {:>9} {:>9} {:>9} {:>9} {:>9}\n",
            fmt_us(l.p50),
            fmt_us(l.p90),
            fmt_us(l.p99),
            fmt_us(l.p999),
            fmt_us(l.max)
        );
        out
    }

    /// TLS handshakes, resumed ones and their time, for a TLS run; whether any certificate
    /// was taken (`--insecure`).
    fn human_tls(&self) -> String {
        let Some(tls) = &self.plan.tls else {
            return String::new();
        };
        let h = &self.timings.tls_handshake_us;
        let insecure = if tls.insecure { ", --insecure" } else { "" };
        format!(
            "  TLS: {} handshake(s), {} resumed, p50 {} p99 {}{insecure}\n",
            self.traffic.tls_handshakes,
            self.traffic.tls_resumed,
            fmt_us(h.p50),
            fmt_us(h.p99)
        )
    }

    /// The first line when no attempt was answered: the rates below are zero, not slow.
    fn human_no_answer(&self) -> String {
        if self.attempts.answered > 0 || self.plan.behaviour.kind().is_attack() {
            return String::new();
        }
        let kinds: Vec<String> = ErrorKind::ALL
            .iter()
            .zip(self.errors.counts())
            .filter(|(_, n)| *n > 0)
            .map(|(kind, n)| format!("{} {n}", kind.wire_name()))
            .collect();
        let why = if kinds.is_empty() {
            String::new()
        } else {
            format!(" ({})", kinds.join(", "))
        };
        format!(
            "NO ANSWER: none of {} attempt(s) got an answer{why}\n",
            self.attempts.requests
        )
    }

    /// Answers, attempts, bytes, errors and push events.
    fn human_counts(&self) -> String {
        let mut out = format!(
            "  {} answered of {} attempts in {:.2}s, {} read, {} errors\n",
            self.attempts.answered,
            self.attempts.requests,
            self.duration_s,
            fmt_bytes(self.traffic.bytes_read),
            self.errors.total()
        );
        out += &self.human_tls();
        if self.errors.total() > 0 {
            out += &format!(
                "  Errors: {}\n",
                serde_json::to_string(&self.errors).unwrap_or_default()
            );
        }
        out += &self.human_client_cost();
        let pinged = self.events.pings > 0 || self.events.pongs > 0;
        if self.events.received > 0 || self.events.longpoll_timeout_answers > 0 || pinged {
            out += &format!(
                "  Events: {}\n",
                serde_json::to_string(&self.events).unwrap_or_default()
            );
        }
        out
    }

    /// What an attack cost the client, the other side of its amplification: connections,
    /// HTTP/2 streams and bytes written (an attack is judged by what it spends, not answers).
    fn human_client_cost(&self) -> String {
        let t = &self.traffic;
        if !self.plan.behaviour.kind().is_attack() && t.streams_opened == 0 {
            return String::new();
        }
        format!(
            "  Client cost: {} connection(s) and {} HTTP/2 stream(s) opened, {} written\n",
            t.connections_opened,
            t.streams_opened,
            fmt_bytes(t.bytes_written)
        )
    }

    /// Rates, the loop's reading delay and the generator's CPU.
    fn human_rates(&self) -> String {
        let mut out = String::new();
        if let Some(rate) = self.intended_rate {
            out += &format!(
                "Intended rate: {rate:.2}/s, achieved {:.2}/s\n",
                self.achieved_rate
            );
        }
        if self.timings.resubscribe_gap_us.count > 0 {
            out += &format!(
                "  Long poll re-subscribe gap (answer to next poll): p50 {}, p99 {}\n",
                fmt_us(self.timings.resubscribe_gap_us.p50),
                fmt_us(self.timings.resubscribe_gap_us.p99)
            );
        }
        if self.timings.notice_us.count > 0 {
            out += &format!(
                "  Answers read after arrival: p50 {}, p99 {} (sampled; part of the latency)\n",
                fmt_us(self.timings.notice_us.p50),
                fmt_us(self.timings.notice_us.p99)
            );
        }
        out += &format!("Requests/sec: {:.2} (answers)\n", self.rps);
        out += &format!("Client CPU: {:.3}s\n", self.client_cpu_s);
        out
    }

    /// What qualifies the figures: a late start, an early stop, an invalid run.
    fn human_caveats(&self) -> String {
        let mut out = String::new();
        if self.start_late_ms > 0.0 {
            out += &format!(
                "Started {:.1} ms after start_at_ms, which had passed when the run was ready\n",
                self.start_late_ms
            );
        }
        if self.stopped_early {
            out += "Stopped early by a signal: the figures cover the run until then\n";
        }
        if !self.valid {
            out += &format!("INVALID RUN: {}\n", self.invalid_reasons.join("; "));
        }
        out
    }
}

impl Summary {
    /// The method on the wire, or what is sent instead of HTTP.
    fn method(&self) -> &str {
        if self.plan.behaviour.kind().needs_http() {
            self.plan.wire_method()
        } else {
            "SYSLOG"
        }
    }

    fn clients(&self) -> String {
        if self.generators > 1 {
            return format!("{} generators", self.generators);
        }
        if let Some(label) = self.plan.pacer.pace().clients_label() {
            return label;
        }
        match self.plan.concurrency() {
            Some(connections) => format!("{connections} connection(s)"),
            None => "a new connection per arrival".into(),
        }
    }
}

fn fmt_us(us: u64) -> String {
    match us {
        0..1_000 => format!("{us}us"),
        1_000..1_000_000 => format!("{:.2}ms", us as f64 / 1e3),
        _ => format!("{:.2}s", us as f64 / 1e6),
    }
}

fn fmt_bytes(b: u64) -> String {
    match b {
        0..1024 => format!("{b}B"),
        1024..1_048_576 => format!("{:.1}KB", b as f64 / 1024.0),
        _ => format!("{:.1}MB", b as f64 / 1_048_576.0),
    }
}
