//! Server push (spec §6, §10, §11), the seed 004 Event Manager and Request Manager. Each
//! held push request, SSE stream and WebSocket keeps its connection thread (blocking IO, as
//! the seed's tasks did); each active event has one emitter thread that writes deliveries
//! straight to the subscribers' sockets, whatever their transport.

mod event;
mod hub;
pub mod request;
mod session;
mod sse;
mod subscriber;
mod websocket;

pub use hub::PushHub;
pub use session::serve;
pub use sse::serve as serve_sse;
pub use websocket::serve as serve_websocket;
