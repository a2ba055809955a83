//! Plan stage: a suite key and the plan key it sets, which a behaviour names of itself and
//! `facts` prints. Apart from both, so that neither uses the other for it.

/// A suite key and the plan key it sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuiteKey {
    /// The key a suite's scenario writes (`longpoll_duration_ms`).
    pub suite: &'static str,
    /// The spec's key it sets (`duration_ms`; `publish.every_ms` inside an object).
    pub plan: &'static str,
    /// Whether the planner makes the plan key's value from the suite key's (a read rate into
    /// a read interval) rather than passing it as is.
    pub derived: bool,
}

impl SuiteKey {
    /// A suite key passed to the plan as is.
    pub const fn same(suite: &'static str, plan: &'static str) -> SuiteKey {
        SuiteKey {
            suite,
            plan,
            derived: false,
        }
    }
    /// A suite key the planner turns into the plan key.
    pub const fn derived(suite: &'static str, plan: &'static str) -> SuiteKey {
        SuiteKey {
            suite,
            plan,
            derived: true,
        }
    }
}
