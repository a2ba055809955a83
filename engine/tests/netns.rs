//! `--netns`: the engine reaches a server that listens on the 127.0.0.1 of a namespace of
//! its own, which the host's 127.0.0.1 cannot reach. Needs root (`ip netns add`), as the
//! orchestrator's shaped links do.

use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};

fn engine() -> Command {
    Command::new(env!("CARGO_BIN_EXE_serverlab-load"))
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("ip (iproute2) runs");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A namespace with its loopback up and a Python HTTP server inside; both are removed when
/// this is dropped, even when an assertion failed.
struct NamespacedServer {
    name: String,
    server: Option<Child>,
}

impl NamespacedServer {
    /// A namespace with its loopback up and a server on its 127.0.0.1.
    fn start(name: &str) -> (NamespacedServer, u16) {
        let mut guard = NamespacedServer::empty(name);
        let port = guard.serve("127.0.0.1");
        (guard, port)
    }

    /// A namespace the host reaches through a veth pair addressed from 198.18.0.0/15 (a /30
    /// of 198.19.0.0/16 picked by this process's id, away from the lab's 198.18.0.0/24), with
    /// a server on the namespace's end; returns that end's address too.
    fn start_linked(name: &str) -> (NamespacedServer, u16, Ipv4Addr) {
        let mut guard = NamespacedServer::empty(name);
        let id = std::process::id();
        let n = id % 16_384;
        let base = u32::from(Ipv4Addr::new(198, 19, (n / 64) as u8, (n % 64 * 4) as u8));
        let (host, inside) = (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2));
        let (host_end, inside_end) = (format!("slh{id}"), format!("sln{id}"));
        // Made with its inside end already in the namespace: deleting the namespace then
        // deletes the pair, whatever failed in between.
        ip(&[
            "link",
            "add",
            &host_end,
            "type",
            "veth",
            "peer",
            "name",
            &inside_end,
            "netns",
            name,
        ]);
        ip(&["addr", "add", &format!("{host}/30"), "dev", &host_end]);
        ip(&["link", "set", &host_end, "up"]);
        ip(&[
            "-n",
            name,
            "addr",
            "add",
            &format!("{inside}/30"),
            "dev",
            &inside_end,
        ]);
        ip(&["-n", name, "link", "set", &inside_end, "up"]);
        let port = guard.serve(&inside.to_string());
        (guard, port, inside)
    }

    /// A fresh namespace with its loopback up, removed again when dropped.
    fn empty(name: &str) -> NamespacedServer {
        let _ = Command::new("ip").args(["netns", "delete", name]).output();
        ip(&["netns", "add", name]);
        let guard = NamespacedServer {
            name: name.to_string(),
            server: None,
        };
        ip(&["-n", name, "link", "set", "lo", "up"]);
        guard
    }

    /// Starts a Python HTTP server inside on `bind`; returns its port.
    fn serve(&mut self, bind: &str) -> u16 {
        // Port 0: the namespace's kernel picks a free port; the server prints it.
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.name,
                "python3",
                "-u",
                "-m",
                "http.server",
            ])
            .args(["0", "--bind", bind])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs");
        let stdout = self.server.insert(child).stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        // "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
        line.split_whitespace()
            .skip_while(|w| *w != "port")
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"))
    }
}

impl Drop for NamespacedServer {
    fn drop(&mut self) {
        if let Some(child) = &mut self.server {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.name])
            .output();
    }
}

fn needs_root(for_what: &str) {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "this test needs root ({for_what})");
}

/// The summary of a run from flags that ends with exit code `exit` (3: no answer at all).
fn summary_of(args: &[&str], exit: i32) -> serde_json::Value {
    let out = engine().args(args).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(exit),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

#[test]
fn the_engine_reaches_a_server_inside_a_namespace() {
    needs_root("ip netns add");
    let name = format!("sl-load-test-{}", std::process::id());
    let (_server, port) = NamespacedServer::start(&name);
    let url = format!("http://127.0.0.1:{port}/");
    let inside = summary_of(
        &[&url, "-n", "20", "-c", "2", "--netns", &name, "--json"],
        0,
    );
    assert_eq!(inside["requests"], 20);
    assert_eq!(inside["ok"], 20, "{inside}");
    assert_eq!(inside["plan"]["netns"], name.as_str());
    let outside = summary_of(
        &[&url, "-n", "4", "-c", "1", "--timeout", "2s", "--json"],
        3,
    );
    assert_eq!(
        outside["ok"], 0,
        "the host's 127.0.0.1:{port} must not be the server"
    );
    assert_eq!(outside["errors"]["connect"], 4);
}

#[test]
fn an_address_off_loopback_is_reached_only_when_the_plan_allows_it() {
    needs_root("ip link add");
    let name = format!("sl-allow-test-{}", std::process::id());
    let (_server, port, inside) = NamespacedServer::start_linked(&name);
    let url = format!("http://{inside}:{port}/");
    let allowed = summary_of(
        &[
            &url,
            "-n",
            "20",
            "-c",
            "2",
            "--allow-host",
            &inside.to_string(),
            "--json",
        ],
        0,
    );
    assert_eq!(allowed["ok"], 20, "{allowed}");
    assert_eq!(allowed["plan"]["allowed_hosts"][0], inside.to_string());
    let other = Ipv4Addr::from(u32::from(inside) + 1).to_string();
    for refused in [vec![], vec!["--allow-host", &other]] {
        let out = engine()
            .args([&url, "-n", "1", "-c", "1"])
            .args(&refused)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{refused:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("allowed_hosts"), "{err}");
    }
}

#[test]
fn a_missing_namespace_is_refused_in_one_line() {
    let out = engine()
        .args(["http://127.0.0.1:9/", "-n", "1", "-c", "1"])
        .args(["--netns", "serverlab-no-such-namespace"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("serverlab-no-such-namespace"), "{err}");
}

#[test]
fn netns_may_go_with_a_plan_file() {
    let dir = std::env::temp_dir().join(format!("serverlab-netns-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plan.json");
    std::fs::write(
        &path,
        r#"{"target": "http://127.0.0.1:9/", "requests": 1, "connections": 1}"#,
    )
    .unwrap();
    let out = engine()
        .args(["--plan", path.to_str().unwrap(), "--json"])
        .args(["--netns", "serverlab-no-such-namespace"])
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/var/run/netns/serverlab-no-such-namespace"),
        "{err}"
    );
}
