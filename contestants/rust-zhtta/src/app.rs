//! The server's shared state: one `App`, leaked once at start and read by every thread.
//! It has a module of its own so that the endpoints (control, push) and the listener that
//! routes to them all depend on it, and never on each other.

use crate::files::FileService;
use crate::push::PushHub;
use crate::stats::Stats;
use crate::threads::ThreadBudget;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

pub struct App {
    pub stats: &'static Stats,
    pub threads: &'static ThreadBudget,
    pub files: FileService,
    pub push: PushHub,
    pub logging: AtomicBool,
    pub started: Instant,
}
