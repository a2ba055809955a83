//! `--netns`: the engine reaches a server that listens on the 127.0.0.1 of a namespace of
//! its own, which the host's 127.0.0.1 cannot reach. Needs root (`ip netns add`), as the
//! orchestrator's shaped links do.

use std::io::{BufRead, BufReader};
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
    fn start(name: &str) -> (NamespacedServer, u16) {
        let _ = Command::new("ip").args(["netns", "delete", name]).output();
        ip(&["netns", "add", name]);
        let mut guard = NamespacedServer {
            name: name.to_string(),
            server: None,
        };
        ip(&["-n", name, "link", "set", "lo", "up"]);
        // Port 0: the namespace's kernel picks a free port; the server prints it.
        let child = Command::new("ip")
            .args(["netns", "exec", name, "python3", "-u", "-m", "http.server"])
            .args(["0", "--bind", "127.0.0.1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs");
        let stdout = guard.server.insert(child).stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        // "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
        let port = line
            .split_whitespace()
            .skip_while(|w| *w != "port")
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        (guard, port)
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

fn summary_of(args: &[&str]) -> serde_json::Value {
    let out = engine().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

#[test]
fn the_engine_reaches_a_server_inside_a_namespace() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root (ip netns add)"
    );
    let name = format!("sl-load-test-{}", std::process::id());
    let (_server, port) = NamespacedServer::start(&name);
    let url = format!("http://127.0.0.1:{port}/");
    let inside = summary_of(&[&url, "-n", "20", "-c", "2", "--netns", &name, "--json"]);
    assert_eq!(inside["requests"], 20);
    assert_eq!(inside["ok"], 20, "{inside}");
    assert_eq!(inside["plan"]["netns"], name.as_str());
    let outside = summary_of(&[&url, "-n", "4", "-c", "1", "--timeout", "2s", "--json"]);
    assert_eq!(
        outside["ok"], 0,
        "the host's 127.0.0.1:{port} must not be the server"
    );
    assert_eq!(outside["errors"]["connect"], 4);
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
