//! The description of one run. Flags and `--plan FILE` both end here, and no worker starts
//! before `Plan::validate` has accepted it: `types` says what a plan may hold, `pacer` what
//! each pacer holds, implies and must keep, `behaviour` the same of each behaviour (a file
//! per pacer or behaviour), `parse` reads one, `validate` judges it into a
//! `ValidPlan` with the rules `serverlab-load --check` applies (HTTP/2's in `http2_check`, the
//! bounds in `limits`). No two of these files use each other (`scripts/engine-layers`):
//! `types` and `validate` ask the pacers, which read a plan only through a `PlanView`.

mod behaviour;
mod duration;
mod error;
mod facts;
mod http2;
mod http2_check;
mod limits;
mod pacer;
mod parse;
mod suite_key;
mod tls;
mod types;
mod validate;

pub use behaviour::*;
pub use duration::parse_duration;
pub use error::{PlanError, PlanErrors};
pub use facts::engine_facts;
pub use http2::{Http2Mode, Http2Spec, MAX_STREAMS};
pub use pacer::*;
pub use suite_key::SuiteKey;
pub use tls::{KxGroup, TlsClient, TlsSpec};
pub use types::{GroupSpec, IoBackend, Plan, WaitMode, WeightedPath};
pub use validate::{parse_sources, Stop, ValidGroup, ValidPlan};
