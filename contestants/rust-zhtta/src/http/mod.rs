//! HTTP/1.1 on a blocking socket: request heads parsed by httparse, bodies by length or
//! chunked coding, and response heads written in one buffer.

mod body;
mod conn;
mod framing;
mod response;

pub use body::{BodyReader, LimitedBodyError, read_limited};
pub use conn::{Conn, HeadError, MAX_HEAD, Request, Upgrade};
pub use response::{Length, Sent, write_head};
