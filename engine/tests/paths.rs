//! Weighted paths against a hyper server that records the path of every request.

mod common;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::json;

type PathLog = Arc<Mutex<Vec<String>>>;

/// Answers every request with a short body and logs its path in arrival order.
fn recording_server() -> (common::TestServer, PathLog) {
    let log: PathLog = Arc::default();
    let server_log = log.clone();
    let server = common::serve(move |stream, _| {
        let log = server_log.clone();
        async move {
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                log.lock().unwrap().push(req.uri().path().to_string());
                async { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok")))) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    });
    (server, log)
}

fn weighted(weights: &[(&str, f64)]) -> serde_json::Value {
    weights
        .iter()
        .map(|(path, weight)| json!({"path": path, "weight": weight}))
        .collect()
}

#[test]
fn requests_spread_over_paths_by_weight() {
    let (server, log) = recording_server();
    let paths = weighted(&[("/files/a", 1.0), ("/files/b", 2.0), ("/files/c", 7.0)]);
    let s = common::run_plan(json!({"target": server.url("/unused"), "requests": 10000,
        "connections": 4, "threads": 2, "paths": paths}));
    assert_eq!(
        (s.attempts.requests, s.attempts.ok, s.paths),
        (10000, 10000, 3)
    );
    let mut counts: HashMap<String, usize> = HashMap::new();
    for path in log.lock().unwrap().iter() {
        *counts.entry(path.clone()).or_default() += 1;
    }
    assert_eq!(counts.values().sum::<usize>(), 10000);
    assert!(!counts.contains_key("/unused"));
    for (path, share) in [("/files/a", 0.1), ("/files/b", 0.2), ("/files/c", 0.7)] {
        let got = counts[path] as f64 / 10000.0;
        // Binomial sd at n=10000 is below 0.005; 0.02 is four of them.
        assert!((got - share).abs() < 0.02, "{path}: {got} vs {share}");
    }
}

fn sequence(seed: u64) -> Vec<String> {
    let (server, log) = recording_server();
    let paths = weighted(&[("/a", 1.0), ("/b", 1.0), ("/c", 1.0), ("/d", 1.0)]);
    let s = common::run_plan(json!({"target": server.url("/"), "requests": 300,
        "connections": 1, "threads": 1, "seed": seed, "paths": paths}));
    assert_eq!(s.attempts.requests, 300);
    let got = log.lock().unwrap().clone();
    got
}

#[test]
fn the_same_seed_repeats_the_same_choices() {
    let first = sequence(5);
    assert_eq!(first.len(), 300);
    assert_eq!(first, sequence(5));
    assert_ne!(first, sequence(6));
}

#[test]
fn a_paths_file_holds_thousands_of_paths() {
    let (server, log) = recording_server();
    let list: Vec<(String, f64)> = (0..2000).map(|i| (format!("/f/{i}"), 1.0)).collect();
    let refs: Vec<(&str, f64)> = list.iter().map(|(p, w)| (p.as_str(), *w)).collect();
    let dir = std::env::temp_dir().join(format!("serverlab-pathsfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("paths.json");
    std::fs::write(&file, weighted(&refs).to_string()).unwrap();
    let s = common::run_plan(json!({"target": server.url("/"), "requests": 4000,
        "connections": 2, "paths_file": file}));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!((s.attempts.requests, s.paths), (4000, 2000));
    let distinct: std::collections::HashSet<_> = log.lock().unwrap().iter().cloned().collect();
    // 4000 uniform draws over 2000 paths leave about e^-2 of them unseen.
    assert!(distinct.len() > 1500, "{}", distinct.len());
    assert!(distinct.iter().all(|p| p.starts_with("/f/")));
}

#[test]
fn without_paths_the_target_path_is_used() {
    let (server, log) = recording_server();
    let s = common::run_plan(json!({"target": server.url("/perf"), "requests": 20}));
    assert_eq!(s.paths, 1);
    assert!(log.lock().unwrap().iter().all(|p| p == "/perf"));
}
