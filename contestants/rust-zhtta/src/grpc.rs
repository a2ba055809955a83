//! The gRPC service of spec §16 on tonic, which owns whole connections: `{grpc_port}` with
//! prior knowledge and, with TLS, `{grpc_tls_port}` by ALPN h2 (tonic's TLS, on the same
//! rustls and ring as the HTTPS port). tonic needs tokio, so it runs on a runtime of its own
//! inside this process, beside the thread-per-connection HTTP/1.1 server; `Subscribe`
//! streams join the same push hub, so one emit cycle's snapshot spans every transport.

use crate::app::App;
use crate::lab::lab_server::{Lab, LabServer};
use crate::lab::{Delivery, EchoMessage, PerfReply, PerfRequest, SubscribeRequest};
use crate::push::{Behind, GrpcDeliveries, Registration, request::distinct_names};
use crate::server::PERF_BODY;
use crate::stats::{Stats, bump};
use std::future::Future;
use std::io;
use std::net::TcpListener;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Sleep;
use tonic::codegen::BoxFuture;
use tonic::codegen::tokio_stream::Stream;
use tonic::codegen::{Service, http};
use tonic::metadata::MetadataMap;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Identity, Server, ServerTlsConfig};
use tonic::{Code, Request, Response, Status, Streaming};

/// The largest request message served (spec §16: 4 MiB, encoded); tonic refuses a larger
/// one and keeps the connection (its status mended by `conform_head`).
const MAX_MESSAGE: usize = 4 * 1024 * 1024;
const GRPC_STATUS: &str = "grpc-status";
const GRPC_MESSAGE: &str = "grpc-message";
const OUT_OF_RANGE: &[u8] = b"11";
const UNIMPLEMENTED: &[u8] = b"12";
/// gRPC's percent-encoding of `grpc-message`: everything but printable ASCII, and `%`.
const GRPC_MESSAGE_ESCAPES: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b'%');

/// The gRPC ports' listeners, bound before the HTTP port takes connections.
pub struct GrpcListeners {
    pub plain: Vec<TcpListener>,
    /// The TLS ports, with the run's certificate and key (spec §12).
    pub tls: Vec<TcpListener>,
}

/// Starts the gRPC runtime and serves every listener on it; the runtime lives as long as
/// the process.
pub fn start(
    app: &'static App,
    listeners: GrpcListeners,
    tls_files: Option<(&Path, &Path)>,
) -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads())
        .thread_name("grpc")
        .enable_all()
        .build()?;
    let tls = match tls_files {
        Some((cert, key)) if !listeners.tls.is_empty() => Some(tls_server(cert, key)?),
        _ => None,
    };
    // Listeners join the runtime's reactor as they are converted.
    let entered = runtime.enter();
    for listener in listeners.plain {
        runtime.spawn(serve(app, Server::builder(), tokio_listener(listener)?));
    }
    for listener in listeners.tls {
        let server = tls.clone().expect("TLS listeners come with their files");
        runtime.spawn(serve(app, server, tokio_listener(listener)?));
    }
    drop(entered);
    Box::leak(Box::new(runtime));
    Ok(())
}

/// One worker per CPU the process may use (tokio's own default, made explicit): the gRPC
/// side is event-driven, so more workers would only add switches, and fewer would cap it
/// below the cores the HTTP side's threads may use.
fn worker_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn tls_server(cert: &Path, key: &Path) -> io::Result<Server> {
    let read = |path: &Path| {
        std::fs::read(path)
            .map_err(|error| io::Error::other(format!("{}: {error}", path.display())))
    };
    let identity = Identity::from_pem(read(cert)?, read(key)?);
    Server::builder()
        .tls_config(ServerTlsConfig::new().identity(identity))
        .map_err(|error| io::Error::other(format!("gRPC TLS configuration: {error}")))
}

fn tokio_listener(listener: TcpListener) -> io::Result<tokio::net::TcpListener> {
    listener.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(listener)
}

async fn serve(app: &'static App, server: Server, listener: tokio::net::TcpListener) {
    let service = LabServer::new(LabService { app }).max_decoding_message_size(MAX_MESSAGE);
    let counted = Counted {
        inner: service,
        stats: app.stats,
    };
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    if let Err(error) = server.serve_with_incoming(counted, incoming).await {
        eprintln!("{}: gRPC listener stopped: {error}", crate::NAME);
    }
}

/// Counts every call that reaches the gRPC server, whatever its method (`grpc.calls`),
/// and as an HTTP/2 request (`requests.total`); and mends the two trailers-only answers in
/// which tonic 0.14 differs from spec §16 (see `conform_head`).
#[derive(Clone)]
struct Counted<S> {
    inner: S,
    stats: &'static Stats,
}

impl<S, B, R> Service<http::Request<B>> for Counted<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        bump(&self.stats.grpc_calls);
        bump(&self.stats.requests_total);
        let path = request.uri().path().to_owned();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let mut response = answer.await?;
            conform_head(response.headers_mut(), &path);
            Ok(response)
        })
    }
}

/// A trailers-only answer as spec §16 has it: tonic answers an unknown method
/// UNIMPLEMENTED with no `grpc-message` (every non-zero status needs one), and a request
/// message over the size limit OUT_OF_RANGE, where gRPC's servers (and the spec) say
/// RESOURCE_EXHAUSTED. This service never answers OUT_OF_RANGE itself.
fn conform_head(head: &mut http::HeaderMap, path: &str) {
    let code = head.get(GRPC_STATUS).map(|value| value.as_bytes());
    if code == Some(OUT_OF_RANGE) {
        head.insert(
            GRPC_STATUS,
            http::HeaderValue::from(Code::ResourceExhausted as i32),
        );
    } else if code == Some(UNIMPLEMENTED) && !head.contains_key(GRPC_MESSAGE) {
        let message = format!("unknown method {path}");
        let message = percent_encoding::utf8_percent_encode(&message, GRPC_MESSAGE_ESCAPES);
        if let Ok(value) = http::HeaderValue::from_str(&message.to_string()) {
            head.insert(GRPC_MESSAGE, value);
        }
    }
}

/// A message read from a stream (Chat's) over the size limit: RESOURCE_EXHAUSTED, as
/// `conform_head` answers a unary call's.
fn conform_status(status: Status) -> Status {
    if status.code() == Code::OutOfRange {
        Status::resource_exhausted(status.message().to_owned())
    } else {
        status
    }
}

struct LabService {
    app: &'static App,
}

#[tonic::async_trait]
impl Lab for LabService {
    async fn perf(&self, _: Request<PerfRequest>) -> Result<Response<PerfReply>, Status> {
        let body = PERF_BODY.to_vec();
        Ok(Response::new(PerfReply { body }))
    }

    async fn echo(&self, request: Request<EchoMessage>) -> Result<Response<EchoMessage>, Status> {
        Ok(Response::new(request.into_inner()))
    }

    type SubscribeStream = Deadlined<Subscribed>;

    /// Subscribes the stream from the moment its request is read until its deadline, its
    /// cancellation (tonic drops the stream, and with it the registration) or its falling
    /// too far behind.
    async fn subscribe(
        &self,
        request: Request<SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let deadline = deadline(request.metadata());
        let names = request.into_inner().events;
        distinct_names(&names).map_err(Status::invalid_argument)?;
        let (registration, deliveries) = self.app.push.subscribe_grpc(names);
        let stream = Subscribed {
            _registration: registration,
            deliveries,
        };
        Ok(Response::new(Deadlined::new(stream, deadline)))
    }

    type ChatStream = Deadlined<Streaming<EchoMessage>>;

    /// Every message back as it is read; the client's end of its side ends the call OK.
    async fn chat(
        &self,
        request: Request<Streaming<EchoMessage>>,
    ) -> Result<Response<Self::ChatStream>, Status> {
        let deadline = deadline(request.metadata());
        Ok(Response::new(Deadlined::new(
            request.into_inner(),
            deadline,
        )))
    }
}

/// A `Subscribe` stream: its deliveries while its registration keeps it in its events'
/// lists and in the open counts.
pub struct Subscribed {
    _registration: Registration,
    deliveries: GrpcDeliveries,
}

impl Stream for Subscribed {
    type Item = Result<Delivery, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.deliveries.poll_next(cx).map(|next| {
            Some(next.map_err(|Behind| {
                Status::resource_exhausted("the stream fell too far behind its events")
            }))
        })
    }
}

/// A response stream ended DEADLINE_EXCEEDED when the call's `grpc-timeout` passes (tonic
/// bounds only the wait for a call's response head, not its stream). The inner stream is
/// dropped as the call ends, so a `Subscribe` stream leaves its lists at once.
pub struct Deadlined<S> {
    inner: Option<S>,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl<S> Deadlined<S> {
    fn new(inner: S, deadline: Option<Duration>) -> Deadlined<S> {
        Deadlined {
            inner: Some(inner),
            deadline: deadline.map(|after| Box::pin(tokio::time::sleep(after))),
        }
    }
}

impl<S, T> Stream for Deadlined<S>
where
    S: Stream<Item = Result<T, Status>> + Unpin,
{
    type Item = Result<T, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        if let Some(deadline) = this.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            this.inner = None;
            return Poll::Ready(Some(Err(Status::deadline_exceeded(
                "the call's deadline passed",
            ))));
        }
        let next = Pin::new(inner).poll_next(cx);
        if matches!(next, Poll::Ready(None | Some(Err(_)))) {
            this.inner = None;
        }
        next.map(|item| item.map(|result| result.map_err(conform_status)))
    }
}

/// The call's `grpc-timeout` (gRPC over HTTP/2: at most 8 digits and a unit), if it has a
/// valid one.
fn deadline(metadata: &MetadataMap) -> Option<Duration> {
    let value = metadata.get("grpc-timeout")?.to_str().ok()?;
    parse_timeout(value)
}

fn parse_timeout(value: &str) -> Option<Duration> {
    if !value.is_ascii() {
        return None;
    }
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount * 3600),
        "M" => Duration::from_secs(amount * 60),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::parse_timeout;
    use std::time::Duration;

    #[test]
    fn grpc_timeouts_are_read_with_their_units() {
        assert_eq!(parse_timeout("2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse_timeout("1500m"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(
            parse_timeout("99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
        for bad in ["", "S", "123456789S", "5x", "-1S", "1.5S"] {
            assert_eq!(parse_timeout(bad), None, "{bad}");
        }
    }
}
