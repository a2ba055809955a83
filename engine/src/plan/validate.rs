//! The rules a plan must keep: `Plan::check` judges it without reading a file or opening a
//! socket (all that `serverlab-load --check` does), `Plan::validate` then reads the files it
//! names and derives what the workers need. Counts and spans are bounded by what one engine
//! process can run, so that a typo of a few zeros is refused before any server starts.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use super::limits::{
    too_large, MAX_CLOCK_OFFSET_MS, MAX_CONNECTIONS, MAX_RATE, MAX_REQUESTS, MAX_SECONDS,
    MAX_START_AHEAD_MS, MAX_THREADS,
};
use super::{
    BehaviourSpec, GroupSpec, IoBackend, Plan, PlanError, PlanErrors, TlsClient, WeightedPath,
};
use crate::target::{may_send_to, Target};

/// A plan whose every value has been checked, with the derived values workers need.
#[derive(Debug, Clone)]
pub struct ValidPlan {
    pub plan: Plan,
    pub target: Target,
    pub body: Vec<u8>,
    pub headers: Vec<(String, String)>,
    pub sources: Vec<Ipv4Addr>,
    pub threads: usize,
    pub stop: Stop,
    /// The weighted paths (from `paths` or `paths_file`); empty: the target's path only.
    pub paths: Vec<WeightedPath>,
    /// The TLS client, for a TLS target.
    pub tls: Option<TlsClient>,
    /// The plan's client groups, each validated as a plan of its own (empty: none).
    pub groups: Vec<ValidGroup>,
}

/// One client group, ready to run: its name, when it starts after the run's start, and the
/// plan it runs (lasting its window).
#[derive(Debug, Clone)]
pub struct ValidGroup {
    pub name: String,
    pub start: std::time::Duration,
    pub plan: ValidPlan,
}

/// The most client groups one plan may name.
pub const MAX_GROUPS: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    Requests(u64),
    Duration(std::time::Duration),
}

impl Plan {
    /// Every rule that needs no file and no socket: what `serverlab-load --check` judges.
    /// `validate` applies the same rules, then reads the files the plan names. Every rule
    /// broken is reported (a rule that needs another's result, as the target needs the
    /// allowed hosts, is skipped when that one failed), in the order they are checked.
    pub fn check(&self) -> Result<(Target, Stop), PlanErrors> {
        let alone = self.check_alone();
        let Some(groups) = &self.groups else {
            return alone;
        };
        let mut found = Found::default();
        self.check_group_list(groups, &mut found);
        match alone {
            // Each group's own plan is judged once the plan-wide parts pass: a refusal of
            // those would otherwise come again for every group.
            Ok(run) if found.0.is_empty() => {
                for group in groups {
                    let refusals = self.group_plan(group).check().err();
                    found.0.extend(
                        refusals
                            .into_iter()
                            .flat_map(|e| e.0)
                            .map(|e| in_group(group, e)),
                    );
                }
                match found.0.is_empty() {
                    true => Ok(run),
                    false => Err(PlanErrors(found.0)),
                }
            }
            Ok(_) => Err(PlanErrors(found.0)),
            Err(mut refused) => {
                refused.0.append(&mut found.0);
                Err(refused)
            }
        }
    }

    /// The groups list's own rules: a duration-bound plan without a warm-up, at most
    /// `MAX_GROUPS` groups, each with its own name and a window inside the run.
    fn check_group_list(&self, groups: &[GroupSpec], found: &mut Found) {
        let refuse = |why: String| PlanError::Contradiction("groups", why);
        if groups.is_empty() {
            found.0.push(refuse(
                "the groups list is empty: name at least one group, or leave groups out".into(),
            ));
        }
        if groups.len() > MAX_GROUPS {
            found.0.push(refuse(format!(
                "{} groups: a plan runs at most {MAX_GROUPS}",
                groups.len()
            )));
        }
        if self.requests.is_some() || self.duration_s.is_none() {
            found.0.push(refuse(
                "a plan with groups is duration-bound: give duration_s, not requests".into(),
            ));
        }
        if self.warmup_max_s.is_some() {
            found.0.push(refuse(
                "a warm-up phase (warmup_max_s) is not run with groups yet: warm up in a run apart"
                    .into(),
            ));
        }
        let run_s = self.duration_s.unwrap_or(f64::INFINITY);
        for (index, group) in groups.iter().enumerate() {
            if groups[..index].iter().any(|g| g.name == group.name) {
                found.0.push(refuse(format!(
                    "two groups are named {:?}: each needs a name of its own",
                    group.name
                )));
            }
            found.0.extend(
                group_window(group, run_s)
                    .into_iter()
                    .map(|e| in_group(group, e)),
            );
        }
    }

    /// The rules of one plan, its groups aside.
    fn check_alone(&self) -> Result<(Target, Stop), PlanErrors> {
        let mut found = Found::default();
        self.check_io(&mut found);
        let allowed = found.add(self.checked_allowed_hosts());
        let needs_http = self.behaviour.kind().needs_http();
        let target = allowed.as_ref().and_then(|allowed| {
            found.add(Target::parse(&self.target, needs_http, allowed).map_err(PlanError::from))
        });
        if let Some(target) = &target {
            found.add(self.check_tls(target));
            found.add(self.check_http2(target));
        }
        let stop = found.add(self.checked_stop());
        if self.behaviour.kind().is_endless() && matches!(stop, Some(Stop::Requests(_))) {
            found.0.push(PlanError::Contradiction(
                "duration_s",
                "this behaviour holds its connections until the run ends (a stream without \
                 duration_ms, an attack): give -d, not -n"
                    .into(),
            ));
        }
        self.check_bounds(&mut found);
        self.check_counts(&mut found);
        found.add(self.pacer.pace().check(&self.view()));
        if let Some(stop) = stop {
            found.add(self.check_offset(stop));
        }
        self.check_behaviour(&mut found);
        if let Some(stop) = stop {
            found.add(self.check_warmup(stop));
        }
        found.add(self.check_clocks());
        found.add(self.parsed_headers());
        if let Some(allowed) = &allowed {
            found.add(parse_sources(&self.sources, allowed));
        }
        self.check_paths_and_netns(&mut found);
        match (target, stop) {
            (Some(target), Some(stop)) if found.0.is_empty() => Ok((target, stop)),
            _ => Err(PlanErrors(found.0)),
        }
    }

    pub fn validate(self) -> Result<ValidPlan, PlanErrors> {
        let (target, stop) = self.check()?;
        let body = self.load_body()?;
        let headers = self.parsed_headers()?;
        let sources = parse_sources(&self.sources, &self.checked_allowed_hosts()?)?;
        let threads = self.effective_threads();
        let paths = self.checked_paths()?;
        let tls = match &self.tls {
            Some(spec) if target.tls => Some(spec.client(&target.host, self.alpn())?),
            _ => None,
        };
        let groups = self.valid_groups()?;
        Ok(ValidPlan {
            groups,
            tls,
            plan: self,
            target,
            body,
            headers,
            sources,
            threads,
            stop,
            paths,
        })
    }

    /// Each group's plan, validated (its files read), in the plan's order.
    fn valid_groups(&self) -> Result<Vec<ValidGroup>, PlanErrors> {
        let groups = self.groups.as_deref().unwrap_or_default();
        groups
            .iter()
            .map(|group| {
                let plan = self.group_plan(group).validate().map_err(|e| {
                    PlanErrors(e.0.into_iter().map(|e| in_group(group, e)).collect())
                })?;
                Ok(ValidGroup {
                    name: group.name.clone(),
                    start: std::time::Duration::from_secs_f64(group.start_s),
                    plan,
                })
            })
            .collect()
    }

    /// What the chosen socket loop cannot drive.
    fn check_io(&self, found: &mut Found) {
        let refuse = |field, why: &str| PlanError::Contradiction(field, why.into());
        if self.io == IoBackend::IoUring && self.tls.is_some() {
            found.0.push(refuse(
                "io",
                "the io_uring loop carries no TLS yet; use --io auto or epoll for a TLS target",
            ));
        }
        // An HTTP/2 plan's refusals, io_uring's among them, come together in check_http2.
        if self.io == IoBackend::IoUring && !self.suits_io_uring() && self.http2.is_none() {
            found.0.push(refuse("io",
                "io_uring drives closed-loop or sequential plain requests only; use --io auto or epoll",
            ));
        }
    }

    /// Weighted paths (given one way, for plain requests) and the namespace's name.
    fn check_paths_and_netns(&self, found: &mut Found) {
        if self.paths_file.is_some() && !self.paths.is_empty() {
            found.0.push(PlanError::Contradiction(
                "paths",
                "give paths or paths_file, not both".into(),
            ));
        }
        found.add(check_paths(&self.paths, &self.behaviour));
        if let Some(name) = &self.netns {
            found.add(check_netns_name(name));
        }
    }

    /// A TLS target needs its TLS settings (whom to trust), a cleartext one none; io_uring and
    /// UDP carry no TLS.
    fn check_tls(&self, target: &Target) -> Result<(), PlanError> {
        let refuse = |field, why: &str| Err(PlanError::Contradiction(field, why.into()));
        match (&self.tls, target.tls) {
            (None, true) => refuse(
                "tls",
                "a TLS target needs a CA to trust (--tls-ca FILE) or an explicit --insecure",
            ),
            (Some(_), false) => refuse(
                "tls",
                "TLS settings need an https://, wss:// or tls:// target",
            ),
            (Some(_), true) if self.behaviour.kind().is_datagram() => refuse(
                "tls",
                "syslog over UDP stays cleartext: use a tls:// target for RFC 5425",
            ),
            (Some(spec), true) if spec.resume && self.behaviour.kind().full_tls_handshakes() => {
                refuse(
                    "tls",
                    "a handshake flood makes full handshakes: give tls resume off (--tls-resume off)",
                )
            }
            (Some(spec), true) => spec.check(),
            (None, false) if self.behaviour.kind().full_tls_handshakes() => refuse(
                "target",
                "a handshake flood needs a TLS target (https://)",
            ),
            (None, false) => Ok(()),
        }
    }

    /// Every rule an HTTP/2 plan breaks, in one refusal.
    fn check_http2(&self, target: &Target) -> Result<(), PlanError> {
        let Some(spec) = &self.http2 else {
            return match self.behaviour.kind().needs_http2() {
                true => Err(PlanError::Contradiction(
                    "http2",
                    format!(
                        "{} runs on HTTP/2 alone: give an http2 setting (--h2c for an http:// \
                         target, --h2 for https://)",
                        self.behaviour.name()
                    ),
                )),
                false => Ok(()),
            };
        };
        let problems = spec.problems(self, target.tls);
        match problems.is_empty() {
            true => Ok(()),
            false => Err(PlanError::Contradiction("http2", problems.join("; "))),
        }
    }

    /// The protocols offered by ALPN: `h2` alone for HTTP/2 over TLS, else none.
    fn alpn(&self) -> &'static [&'static [u8]] {
        match self.http2.is_some() || self.behaviour.kind().writes_h2_frames() {
            true => &[b"h2"],
            false => &[],
        }
    }

    /// Counts and durations a run can hold: finite, and within what one engine process
    /// can do, so that a typo of a few zeros is refused before any server starts.
    fn check_bounds(&self, found: &mut Found) {
        let pace = self.pacer.pace();
        let users = pace.users().unwrap_or(0) as f64;
        let bounds = [
            ("duration_s", self.duration_s.unwrap_or(0.0), MAX_SECONDS),
            ("pacer", pace.seconds().unwrap_or(0.0), MAX_SECONDS),
            ("connections", self.connections as f64, MAX_CONNECTIONS),
            ("requests", self.requests.unwrap_or(0) as f64, MAX_REQUESTS),
            ("timeout_ms", self.timeout_ms as f64, MAX_SECONDS * 1000.0),
            ("interval_ms", self.interval_ms as f64, MAX_SECONDS * 1000.0),
            ("threads", self.threads as f64, MAX_THREADS),
            ("users", users, MAX_CONNECTIONS),
            ("pacer", pace.peak_rate().unwrap_or(0.0), MAX_RATE),
            ("pacer", pace.calls_per_connection() as f64, MAX_REQUESTS),
        ];
        for (field, value, max) in bounds {
            found.add(too_large(field, value, max));
        }
    }

    /// The addresses off loopback the plan allows: IPv4 literals of a host (not 0.0.0.0,
    /// a broadcast or a multicast group), never names.
    fn checked_allowed_hosts(&self) -> Result<Vec<Ipv4Addr>, PlanError> {
        self.allowed_hosts
            .iter()
            .map(|text| {
                let bad = |why: &str| {
                    PlanError::Contradiction(
                        "allowed_hosts",
                        format!("allowed host {text:?} {why}"),
                    )
                };
                let ip: Ipv4Addr = text
                    .trim()
                    .parse()
                    .map_err(|_| bad("is not an IPv4 address"))?;
                if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() {
                    return Err(bad("is not the address of one host"));
                }
                Ok(ip)
            })
            .collect()
    }

    /// `offset_s` delays a schedule within the run: finite, not negative, and smaller than
    /// the run when the run has a length.
    fn check_offset(&self, stop: Stop) -> Result<(), PlanError> {
        let offset = self.pacer.pace().offset_s();
        if !(offset.is_finite() && offset >= 0.0) {
            return Err(PlanError::Contradiction(
                "pacer",
                format!("offset_s = {offset} must be finite and not negative"),
            ));
        }
        match stop {
            Stop::Duration(run) if offset >= run.as_secs_f64() => Err(PlanError::Contradiction(
                "pacer",
                format!(
                    "offset_s = {offset} must be smaller than the run ({} s)",
                    run.as_secs_f64()
                ),
            )),
            _ => too_large("pacer", offset, MAX_SECONDS),
        }
    }

    /// A warm-up phase (`warmup_max_s`) is a finite positive cap within what a run may last,
    /// before a duration: the measured window then starts at an interval boundary and runs
    /// `duration_s` from there, which a request count, a users ramp or an open-loop schedule
    /// (all fixed from the run's start) cannot.
    fn check_warmup(&self, stop: Stop) -> Result<(), PlanError> {
        let Some(cap) = self.warmup_max_s else {
            return Ok(());
        };
        if !(cap.is_finite() && cap > 0.0) {
            return Err(PlanError::NotPositive("warmup_max_s", "warm-up cap"));
        }
        too_large("warmup_max_s", cap, MAX_SECONDS)?;
        let refuse = |why: &str| Err(PlanError::Contradiction("warmup_max_s", why.into()));
        if matches!(stop, Stop::Requests(_)) {
            return refuse("a warm-up phase needs a duration (-d) to measure after it, not -n");
        }
        if self.pacer.pace().takes_warmup_phase() {
            Ok(())
        } else {
            refuse("a warm-up phase takes closed-loop or sequential pacing: an open-loop or users schedule is fixed from the run's start")
        }
    }

    /// A start instant no further ahead than `MAX_START_AHEAD_MS` (a later one is a clock or
    /// unit mistake, and would hold a generator idle), and a clock offset a clock can have.
    fn check_clocks(&self) -> Result<(), PlanError> {
        if let Some(at) = self.start_at_ms {
            let ahead = at as f64 - crate::system::unix_ms();
            if ahead > MAX_START_AHEAD_MS {
                return Err(PlanError::Contradiction(
                    "start_at_ms",
                    format!(
                        "start_at_ms = {at} is {:.0} s ahead of this host's clock; at most {} s",
                        ahead / 1000.0,
                        MAX_START_AHEAD_MS / 1000.0
                    ),
                ));
            }
        }
        too_large(
            "clock_offset_ms",
            self.clock_offset_ms.abs(),
            MAX_CLOCK_OFFSET_MS,
        )
    }

    fn checked_paths(&self) -> Result<Vec<WeightedPath>, PlanError> {
        match &self.paths_file {
            Some(file) => {
                let paths = read_paths_file(file)?;
                check_paths(&paths, &self.behaviour)?;
                Ok(paths)
            }
            None => Ok(self.paths.clone()),
        }
    }

    fn checked_stop(&self) -> Result<Stop, PlanError> {
        if let Some(own) = self.pacer.pace().own_stop(&self.view()) {
            return own.map(Stop::Duration);
        }
        match (self.requests, self.duration_s) {
            (Some(_), Some(_)) => Err(PlanError::BothStops),
            (None, None) => Err(PlanError::NoStop),
            (Some(0), _) => Err(PlanError::NotPositive("requests", "request count")),
            (Some(n), None) => Ok(Stop::Requests(n)),
            (None, Some(d)) if d.is_finite() && d > 0.0 => {
                Ok(Stop::Duration(std::time::Duration::from_secs_f64(d)))
            }
            (None, Some(_)) => Err(PlanError::NotPositive("duration_s", "duration")),
        }
    }

    fn check_counts(&self, found: &mut Found) {
        if self.timeout_ms == 0 {
            found
                .0
                .push(PlanError::NotPositive("timeout_ms", "timeout"));
        }
        if self.interval_ms == 0 {
            found
                .0
                .push(PlanError::NotPositive("interval_ms", "interval"));
        }
        // Open-loop arrivals with connections of their own and users ignore `connections`.
        if self.pacer.pace().fills_connections(&self.view()) && self.connections == 0 {
            found
                .0
                .push(PlanError::NotPositive("connections", "connection count"));
        }
        if self.method.is_empty() || !self.method.bytes().all(|b| b.is_ascii_uppercase()) {
            found.0.push(PlanError::Contradiction(
                "method",
                format!("method {:?} is not an upper-case token", self.method),
            ));
        }
    }

    /// The behaviour's own rules (every one it breaks), then the body's, which depend on
    /// the behaviour.
    fn check_behaviour(&self, found: &mut Found) {
        found.0.extend(self.behaviour.kind().check());
        let body_given = self.body.is_some() || self.body_file.is_some();
        if self.body.is_some() && self.body_file.is_some() {
            found.0.push(PlanError::Contradiction(
                "body",
                "give body or body_file, not both".into(),
            ));
        }
        if body_given && !self.behaviour.kind().is_plain() {
            found.0.push(PlanError::Contradiction(
                "body",
                "this behaviour builds its own body; drop --body-file".into(),
            ));
        }
    }

    fn load_body(&self) -> Result<Vec<u8>, PlanError> {
        if let Some(path) = &self.body_file {
            return std::fs::read(path).map_err(|e| PlanError::BodyFile(path.clone(), e));
        }
        Ok(self.body.clone().unwrap_or_default().into_bytes())
    }

    fn parsed_headers(&self) -> Result<Vec<(String, String)>, PlanError> {
        self.headers
            .iter()
            .map(|line| {
                let (name, value) = line
                    .split_once(':')
                    .ok_or_else(|| PlanError::BadHeader(line.clone()))?;
                let name = name.trim();
                let valid_name = !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_!#$%&'*+.^`|~".contains(&b));
                if !valid_name || value.contains(['\r', '\n']) {
                    return Err(PlanError::BadHeader(line.clone()));
                }
                Ok((name.to_string(), value.trim().to_string()))
            })
            .collect()
    }

    fn effective_threads(&self) -> usize {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let wanted = if self.threads == 0 {
            cpus
        } else {
            self.threads
        };
        let parallel_units = self.concurrency().unwrap_or(u64::MAX);
        wanted.clamp(1, parallel_units.min(1024) as usize)
    }
}

fn check_paths(paths: &[WeightedPath], behaviour: &BehaviourSpec) -> Result<(), PlanError> {
    if paths.is_empty() {
        return Ok(());
    }
    if !behaviour.kind().is_plain() {
        return Err(PlanError::Contradiction(
            "paths",
            "weighted paths apply to plain requests (keepalive, new-connection, slow-reader)"
                .into(),
        ));
    }
    for p in paths {
        if !crate::target::is_request_path(&p.path) {
            return Err(PlanError::BadPath(
                p.path.clone(),
                "a path starts with / and has no spaces or control bytes",
            ));
        }
        if !(p.weight.is_finite() && p.weight > 0.0) {
            return Err(PlanError::BadPath(
                p.path.clone(),
                "weight must be positive and finite",
            ));
        }
    }
    Ok(())
}

/// A refusal about one group, named by it.
fn in_group(group: &GroupSpec, error: PlanError) -> PlanError {
    PlanError::Group {
        name: group.name.clone(),
        error: Box::new(error),
    }
}

/// A group's name and window: `[a-z0-9_-]{1,32}`, and `0 <= start_s < stop_s <= run_s`.
fn group_window(group: &GroupSpec, run_s: f64) -> Vec<PlanError> {
    let mut out = Vec::new();
    let name = &group.name;
    let plain = (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if !plain {
        out.push(PlanError::Contradiction(
            "groups",
            format!("group name {name:?} is not 1 to 32 of a-z, 0-9, _ and -"),
        ));
    }
    let (start, stop) = (group.start_s, group.stop(run_s));
    if !(start.is_finite() && start >= 0.0) {
        out.push(PlanError::Contradiction(
            "groups",
            format!("start_s = {start} must be finite and not negative"),
        ));
    } else if start >= stop {
        out.push(PlanError::Contradiction(
            "groups",
            format!("start_s = {start} must be smaller than stop_s = {stop}"),
        ));
    }
    if stop > run_s {
        out.push(PlanError::Contradiction(
            "groups",
            format!("stop_s = {stop} is past the run's end (duration_s = {run_s})"),
        ));
    }
    out
}

/// The refusals found so far: each rule adds what it finds, and the check goes on.
#[derive(Default)]
struct Found(Vec<PlanError>);

impl Found {
    /// The value of a rule that passed; a refusal is kept, and `None` stands in for the value.
    fn add<T>(&mut self, result: Result<T, PlanError>) -> Option<T> {
        result.map_err(|e| self.0.push(e)).ok()
    }
}

/// A namespace name is a plain file name under /var/run/netns.
fn check_netns_name(name: &str) -> Result<(), PlanError> {
    let plain = !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && !name.bytes().any(|b| b == b'/' || b <= b' ' || b == 0x7f);
    if plain {
        Ok(())
    } else {
        Err(PlanError::Contradiction(
            "netns",
            format!(
                "network namespace {name:?} is not a plain name (as `ip netns add NAME` takes)"
            ),
        ))
    }
}

fn read_paths_file(file: &std::path::Path) -> Result<Vec<WeightedPath>, PlanError> {
    let fail = |why: String| PlanError::PathsFile(file.to_path_buf(), why);
    let text = std::fs::read_to_string(file).map_err(|e| fail(e.to_string()))?;
    let paths: Vec<WeightedPath> = serde_json::from_str(&text).map_err(|e| fail(e.to_string()))?;
    if paths.is_empty() {
        return Err(fail("the list is empty".into()));
    }
    Ok(paths)
}

/// Expands `127.0.0.2-127.0.0.250` ranges; every address must be loopback or `allowed`.
pub fn parse_sources(items: &[String], allowed: &[Ipv4Addr]) -> Result<Vec<Ipv4Addr>, PlanError> {
    let mut out = Vec::new();
    for item in items.iter().flat_map(|s| s.split(',')) {
        let item = item.trim();
        let bad = |why: &str| PlanError::BadSource(item.to_string(), why.to_string());
        let (first, last) = match item.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (item, item),
        };
        let first: Ipv4Addr = first.parse().map_err(|_| bad("not an IPv4 address"))?;
        let last: Ipv4Addr = last.parse().map_err(|_| bad("not an IPv4 address"))?;
        let (a, b) = (u32::from(first), u32::from(last));
        if a > b {
            return Err(bad("range runs backwards"));
        }
        // 127.0.0.0/8 is one block: a range with both ends on loopback lies in it.
        let on_loopback = first.is_loopback() && last.is_loopback();
        if !on_loopback && !(a..=b).all(|ip| may_send_to(ip.into(), allowed)) {
            return Err(bad("only 127.0.0.0/8 and the allowed_hosts may be used"));
        }
        out.extend((a..=b).map(Ipv4Addr::from));
    }
    Ok(out)
}

impl ValidPlan {
    pub fn socket_addr(&self) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(self.target.ip, self.target.port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{OpenSpec, PacerSpec};
    use serde_json::json;

    /// The plan's validation; each plan here breaks one rule at most, and its refusal says so.
    fn plan(json: serde_json::Value) -> Result<ValidPlan, PlanError> {
        Plan::from_value(json).unwrap().validate().map_err(|mut e| {
            assert_eq!(e.0.len(), 1, "one refusal expected: {e}");
            e.0.remove(0)
        })
    }

    #[test]
    fn a_plan_with_three_independent_mistakes_is_refused_with_all_three() {
        let p = Plan::from_value(json!({"target": "http://127.0.0.1:1/", "requests": 10,
            "timeout_ms": 0, "headers": ["no colon"],
            "behaviour": {"kind": "sse", "events": ["e1"], "heartbeat_ms": 5,
                          "duration_ms": 100}}))
        .unwrap();
        let errors = p.validate().unwrap_err();
        let fields: Vec<&str> = errors.0.iter().map(|e| e.field()).collect();
        assert_eq!(fields, ["timeout_ms", "behaviour", "headers"], "{errors}");
        assert_eq!(errors.to_string().lines().count(), 3, "one line each");
    }

    #[test]
    fn an_attack_is_held_to_the_plans_bounds_and_its_targets_rules() {
        let attack = |target: &str, stop: serde_json::Value, behaviour: serde_json::Value| {
            let mut json = json!({"target": target, "behaviour": behaviour});
            json.as_object_mut()
                .unwrap()
                .extend(stop.as_object().unwrap().clone());
            plan(json).map(|_| ())
        };
        let (lasting, counted) = (json!({"duration_s": 1.0}), json!({"requests": 10}));
        let loris = json!({"kind": "slowloris", "interval_ms": 100});
        let reset = json!({"kind": "rapid-reset", "streams_per_s": 100});
        assert!(attack("http://127.0.0.1:1/", lasting.clone(), loris.clone()).is_ok());
        // Held until the run ends: a run of a count would never end.
        let held = attack("http://127.0.0.1:1/", counted, loris.clone());
        assert_eq!(held.unwrap_err().field(), "duration_s");
        // Only loopback or an allowed host, as every behaviour.
        let off = attack("http://192.0.2.1:80/", lasting.clone(), reset.clone());
        assert_eq!(off.unwrap_err().field(), "target");
        // Its own HTTP/2 frames: no http2 setting beside them.
        let both = plan(json!({"target": "http://127.0.0.1:1/", "duration_s": 1.0,
            "behaviour": reset, "http2": {"mode": "h2c"}}));
        assert!(both
            .unwrap_err()
            .to_string()
            .contains("frames of their own"));
        let over = json!({"kind": "rapid-reset", "streams_per_s": 2_000_000});
        let refused = attack("http://127.0.0.1:1/", lasting, over).unwrap_err();
        assert_eq!(refused.field(), "behaviour");
    }

    #[test]
    fn a_grpc_plan_without_an_http2_setting_is_refused_naming_its_behaviour() {
        for behaviour in [
            json!({"kind": "grpc-unary"}),
            json!({"kind": "grpc-stream", "events": ["e1"]}),
            json!({"kind": "grpc-chat"}),
        ] {
            let name = behaviour["kind"].as_str().unwrap_or_default().to_string();
            let bare = json!({"target": "http://127.0.0.1:1/", "duration_s": 1.0,
                "behaviour": behaviour.clone()});
            let refused = plan(bare).unwrap_err();
            assert_eq!(refused.field(), "http2");
            assert!(refused
                .to_string()
                .contains(&format!("{name} runs on HTTP/2 alone")));
            let carried = json!({"target": "http://127.0.0.1:1/", "duration_s": 1.0,
                "behaviour": behaviour, "http2": {"mode": "h2c"}});
            assert!(plan(carried).is_ok(), "{name} over h2c");
        }
    }

    #[test]
    fn a_handshake_flood_needs_a_tls_target_whose_sessions_do_not_resume() {
        let flood = |target: &str, tls: serde_json::Value| {
            let mut json = json!({"target": target, "duration_s": 1.0,
                "behaviour": {"kind": "handshake-flood", "abandon": "finished"}});
            if !tls.is_null() {
                json["tls"] = tls;
            }
            plan(json).map(|_| ())
        };
        let fresh = json!({"insecure": true, "resume": false});
        assert!(flood("https://127.0.0.1:1/", fresh).is_ok());
        let resumed = flood("https://127.0.0.1:1/", json!({"insecure": true}));
        assert_eq!(resumed.unwrap_err().field(), "tls");
        let clear = flood("http://127.0.0.1:1/", serde_json::Value::Null);
        assert_eq!(clear.unwrap_err().field(), "target");
    }

    #[test]
    fn a_rule_that_needs_a_failed_one_is_skipped_not_misreported() {
        // The target cannot be judged without the allowed hosts: one refusal, not two.
        let p = Plan::from_value(json!({"target": "http://198.18.0.2:80/", "requests": 10,
            "allowed_hosts": ["not an address"], "sources": ["198.18.0.2"]}))
        .unwrap();
        let errors = p.check().unwrap_err();
        assert_eq!(errors.0.len(), 1, "{errors}");
        assert_eq!(errors.field(), "allowed_hosts");
    }

    #[test]
    fn io_uring_is_refused_where_it_cannot_drive_the_plan() {
        let mut plan = Plan::for_target("http://127.0.0.1:1/");
        plan.requests = Some(100);
        plan.io = IoBackend::IoUring;
        plan.clone()
            .validate()
            .expect("closed keep-alive suits io_uring");
        plan.pacer = PacerSpec::Open(OpenSpec::at(100.0));
        let err = plan.validate().unwrap_err().to_string();
        assert!(err.contains("io_uring drives closed-loop"), "{err}");
    }

    #[test]
    fn spinning_goes_with_either_loop() {
        use crate::plan::WaitMode;
        let mut plan = Plan::for_target("http://127.0.0.1:1/");
        plan.requests = Some(100);
        plan.connections = 1;
        plan.wait = WaitMode::Spin;
        plan.clone().validate().expect("spin on the auto loop");
        plan.io = IoBackend::IoUring;
        plan.validate().expect("spin on the ring");
    }

    #[test]
    fn latency_bound_plans_are_the_few_and_the_slow() {
        let bound = |json: serde_json::Value| Plan::from_value(json).unwrap().latency_bound();
        let t = "http://127.0.0.1:1/";
        assert!(bound(
            serde_json::json!({"target": t, "pacer": {"kind": "sequential"},
            "behaviour": {"kind": "new-connection"}})
        ));
        assert!(bound(serde_json::json!({"target": t, "connections": 4})));
        assert!(!bound(serde_json::json!({"target": t, "connections": 5})));
        assert!(bound(
            serde_json::json!({"target": t, "pacer": {"kind": "open", "rate": 500.0}})
        ));
        assert!(!bound(serde_json::json!({"target": t,
            "pacer": {"kind": "open", "rate": 500.0, "ramp_to_rate": 5000.0, "ramp_s": 1.0}})));
        assert!(!bound(serde_json::json!({"target": t, "connections": 1,
            "behaviour": {"kind": "longpoll", "events": ["e"], "duration_ms": 10}})));
    }

    #[test]
    fn defaults_need_a_stop() {
        let err = plan(serde_json::json!({"target": "http://127.0.0.1:1/"})).unwrap_err();
        assert!(matches!(err, PlanError::NoStop));
    }

    #[test]
    fn refuses_both_stops_and_remote_targets() {
        let both = serde_json::json!({"target": "http://127.0.0.1:1/", "requests": 5, "duration_s": 1.0,
            "connections": 1});
        assert!(matches!(plan(both).unwrap_err(), PlanError::BothStops));
        let remote =
            serde_json::json!({"target": "http://10.0.0.1:80/", "requests": 5, "connections": 1});
        assert!(matches!(plan(remote).unwrap_err(), PlanError::Target(_)));
    }

    #[test]
    fn sequential_needs_new_connections() {
        let p = serde_json::json!({"target": "http://127.0.0.1:1/", "requests": 5,
            "pacer": {"kind": "sequential"}});
        assert!(matches!(plan(p).unwrap_err(), PlanError::Contradiction(..)));
    }

    #[test]
    fn source_ranges_expand_and_stay_on_loopback() {
        let got = parse_sources(&["127.0.0.2-127.0.0.4,127.0.0.9".into()], &[]).unwrap();
        assert_eq!(got.len(), 4);
        assert_eq!(got[3], Ipv4Addr::new(127, 0, 0, 9));
        assert!(parse_sources(&["10.0.0.1".into()], &[]).is_err());
        assert!(parse_sources(&["127.0.0.9-127.0.0.2".into()], &[]).is_err());
    }

    #[test]
    fn header_lines_are_checked() {
        let p = serde_json::json!({"target": "http://127.0.0.1:1/", "requests": 10,
            "headers": ["X-Ok: yes", "bad header"]});
        assert!(matches!(plan(p).unwrap_err(), PlanError::BadHeader(_)));
    }

    #[test]
    fn weighted_paths_are_checked() {
        let with = |paths: serde_json::Value| {
            plan(
                serde_json::json!({"target": "http://127.0.0.1:1/", "requests": 10,
                "paths": paths}),
            )
        };
        assert_eq!(
            with(serde_json::json!([{"path": "/a", "weight": 1.0}]))
                .unwrap()
                .paths
                .len(),
            1
        );
        for bad in [
            serde_json::json!([{"path": "a", "weight": 1.0}]),
            serde_json::json!([{"path": "/a b", "weight": 1.0}]),
            serde_json::json!([{"path": "/a", "weight": 0.0}]),
            serde_json::json!([{"path": "/a", "weight": -2.0}]),
        ] {
            assert!(matches!(with(bad).unwrap_err(), PlanError::BadPath(..)));
        }
        let push = plan(
            serde_json::json!({"target": "http://127.0.0.1:1/push", "requests": 1, "connections": 1,
            "behaviour": {"kind": "longpoll", "events": ["e1"], "duration_ms": 10},
            "paths": [{"path": "/a", "weight": 1.0}]}),
        );
        assert!(matches!(push.unwrap_err(), PlanError::Contradiction(..)));
    }

    #[test]
    fn paths_files_must_hold_a_list() {
        let dir = std::env::temp_dir().join(format!("serverlab-paths-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("paths.json");
        let with_file = |text: &str| {
            std::fs::write(&file, text).unwrap();
            plan(
                serde_json::json!({"target": "http://127.0.0.1:1/", "requests": 10,
                "paths_file": file}),
            )
        };
        let ok = with_file(r#"[{"path": "/a", "weight": 1}, {"path": "/b", "weight": 2}]"#);
        assert_eq!(ok.unwrap().paths.len(), 2);
        assert!(matches!(
            with_file("[]").unwrap_err(),
            PlanError::PathsFile(..)
        ));
        assert!(matches!(
            with_file("{").unwrap_err(),
            PlanError::PathsFile(..)
        ));
        let both = plan(
            serde_json::json!({"target": "http://127.0.0.1:1/", "requests": 10,
            "paths_file": file, "paths": [{"path": "/a", "weight": 1.0}]}),
        );
        assert!(matches!(both.unwrap_err(), PlanError::Contradiction(..)));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn namespace_names_are_plain_file_names() {
        let with = |name: &str| {
            plan(
                serde_json::json!({"target": "http://127.0.0.1:1/", "requests": 1, "connections": 1,
                "netns": name}),
            )
        };
        assert!(with("serverlab-1").is_ok());
        for bad in ["", "..", "a/b", "../etc", "a b"] {
            assert!(with(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_address_off_loopback_must_be_allowed_for_target_and_sources() {
        let with = |target: &str, allowed: serde_json::Value, sources: serde_json::Value| {
            plan(serde_json::json!({"target": target, "requests": 10,
                "allowed_hosts": allowed, "sources": sources}))
        };
        let ok = with("http://198.18.0.2:80/", json!(["198.18.0.2"]), json!([])).unwrap();
        assert_eq!(ok.target.ip, Ipv4Addr::new(198, 18, 0, 2));
        let unlisted = with("http://198.18.0.3:80/", json!(["198.18.0.2"]), json!([]));
        assert_eq!(unlisted.unwrap_err().field(), "target");
        // A source off loopback too: only a listed one, each address of a range listed.
        let listed = json!(["198.18.0.2", "198.18.0.5", "198.18.0.6"]);
        let ok = with(
            "http://198.18.0.2:80/",
            listed.clone(),
            json!(["198.18.0.5-198.18.0.6"]),
        );
        assert_eq!(ok.unwrap().sources.len(), 2);
        for sources in [json!(["198.18.0.5-198.18.0.7"]), json!(["10.0.0.1"])] {
            let err = with("http://198.18.0.2:80/", listed.clone(), sources).unwrap_err();
            assert_eq!(err.field(), "sources");
        }
        for bad in [
            "example.com",
            "198.18.0",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
        ] {
            let err = with("http://127.0.0.1:80/", json!([bad]), json!([])).unwrap_err();
            assert_eq!(err.field(), "allowed_hosts", "{bad}: {err}");
        }
    }

    #[test]
    fn a_start_instant_at_most_ten_minutes_ahead() {
        let now = crate::system::unix_ms() as u64;
        let at = |start_at_ms: u64| {
            plan(json!({"target": "http://127.0.0.1:1/", "requests": 10,
                "start_at_ms": start_at_ms}))
        };
        at(now + 9 * 60_000).expect("nine minutes ahead");
        at(now - 3_600_000).expect("an hour ago: starts at once");
        assert_eq!(at(now + 11 * 60_000).unwrap_err().field(), "start_at_ms");
    }

    #[test]
    fn offsets_are_finite_not_negative_and_inside_the_run() {
        let open = |offset_s: f64, stop: serde_json::Value| {
            let mut p = Plan::from_value(json!({"target": "http://127.0.0.1:1/",
                "pacer": {"kind": "open", "rate": 100.0}}))
            .unwrap();
            p.duration_s = stop["duration_s"].as_f64();
            p.requests = stop["requests"].as_u64();
            if let PacerSpec::Open(OpenSpec { offset_s: o, .. }) = &mut p.pacer {
                *o = offset_s;
            }
            p.check()
        };
        let seconds = json!({"duration_s": 2.0});
        open(0.5, seconds.clone()).expect("inside the run");
        open(0.5, json!({"requests": 10})).expect("a count has no end to be inside");
        for bad in [-0.1, f64::NAN, f64::INFINITY, 2.0, 3.0] {
            let err = open(bad, seconds.clone()).unwrap_err();
            assert_eq!(err.field(), "pacer", "{bad}: {err}");
        }
    }

    #[test]
    fn users_pacer_derives_its_duration() {
        let p = plan(json!({"target": "http://127.0.0.1:1/",
            "pacer": {"kind": "users", "users": 10, "ramp_up_s": 1.0, "hold_s": 2.0}}))
        .unwrap();
        assert_eq!(p.stop, Stop::Duration(std::time::Duration::from_secs(3)));
        let negative_hold = plan(json!({"target": "http://127.0.0.1:1/",
            "pacer": {"kind": "users", "users": 3, "ramp_up_s": 12.0, "hold_s": -1.0}}))
        .unwrap_err();
        assert_eq!(negative_hold.field(), "pacer");
        assert!(
            negative_hold.to_string().contains("hold_s = -1"),
            "{negative_hold}"
        );
    }

    #[test]
    fn a_users_offset_lies_inside_ramp_up_and_hold() {
        let users = |offset_s: f64| {
            plan(
                json!({"target": "http://127.0.0.1:1/", "pacer": {"kind": "users",
                "users": 4, "ramp_up_s": 1.0, "hold_s": 1.0, "offset_s": offset_s}}),
            )
        };
        users(1.5).expect("inside ramp_up_s + hold_s");
        assert_eq!(users(2.0).unwrap_err().field(), "pacer");
    }

    #[test]
    fn a_warm_up_phase_needs_a_positive_cap_a_duration_and_a_closed_loop() {
        let warm = |extra: serde_json::Value| {
            let mut value = json!({"target": "http://127.0.0.1:1/", "warmup_max_s": 5.0});
            value
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            plan(value)
        };
        warm(json!({"duration_s": 2.0})).expect("closed loop, then 2 s measured");
        let sequential = json!({"duration_s": 2.0, "connections": 1,
            "behaviour": {"kind": "new-connection"}, "pacer": {"kind": "sequential"}});
        warm(sequential).expect("sequential pacing");
        for refused in [
            json!({"requests": 100}),
            json!({"duration_s": 2.0, "pacer": {"kind": "open", "rate": 100.0}}),
            json!({"pacer": {"kind": "users", "users": 4, "ramp_up_s": 1.0, "hold_s": 1.0}}),
            json!({"duration_s": 2.0, "warmup_max_s": 0.0}),
            json!({"duration_s": 2.0, "warmup_max_s": -1.0}),
            json!({"duration_s": 2.0, "warmup_max_s": 1e12}),
        ] {
            let err = warm(refused.clone()).unwrap_err();
            assert_eq!(err.field(), "warmup_max_s", "{refused}: {err}");
        }
    }

    #[test]
    fn syslog_numbers_and_clock_offsets_stay_in_range() {
        let syslog = |seq_start: u64| {
            plan(json!({"target": "tcp://127.0.0.1:1", "requests": 10,
                "behaviour": {"kind": "syslog", "seq_start": seq_start}}))
        };
        assert_eq!(
            syslog(1_000_001).unwrap().plan.behaviour.kind().seq_start(),
            1_000_001
        );
        assert_eq!(syslog(u64::MAX).unwrap_err().field(), "behaviour");
        let offset = |ms: f64| {
            plan(json!({"target": "http://127.0.0.1:1/", "requests": 10, "clock_offset_ms": ms}))
        };
        offset(-1234.5).expect("a clock behind the server's");
        assert_eq!(offset(1e12).unwrap_err().field(), "clock_offset_ms");
    }

    /// A grouped plan's refusals, each as its text.
    fn group_refusals(groups: serde_json::Value, extra: serde_json::Value) -> Vec<String> {
        let mut value = json!({"target": "http://127.0.0.1:1/", "duration_s": 30.0,
            "groups": groups});
        let fields = value.as_object_mut().unwrap();
        fields.extend(extra.as_object().unwrap().clone());
        match Plan::from_value(value).unwrap().check() {
            Ok(_) => Vec::new(),
            Err(e) => e.0.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn two_groups_each_run_their_own_plan_within_their_window() {
        let p = plan(json!({"target": "http://127.0.0.1:1/", "duration_s": 30.0,
            "connections": 4, "groups": [
                {"name": "keep", "pacer": {"kind": "open", "rate": 50.0}, "connections": 2},
                {"name": "slow", "start_s": 5.0, "stop_s": 25.0,
                 "behaviour": {"kind": "slowloris"}}]}))
        .unwrap();
        let [keep, slow] = &p.groups[..] else {
            panic!("two groups: {:?}", p.groups)
        };
        assert_eq!(
            keep.plan.stop,
            Stop::Duration(std::time::Duration::from_secs(30))
        );
        assert_eq!(keep.plan.plan.connections, 2);
        assert!(keep.plan.plan.pacer.pace().is_open());
        assert_eq!(slow.start, std::time::Duration::from_secs(5));
        assert_eq!(
            slow.plan.stop,
            Stop::Duration(std::time::Duration::from_secs(20))
        );
        assert_eq!(
            slow.plan.plan.connections, 4,
            "the plan's connections by default"
        );
        assert!(slow.plan.plan.behaviour.kind().is_attack());
        assert!(slow.plan.groups.is_empty() && slow.plan.plan.groups.is_none());
    }

    #[test]
    fn a_group_may_name_its_own_target_and_tls_beside_the_plans() {
        let p = plan(json!({"target": "http://127.0.0.1:1/", "duration_s": 10.0,
            "groups": [
                {"name": "clear"},
                {"name": "flood", "target": "https://127.0.0.1:2/",
                 "tls": {"insecure": true, "resume": false},
                 "behaviour": {"kind": "handshake-flood", "abandon": "finished"},
                 "pacer": {"kind": "open", "rate": 10.0}}]}))
        .unwrap();
        let [clear, flood] = &p.groups[..] else {
            panic!("two groups: {:?}", p.groups)
        };
        assert!(!clear.plan.target.tls && clear.plan.tls.is_none());
        assert!(flood.plan.target.tls && flood.plan.tls.is_some());
        assert_eq!(flood.plan.target.port, 2);
        let refusals = group_refusals(
            json!([{"name": "other", "target": "https://127.0.0.1:2/"}]),
            json!({}),
        );
        assert_eq!(
            refusals,
            ["groups[other]: a TLS target needs a CA to trust (--tls-ca FILE) or an explicit --insecure"],
            "a group's own target takes none of the plan's TLS settings"
        );
    }

    #[test]
    fn a_group_is_judged_by_a_plans_rules_under_its_name() {
        let refusals = group_refusals(
            json!([{"name": "ok"}, {"name": "bad", "connections": 0, "method": "get"}]),
            json!({}),
        );
        assert_eq!(
            refusals,
            [
                "groups[bad]: connection count must be positive",
                "groups[bad]: method \"get\" is not an upper-case token",
            ]
        );
    }

    #[test]
    fn group_names_are_unique_and_plain() {
        let refusals = group_refusals(
            json!([{"name": "a"}, {"name": "a"}, {"name": "Big"}, {"name": ""}]),
            json!({}),
        );
        assert_eq!(
            refusals,
            [
                "two groups are named \"a\": each needs a name of its own",
                "groups[Big]: group name \"Big\" is not 1 to 32 of a-z, 0-9, _ and -",
                "groups[]: group name \"\" is not 1 to 32 of a-z, 0-9, _ and -",
            ]
        );
        let long = "x".repeat(33);
        assert_eq!(group_refusals(json!([{"name": long}]), json!({})).len(), 1);
        assert!(group_refusals(json!([{"name": "x".repeat(32)}]), json!({})).is_empty());
    }

    #[test]
    fn a_group_window_starts_before_it_stops_and_ends_inside_the_run() {
        let refusals = group_refusals(
            json!([{"name": "same", "start_s": 5.0, "stop_s": 5.0},
                   {"name": "late", "start_s": 31.0},
                   {"name": "past", "stop_s": 31.0},
                   {"name": "neg", "start_s": -1.0}]),
            json!({}),
        );
        assert_eq!(
            refusals,
            [
                "groups[same]: start_s = 5 must be smaller than stop_s = 5",
                "groups[late]: start_s = 31 must be smaller than stop_s = 30",
                "groups[past]: stop_s = 31 is past the run's end (duration_s = 30)",
                "groups[neg]: start_s = -1 must be finite and not negative",
            ]
        );
    }

    #[test]
    fn a_groups_list_is_neither_empty_nor_longer_than_sixteen() {
        assert_eq!(
            group_refusals(json!([]), json!({})),
            ["the groups list is empty: name at least one group, or leave groups out"]
        );
        let many: Vec<_> = (0..17).map(|i| json!({"name": format!("g{i}")})).collect();
        assert_eq!(
            group_refusals(json!(many), json!({})),
            ["17 groups: a plan runs at most 16"]
        );
        let sixteen: Vec<_> = (0..16).map(|i| json!({"name": format!("g{i}")})).collect();
        assert!(group_refusals(json!(sixteen), json!({})).is_empty());
    }

    #[test]
    fn a_plan_with_groups_is_duration_bound_and_has_no_warm_up_yet() {
        let counted = group_refusals(
            json!([{"name": "a"}]),
            json!({"duration_s": null, "requests": 100}),
        );
        assert_eq!(
            counted,
            ["a plan with groups is duration-bound: give duration_s, not requests"]
        );
        let warm = group_refusals(json!([{"name": "a"}]), json!({"warmup_max_s": 5.0}));
        assert_eq!(
            warm,
            ["a warm-up phase (warmup_max_s) is not run with groups yet: warm up in a run apart"]
        );
    }

    #[test]
    fn a_plan_wide_refusal_is_said_once_not_again_for_every_group() {
        let refusals = group_refusals(
            json!([{"name": "a"}, {"name": "b"}]),
            json!({"target": "http://10.0.0.1:1/"}),
        );
        assert_eq!(refusals.len(), 1, "{refusals:?}");
        assert!(!refusals[0].starts_with("groups["), "{refusals:?}");
    }
}
