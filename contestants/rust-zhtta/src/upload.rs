//! `POST /upload` (spec §4): the body is streamed through SHA-256 as it arrives, never held.

use crate::http::{BodyReader, Conn, Request, Sent};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::io::{self, ErrorKind, Read};

const READ_SIZE: usize = 128 * 1024;

pub fn handle(conn: &mut Conn, request: &Request) -> io::Result<Sent> {
    let mut hasher = Sha256::new();
    let mut bytes: u64 = 0;
    let mut buffer = vec![0; READ_SIZE];
    let read = {
        let mut body = BodyReader::new(conn, request);
        loop {
            match body.read(&mut buffer) {
                Ok(0) => break Ok(()),
                Ok(n) => {
                    hasher.update(&buffer[..n]);
                    bytes += n as u64;
                }
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => break Err(error),
            }
        }
    };
    match read {
        Ok(()) => {
            let digest = hex::encode(hasher.finalize());
            conn.send_json(
                200,
                &json!({ "bytes": bytes, "sha256": digest }),
                request.keep_alive,
            )
        }
        Err(error) if error.kind() == ErrorKind::InvalidData => {
            conn.send_error(400, "malformed chunked body", false)
        }
        Err(error) => Err(error),
    }
}
