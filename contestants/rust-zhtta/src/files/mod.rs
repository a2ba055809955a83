//! `GET /files/<path>` the seed 001 way: the connection thread checks the path and queues
//! the request; one of N responder threads takes it from the shared queue (FIFO or SPT)
//! and writes the file, whole or chunked, through the cache when it is on.

mod cache;
mod path;
mod queue;
mod responder;

use crate::config::Config;
use crate::http::{Conn, Length, Request, Sent};
use crate::stats::Stats;
use cache::FileCache;
use path::{Refusal, resolve};
use queue::JobQueue;
use responder::{FileJob, Responder};
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, mpsc};
use std::thread;

/// Responders keep their buffers on the heap; a small stack lets 1024 of them start cheaply.
const RESPONDER_STACK: usize = 256 * 1024;

pub struct FileService {
    root: PathBuf,
    queue: Arc<JobQueue<FileJob>>,
}

impl FileService {
    pub fn start(config: &Config, stats: &'static Stats) -> io::Result<FileService> {
        let root = config.docroot.canonicalize().map_err(|error| {
            io::Error::new(
                error.kind(),
                format!("docroot {}: {error}", config.docroot.display()),
            )
        })?;
        let queue = Arc::new(JobQueue::new(config.schedule));
        let cache = config.cache.map(|c| Arc::new(FileCache::new(c)));
        for index in 0..config.responders {
            let responder = Responder::new(config.read, config.chunk_size, cache.clone(), stats);
            let queue = Arc::clone(&queue);
            thread::Builder::new()
                .name(format!("responder-{index}"))
                .stack_size(RESPONDER_STACK)
                .spawn(move || responder.run(&queue))?;
        }
        Ok(FileService { root, queue })
    }

    /// `raw` is the path after `/files/`. GET goes through the queue; HEAD is answered here.
    pub fn handle(
        &self,
        conn: &mut Conn,
        request: &Request,
        raw: &str,
        keep_alive: bool,
    ) -> io::Result<Sent> {
        let file = match resolve(&self.root, raw) {
            Ok(file) => file,
            Err(Refusal::Forbidden) => {
                return conn.send_error(403, "path outside the document root", keep_alive);
            }
            Err(Refusal::NotFound) => return conn.send_error(404, "no such file", keep_alive),
        };
        let len = file.stamp.len;
        if request.method == "HEAD" {
            let content_type = "application/octet-stream";
            return conn.send_head(200, content_type, Length::Known(len), "", keep_alive, b"");
        }
        let (reply, outcome) = mpsc::sync_channel(1);
        let job = FileJob {
            stream: Arc::clone(&conn.stream),
            file,
            keep_alive,
            reply,
        };
        self.queue.push(job, len);
        match outcome.recv() {
            Ok(Some(sent)) => Ok(sent),
            _ => Err(io::Error::other("file response failed")),
        }
    }
}
