//! Plan stage: the `websocket` behaviour's spec: the events subscribed to, and which of the
//! run's clients publish, how often.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::super::limits::{too_large, MAX_CONNECTIONS};
use super::{check_stream_events, refuse, Kind, PlanError, SuiteKey};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebsocketSpec {
    pub events: Vec<String>,
    #[serde(default)]
    pub publish: Option<Publish>,
}

/// WebSocket publishers: how often, and how many of the run's clients.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Publish {
    pub every_ms: u64,
    #[serde(default = "default_publishers")]
    pub clients: u64,
}

fn default_publishers() -> u64 {
    1
}

impl Kind for WebsocketSpec {
    fn check(&self) -> Vec<PlanError> {
        let mut errors = Vec::new();
        check_stream_events(&self.events, &mut errors);
        if let Some(p) = self.publish {
            if !(1..=3_600_000).contains(&p.every_ms) {
                errors.push(refuse("websocket publish every_ms must be 1..3600000"));
            }
            if p.clients == 0 {
                errors.push(PlanError::NotPositive("behaviour", "publishing clients"));
            }
            errors.extend(too_large("behaviour", p.clients as f64, MAX_CONNECTIONS).err());
        }
        errors
    }
    /// A WebSocket is held until the run ends.
    fn is_endless(&self) -> bool {
        true
    }
    fn events(&self) -> Option<&[String]> {
        Some(&self.events)
    }
    fn http2_refusal(&self) -> Option<&'static str> {
        Some(
            "a WebSocket over HTTP/2 needs RFC 8441's extended CONNECT, which the engine does \
             not speak: run WebSocket without --h2/--h2c",
        )
    }
    fn path(&self) -> Option<&'static str> {
        Some("/ws")
    }
    fn suite_keys(&self) -> &'static [SuiteKey] {
        const KEYS: &[SuiteKey] = &[SuiteKey::derived("publish_every_ms", "publish.every_ms"), SuiteKey::derived("publishers", "publish.clients")];
        KEYS
    }
}

/// `--websocket EVENTS`, `--publish-every` and `--publishers` (default: the spec's).
#[derive(Debug, Clone, clap::Args)]
pub struct WebsocketFlags {
    /// WebSocket to the target, subscribed to these events (comma list)
    #[arg(long, value_delimiter = ',')]
    pub websocket: Option<Vec<String>>,
    /// WebSocket: publish the first event this often (e.g. 1s), from --publishers clients
    #[arg(long, value_parser = crate::plan::parse_duration, requires = "websocket")]
    pub publish_every: Option<std::time::Duration>,
    /// WebSocket: how many of the run's clients publish (with --publish-every)
    #[arg(long, requires = "publish_every", default_value_t = default_publishers())]
    pub publishers: u64,
}

impl super::Flags for WebsocketFlags {
    const NAME: &'static str = "--websocket";
    fn spec(&self, _: &super::SharedFlags) -> Result<Option<super::BehaviourSpec>, PlanError> {
        let Some(events) = &self.websocket else {
            return Ok(None);
        };
        let publish = self.publish_every.map(|every| Publish {
            every_ms: every.as_millis() as u64,
            clients: self.publishers,
        });
        let events = super::non_empty(events);
        Ok(Some(super::BehaviourSpec::Websocket(WebsocketSpec { events, publish })))
    }
}
