//! The spin-then-sleep wait of latency-bound plans. A worker that sleeps in `epoll_wait`
//! between the steps of an exchange adds the kernel's wake-up latency to every response time
//! it measures; in a test of one connection at a time that is a large share of the figure.
//! Spinning instead (polling the sockets without blocking) removes it, but burns the CPU it
//! runs on, so it is chosen only when that CPU is the engine's alone (`choose`), and it stops
//! spinning once nothing has happened for longer than the waits it has lately seen
//! (`Budget`), then sleeps until the next wait begins.

use std::cell::Cell;
use std::future::poll_fn;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use crate::plan::{IoBackend, Plan, WaitMode};

/// Never spin longer than this for one wait: past it, a wake-up's few tens of microseconds
/// are a small share of what is being measured.
const MAX_SPIN: Duration = Duration::from_millis(1);
/// The shortest spin the budget adapts down to.
const MIN_SPIN: Duration = Duration::from_micros(50);
/// Waits between adaptations of the budget.
const WINDOW: usize = 64;
/// How long the CPUs are watched before the run to see that nothing else runs there.
const PROBE: Duration = Duration::from_millis(50);
/// Share of the probe the engine's CPUs may have been busy with other work.
const BUSY_SHARE: f64 = 0.2;

/// Which wait the workers use, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitChoice {
    pub spin: bool,
    pub reason: String,
}

/// The wait a plan gets: as asked, or under `auto` spinning only for a latency-bound plan on
/// the epoll loop when the engine has a CPU to itself (`cpu_to_itself`).
pub fn choose(plan: &Plan, threads: usize) -> WaitChoice {
    let (spin, reason) = match plan.wait {
        WaitMode::Spin => (true, "asked (--wait spin)".to_string()),
        WaitMode::Sleep => (false, "asked (--wait sleep)".to_string()),
        WaitMode::Auto if plan.io == IoBackend::IoUring => {
            (false, "the io_uring loop sleeps".to_string())
        }
        WaitMode::Auto if !plan.latency_bound() => (false, "not latency-bound".to_string()),
        WaitMode::Auto => match cpu_to_itself(threads) {
            Ok(cpus) => (true, format!("latency-bound, CPUs {cpus:?} to itself")),
            Err(why) => (false, format!("latency-bound, but {why}")),
        },
    };
    WaitChoice { spin, reason }
}

/// The engine has a CPU to itself when (1) it is pinned: its affinity is a strict subset of
/// the online CPUs, with one CPU per worker at least; (2) no other process (its own ancestors,
/// which wait for it, and kernel threads aside) is pinned to any of them — a server pinned
/// beside it would be starved; (3) those CPUs were idle, at most `BUSY_SHARE` busy, while it
/// watched them for `PROBE` before the run — unpinned neighbours are there too.
pub fn cpu_to_itself(threads: usize) -> Result<Vec<usize>, String> {
    let mine = affinity().ok_or("its CPU affinity is unreadable")?;
    let online = online_cpus();
    if mine.len() >= online {
        return Err("it is not pinned to a subset of the CPUs".into());
    }
    if mine.len() < threads {
        return Err(format!("{threads} workers share {} CPUs", mine.len()));
    }
    if let Some(other) = pinned_neighbour(&mine, online) {
        return Err(format!("{other} is pinned to its CPUs too"));
    }
    let busy = busy_share(&mine, PROBE);
    if busy > BUSY_SHARE {
        return Err(format!(
            "its CPUs were {:.0}% busy with other work",
            busy * 100.0
        ));
    }
    Ok(mine)
}

fn online_cpus() -> usize {
    // SAFETY: sysconf only reads a system setting.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as usize
}

/// The CPUs this process may run on.
fn affinity() -> Option<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity fills it.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        set
    };
    // SAFETY: CPU_ISSET reads the set within its size.
    Some(
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
            .collect(),
    )
}

/// A process other than this one and its ancestors, not a kernel thread, whose affinity is
/// narrowed to some CPUs including one of `mine`: "name (pid N)".
fn pinned_neighbour(mine: &[usize], online: usize) -> Option<String> {
    let ancestors = ancestors();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if ancestors.contains(&pid) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
        };
        // Kernel threads have no memory map; per-CPU ones are pinned everywhere by design.
        if field("VmSize:").is_none() {
            continue;
        }
        let Some(cpus) = field("Cpus_allowed_list:").map(|l| parse_cpu_list(&l)) else {
            continue;
        };
        if cpus.len() < online && cpus.iter().any(|c| mine.contains(c)) {
            let name = field("Name:").unwrap_or_default();
            return Some(format!("{name} (pid {pid})"));
        }
    }
    None
}

/// This process and its ancestors up to init.
fn ancestors() -> Vec<u32> {
    let mut out = vec![std::process::id()];
    while let Some(&pid) = out.last() {
        let parent = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("PPid:").and_then(|v| v.trim().parse().ok()))
            });
        match parent {
            Some(p) if p > 1 && !out.contains(&p) => out.push(p),
            _ => break,
        }
    }
    out
}

/// `0-2,5` → [0, 1, 2, 5].
pub fn parse_cpu_list(list: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let mut ends = part.splitn(2, '-').map(|n| n.parse::<usize>().ok());
        match (ends.next().flatten(), ends.next()) {
            (Some(a), None) => out.push(a),
            (Some(a), Some(Some(b))) => out.extend(a..=b),
            _ => {}
        }
    }
    out
}

/// The share of `span` the CPUs `mine` spent on anything but idling, from /proc/stat (the
/// engine itself sleeps meanwhile). Unreadable counts as busy.
fn busy_share(mine: &[usize], span: Duration) -> f64 {
    let Some(before) = cpu_ticks(mine) else {
        return 1.0;
    };
    std::thread::sleep(span);
    let Some(after) = cpu_ticks(mine) else {
        return 1.0;
    };
    let total = after.0.saturating_sub(before.0).max(1);
    let idle = after.1.saturating_sub(before.1);
    total.saturating_sub(idle) as f64 / total as f64
}

/// (all ticks, idle ticks) of the CPUs `mine`, summed.
fn cpu_ticks(mine: &[usize]) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let mut sums = (0, 0);
    for line in stat.lines() {
        let mut fields = line.split_whitespace();
        let Some(cpu) = fields
            .next()
            .and_then(|n| n.strip_prefix("cpu"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        if !mine.contains(&cpu) {
            continue;
        }
        let ticks: Vec<u64> = fields.filter_map(|f| f.parse().ok()).collect();
        sums.0 += ticks.iter().sum::<u64>();
        // idle and iowait
        sums.1 += ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    }
    Some(sums)
}

/// What the worker's sockets tell the spinner: a step was made (a connect begun or done,
/// bytes moved, an attempt ended), and whether a wait has begun since it last slept.
#[derive(Default)]
pub struct Steps {
    count: Cell<u64>,
    armed: Cell<bool>,
    sleeper: Cell<Option<Waker>>,
}

impl Steps {
    /// A step; it may begin a wait, so a sleeping spinner wakes.
    #[inline]
    pub fn step(&self) {
        self.count.set(self.count.get() + 1);
        self.armed.set(true);
        if let Some(waker) = self.sleeper.take() {
            waker.wake();
        }
    }

    async fn next_wait(&self) {
        poll_fn(|cx| {
            if self.armed.replace(false) {
                Poll::Ready(())
            } else {
                self.sleeper.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        })
        .await
    }
}

/// How long to spin before sleeping: twice the 90th percentile of the last `WINDOW` waits
/// that spinning caught, within [`MIN_SPIN`, `MAX_SPIN`]; when more than one wait in eight
/// outlasted the budget it starts again from `MAX_SPIN`, so a server that slowed down is
/// followed rather than slept through.
pub struct Budget {
    now: Duration,
    caught: Vec<Duration>,
    missed: usize,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            now: MAX_SPIN,
            caught: Vec::with_capacity(WINDOW),
            missed: 0,
        }
    }
}

impl Budget {
    pub fn now(&self) -> Duration {
        self.now
    }

    /// A wait that ended after `waited`, while spinning.
    pub fn caught(&mut self, waited: Duration) {
        self.caught.push(waited);
        self.adapt();
    }

    /// A wait that outlasted the budget (the spinner went to sleep).
    pub fn missed(&mut self) {
        self.missed += 1;
        self.adapt();
    }

    fn adapt(&mut self) {
        if self.caught.len() + self.missed < WINDOW {
            return;
        }
        self.now = if self.missed * 8 > WINDOW || self.caught.is_empty() {
            MAX_SPIN
        } else {
            self.caught.sort_unstable();
            let p90 = self.caught[(self.caught.len() * 9 / 10).min(self.caught.len() - 1)];
            (p90 * 2).clamp(MIN_SPIN, MAX_SPIN)
        };
        self.caught.clear();
        self.missed = 0;
    }
}

/// The spinner task of one worker: after each step it keeps the event loop polling its
/// sockets without blocking (each `yield_now` makes tokio poll epoll with a zero timeout)
/// until nothing has happened for the budget, then sleeps until a step begins a wait.
/// Adds to `spun` the time its polls found nothing: the CPU spent spinning.
pub async fn spin(steps: &Steps, spun: &Cell<Duration>, counters: &crate::stats::Counters) {
    let mut budget = Budget::default();
    loop {
        steps.next_wait().await;
        let mut last = steps.count.get();
        let mut since = Instant::now();
        loop {
            let before = Instant::now();
            tokio::task::yield_now().await;
            let after = Instant::now();
            let count = steps.count.get();
            if count != last {
                budget.caught(after - since);
                last = count;
                since = after;
            } else {
                spun.set(spun.get() + (after - before));
                counters.spun(after - before);
                if after - since >= budget.now() {
                    budget.missed();
                    break;
                }
            }
        }
        // Every step until now was seen while spinning: sleep until the next one.
        steps.armed.set(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_read_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0-2,5"), vec![0, 1, 2, 5]);
        assert_eq!(parse_cpu_list("1"), vec![1]);
        assert_eq!(parse_cpu_list(""), Vec::<usize>::new());
    }

    #[test]
    fn the_budget_follows_the_waits_it_catches() {
        let mut budget = Budget::default();
        assert_eq!(budget.now(), MAX_SPIN);
        for i in 0..WINDOW as u64 {
            budget.caught(Duration::from_micros(100 + i % 10));
        }
        // The 58th of the 64 sorted waits (100..=103 µs seven times each, 104..=109 six
        // times) is 108 µs: twice that.
        assert_eq!(budget.now(), Duration::from_micros(216));
        for _ in 0..WINDOW {
            budget.caught(Duration::from_micros(5));
        }
        assert_eq!(budget.now(), MIN_SPIN);
    }

    #[test]
    fn many_missed_waits_send_the_budget_back_to_its_ceiling() {
        let mut budget = Budget::default();
        for _ in 0..WINDOW {
            budget.caught(Duration::from_micros(5));
        }
        assert_eq!(budget.now(), MIN_SPIN);
        for i in 0..WINDOW {
            if i % 4 == 0 {
                budget.missed();
            } else {
                budget.caught(Duration::from_micros(5));
            }
        }
        assert_eq!(budget.now(), MAX_SPIN);
    }

    #[test]
    fn a_plan_that_is_not_latency_bound_never_spins_unasked() {
        let mut plan: Plan =
            serde_json::from_str(r#"{"target": "http://127.0.0.1:1/", "connections": 100}"#)
                .unwrap();
        let choice = choose(&plan, 1);
        assert!(!choice.spin, "{choice:?}");
        assert_eq!(choice.reason, "not latency-bound");
        plan.wait = WaitMode::Spin;
        assert!(choose(&plan, 1).spin);
        plan.connections = 1;
        plan.wait = WaitMode::Sleep;
        assert!(!choose(&plan, 1).spin);
    }

    #[test]
    fn an_unpinned_engine_does_not_have_a_cpu_to_itself() {
        // The test process runs on every CPU unless someone pinned it; then the rule must
        // not blame pinning.
        let mine = affinity().unwrap();
        let verdict = cpu_to_itself(1);
        if mine.len() >= online_cpus() {
            assert_eq!(
                verdict.unwrap_err(),
                "it is not pinned to a subset of the CPUs"
            );
        } else {
            assert_ne!(
                verdict.err().as_deref(),
                Some("it is not pinned to a subset of the CPUs")
            );
        }
    }
}
