//! Behaviours stage: `keepalive` and `new-connection` over HTTP/2 (`crate::mux`). Each
//! exchange is one stream: the plan's request (its method, path pick, headers and body) sent
//! as HEADERS and DATA frames, the answer's body read and its window given back. Kept alive,
//! a client sends on its group's shared connection (`streams` clients to one); a new
//! connection per request opens, uses and drops a connection of its own per exchange.

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri};

use super::{Attempt, Behaviour};
use crate::client::Client;
use crate::inbox::Answer;
use crate::mux::{breaks_connection, connect, Group, Groups, Link};
use crate::paths::PathPicker;
use crate::plan::ValidPlan;
use crate::stats::ErrorKind;

/// Headers HTTP/2 forbids (RFC 9113 §8.2.2) or carries as a pseudo-header (`Host` is
/// `:authority`); a plan's header of these names is left out.
const HOP_BY_HOP: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "host",
];

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

/// A client's seat: the group whose connection it sends on (kept-alive only).
#[derive(Default)]
pub(crate) struct Seat(Option<Rc<Group>>);

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
            headers: h2_headers(&plan.headers),
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

    /// One stream on `link`: the request out, the whole answer in.
    async fn stream(
        &self,
        c: &Client,
        link: Link,
        attempt: Attempt,
        sent: Instant,
    ) -> Result<(), ErrorKind> {
        let fail = |e: h2::Error| link.error_kind(&e);
        let mut send = link.send.clone().ready().await.map_err(fail)?;
        let bare = self.body.is_empty();
        let (answer, mut out) = send.send_request(self.request(), bare).map_err(fail)?;
        if !bare {
            out.send_data(self.body.clone(), true).map_err(fail)?;
        }
        let answer = answer.await.map_err(fail)?;
        let first_byte = Instant::now();
        let status = answer.status().as_u16();
        let mut body = answer.into_body();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(fail)?;
            // The window is given back as the bytes are taken, as a reader would.
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        let answer = Answer {
            status,
            close: false,
            first_byte,
        };
        c.record_answer(attempt.intended, sent, &answer);
        Ok(())
    }
}

/// The plan's headers as HTTP/2 carries them: lower-case names, hop-by-hop ones left out.
fn h2_headers(headers: &[(String, String)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        if HOP_BY_HOP.contains(&name.as_str()) {
            continue;
        }
        // The plan's check let only "Name: value" through; what HTTP/2 cannot carry is left out.
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            map.append(name, value);
        }
    }
    map
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
        if !self.keep_alive {
            let link = connect(c).await?;
            return self.stream(c, link, attempt, sent).await;
        }
        let group = seat.0.get_or_insert_with(|| self.groups.seat()).clone();
        let (generation, link) = group.link(c).await?;
        let result = self.stream(c, link, attempt, sent).await;
        if let Err(kind) = result {
            if breaks_connection(kind) {
                group.forget(generation);
            }
        }
        result
    }
}
