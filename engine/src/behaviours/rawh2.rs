//! Behaviours stage: an HTTP/2 connection whose frames the behaviour writes itself
//! (`crate::h2frames`), for the attacks the `h2` crate will not make. The server's frames are
//! read and dropped, but for what a peer must answer to be left talking: its SETTINGS (the
//! first awaited before the attack begins) and PINGs are acknowledged, but inside a header
//! block. Its GOAWAY ends the connection (`h2_goaway`), as its close does
//! (`closed`): the server defending itself is the outcome measured.

use std::time::{Duration, Instant};

use super::schedule::Schedule;

use crate::client::Client;
use crate::h2frames::{frame, opening, FrameHead, ACK, GOAWAY, HEADER_LEN, PING, SETTINGS};
use crate::stats::ErrorKind;

/// Opens a connection (over TLS, ALPN must agree `h2`), writes the preface and SETTINGS,
/// and waits for the server's SETTINGS (within the plan's timeout) to acknowledge them, so
/// that the attack's frames follow a connection the server holds as set up.
pub(super) async fn open(c: &mut Client) -> Result<(), ErrorKind> {
    c.ensure_conn().await?;
    if !c.agreed_h2() {
        // The server did not agree to HTTP/2: a failed negotiation, as `mux::connect` counts.
        return Err(ErrorKind::TlsHandshake);
    }
    c.send(&opening()).await?;
    let limit = Duration::from_millis(c.ctx.shared.plan.plan.timeout_ms);
    let settled = async {
        while !take_frames(c, Answer::All).await? {
            if c.fill().await? == 0 {
                return Err(ErrorKind::Closed);
            }
        }
        Ok(())
    };
    tokio::time::timeout(limit, settled)
        .await
        .map_err(|_| ErrorKind::Timeout)?
}

/// Which of the server's frames the engine answers while reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Answer {
    /// SETTINGS and PINGs are acknowledged.
    All,
    /// None: inside a header block, where any frame but CONTINUATION is a connection error
    /// (RFC 9113 §6.10), the engine stays silent.
    None,
}

/// Writes units `0..total` (endless with `None`) at `per_s` from now (`Schedule`):
/// `units(from, to)` makes the bytes of units `from..to`, and `wrote(n)` counts them once
/// written. Between writes the server's frames are read (`listen_until`).
pub(super) async fn paced(
    c: &mut Client,
    per_s: f64,
    total: Option<u64>,
    units: impl Fn(u64, u64) -> Vec<u8>,
    wrote: impl Fn(&Client, u64),
    answer: Answer,
) -> Result<(), ErrorKind> {
    let mut schedule = Schedule::new(per_s, total);
    while !schedule.done() {
        let due = schedule.take_due();
        if !due.is_empty() {
            c.send(&units(due.start, due.end)).await?;
            wrote(c, due.end - due.start);
        }
        listen_until(c, schedule.next_at(), answer).await?;
    }
    Ok(())
}

/// Reads the server's frames until `until`, answering as `answer` says.
async fn listen_until(c: &mut Client, until: Instant, answer: Answer) -> Result<(), ErrorKind> {
    loop {
        match tokio::time::timeout_at(until.into(), c.fill()).await {
            Err(_) => return Ok(()),
            Ok(Ok(0)) => return Err(ErrorKind::Closed),
            Ok(Ok(_)) => _ = take_frames(c, answer).await?,
            Ok(Err(kind)) => return Err(kind),
        }
    }
}

/// Takes every whole frame read so far, answering as `answer` says (in one write); whether
/// a SETTINGS frame of the server's was among them.
async fn take_frames(c: &mut Client, answer: Answer) -> Result<bool, ErrorKind> {
    let (mut reply, mut settings) = (Vec::new(), false);
    while let Some(head) = FrameHead::parse(c.unread()) {
        let whole = HEADER_LEN + head.len;
        let Some(payload) = c.unread().get(HEADER_LEN..whole) else {
            break;
        };
        let asks = head.flags & ACK == 0 && answer == Answer::All;
        match head.kind {
            GOAWAY => return Err(ErrorKind::H2Goaway),
            SETTINGS if head.flags & ACK == 0 => {
                settings = true;
                if asks {
                    frame(&mut reply, SETTINGS, ACK, 0, &[]);
                }
            }
            PING if asks => frame(&mut reply, PING, ACK, 0, payload),
            _ => {}
        }
        c.consume(whole);
    }
    if !reply.is_empty() {
        c.send(&reply).await?;
    }
    Ok(settings)
}
