//! Behaviours stage: what the abuse behaviours that hold a connection share: an attack
//! connection waits for the server's move, writing its own bytes on a schedule meanwhile.
//! The server ending it is the outcome measured: an answer (a `408`, a `400`) is recorded
//! with its latency, the time the server held the connection; a close without one counts
//! as `closed`, a reset as `reset`.

use std::time::{Duration, Instant};

use super::Attempt;
use crate::client::Client;
use crate::inbox::discard;
use crate::stats::ErrorKind;

/// Holds `c`'s connection, opened at `began`, writing `next_bytes()` every `every` (never,
/// with `None`), until the server answers or closes; the run's end drops it first.
pub(super) async fn hold(
    c: &mut Client,
    attempt: Attempt,
    began: Instant,
    every: Option<Duration>,
    mut next_bytes: impl FnMut() -> Vec<u8>,
) -> Result<(), ErrorKind> {
    let mut due = every.map(|every| began + every);
    loop {
        let heard = match due {
            Some(at) => tokio::time::timeout_at(at.into(), c.fill()).await.ok(),
            None => Some(c.fill().await),
        };
        match heard {
            // Nothing from the server by the next line's time: the line goes.
            None => {
                c.send(&next_bytes()).await?;
                due = due.zip(every).map(|(at, every)| at + every);
            }
            Some(Ok(0)) => return Err(ErrorKind::Closed),
            Some(Ok(_)) => return answered(c, attempt, began).await,
            Some(Err(kind)) => return Err(kind),
        }
    }
}

/// The server began an answer to the unfinished request: read it whole and record it, timed
/// from the connection's start.
async fn answered(c: &mut Client, attempt: Attempt, began: Instant) -> Result<(), ErrorKind> {
    let answer = c.read_answer(false, &mut discard).await?;
    c.record_answer(attempt.intended, began, &answer);
    c.close();
    Ok(())
}
