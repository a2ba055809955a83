//! The address load goes to. Anything outside 127.0.0.0/8 that the plan does not list in its
//! `allowed_hosts` is refused here, before any socket exists, because the lab must never load
//! a machine it does not own. No name is resolved: an IPv4 literal or `localhost` only.

use std::net::Ipv4Addr;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TargetError {
    #[error("target {0:?} is not a URL like http://127.0.0.1:8080/path")]
    Malformed(String),
    #[error("target scheme {0:?} is not supported here (use {1})")]
    Scheme(String, &'static str),
    #[error("target host {0:?} is not on loopback: serverlab-load only sends to 127.0.0.0/8 and the addresses a plan lists in allowed_hosts")]
    NotLoopback(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub ip: Ipv4Addr,
    pub port: u16,
    /// Path and query, always starting with `/`.
    pub path: String,
    /// The `Host` header value, as the user wrote it.
    pub authority: String,
    /// The host as written (an IPv4 literal or `localhost`): the TLS server name.
    pub host: String,
    /// Whether the scheme asks for TLS (`https`, `wss`, syslog's `tls`).
    pub tls: bool,
}

impl Target {
    /// Parses `url`; a host off loopback must be one of `allowed`.
    pub fn parse(url: &str, http: bool, allowed: &[Ipv4Addr]) -> Result<Target, TargetError> {
        let malformed = || TargetError::Malformed(url.to_string());
        let (scheme, rest) = url.split_once("://").ok_or_else(malformed)?;
        let schemes: &[&str] = if http {
            &["http", "https", "ws", "wss"]
        } else {
            &["http", "tcp", "udp", "syslog", "tls"]
        };
        if !schemes.contains(&scheme) {
            let hint = if http {
                "http://, https://, ws:// or wss://"
            } else {
                "tcp://, tls:// or udp://"
            };
            return Err(TargetError::Scheme(scheme.to_string(), hint));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h, p.parse::<u16>().map_err(|_| malformed())?),
            None if matches!(scheme, "http" | "ws") => (authority, 80),
            None if matches!(scheme, "https" | "wss") => (authority, 443),
            None => return Err(malformed()),
        };
        if port == 0 || host.is_empty() {
            return Err(malformed());
        }
        let ip = match host {
            "localhost" => Ipv4Addr::LOCALHOST,
            other => other
                .parse::<Ipv4Addr>()
                .map_err(|_| TargetError::NotLoopback(other.to_string()))?,
        };
        if !may_send_to(ip, allowed) {
            return Err(TargetError::NotLoopback(host.to_string()));
        }
        if !is_request_path(path) {
            return Err(malformed());
        }
        Ok(Target {
            ip,
            port,
            path: path.to_string(),
            authority: authority.to_string(),
            host: host.to_string(),
            tls: matches!(scheme, "https" | "wss" | "tls"),
        })
    }
}

/// Whether load may go to (or come from) `ip`: loopback, or an address the plan allows.
pub fn may_send_to(ip: Ipv4Addr, allowed: &[Ipv4Addr]) -> bool {
    ip.is_loopback() || allowed.contains(&ip)
}

/// A path (and query) that can stand in a request line as is.
pub fn is_request_path(path: &str) -> bool {
    path.starts_with('/') && !path.bytes().any(|b| b <= b' ' || b == 0x7f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_loopback_urls() {
        let t = Target::parse("http://127.0.0.1:8080/perf?x=1", true, &[]).unwrap();
        assert_eq!(
            (t.ip, t.port, t.path.as_str()),
            (Ipv4Addr::LOCALHOST, 8080, "/perf?x=1")
        );
        let t = Target::parse("http://localhost:9", true, &[]).unwrap();
        assert_eq!(t.path, "/");
        assert_eq!(
            Target::parse("tcp://127.0.0.3:514", false, &[])
                .unwrap()
                .port,
            514
        );
    }

    #[test]
    fn https_and_wss_targets_ask_for_tls_and_name_their_host() {
        let t = Target::parse("https://localhost/perf", true, &[]).unwrap();
        assert_eq!((t.tls, t.port, t.host.as_str()), (true, 443, "localhost"));
        assert!(
            Target::parse("wss://127.0.0.1:9/ws", true, &[])
                .unwrap()
                .tls
        );
        assert!(!Target::parse("ws://127.0.0.1:9/ws", true, &[]).unwrap().tls);
        assert!(
            Target::parse("tls://127.0.0.1:6514", false, &[])
                .unwrap()
                .tls
        );
        assert!(Target::parse("tls://127.0.0.1:6514", true, &[]).is_err());
    }

    #[test]
    fn refuses_everything_off_loopback() {
        for url in [
            "http://192.168.1.1:80/",
            "http://example.com/",
            "http://[::1]:80/",
        ] {
            assert!(matches!(
                Target::parse(url, true, &[Ipv4Addr::new(198, 18, 0, 2)]),
                Err(TargetError::NotLoopback(_))
            ));
        }
        assert!(matches!(
            Target::parse("ftp://127.0.0.1:1/", true, &[]),
            Err(TargetError::Scheme(..))
        ));
        assert!(Target::parse("127.0.0.1:80", true, &[]).is_err());
        assert!(Target::parse("http://127.0.0.1:0/", true, &[]).is_err());
        assert!(Target::parse("http://127.0.0.1:1/a b", true, &[]).is_err());
    }

    #[test]
    fn an_address_off_loopback_only_where_allowed() {
        let allowed = [Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(10, 0, 0, 7)];
        let t = Target::parse("http://198.18.0.2:8080/perf", true, &allowed).unwrap();
        assert_eq!(
            (t.ip, t.authority.as_str()),
            (allowed[0], "198.18.0.2:8080")
        );
        assert_eq!(
            Target::parse("udp://10.0.0.7:514", false, &allowed)
                .unwrap()
                .ip,
            allowed[1]
        );
        for url in [
            "http://198.18.0.3:80/",
            "http://10.0.0.8/",
            "http://[::1]:80/",
        ] {
            assert!(
                matches!(
                    Target::parse(url, true, &allowed),
                    Err(TargetError::NotLoopback(_))
                ),
                "{url}"
            );
        }
        // Listing an address never lets a name through: no resolution.
        assert!(Target::parse("http://example.com/", true, &allowed).is_err());
    }
}
