//! The description of one run. Flags and `--plan FILE` both end here, and no worker starts
//! before `Plan::validate` has accepted it: `types` says what a plan may hold (and what each
//! kind of pacer and behaviour implies), `parse` reads one, `validate` judges it into a
//! `ValidPlan` with the rules `serverlab-load --check` applies.

mod error;
mod parse;
mod types;
mod validate;

pub use error::PlanError;
pub(crate) use types::{default_message_bytes, default_seq_start};
pub use types::{
    BehaviourSpec, IoBackend, PacerSpec, Plan, Publish, ReadPace, SyslogFraming, SyslogTransport,
    WaitMode, WeightedPath,
};
pub use validate::{parse_sources, Stop, ValidPlan};
