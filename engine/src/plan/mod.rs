//! The description of one run. Flags and `--plan FILE` both end here, and no worker starts
//! before `Plan::validate` has accepted it: `types` says what a plan may hold (and what each
//! kind of pacer implies), `behaviour` what each behaviour holds, implies and must keep (a
//! file per behaviour), `parse` reads one, `validate` judges it into a
//! `ValidPlan` with the rules `serverlab-load --check` applies (HTTP/2's in `http2_check`, the
//! bounds in `limits`). No two of these files use each other (`scripts/engine-layers`).

mod behaviour;
mod duration;
mod error;
mod http2;
mod http2_check;
mod limits;
mod parse;
mod tls;
mod types;
mod validate;

pub use behaviour::*;
pub use duration::parse_duration;
pub use error::{PlanError, PlanErrors};
pub use http2::{Http2Mode, Http2Spec, MAX_STREAMS};
pub use tls::{KxGroup, TlsClient, TlsSpec};
pub use types::{IoBackend, PacerSpec, Plan, WaitMode, WeightedPath};
pub use validate::{parse_sources, Stop, ValidPlan};
