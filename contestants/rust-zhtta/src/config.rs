//! Command-line options. Each tunable replays one version or sweep of the seed 001 study.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

pub const USAGE: &str = "usage: rust-zhtta --port N --docroot DIR [--host ADDR] [--syslog-port N] \
[--read whole|chunked] [--chunk-size BYTES] [--responders N] [--schedule fifo|spt] \
[--cache off|MB] [--cache-policy lru|fifo] [--connection-threads auto|N] [--syslog-mode count|parse] \
[--tls-port N] [--syslog-tls-port N] [--grpc-port N] [--grpc-tls-port N] \
[--tls-cert PEM --tls-key PEM] | --version";

const MIN_CHUNK: usize = 1024;
const MAX_CHUNK: usize = 512 * 1024 * 1024;
const MAX_RESPONDERS: usize = 1024;
const MAX_CACHE_MB: u64 = 64 * 1024;
const MAX_CONNECTION_THREADS: usize = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadMode {
    /// The starting code: read the whole file into memory, then write it.
    Whole,
    /// zhtta-v1: read and write `chunk_size` bytes at a time through one reused buffer.
    Chunked,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    Fifo,
    /// zhtta-v3: shortest processing time first, keyed by file size.
    Spt,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CachePolicy {
    /// Evicts the entry used longest ago.
    Lru,
    /// Evicts the entry inserted longest ago, however often it is used.
    Fifo,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    pub capacity_bytes: u64,
    pub policy: CachePolicy,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub port: u16,
    /// Where the HTTP and syslog ports listen: loopback, and the `--host` address if it
    /// is another one.
    pub addresses: Vec<IpAddr>,
    pub syslog_port: Option<u16>,
    /// Spec §7.1: parse every syslog message (`--syslog-mode parse`), or only count them.
    pub syslog_parse: bool,
    pub docroot: PathBuf,
    pub read: ReadMode,
    pub chunk_size: usize,
    pub responders: usize,
    pub schedule: Schedule,
    pub cache: Option<CacheConfig>,
    /// `None`: as many as the machine's limits allow.
    pub connection_threads: Option<usize>,
    /// The gRPC port with prior knowledge (spec §16, tonic's own listener).
    pub grpc_port: Option<u16>,
    /// HTTPS, RFC 5425 syslog and gRPC over TLS, when a TLS port is given.
    pub tls: Option<TlsConfig>,
}

/// The TLS ports (spec §12, §15) and the run's certificate and key, PEM files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsConfig {
    pub port: Option<u16>,
    pub syslog_port: Option<u16>,
    /// gRPC over TLS by ALPN h2 (spec §16).
    pub grpc_port: Option<u16>,
    pub cert: PathBuf,
    pub key: PathBuf,
}

pub enum Command {
    Serve(Config),
    Version,
}

impl Command {
    pub fn from_args(args: impl IntoIterator<Item = String>) -> Result<Command, String> {
        let mut options = Options::default();
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            if flag == "--version" {
                return Ok(Command::Version);
            }
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            options.set(&flag, value)?;
        }
        options.finish().map(Command::Serve)
    }
}

/// The command line as it is read, before the checks that need all of it.
struct Options {
    config: Config,
    port: Option<u16>,
    host: IpAddr,
    docroot: Option<PathBuf>,
    cache_mb: Option<u64>,
    policy: CachePolicy,
    tls: TlsConfig,
}

impl Default for Options {
    fn default() -> Options {
        let config = Config {
            port: 0,
            addresses: Vec::new(),
            syslog_port: None,
            syslog_parse: false,
            docroot: PathBuf::new(),
            read: ReadMode::Whole,
            chunk_size: 512_000,
            responders: 1,
            schedule: Schedule::Fifo,
            cache: None,
            connection_threads: None,
            grpc_port: None,
            tls: None,
        };
        Options {
            config,
            port: None,
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            docroot: None,
            cache_mb: None,
            policy: CachePolicy::Lru,
            tls: TlsConfig::default(),
        }
    }
}

impl Options {
    fn set(&mut self, flag: &str, value: String) -> Result<(), String> {
        let config = &mut self.config;
        match flag {
            "--port" => self.port = Some(parse_port(&value)?),
            "--host" => {
                self.host = value
                    .parse()
                    .map_err(|_| format!("bad address {value:?}"))?
            }
            "--syslog-port" => config.syslog_port = Some(parse_port(&value)?),
            "--syslog-mode" => config.syslog_parse = parse_syslog_mode(&value)?,
            "--docroot" => self.docroot = Some(PathBuf::from(value)),
            "--read" => config.read = parse_read_mode(&value)?,
            "--chunk-size" => config.chunk_size = parse_chunk_size(&value)?,
            "--responders" => config.responders = parse_responders(&value)?,
            "--schedule" => config.schedule = parse_schedule(&value)?,
            "--cache" => self.cache_mb = parse_cache_size(&value)?,
            "--cache-policy" => self.policy = parse_cache_policy(&value)?,
            "--connection-threads" => config.connection_threads = parse_connection_threads(&value)?,
            "--tls-port" => self.tls.port = Some(parse_port(&value)?),
            "--syslog-tls-port" => self.tls.syslog_port = Some(parse_port(&value)?),
            "--grpc-port" => config.grpc_port = Some(parse_port(&value)?),
            "--grpc-tls-port" => self.tls.grpc_port = Some(parse_port(&value)?),
            "--tls-cert" => self.tls.cert = PathBuf::from(value),
            "--tls-key" => self.tls.key = PathBuf::from(value),
            _ => return Err(format!("unknown option {flag}")),
        }
        Ok(())
    }

    fn finish(self) -> Result<Config, String> {
        let tls = self.tls;
        let has_files = !tls.cert.as_os_str().is_empty() && !tls.key.as_os_str().is_empty();
        let has_port = tls.port.is_some() || tls.syslog_port.is_some() || tls.grpc_port.is_some();
        if has_port && !has_files {
            return Err("a TLS port needs --tls-cert and --tls-key".into());
        }
        let policy = self.policy;
        Ok(Config {
            port: self.port.ok_or("--port is required")?,
            addresses: addresses(self.host),
            docroot: self.docroot.ok_or("--docroot is required")?,
            cache: self.cache_mb.map(|mb| CacheConfig {
                capacity_bytes: mb * 1024 * 1024,
                policy,
            }),
            tls: has_port.then_some(tls),
            ..self.config
        })
    }
}

/// Loopback, and `host` if it is another address.
fn addresses(host: IpAddr) -> Vec<IpAddr> {
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    if host == loopback {
        vec![loopback]
    } else {
        vec![loopback, host]
    }
}

fn parse_port(value: &str) -> Result<u16, String> {
    value.parse().map_err(|_| format!("bad port {value:?}"))
}

fn parse_read_mode(value: &str) -> Result<ReadMode, String> {
    match value {
        "whole" => Ok(ReadMode::Whole),
        "chunked" => Ok(ReadMode::Chunked),
        _ => Err(format!("read must be whole or chunked, not {value:?}")),
    }
}

/// Plain bytes, or a binary `KB`/`MB` suffix as the seed's sweep wrote them (1KB … 512MB).
fn parse_chunk_size(value: &str) -> Result<usize, String> {
    let upper = value.to_ascii_uppercase();
    let (digits, unit) = if let Some(kb) = upper.strip_suffix("KB") {
        (kb, 1024)
    } else if let Some(mb) = upper.strip_suffix("MB") {
        (mb, 1024 * 1024)
    } else {
        (upper.as_str(), 1)
    };
    let size = digits
        .trim()
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("bad chunk size {value:?}"))?;
    if (MIN_CHUNK..=MAX_CHUNK).contains(&size) {
        Ok(size)
    } else {
        Err(format!("chunk size must be 1KB to 512MB, not {value:?}"))
    }
}

fn parse_responders(value: &str) -> Result<usize, String> {
    parse_in_range(value, 1..=MAX_RESPONDERS)
        .ok_or_else(|| format!("responders must be 1 to 1024, not {value:?}"))
}

/// A decimal integer within `range`, or `None`.
fn parse_in_range<T: std::str::FromStr + PartialOrd>(
    value: &str,
    range: std::ops::RangeInclusive<T>,
) -> Option<T> {
    value.parse().ok().filter(|n| range.contains(n))
}

fn parse_syslog_mode(value: &str) -> Result<bool, String> {
    match value {
        "count" => Ok(false),
        "parse" => Ok(true),
        _ => Err(format!("syslog mode must be count or parse, not {value:?}")),
    }
}

fn parse_schedule(value: &str) -> Result<Schedule, String> {
    match value {
        "fifo" => Ok(Schedule::Fifo),
        "spt" => Ok(Schedule::Spt),
        _ => Err(format!("schedule must be fifo or spt, not {value:?}")),
    }
}

/// `off`, or the cache size in MB.
fn parse_cache_size(value: &str) -> Result<Option<u64>, String> {
    parse_optional(value, "off", 1..=MAX_CACHE_MB)
        .ok_or_else(|| format!("cache must be off or 1 to 65536 (MB), not {value:?}"))
}

/// `auto`, or a thread count.
fn parse_connection_threads(value: &str) -> Result<Option<usize>, String> {
    parse_optional(value, "auto", 1..=MAX_CONNECTION_THREADS)
        .ok_or_else(|| format!("connection threads must be auto or 1 to 1048576, not {value:?}"))
}

/// `keyword` for none, or an integer within `range`.
fn parse_optional<T: std::str::FromStr + PartialOrd>(
    value: &str,
    keyword: &str,
    range: std::ops::RangeInclusive<T>,
) -> Option<Option<T>> {
    if value == keyword {
        Some(None)
    } else {
        parse_in_range(value, range).map(Some)
    }
}

fn parse_cache_policy(value: &str) -> Result<CachePolicy, String> {
    match value {
        "lru" => Ok(CachePolicy::Lru),
        "fifo" => Ok(CachePolicy::Fifo),
        _ => Err(format!("cache policy must be lru or fifo, not {value:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, String> {
        match Command::from_args(args.iter().map(|a| a.to_string()))? {
            Command::Serve(config) => Ok(config),
            Command::Version => Err("version".into()),
        }
    }

    #[test]
    fn defaults_are_the_starting_code() {
        let config = parse(&["--port", "1", "--docroot", "/tmp"]).unwrap();
        assert_eq!(config.read, ReadMode::Whole);
        assert_eq!(config.responders, 1);
        assert_eq!(config.schedule, Schedule::Fifo);
        assert_eq!(config.chunk_size, 512_000);
        assert!(config.cache.is_none());
    }

    #[test]
    fn host_adds_an_address_besides_loopback() {
        let base = ["--port", "1", "--docroot", "/"];
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(parse(&base).unwrap().addresses, [loopback]);
        let same = parse(&[&base[..], &["--host", "127.0.0.1"]].concat()).unwrap();
        assert_eq!(same.addresses, [loopback]);
        let lab = parse(&[&base[..], &["--host", "10.1.2.3"]].concat()).unwrap();
        assert_eq!(lab.addresses, [loopback, "10.1.2.3".parse().unwrap()]);
        assert!(parse(&[&base[..], &["--host", "lab"]].concat()).is_err());
    }

    #[test]
    fn chunk_size_accepts_the_seed_sweep_units_and_bounds() {
        assert_eq!(parse_chunk_size("1KB"), Ok(1024));
        assert_eq!(parse_chunk_size("512MB"), Ok(512 * 1024 * 1024));
        assert_eq!(parse_chunk_size("512000"), Ok(512_000));
        assert!(parse_chunk_size("1023").is_err());
        assert!(parse_chunk_size("513MB").is_err());
        assert!(parse_chunk_size("lots").is_err());
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(parse(&["--port", "1", "--docroot", "/", "--responders", "0"]).is_err());
        assert!(parse(&["--port", "1", "--docroot", "/", "--responders", "1025"]).is_err());
        assert!(parse(&["--port", "1", "--docroot", "/", "--cache", "big"]).is_err());
        assert!(parse(&["--port", "1", "--docroot", "/", "--bogus", "1"]).is_err());
        assert!(parse(&["--docroot", "/"]).is_err());
    }

    #[test]
    fn a_tls_port_needs_the_certificate_and_the_key() {
        let base = ["--port", "1", "--docroot", "/"];
        assert_eq!(parse(&base).unwrap().tls, None);
        let files = ["--tls-cert", "c.pem", "--tls-key", "k.pem"];
        for port in ["--tls-port", "--syslog-tls-port", "--grpc-tls-port"] {
            assert!(parse(&[&base[..], &[port, "2"]].concat()).is_err());
            let without_key = [&base[..], &[port, "2"], &files[..2]].concat();
            assert!(parse(&without_key).is_err());
        }
        let both = [
            &base[..],
            &["--tls-port", "2", "--syslog-tls-port", "3"],
            &files,
        ]
        .concat();
        let tls = parse(&both).unwrap().tls.unwrap();
        assert_eq!((tls.port, tls.syslog_port), (Some(2), Some(3)));
        assert_eq!(
            (tls.cert.to_str(), tls.key.to_str()),
            (Some("c.pem"), Some("k.pem"))
        );
        assert!(parse(&[&base[..], &["--tls-port", "x"], &files].concat()).is_err());
    }

    #[test]
    fn cache_size_is_in_megabytes() {
        let config = parse(&[
            "--port",
            "1",
            "--docroot",
            "/",
            "--cache",
            "64",
            "--cache-policy",
            "fifo",
        ])
        .unwrap();
        let cache = config.cache.unwrap();
        assert_eq!(cache.capacity_bytes, 64 << 20);
        assert_eq!(cache.policy, CachePolicy::Fifo);
    }
}
