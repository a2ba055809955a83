//! Command-line flags, close to wrk and oha, turned into a `Plan`. Anything the flags cannot
//! say goes in a plan file (`--plan FILE`), which then stands alone.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::plan::{
    BehaviourFlags, BehaviourSpec, Http2Mode, Http2Spec, IoBackend, KxGroup, PacerFlags, PacerSpec,
    Plan, PlanError, SharedFlags, TlsSpec, WaitMode,
};

#[derive(Debug, Parser)]
#[command(
    name = "serverlab-load",
    version,
    about = "Load generator for serverlab: closed and open loop, users, long poll, comet, slow clients, syslog",
    after_help = "Only 127.0.0.0/8 targets (and the addresses given with --allow-host) are accepted. Exit codes: 0 run done (from --plan, even with no answer), 1 run failed (or a second SIGTERM/SIGINT), 2 plan refused (--check: any plan refused), 3 no answer (a run from flags that got no answer at all)."
)]
pub struct Args {
    /// Target URL, e.g. http://127.0.0.1:8080/perf (tcp:// or udp:// for --syslog)
    pub url: Option<String>,
    /// A plan file (JSON); excludes every load flag
    #[arg(long)]
    pub plan: Option<PathBuf>,
    /// JSON Lines on stdout: interval lines and a summary line
    #[arg(long)]
    pub json: bool,
    /// Print the JSON schema of the output lines and exit
    #[arg(long)]
    pub print_schema: bool,
    /// Print as JSON what each behaviour and pacer is (its name, suite and plan keys with
    /// their types and defaults, method, push, datagram, TLS and HTTP/2) and exit
    #[arg(long)]
    pub print_facts: bool,
    /// Judge plans without running them: the plan the flags make, or else plans as JSON
    /// Lines on stdin; prints one verdict line each (the normalised plan, or the refusal and
    /// the field it is about) and exits 0 if all are accepted, 2 if any is refused
    #[arg(long)]
    pub check: bool,
    /// Open every socket in this network namespace (/var/run/netns/NAME); may go with --plan
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Socket loop: auto (io_uring for closed-loop keep-alive, new-connection and sequential
    /// requests when the kernel has it), epoll, io_uring; may go with --plan
    #[arg(long, value_enum)]
    pub io: Option<IoBackend>,
    /// How workers wait for sockets: auto (spin, then sleep, for latency-bound plans when the
    /// engine has a CPU to itself), spin (force it, on either loop), sleep; may go with --plan
    #[arg(long, value_enum)]
    pub wait: Option<WaitMode>,
    /// An IPv4 address off loopback the target (or a --source) may be (repeatable); adds to
    /// a plan's allowed_hosts, so it may go with --plan
    #[arg(long = "allow-host", value_name = "ADDR")]
    pub allow_hosts: Vec<String>,
    /// Merge several engines' --json outputs of one run (one file each) into one output:
    /// counts summed, histograms added; --json prints JSON Lines, else the human summary
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub merge: Vec<PathBuf>,

    /// Concurrent connections
    #[arg(short = 'c', long)]
    pub connections: Option<u64>,
    /// Run for this long (e.g. 10s, 500ms, 2m)
    #[arg(short = 'd', long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Stop after this many requests
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,
    /// Each pacer's own flags, from its spec file
    #[command(flatten)]
    pub pacers: PacerFlags,

    /// Worker threads (default: one per usable CPU)
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Per-request timeout (e.g. 5s)
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Extra header "Name: value" (repeatable)
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Request method
    #[arg(short = 'm', long)]
    pub method: Option<String>,
    /// Request body from a file
    #[arg(long)]
    pub body_file: Option<PathBuf>,
    /// Source addresses, e.g. 127.0.0.2-127.0.0.250 (repeatable, comma lists allowed)
    #[arg(long = "source")]
    pub sources: Vec<String>,
    /// Interval between progress lines (e.g. 1s)
    #[arg(long, value_parser = parse_duration)]
    pub interval: Option<Duration>,
    /// Warm up first for at most this long (e.g. 20s), on the same connections; a line
    /// `measure` on stdin ends the warm-up at the next interval, and -d counts from there
    #[arg(long, value_parser = parse_duration)]
    pub warmup_max: Option<Duration>,

    /// Each behaviour's own flags, from its spec file
    #[command(flatten)]
    pub behaviours: BehaviourFlags,
    /// Push request duration_ms (long poll timeout; comet and SSE stream length; a gRPC
    /// Subscribe stream's deadline)
    #[arg(long)]
    pub push_ms: Option<u64>,
    /// TLS (https://, wss://, tls:// targets): trust only the CA certificates of this PEM file
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// TLS: accept any server certificate (explicit; the summary's plan records it)
    #[arg(long)]
    pub insecure: bool,
    /// TLS: resume sessions on new connections (tickets or session IDs); default on
    #[arg(long, value_parser = ["on", "off"])]
    pub tls_resume: Option<String>,
    /// TLS: the key exchange group offered; default x25519
    #[arg(long, value_enum)]
    pub tls_group: Option<KxGroup>,
    /// HTTP/2 over TLS, agreed by ALPN "h2" (an https:// target)
    #[arg(long, conflicts_with = "h2c")]
    pub h2: bool,
    /// HTTP/2 in cleartext with prior knowledge (an http:// target)
    #[arg(long)]
    pub h2c: bool,
    /// HTTP/2: concurrent streams per connection (h2load's -m); default 1
    #[arg(long, value_name = "M")]
    pub streams: Option<u64>,
}

pub use crate::plan::parse_duration;

impl Args {
    /// The plan these flags describe (not yet validated).
    pub fn into_plan(self) -> Result<Plan, PlanError> {
        let netns = self.netns.clone();
        let io = self.io;
        let wait = self.wait;
        let allow_hosts = self.allow_hosts.clone();
        let mut plan = self.flags_or_file()?;
        if netns.is_some() {
            plan.netns = netns;
        }
        if let Some(io) = io {
            plan.io = io;
        }
        if let Some(wait) = wait {
            plan.wait = wait;
        }
        plan.allowed_hosts.extend(allow_hosts);
        Ok(plan)
    }

    /// Whether any flag that says what to run is given (`--merge` runs nothing, and a plan
    /// file says it all).
    pub fn run_flags_given(&self) -> bool {
        self.plan.is_some()
            || self.check
            || self.netns.is_some()
            || self.io.is_some()
            || self.wait.is_some()
            || !self.allow_hosts.is_empty()
            || self.load_flags_given()
    }

    fn load_flags_given(&self) -> bool {
        self.url.is_some()
            || self.connections.is_some()
            || self.duration.is_some()
            || self.requests.is_some()
            || !self.pacers.chosen().is_empty()
            || self.threads.is_some()
            || self.timeout.is_some()
            || !self.headers.is_empty()
            || self.method.is_some()
            || self.body_file.is_some()
            || !self.sources.is_empty()
            || self.push_ms.is_some()
            || self.warmup_max.is_some()
            || !matches!(self.behaviours.chosen(&SharedFlags::default()), Ok(v) if v.is_empty())
            || self.tls_flags_given()
            || self.h2
            || self.h2c
            || self.streams.is_some()
    }

    fn tls_flags_given(&self) -> bool {
        self.tls_ca.is_some()
            || self.insecure
            || self.tls_resume.is_some()
            || self.tls_group.is_some()
    }

    /// The TLS settings the flags give, if any TLS flag is given.
    fn tls(&self) -> Option<TlsSpec> {
        self.tls_flags_given().then(|| TlsSpec {
            ca_file: self.tls_ca.clone(),
            insecure: self.insecure,
            resume: self.tls_resume.as_deref() != Some("off"),
            group: self.tls_group.unwrap_or_default(),
        })
    }

    /// The HTTP/2 settings `--h2` or `--h2c` give; `--streams` alone is refused.
    fn http2(&self) -> Result<Option<Http2Spec>, PlanError> {
        let mode = match (self.h2, self.h2c) {
            (true, _) => Http2Mode::H2,
            (false, true) => Http2Mode::H2c,
            (false, false) if self.streams.is_some() => {
                return Err(PlanError::Contradiction(
                    "http2",
                    "--streams needs --h2 or --h2c".into(),
                ))
            }
            (false, false) => return Ok(None),
        };
        Ok(Some(Http2Spec {
            mode,
            streams: self.streams.unwrap_or(1),
        }))
    }

    fn flags_or_file(self) -> Result<Plan, PlanError> {
        if let Some(path) = &self.plan {
            return self.plan_file(path);
        }
        let url = self.url.clone().ok_or_else(|| {
            PlanError::Contradiction("target", "give a target URL or --plan FILE".into())
        })?;
        let mut plan = Plan::for_target(&url);
        plan.pacer = self.pacer()?;
        plan.behaviour = self.behaviour()?;
        plan.tls = self.tls();
        plan.http2 = self.http2()?;
        plan.connections = self
            .connections
            .unwrap_or_else(|| plan.pacer.pace().default_connections());
        plan.threads = self.threads.unwrap_or(0);
        plan.requests = self.requests;
        plan.duration_s = self.duration.map(|d| d.as_secs_f64());
        if let Some(t) = self.timeout {
            plan.timeout_ms = t.as_millis() as u64;
        }
        if let Some(i) = self.interval {
            plan.interval_ms = i.as_millis() as u64;
        }
        plan.warmup_max_s = self.warmup_max.map(|d| d.as_secs_f64());
        if let Some(m) = self.method {
            plan.method = m;
        } else if let Some(method) = plan.behaviour.kind().own_method() {
            plan.method = method.into();
        } else if self.body_file.is_some() {
            plan.method = "POST".into();
        }
        plan.headers = self.headers;
        plan.body_file = self.body_file;
        plan.sources = self.sources;
        Ok(plan)
    }

    fn plan_file(&self, path: &PathBuf) -> Result<Plan, PlanError> {
        if self.load_flags_given() {
            return Err(PlanError::Contradiction(
                "flags",
                "--plan stands alone: put every setting in the plan file".into(),
            ));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| PlanError::PlanFile(format!("{}: {e}", path.display())))?;
        Plan::from_json(&text)
    }

    /// The one pacer the flags choose, each built by its spec file; closed when none is.
    fn pacer(&self) -> Result<PacerSpec, PlanError> {
        let mut chosen = self.pacers.chosen();
        match chosen.len() {
            0 => Ok(PacerSpec::default()),
            1 => Ok(chosen.remove(0)),
            _ => Err(PlanError::Contradiction(
                "flags",
                format!("choose one of {}", PacerFlags::names().join(", ")),
            )),
        }
    }

    /// The one behaviour the flags choose, each built by its spec file from its own defaults.
    fn behaviour(&self) -> Result<BehaviourSpec, PlanError> {
        let shared = SharedFlags {
            push_ms: self.push_ms,
            sequential: self.pacers.sequential.sequential,
        };
        self.one_of(self.behaviours.chosen(&shared)?)
    }

    /// The behaviour chosen, when the flags chose one at most.
    fn one_of(&self, mut chosen: Vec<BehaviourSpec>) -> Result<BehaviourSpec, PlanError> {
        match chosen.len() {
            0 => Ok(BehaviourSpec::default()),
            1 => Ok(chosen.remove(0)),
            _ if self.pacers.sequential.sequential
                && chosen.len() == 2
                && !self.behaviours.new_connection.new_connection =>
            {
                Err(PlanError::Contradiction(
                    "flags",
                    "--sequential works with plain requests only".into(),
                ))
            }
            _ => Err(PlanError::Contradiction(
                "flags",
                format!(
                    "choose one behaviour: {}",
                    BehaviourFlags::names().join(", ")
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{NewConnectionSpec, SlowReaderSpec, SyslogFraming, SyslogSpec};

    fn plan(args: &[&str]) -> Result<Plan, PlanError> {
        let mut all = vec!["serverlab-load"];
        all.extend_from_slice(args);
        Args::try_parse_from(all).unwrap().into_plan()
    }

    #[test]
    fn a_warm_up_phase_by_hand_is_the_plans_warmup_max_s_and_judged_as_one() {
        let p = plan(&["http://127.0.0.1:1/", "-d", "2s", "--warmup-max", "20s"]).unwrap();
        assert_eq!(p.warmup_max_s, Some(20.0));
        p.check().unwrap();
        let counted = plan(&["http://127.0.0.1:1/", "-n", "100", "--warmup-max", "20s"]);
        let err = counted.unwrap().check().unwrap_err();
        assert_eq!(err.0[0].field(), "warmup_max_s", "{err}");
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn wrk_style_flags_become_a_plan() {
        let p = plan(&[
            "http://127.0.0.1:8080/perf",
            "-c",
            "100",
            "-d",
            "5s",
            "-H",
            "X-A: b",
        ])
        .unwrap();
        assert_eq!(
            (p.connections, p.duration_s, p.requests),
            (100, Some(5.0), None)
        );
        assert_eq!(p.pacer, PacerSpec::default());
        assert_eq!(p.behaviour, BehaviourSpec::default());
        assert_eq!(p.headers, vec!["X-A: b".to_string()]);
    }

    #[test]
    fn open_loop_and_sequential_flags() {
        let p = plan(&[
            "http://127.0.0.1:1/",
            "-R",
            "500",
            "-n",
            "1000",
            "--new-connection",
            "--calls",
            "2",
        ])
        .unwrap();
        assert!(
            matches!(p.pacer, PacerSpec::Open(crate::plan::OpenSpec { rate, calls_per_connection: 2, .. }) if rate == 500.0)
        );
        let p = plan(&["http://127.0.0.1:1/", "--sequential", "-n", "6000"]).unwrap();
        assert_eq!(
            (p.pacer, p.behaviour, p.connections),
            (
                PacerSpec::Sequential(crate::plan::SequentialSpec {}),
                BehaviourSpec::NewConnection(NewConnectionSpec::default()),
                1
            )
        );
        let p = plan(&["http://127.0.0.1:1/", "--sequential", "-n", "60", "-c", "3"]).unwrap();
        assert_eq!(p.check().unwrap_err().field(), "connections");
    }

    #[test]
    fn close_client_makes_the_engine_close_and_asks_the_server_for_nothing() {
        let p = plan(&[
            "http://127.0.0.1:1/",
            "--sequential",
            "-n",
            "5",
            "--close",
            "client",
        ]);
        let p = p.unwrap();
        let spec = NewConnectionSpec {
            close: crate::plan::Closer::Client,
        };
        assert_eq!(p.behaviour, BehaviourSpec::NewConnection(spec));
        assert!(!p.awaits_close() && !p.asks_close());
        let p = plan(&["http://127.0.0.1:1/", "--sequential", "-n", "5"]).unwrap();
        assert!(
            p.awaits_close() && p.asks_close(),
            "the server closes by default"
        );
        let p = plan(&["http://127.0.0.1:1/", "-n", "5", "--close", "client"]).unwrap_err();
        assert!(p.to_string().contains("--new-connection"), "{p}");
        assert!(Args::try_parse_from(["serverlab-load", "--close", "later"]).is_err());
    }

    #[test]
    fn allowed_hosts_add_to_flags_and_to_plan_files() {
        let p = plan(&[
            "http://198.18.0.2:8080/perf",
            "-n",
            "50",
            "--allow-host",
            "198.18.0.2",
        ])
        .unwrap();
        assert_eq!(p.allowed_hosts, vec!["198.18.0.2".to_string()]);
        p.check().expect("a listed host is a target");
        let p = plan(&[
            "http://198.18.0.3:8080/perf",
            "-n",
            "50",
            "--allow-host",
            "198.18.0.2",
        ]);
        assert_eq!(p.unwrap().check().unwrap_err().field(), "target");
        let dir = std::env::temp_dir().join(format!("serverlab-allow-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("plan.json");
        std::fs::write(
            &file,
            r#"{"target": "http://198.18.0.2:1/", "requests": 1, "connections": 1, "allowed_hosts": ["198.18.0.9"]}"#,
        )
        .unwrap();
        let p = plan(&[
            "--plan",
            file.to_str().unwrap(),
            "--allow-host",
            "198.18.0.2",
        ])
        .unwrap();
        assert_eq!(p.allowed_hosts, vec!["198.18.0.9", "198.18.0.2"]);
        p.check().unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// The flags start from the plan's own defaults, not restated ones: a behaviour made from
    /// its naming flags alone equals the one a plan file makes from the same settings, and
    /// `--help` shows the spec's defaults.
    #[test]
    fn a_behaviour_made_by_flags_has_its_specs_defaults() {
        let cases: [(&[&str], &str); 3] = [
            (
                &["--read-bytes", "10", "--read-interval", "20ms"],
                r#"{"kind": "slow-reader", "read_bytes": 10, "read_interval_ms": 20}"#,
            ),
            (&["--syslog", "tcp"], r#"{"kind": "syslog"}"#),
            (
                &["--websocket", "e1", "--publish-every", "1s"],
                r#"{"kind": "websocket", "events": ["e1"], "publish": {"every_ms": 1000}}"#,
            ),
        ];
        for (flags, json) in cases {
            let mut args = vec!["http://127.0.0.1:1/"];
            args.extend_from_slice(flags);
            let from_file: BehaviourSpec = serde_json::from_str(json).unwrap();
            assert_eq!(plan(&args).unwrap().behaviour, from_file, "{flags:?}");
        }
        let shown = |name: &str| {
            let command = <Args as clap::CommandFactory>::command();
            let arg = command.get_arguments().find(|a| a.get_id() == name);
            let values = arg.unwrap().get_default_values().iter();
            values
                .map(|v| v.to_string_lossy())
                .collect::<Vec<_>>()
                .join(",")
        };
        let reader = SlowReaderSpec::default();
        assert_eq!(reader.rcvbuf, 4096);
        assert_eq!(shown("rcvbuf"), reader.rcvbuf.to_string());
        let syslog = SyslogSpec::default();
        assert_eq!(shown("message_bytes"), syslog.message_bytes.to_string());
        assert_eq!(shown("syslog_framing"), "newline");
        assert_eq!(syslog.syslog_framing, SyslogFraming::Newline);
        assert_eq!(shown("publishers"), "1");
    }

    /// A flag with a default still needs the flag that names its behaviour when given, and
    /// its default alone chooses nothing.
    #[test]
    fn a_defaulted_flag_given_alone_is_refused_and_absent_chooses_nothing() {
        for flag in ["--rcvbuf", "--message-bytes", "--publishers"] {
            let args = ["serverlab-load", "http://127.0.0.1:1/", flag, "300"];
            assert!(Args::try_parse_from(args).is_err(), "{flag}");
        }
        let args = [
            "serverlab-load",
            "http://127.0.0.1:1/",
            "--syslog-framing",
            "octet",
        ];
        assert!(Args::try_parse_from(args).is_err());
        let p = plan(&["http://127.0.0.1:1/", "-n", "5"]).unwrap();
        assert_eq!(p.behaviour, BehaviourSpec::default());
    }

    #[test]
    fn contradictions_are_refused() {
        assert!(plan(&["http://127.0.0.1:1/", "-R", "5", "--sequential", "-n", "5"]).is_err());
        assert!(plan(&[
            "http://127.0.0.1:1/",
            "--comet",
            "e1",
            "--new-connection",
            "-d",
            "1s"
        ])
        .is_err());
        assert!(plan(&["http://127.0.0.1:1/", "--longpoll", "e1", "-d", "1s"]).is_err());
        assert!(plan(&["--plan", "/nonexistent.json", "-c", "3"]).is_err());
        assert!(plan(&["-n", "3"]).is_err());
    }
}
