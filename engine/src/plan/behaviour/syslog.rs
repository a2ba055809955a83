//! Plan stage: the `syslog` behaviour's spec: transport, TCP framing, mean message size and
//! the first message number. Syslog is the one behaviour that speaks no HTTP.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::super::limits::{too_large, MAX_REQUESTS};
use super::{refuse, Kind, PlanError, SuiteKey, FIRST_SEQ};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SyslogSpec {
    #[serde(default)]
    pub transport: SyslogTransport,
    /// TCP framing (RFC 6587); named apart from HTTP's message framing (issue 21).
    #[serde(default)]
    pub syslog_framing: SyslogFraming,
    /// The mean message size: each message's shape scales it (`crate::syslogmsg`).
    #[serde(default = "default_message_bytes")]
    pub message_bytes: usize,
    #[serde(default = "default_seq_start")]
    pub seq_start: u64,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum SyslogTransport {
    #[default]
    Tcp,
    Udp,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum SyslogFraming {
    #[default]
    Newline,
    Octet,
}

fn default_message_bytes() -> usize {
    200
}

fn default_seq_start() -> u64 {
    FIRST_SEQ
}

impl Default for SyslogSpec {
    fn default() -> Self {
        SyslogSpec {
            transport: SyslogTransport::default(),
            syslog_framing: SyslogFraming::default(),
            message_bytes: default_message_bytes(),
            seq_start: default_seq_start(),
        }
    }
}

impl Kind for SyslogSpec {
    fn check(&self) -> Vec<PlanError> {
        let mut errors = Vec::new();
        if !(32..=65_000).contains(&self.message_bytes) {
            errors.push(refuse("syslog message_bytes must be 32..65000"));
        }
        errors.extend(too_large("behaviour", self.seq_start as f64, MAX_REQUESTS).err());
        errors
    }
    fn needs_http(&self) -> bool {
        false
    }
    fn is_datagram(&self) -> bool {
        self.transport == SyslogTransport::Udp
    }
    fn seq_start(&self) -> u64 {
        self.seq_start
    }
    fn path(&self) -> Option<&'static str> {
        None
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[SuiteKey::same("syslog_transport", "transport"), SuiteKey::same("syslog_framing", "syslog_framing")];
        KEYS
    }
}

/// `--syslog tcp|udp`, `--syslog-framing` and `--message-bytes` (defaults: the spec's).
#[derive(Debug, Clone, clap::Args)]
pub struct SyslogFlags {
    /// Syslog flood over tcp or udp
    #[arg(long, value_enum)]
    pub syslog: Option<SyslogTransport>,
    /// Syslog TCP framing (RFC 6587)
    #[arg(long, value_enum, requires = "syslog", default_value_t = SyslogFraming::default())]
    pub syslog_framing: SyslogFraming,
    /// Syslog mean message size in bytes (each message's shape varies it)
    #[arg(long, requires = "syslog", default_value_t = default_message_bytes())]
    pub message_bytes: usize,
}

impl super::Flags for SyslogFlags {
    const NAME: &'static str = "--syslog";
    fn spec(&self, _: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        Ok(self.syslog.map(|transport| {
            super::BehaviourSpec::Syslog(SyslogSpec {
                transport,
                syslog_framing: self.syslog_framing,
                message_bytes: self.message_bytes,
                ..SyslogSpec::default()
            })
        }))
    }
}
