//! Plan stage: the `handshake-flood` behaviour's spec: full TLS handshakes, each on a new
//! connection, abandoned after the server's ServerHello or after the handshake's Finished.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Kind, PlanError, SuiteKey};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandshakeFloodSpec {
    /// When each handshake is left: once the server's ServerHello has come (the server has
    /// done its key exchange and, in TLS 1.3, signed its flight; the client has done
    /// nothing past its key share), or once the handshake finished.
    #[serde(default)]
    pub abandon: Abandon,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Abandon {
    #[default]
    ServerHello,
    Finished,
}

impl Kind for HandshakeFloodSpec {
    fn path(&self) -> Option<&'static str> {
        Some("/")
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[SuiteKey::same("handshake_abandon", "abandon")];
        KEYS
    }
    fn is_attack(&self) -> bool {
        true
    }
    fn new_connection_each(&self) -> bool {
        true
    }
    fn full_tls_handshakes(&self) -> bool {
        true
    }
}

/// `--handshake-flood server-hello|finished`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct HandshakeFloodFlags {
    /// TLS handshake flood: full handshakes, each abandoned after the server-hello or after
    /// the handshake finished (needs an https:// target and --tls-resume off)
    #[arg(long, value_parser = parse_abandon)]
    pub handshake_flood: Option<Abandon>,
}

fn parse_abandon(text: &str) -> Result<Abandon, String> {
    match text {
        "server-hello" => Ok(Abandon::ServerHello),
        "finished" => Ok(Abandon::Finished),
        _ => Err("server-hello or finished".into()),
    }
}

impl super::Flags for HandshakeFloodFlags {
    const NAME: &'static str = "--handshake-flood";
    fn spec(&self, _: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        Ok(self.handshake_flood.map(|abandon| {
            super::BehaviourSpec::HandshakeFlood(HandshakeFloodSpec { abandon })
        }))
    }
}
