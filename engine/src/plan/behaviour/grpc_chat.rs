//! Plan stage: the `grpc-chat` behaviour's spec (spec §16): the bidirectional `Chat` of the
//! service `serverlab.v1.Lab`, one message of `echo_bytes` bytes of data per exchange.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{refuse, Kind, PlanError, SuiteKey};

/// The most data a chat message carries: its echo stays within the 1 MiB the engine takes
/// in one message (the data field's tag and length take 4 bytes at that size).
pub const MAX_CHAT_BYTES: u64 = (1 << 20) - 4;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrpcChatSpec {
    /// Bytes of data in each message (0: an empty `EchoMessage`).
    #[serde(default)]
    pub echo_bytes: u64,
}

impl Kind for GrpcChatSpec {
    fn check(&self) -> Vec<PlanError> {
        match self.echo_bytes > MAX_CHAT_BYTES {
            true => vec![refuse(format!(
                "grpc-chat echo_bytes must be at most {MAX_CHAT_BYTES} (a 1 MiB message)"
            ))],
            false => Vec::new(),
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
    fn path(&self) -> Option<&'static str> {
        Some("/serverlab.v1.Lab/Chat")
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[SuiteKey::same("grpc_echo_bytes", "echo_bytes")];
        KEYS
    }
}

/// `--grpc-chat`, and `--chat-bytes N` for each message's data.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct GrpcChatFlags {
    /// gRPC Chat streams of spec §16's service: a message per request, timed to its echo
    #[arg(long)]
    pub grpc_chat: bool,
    /// grpc-chat: bytes of data in each message (default 0)
    #[arg(long, requires = "grpc_chat")]
    pub chat_bytes: Option<u64>,
}

impl super::Flags for GrpcChatFlags {
    const NAME: &'static str = "--grpc-chat";
    fn spec(&self, _: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        let spec = GrpcChatSpec {
            echo_bytes: self.chat_bytes.unwrap_or_default(),
        };
        Ok(self.grpc_chat.then_some(super::BehaviourSpec::GrpcChat(spec)))
    }
}
