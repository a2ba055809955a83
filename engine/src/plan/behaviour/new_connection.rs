//! Plan stage: the `new-connection` behaviour's spec. Plain requests, each on a connection
//! of its own; its one setting, `close`, says which side closes that connection.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Kind, SuiteKey};

/// Settings of a new connection per request: only `close` (an unknown one is refused).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewConnectionSpec {
    /// Which side closes a connection that carries one request. `server`: the request says
    /// `Connection: close`, so the server closes after answering, and sequential pacing opens
    /// the next connection only after that close (the figure includes the server's close
    /// path). `client`: the request asks for no close (as httperf's), and the engine closes
    /// as soon as the answer is complete, then opens the next connection at once (the
    /// client keeps the TIME_WAIT). A connection of several calls (`calls_per_connection`)
    /// is closed by the engine after its last answer either way.
    #[serde(default)]
    pub close: Closer,
}

/// The side that closes a connection carrying one request.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Closer {
    /// The server, asked to by `Connection: close`.
    #[default]
    Server,
    /// The engine, once the answer is complete.
    Client,
}

impl Kind for NewConnectionSpec {
    fn is_plain(&self) -> bool {
        true
    }
    fn is_bare_request(&self) -> bool {
        true
    }
    fn new_connection_each(&self) -> bool {
        true
    }
    fn client_closes(&self) -> bool {
        self.close == Closer::Client
    }
    fn http2_refusal(&self) -> Option<&'static str> {
        None
    }
    fn path(&self) -> Option<&'static str> {
        Some("/perf")
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[SuiteKey::same("close", "close")];
        KEYS
    }
}

/// `--new-connection` (implied by `--sequential`) and `--close`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct NewConnectionFlags {
    /// A new connection per request
    #[arg(long)]
    pub new_connection: bool,
    /// Which side closes a new connection after its one request: server (default: the
    /// request says Connection: close, and --sequential waits for the server's close) or
    /// client (the engine closes once the answer is complete, as httperf does)
    #[arg(long, value_enum, value_name = "SIDE")]
    pub close: Option<Closer>,
}

impl super::Flags for NewConnectionFlags {
    const NAME: &'static str = "--new-connection";
    fn spec(
        &self,
        shared: &super::SharedFlags,
    ) -> Result<Option<super::BehaviourSpec>, super::PlanError> {
        let chosen = self.new_connection || shared.sequential;
        if self.close.is_some() && !chosen {
            return Err(super::refuse(
                "--close is about a new connection per request: add --new-connection or --sequential",
            ));
        }
        let spec = NewConnectionSpec {
            close: self.close.unwrap_or_default(),
        };
        Ok(chosen.then_some(super::BehaviourSpec::NewConnection(spec)))
    }
}
