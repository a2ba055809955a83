//! Plan stage: the most one engine process is asked to do, and the refusal past it; read by
//! `validate` and by the behaviours' own checks, so a leaf of the plan folder.

use super::PlanError;

/// Past these a plan is a typo, not a test.
pub(super) const MAX_SECONDS: f64 = 7.0 * 86_400.0;
pub(super) const MAX_CONNECTIONS: f64 = 1_000_000.0;
pub(super) const MAX_REQUESTS: f64 = 1e12;
pub(super) const MAX_RATE: f64 = 10_000_000.0;
pub(super) const MAX_THREADS: f64 = 1024.0;
/// How far ahead a start instant may be.
pub(super) const MAX_START_AHEAD_MS: f64 = 10.0 * 60_000.0;
/// A day: clocks of one lab further apart than that are not synchronised at all.
pub(super) const MAX_CLOCK_OFFSET_MS: f64 = 86_400_000.0;

pub(super) fn too_large(field: &'static str, value: f64, max: f64) -> Result<(), PlanError> {
    if value.is_finite() && value <= max {
        return Ok(());
    }
    Err(PlanError::TooLarge {
        field,
        value: format!("{value}"),
        max: format!("{max}"),
    })
}
