//! Plan stage: the `grpc-unary` behaviour's spec (spec §16): unary calls of the service
//! `serverlab.v1.Lab` on the HTTP/2 carrier, `Perf` unless `echo_bytes` asks for `Echo`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{refuse, Kind, PlanError, SuiteKey};

/// The largest Echo data whose request message stays within spec §16's 4 MiB (the data
/// field's tag and length take 5 bytes at that size).
pub const MAX_ECHO_BYTES: u64 = (4 << 20) - 5;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrpcUnarySpec {
    /// Call `Echo` with this many bytes of data instead of `Perf`.
    #[serde(default)]
    pub echo_bytes: Option<u64>,
}

impl GrpcUnarySpec {
    /// The method called: `/serverlab.v1.Lab/Perf` or `/serverlab.v1.Lab/Echo`.
    pub fn method_path(&self) -> &'static str {
        match self.echo_bytes {
            Some(_) => "/serverlab.v1.Lab/Echo",
            None => "/serverlab.v1.Lab/Perf",
        }
    }
}

impl Kind for GrpcUnarySpec {
    fn check(&self) -> Vec<PlanError> {
        match self.echo_bytes {
            Some(n) if n > MAX_ECHO_BYTES => vec![refuse(format!(
                "grpc-unary echo_bytes must be at most {MAX_ECHO_BYTES} (a 4 MiB message)"
            ))],
            _ => Vec::new(),
        }
    }
    fn own_method(&self) -> Option<&'static str> {
        Some("POST")
    }
    fn http2_refusal(&self) -> Option<&'static str> {
        None
    }
    fn needs_http2(&self) -> bool {
        true
    }
    fn pooled_in_open_loop(&self) -> bool {
        true
    }
    fn is_rate_searchable(&self) -> bool {
        true
    }
    fn path(&self) -> Option<&'static str> {
        Some(self.method_path())
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[SuiteKey::same("grpc_echo_bytes", "echo_bytes")];
        KEYS
    }
}

/// `--grpc-unary`, and `--echo-bytes N` for Echo calls.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct GrpcUnaryFlags {
    /// gRPC unary calls of spec §16's service over HTTP/2 (h2c on http://, ALPN h2 on https://)
    #[arg(long)]
    pub grpc_unary: bool,
    /// grpc-unary: call Echo with this many bytes of data instead of Perf
    #[arg(long, requires = "grpc_unary")]
    pub echo_bytes: Option<u64>,
}

impl super::Flags for GrpcUnaryFlags {
    const NAME: &'static str = "--grpc-unary";
    fn spec(&self, _: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        let spec = GrpcUnarySpec {
            echo_bytes: self.echo_bytes,
        };
        Ok(self.grpc_unary.then_some(super::BehaviourSpec::GrpcUnary(spec)))
    }
}
