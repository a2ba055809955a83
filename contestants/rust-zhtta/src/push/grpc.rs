//! A gRPC `Subscribe` stream's side of the push hub (spec §16). tonic owns the stream's
//! socket, so an emitter thread cannot write to it: it queues the delivery, bounded, and
//! the stream's task on the gRPC runtime takes it and stamps `sent` as tonic pulls it to
//! encode and write (spec §6).

use super::hub::{PushHub, Registration, Subscription};
use super::subscriber::{Emit, Outlet, Transport};
use crate::clock::now_ms;
use crate::lab::Delivery;
use serde_json::value::RawValue;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use tokio::sync::mpsc::{self, error::TrySendError};

/// How many deliveries a stream may fall behind before it is ended instead of buffered
/// without bound. A delivery counts once it is in this queue (spec §6, "What counts").
pub const BACKLOG: usize = 1024;

/// What every delivery of one emit cycle shares; a queued delivery is this and its place,
/// so that a held stream's queue stays small and a cycle is copied once, not per stream.
pub struct GrpcCycle {
    name: String,
    seq: i64,
    created: i64,
    total: i64,
    data: String,
}

type Queued = (Arc<GrpcCycle>, u64);

/// The emitters' end of a stream's queue.
pub struct GrpcQueue {
    sender: mpsc::Sender<Queued>,
    behind: Arc<AtomicBool>,
}

/// The stream's end: its deliveries, then, once it fell too far behind, `Behind`.
pub struct GrpcDeliveries {
    receiver: mpsc::Receiver<Queued>,
    behind: Arc<AtomicBool>,
}

/// The stream fell more than BACKLOG deliveries behind: it ends RESOURCE_EXHAUSTED.
pub struct Behind;

impl GrpcQueue {
    /// Queues one emit; false if the stream is gone or too far behind to take it.
    pub fn put(&self, emit: &Emit, place: u64) -> bool {
        let cycle = emit.grpc.get_or_init(|| {
            Arc::new(GrpcCycle {
                name: emit.name.to_owned(),
                seq: emit.seq as i64,
                created: emit.created_ms as i64,
                total: emit.total as i64,
                data: emit
                    .data
                    .map(|data| data.get().to_owned())
                    .unwrap_or_default(),
            })
        });
        match self.sender.try_send((Arc::clone(cycle), place)) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                self.behind.store(true, Ordering::Release);
                false
            }
            Err(TrySendError::Closed(_)) => false,
        }
    }
}

impl GrpcDeliveries {
    /// The next delivery, its `sent` stamped now; `Behind` first once the queue overflowed.
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Result<Delivery, Behind>> {
        if self.behind.load(Ordering::Acquire) {
            return Poll::Ready(Err(Behind));
        }
        match self.receiver.poll_recv(cx) {
            Poll::Ready(Some((cycle, place))) => Poll::Ready(Ok(Delivery {
                name: cycle.name.clone(),
                seq: cycle.seq,
                created: cycle.created,
                sent: now_ms() as i64,
                total: cycle.total,
                place: place as i64,
                data: cycle.data.clone(),
            })),
            // The sender lives in the subscriber, which the stream's registration holds.
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }
}

impl PushHub {
    /// Registers a `Subscribe` stream with its events (1 to 16 distinct valid names): it is
    /// in every later cycle's snapshot, beside the other transports' subscribers.
    pub fn subscribe_grpc(&self, names: Vec<String>) -> (Registration, GrpcDeliveries) {
        let (sender, receiver) = mpsc::channel(BACKLOG);
        let behind = Arc::new(AtomicBool::new(false));
        let queue = GrpcQueue {
            sender,
            behind: Arc::clone(&behind),
        };
        let request = serde_json::json!({ "events": names }).to_string();
        let subscription = Subscription {
            transport: Transport::Grpc,
            names,
            request: RawValue::from_string(request).expect("serialized json"),
            keep_alive: true,
        };
        let registration = self.subscribe(subscription, Outlet::Queue(queue));
        (registration, GrpcDeliveries { receiver, behind })
    }
}
