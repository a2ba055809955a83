//! Server push (spec §6, §10, §11, §16), the seed 004 Event Manager and Request Manager.
//! Each held push request, SSE stream and WebSocket keeps its connection thread (blocking
//! IO, as the seed's tasks did); each active event has one emitter thread that writes
//! deliveries straight to the subscribers' sockets, whatever their transport, or, for a
//! gRPC `Subscribe` stream, whose socket tonic owns, to its bounded queue.

mod event;
mod grpc;
mod hub;
pub mod request;
mod session;
mod sse;
mod subscriber;
mod websocket;

pub use grpc::{Behind, GrpcDeliveries};
pub use hub::{PushHub, Registration};
pub use session::serve;
pub use sse::serve as serve_sse;
pub use websocket::serve as serve_websocket;
