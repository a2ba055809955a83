//! Plan stage: the rules an HTTP/2 plan must keep, told all at once. Apart from
//! `http2` (what the plan says) because they read the whole plan (`types`), which holds an
//! `Http2Spec`: here the two meet without depending on each other.

use super::http2::{Http2Mode, Http2Spec, MAX_STREAMS};
use super::{IoBackend, Plan};

impl Http2Spec {
    /// Every rule this plan breaks by asking for HTTP/2 (empty: none); `tls` is whether the
    /// target's scheme asks for TLS.
    pub fn problems(&self, plan: &Plan, tls: bool) -> Vec<String> {
        let mut found = Vec::new();
        let mut refuse = |why: &str| found.push(why.to_string());
        match (self.mode, tls) {
            (Http2Mode::H2, false) => {
                refuse("h2 is HTTP/2 over TLS: give an https:// target (or h2c for cleartext)")
            }
            (Http2Mode::H2c, true) => {
                refuse("h2c is cleartext HTTP/2: give an http:// target (or h2 over TLS)")
            }
            _ => {}
        }
        if !(1..=MAX_STREAMS).contains(&self.streams) {
            refuse(&format!(
                "streams = {} must be 1..={MAX_STREAMS}",
                self.streams
            ));
        }
        if let Some(why) = plan.behaviour.kind().http2_refusal() {
            refuse(why);
        }
        let kind = plan.behaviour.kind();
        if self.streams > 1 && kind.new_connection_each() {
            refuse("streams > 1 needs kept-alive connections: a new connection carries one stream");
        }
        let paced = plan.pacer.pace().fills_connections(&plan.view());
        if self.streams > 1 && !paced {
            refuse("streams > 1 needs a closed loop or an open loop over a kept-alive pool");
        }
        if plan.pacer.pace().waits_for_close() {
            refuse(
                "sequential pacing waits for the server's close, which HTTP/2 leaves to the client",
            );
        }
        if plan.io == IoBackend::IoUring {
            refuse("the io_uring loop carries no HTTP/2; use --io auto or epoll");
        }
        found
    }
}
