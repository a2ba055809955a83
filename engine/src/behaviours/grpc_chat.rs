//! Behaviours stage: `grpc-chat` (spec §16): the bidirectional `Chat` on the HTTP/2 carrier
//! (`crate::mux`), `streams` clients to a connection. Each client holds one Chat stream
//! across its exchanges; one exchange is one message sent on it and its echo read back,
//! timed from the send (or, in open loop, from its scheduled time) to the echo's last byte,
//! under every pacer. An echo that differs from the message is a `parse` error. A stream
//! the server ends, or one whose exchange was cut (a timeout), is replaced by a new one at
//! the next exchange; its end counts by gRPC status as `grpc-stream`'s does.

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::grpcwire::{length_prefixed, status, status_kind, CallHead, EchoMessage, Messages};
use super::{Attempt, Behaviour};
use crate::client::Client;
use crate::http::ParseError;
use crate::inbox::Answer;
use crate::mux::{open_duplex, Duplex, Groups, Seat};
use crate::plan::{GrpcChatSpec, ValidPlan};
use crate::stats::ErrorKind;

impl super::Loop for GrpcChatSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, _worker: usize, runner: R) -> R::Out {
        runner.run(GrpcChat::new(plan, self))
    }
}

pub(crate) struct GrpcChat {
    head: CallHead,
    /// The message as sent, prefix included; its echo is the same bytes.
    framed: Bytes,
    timeout: Duration,
    groups: Groups,
}

impl GrpcChat {
    pub fn new(plan: &ValidPlan, spec: &GrpcChatSpec) -> GrpcChat {
        let message = EchoMessage {
            data: (0..spec.echo_bytes).map(|i| (i % 251) as u8).collect(),
        };
        GrpcChat {
            // No deadline: the stream lasts the run; each message's limit is the timeout.
            head: CallHead::new(plan, "/serverlab.v1.Lab/Chat", None),
            framed: Bytes::from(length_prefixed(&message)),
            timeout: Duration::from_millis(plan.plan.timeout_ms),
            groups: Groups::new(plan.plan.streams()),
        }
    }

    /// Sends the message on the client's Chat stream: the one it holds, or a new one.
    async fn send(&self, c: &mut Client, state: &mut ChatState) -> Result<(), ErrorKind> {
        // An exchange cut while awaiting its echo leaves the echo to come: not this one's.
        if std::mem::take(&mut state.awaiting) {
            state.stream = None;
        }
        if state.stream.is_none() {
            let held = self.groups.held(c, &mut state.seat).await?;
            state.stream = Some(open_duplex(held, self.head.request()).await?);
            state.messages = Messages::default();
        }
        let stream = state.stream.as_mut().ok_or(ErrorKind::Other)?;
        stream.send(self.framed.clone())?;
        state.awaiting = true;
        Ok(())
    }

    /// Reads until the echo of the message sent is whole; `Err` ends the stream.
    async fn echo(&self, stream: &mut Duplex, messages: &mut Messages) -> Result<(), ErrorKind> {
        let mut echoed = None;
        while echoed.is_none() {
            let Some(data) = stream.next().await? else {
                return Err(ErrorKind::Closed);
            };
            let expected = &self.framed[5..];
            messages.feed(&data, &mut |m| match (echoed.is_none(), m == expected) {
                (true, true) => {
                    echoed = Some(());
                    Ok(())
                }
                _ => Err(ParseError::BadMessage),
            })?;
        }
        Ok(())
    }
}

/// One client's Chat: its connection's seat, its stream, and whether an echo is awaited.
#[derive(Default)]
pub(crate) struct ChatState {
    seat: Seat,
    stream: Option<Duplex>,
    messages: Messages,
    awaiting: bool,
}

impl Behaviour for GrpcChat {
    type State = ChatState;

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    async fn exchange(
        &self,
        c: &mut Client,
        state: &mut ChatState,
        attempt: Attempt,
    ) -> Result<(), ErrorKind> {
        let sent = Instant::now();
        if let Err(kind) = self.send(c, state).await {
            state.stream = None;
            return Err(kind);
        }
        let stream = state.stream.as_mut().ok_or(ErrorKind::Other)?;
        let read = self.echo(stream, &mut state.messages).await;
        state.awaiting = false;
        match read {
            Ok(()) => {
                let answer = Answer {
                    status: stream.status().unwrap_or(200),
                    close: false,
                    first_byte: Instant::now(),
                };
                c.record_answer(attempt.intended, sent, &answer);
                Ok(())
            }
            Err(kind) => Err(ended(state.stream.take(), kind).await),
        }
    }
}

/// What a Chat stream's end counts as: the server's status when it ended the stream (a
/// Chat ends OK only after the client ended its side, which the engine never does), or the
/// error that ended the read.
async fn ended(stream: Option<Duplex>, read: ErrorKind) -> ErrorKind {
    let Some(stream) = stream.filter(|_| read == ErrorKind::Closed) else {
        return read;
    };
    match stream.finish().await {
        // The trailers' status, or the headers' when none came (trailers-only).
        Ok(finished) => match status(&finished, false) {
            Some(0) => ErrorKind::Closed,
            Some(code) => status_kind(code),
            None => ErrorKind::GrpcNoStatus,
        },
        Err(kind) => kind,
    }
}
