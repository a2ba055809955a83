//! Behaviours stage: what carries a push subscription (long poll, comet, SSE): the client's
//! own HTTP/1.1 connection, or one HTTP/2 stream (`crate::mux`) on a connection `streams`
//! clients share. A behaviour builds its request as HTTP/1.1 bytes either way; over HTTP/2
//! they become the stream's HEADERS and DATA, and the stream's DATA frames feed the same
//! parser the socket's bytes feed over HTTP/1.1, so every figure (events, delays, `seq`
//! gaps) is counted by the same code whichever protocol carried it.

use std::time::Instant;

use bytes::Bytes;
use http::{Method, Request, Uri};

use crate::client::Client;
use crate::http::ParseError;
use crate::inbox::Answer;
use crate::mux::{h2_headers, open, Groups, Opened, Seat};
use crate::plan::ValidPlan;
use crate::stats::ErrorKind;

/// The protocol a behaviour's subscriptions go over, as the plan asks.
pub(crate) enum Carrier {
    Http1,
    H2(H2Streams),
}

/// HTTP/2: the groups of shared connections, and what a request's URI is made of.
pub(crate) struct H2Streams {
    groups: Groups,
    scheme: &'static str,
    authority: String,
}

/// A subscription sent: when its attempt began, and, over HTTP/2, its stream.
pub(crate) enum Sent {
    Http1(Instant),
    H2(Instant, Box<Opened>),
}

impl Carrier {
    pub fn new(plan: &ValidPlan) -> Carrier {
        match plan.plan.http2 {
            None => Carrier::Http1,
            Some(_) => Carrier::H2(H2Streams {
                groups: Groups::new(plan.plan.streams()),
                scheme: if plan.target.tls { "https" } else { "http" },
                authority: plan.target.authority.clone(),
            }),
        }
    }

    /// Sends `request` (an HTTP/1.1 request's bytes): on the client's connection, opened if
    /// need be, or as a new stream on the connection of `seat`'s group.
    pub async fn send(
        &self,
        c: &mut Client,
        seat: &mut Seat,
        request: &[u8],
    ) -> Result<Sent, ErrorKind> {
        match self {
            Carrier::Http1 => Ok(Sent::Http1(c.open_and_send(request).await?)),
            // Boxed, as is the stream it opens: a held HTTP/1.1 subscription's task is sized
            // by the largest future it may await, and HTTP/2's would add ~0.5 KiB to each.
            Carrier::H2(h2) => Box::pin(h2.send(c, seat, request)).await,
        }
    }
}

impl Sent {
    /// When the attempt began (a new connection's latency includes its connect).
    pub fn at(&self) -> Instant {
        match self {
            Sent::Http1(at) | Sent::H2(at, _) => *at,
        }
    }

    /// Reads the answer, as `Client::read_stream` does: `on_head` is told the status, the
    /// body goes to `sink` as it comes.
    pub async fn read(
        self,
        c: &mut Client,
        sink: &mut impl FnMut(&[u8]) -> Result<(), ParseError>,
        on_head: &mut impl FnMut(u16),
    ) -> Result<Answer, ErrorKind> {
        match self {
            Sent::Http1(_) => c.read_stream(false, sink, on_head).await,
            Sent::H2(_, stream) => Box::pin((*stream).read(sink, on_head)).await,
        }
    }
}

impl H2Streams {
    async fn send(
        &self,
        c: &mut Client,
        seat: &mut Seat,
        request: &[u8],
    ) -> Result<Sent, ErrorKind> {
        let began = Instant::now();
        let (request, body) = self.translate(request).ok_or(ErrorKind::Other)?;
        let held = self.groups.held(c, seat).await?;
        Ok(Sent::H2(began, Box::new(open(held, request, body).await?)))
    }

    /// An HTTP/1.1 request's bytes as HTTP/2 carries them: its method, its target under the
    /// plan's scheme and authority, its headers (hop-by-hop ones left out) and its body.
    fn translate(&self, wire: &[u8]) -> Option<(Request<()>, Bytes)> {
        // Sized for the request: one header per line at most.
        let lines = wire.iter().filter(|&&b| b == b'\n').count();
        let mut headers = vec![httparse::EMPTY_HEADER; lines];
        let mut parsed = httparse::Request::new(&mut headers);
        let httparse::Status::Complete(head_len) = parsed.parse(wire).ok()? else {
            return None;
        };
        let uri: Uri = format!("{}://{}{}", self.scheme, self.authority, parsed.path?)
            .parse()
            .ok()?;
        let mut request = Request::new(());
        *request.method_mut() = Method::from_bytes(parsed.method?.as_bytes()).ok()?;
        *request.uri_mut() = uri;
        *request.headers_mut() = h2_headers(parsed.headers.iter().map(|h| (h.name, h.value)));
        Some((request, Bytes::copy_from_slice(&wire[head_len..])))
    }
}
