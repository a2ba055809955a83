//! Behaviours stage: `keepalive` and `new-connection` over HTTP/2 (`crate::mux`). Each
//! exchange is one stream: the plan's request (its method, path pick, headers and body) sent
//! as HEADERS and DATA frames, the answer's body read and its window given back. Kept alive,
//! a client sends on its group's shared connection (`streams` clients to one); a new
//! connection per request opens, uses and drops a connection of its own per exchange.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Uri};

use super::{Attempt, Behaviour};
use crate::client::Client;
use crate::inbox::discard;
use crate::mux::{connect, h2_headers, open, Groups, Held, Seat};
use crate::paths::PathPicker;
use crate::plan::ValidPlan;
use crate::stats::ErrorKind;

pub(crate) struct H2Plain {
    method: Method,
    /// One URI per weighted path (or the target's), as `Plain` prepares one request each.
    uris: Vec<Uri>,
    picker: Option<PathPicker>,
    headers: HeaderMap,
    body: Bytes,
    keep_alive: bool,
    timeout: Duration,
    groups: Groups,
}

impl H2Plain {
    pub fn new(plan: &ValidPlan, worker: usize) -> H2Plain {
        let scheme = if plan.target.tls { "https" } else { "http" };
        let uri = |path: &str| {
            let text = format!("{scheme}://{}{path}", plan.target.authority);
            text.parse().unwrap_or_else(|_| Uri::from_static("/"))
        };
        let uris = match plan.paths.is_empty() {
            true => vec![uri(&plan.target.path)],
            false => plan.paths.iter().map(|p| uri(&p.path)).collect(),
        };
        H2Plain {
            method: Method::from_bytes(plan.plan.method.as_bytes()).unwrap_or(Method::GET),
            uris,
            picker: PathPicker::new(&plan.paths, plan.plan.seed, worker),
            headers: h2_headers(plan.headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()))),
            body: Bytes::from(plan.body.clone()),
            keep_alive: plan.plan.keeps_alive(),
            timeout: Duration::from_millis(plan.plan.timeout_ms),
            groups: Groups::new(plan.plan.streams()),
        }
    }

    fn request(&self) -> Request<()> {
        let index = self.picker.as_ref().map_or(0, PathPicker::pick);
        let mut request = Request::new(());
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uris[index].clone();
        *request.headers_mut() = self.headers.clone();
        request
    }
}

impl Behaviour for H2Plain {
    type State = Seat;

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    async fn exchange(
        &self,
        c: &mut Client,
        seat: &mut Seat,
        attempt: Attempt,
    ) -> Result<(), ErrorKind> {
        let sent = Instant::now();
        let held = match self.keep_alive {
            true => self.groups.held(c, seat).await?,
            false => Held::own(connect(c).await?),
        };
        let stream = open(held, self.request(), self.body.clone()).await?;
        let answer = stream.read(&mut discard, &mut |_| {}).await?;
        c.record_answer(attempt.intended, sent, &answer);
        Ok(())
    }
}
