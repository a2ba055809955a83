//! The plain request set: one prepared request per path (or the target's), the picker among
//! them, and how they are sent. Both socket loops read it; its exchange on the epoll loop is
//! a behaviour (`behaviours/plain.rs`), and the io_uring loop runs it itself.

use std::time::Duration;

use crate::http::build_request_to;
use crate::paths::PathPicker;
use crate::plan::ValidPlan;

/// A request with a fixed body: keep-alive, new connection, slow reader. With weighted
/// paths there is one prepared request per path and a picker choosing among them.
pub(crate) struct Plain {
    requests: Vec<Vec<u8>>,
    picker: Option<PathPicker>,
    keep_alive: bool,
    head_request: bool,
    /// Wait for the server's close before the exchange counts as done (sequential pacing
    /// with the server closing).
    await_close: bool,
    timeout: Duration,
}

impl Plain {
    pub fn new(plan: &ValidPlan, worker: usize) -> Plain {
        let keep_alive = plan.plan.keeps_alive();
        let method = plan.plan.method.as_str();
        let close = plan.plan.asks_close();
        let build = |path: &str| build_request_to(plan, path, method, None, &plan.body, close);
        let requests = if plan.paths.is_empty() {
            vec![build(&plan.target.path)]
        } else {
            plan.paths.iter().map(|p| build(&p.path)).collect()
        };
        Plain {
            requests,
            picker: PathPicker::new(&plan.paths, plan.plan.seed, worker),
            keep_alive,
            head_request: method == "HEAD",
            await_close: plan.plan.awaits_close(),
            timeout: Duration::from_millis(plan.plan.timeout_ms),
        }
    }
}

impl Plain {
    /// Picks the next request (its index into the prepared ones).
    pub fn pick(&self) -> usize {
        self.picker.as_ref().map_or(0, PathPicker::pick)
    }

    pub fn request(&self, index: usize) -> &[u8] {
        &self.requests[index]
    }

    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }

    pub fn head_request(&self) -> bool {
        self.head_request
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether the exchange waits for the server's close (sequential pacing, `close =
    /// "server"`); otherwise a connection of one request is closed by the engine as soon as
    /// its answer is complete.
    pub fn await_close(&self) -> bool {
        self.await_close
    }
}
