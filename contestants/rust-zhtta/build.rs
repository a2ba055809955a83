//! Generates the gRPC service (spec §16) from the spec's committed .proto, and records the
//! compiler and the locked library versions for `--version`, so that every benchmark run
//! can say exactly what it measured.

use std::process::Command;

const LIBRARIES: [&str; 9] = [
    "httparse",
    "rustls",
    "sha2",
    "serde_json",
    "socket2",
    "tungstenite",
    "tonic",
    "prost",
    "tokio",
];

/// The service of spec §16, shared by every contestant, verify and the engine.
const PROTO: &str = "../../spec/grpc/serverlab.proto";
const PROTO_DIR: &str = "../../spec/grpc";

fn main() {
    // Server code only: protoc (Debian's protobuf-compiler) reads the file, prost and
    // tonic write the messages and the service into OUT_DIR.
    if let Err(error) = tonic_prost_build::configure()
        .build_client(false)
        .build_transport(false)
        .compile_protos(&[PROTO], &[PROTO_DIR])
    {
        panic!("generating the gRPC service from {PROTO}: {error}");
    }
    println!("cargo:rerun-if-changed=Cargo.lock");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let compiler = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|text| text.trim().to_owned())
        .unwrap_or_else(|| "rustc unknown".into());
    let lock = std::fs::read_to_string("Cargo.lock").unwrap_or_default();
    let libraries: Vec<String> = LIBRARIES
        .iter()
        .map(|name| format!("{name} {}", locked_version(&lock, name)))
        .collect();
    println!(
        "cargo:rustc-env=ZHTTA_VERSIONS=rust-zhtta {} ({compiler}; {})",
        std::env::var("CARGO_PKG_VERSION").unwrap_or_default(),
        libraries.join(", ")
    );
}

/// The version Cargo.lock pins for a package (`name = "x"` then `version = "y"`).
fn locked_version(lock: &str, name: &str) -> String {
    let wanted = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == wanted
            && let Some(version) = lines
                .next()
                .and_then(|l| l.trim().strip_prefix("version = "))
        {
            return version.trim_matches('"').to_owned();
        }
    }
    "unknown".into()
}
