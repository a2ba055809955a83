//! Why a plan was refused, and which of its fields the refusal is about.

use std::path::PathBuf;

use crate::target::TargetError;

/// Why a plan was refused. Each message is one line meant for the user.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("give either a request count or a duration, not both")]
    BothStops,
    #[error("give a request count (-n) or a duration (-d)")]
    NoStop,
    /// The plan field at fault, and what must be positive.
    #[error("{1} must be positive")]
    NotPositive(&'static str, &'static str),
    /// The plan field at fault, and why the plan contradicts itself.
    #[error("{1}")]
    Contradiction(&'static str, String),
    #[error("{field} = {value}: the engine runs finite values up to {max}")]
    TooLarge {
        field: &'static str,
        value: String,
        max: String,
    },
    #[error("bad header {0:?}: expected \"Name: value\"")]
    BadHeader(String),
    #[error("bad source address {0:?}: {1}")]
    BadSource(String, String),
    #[error("cannot read body file {0}: {1}")]
    BodyFile(PathBuf, std::io::Error),
    #[error("cannot read plan: {0}")]
    PlanFile(String),
    /// A plan that is not JSON, or not of a plan's shape; `field` is the plan field at fault
    /// (`plan` when the error is not about one field).
    #[error("cannot read plan: {message}")]
    Json { field: String, message: String },
    #[error("cannot read paths file {0}: {1}")]
    PathsFile(PathBuf, String),
    #[error("cannot read TLS CA file {0}: {1}")]
    TlsCa(PathBuf, String),
    #[error("bad weighted path {0:?}: {1}")]
    BadPath(String, &'static str),
    /// A refusal of one client group's own plan, or of its place in the plan.
    #[error("groups[{name}]: {error}")]
    Group { name: String, error: Box<PlanError> },
}

impl PlanError {
    /// The plan field a refusal is about, so that a caller can point at what set it.
    pub fn field(&self) -> &str {
        match self {
            PlanError::Target(_) => "target",
            PlanError::BothStops | PlanError::NoStop => "duration_s",
            PlanError::NotPositive(field, _) | PlanError::Contradiction(field, _) => field,
            PlanError::TooLarge { field, .. } => field,
            PlanError::BadHeader(_) => "headers",
            PlanError::BadSource(..) => "sources",
            PlanError::BodyFile(..) => "body_file",
            PlanError::PlanFile(_) => "plan",
            PlanError::Json { field, .. } => field,
            PlanError::PathsFile(..) | PlanError::BadPath(..) => "paths",
            PlanError::TlsCa(..) => "tls",
            PlanError::Group { .. } => "groups",
        }
    }
}

/// Every refusal of one plan, in the order the rules are checked (k6's `Validate() []error`):
/// a plan with three mistakes is refused once, with all three, not three times in turn.
#[derive(Debug)]
pub struct PlanErrors(pub Vec<PlanError>);

impl PlanErrors {
    /// The first refusal: the one a single-line answer (a `--check` verdict's `field`) names.
    pub fn first(&self) -> &PlanError {
        &self.0[0]
    }

    /// The plan field of the first refusal.
    pub fn field(&self) -> &str {
        self.first().field()
    }
}

impl From<PlanError> for PlanErrors {
    fn from(error: PlanError) -> Self {
        PlanErrors(vec![error])
    }
}

/// One refusal per line.
impl std::fmt::Display for PlanErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

impl std::error::Error for PlanErrors {}
