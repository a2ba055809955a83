//! A responder thread: takes file jobs from the queue and writes each file, whole or in
//! chunks through one reused buffer, with the cache in front when it is on.

use super::cache::FileCache;
use super::path::ResolvedFile;
use super::queue::JobQueue;
use crate::config::ReadMode;
use crate::http::{Length, Sent, write_head};
use crate::stats::{Stats, bump};
use crate::stream::Stream;
use std::fs::File;
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::sync::mpsc::SyncSender;

const CONTENT_TYPE: &str = "application/octet-stream";

/// A checked file request handed from a connection thread to the responders. The reply
/// carries the response status, or `None` when the connection must be closed.
pub struct FileJob {
    pub stream: Arc<Stream>,
    pub file: ResolvedFile,
    pub keep_alive: bool,
    pub reply: SyncSender<Option<Sent>>,
}

pub struct Responder {
    pub read: ReadMode,
    pub chunk_size: usize,
    pub cache: Option<Arc<FileCache>>,
    pub stats: &'static Stats,
    chunk: Vec<u8>,
    head: Vec<u8>,
}

impl Responder {
    pub fn new(
        read: ReadMode,
        chunk_size: usize,
        cache: Option<Arc<FileCache>>,
        stats: &'static Stats,
    ) -> Responder {
        Responder {
            read,
            chunk_size,
            cache,
            stats,
            chunk: Vec::new(),
            head: Vec::with_capacity(256),
        }
    }

    pub fn run(mut self, queue: &JobQueue<FileJob>) {
        loop {
            let job = queue.pop();
            let outcome = self.serve(&job).ok();
            // The connection thread may be gone (it panicked); nothing is left to tell.
            let _ = job.reply.send(outcome);
        }
    }

    fn serve(&mut self, job: &FileJob) -> io::Result<Sent> {
        let sent = Sent {
            status: 200,
            keep_alive: job.keep_alive,
        };
        let mut stream = &*job.stream;
        if let Some(data) = self.cached(&job.file) {
            self.start_head(job, 200, Length::Known(data.len() as u64));
            stream.write_all(&self.head)?;
            bump(&self.stats.responses_total);
            stream.write_all(&data)?;
            return Ok(sent);
        }
        let Ok(file) = File::open(&job.file.path) else {
            return self.send_gone(job);
        };
        match self.read {
            ReadMode::Whole => self.send_whole(job, file)?,
            ReadMode::Chunked => self.send_chunked(job, file)?,
        }
        Ok(sent)
    }

    fn cached(&self, file: &ResolvedFile) -> Option<Arc<[u8]>> {
        self.cache.as_ref()?.get(&file.path, file.stamp)
    }

    fn wants_cache_fill(&self, len: u64) -> bool {
        self.cache.as_ref().is_some_and(|cache| cache.fits(len))
    }

    fn fill_cache(&self, file: &ResolvedFile, data: &[u8]) {
        if let Some(cache) = &self.cache {
            cache.insert(&file.path, file.stamp, Arc::from(data));
        }
    }

    fn start_head(&mut self, job: &FileJob, status: u16, length: Length) {
        self.head.clear();
        write_head(
            &mut self.head,
            status,
            CONTENT_TYPE,
            length,
            "",
            job.keep_alive,
        );
    }

    /// The file was there when the connection thread checked and is gone now.
    fn send_gone(&mut self, job: &FileJob) -> io::Result<Sent> {
        let body = br#"{"error":"no such file"}"#;
        self.head.clear();
        write_head(
            &mut self.head,
            404,
            "application/json",
            Length::Known(body.len() as u64),
            "",
            job.keep_alive,
        );
        self.head.extend_from_slice(body);
        (&*job.stream).write_all(&self.head)?;
        bump(&self.stats.responses_total);
        Ok(Sent {
            status: 404,
            keep_alive: job.keep_alive,
        })
    }

    /// The starting code: the whole file in memory first, then one write (head included).
    fn send_whole(&mut self, job: &FileJob, file: File) -> io::Result<()> {
        let len = job.file.stamp.len;
        self.start_head(job, 200, Length::Known(len));
        let head_len = self.head.len();
        let mut response = Vec::with_capacity(head_len + len as usize);
        response.extend_from_slice(&self.head);
        file.take(len).read_to_end(&mut response)?;
        if response.len() - head_len != len as usize {
            return Err(changed_under_us());
        }
        (&*job.stream).write_all(&response)?;
        bump(&self.stats.responses_total);
        if self.wants_cache_fill(len) {
            self.fill_cache(&job.file, &response[head_len..]);
        }
        Ok(())
    }

    /// zhtta-v1: read `chunk_size` bytes, write them, repeat, through one buffer.
    fn send_chunked(&mut self, job: &FileJob, mut file: File) -> io::Result<()> {
        let len = job.file.stamp.len;
        let buffer_len = self.chunk_size.min(len as usize).max(1);
        if self.chunk.len() < buffer_len {
            self.chunk.resize(buffer_len, 0);
        }
        let mut copy = self
            .wants_cache_fill(len)
            .then(|| Vec::with_capacity(len as usize));
        self.start_head(job, 200, Length::Known(len));
        let mut stream = &*job.stream;
        stream.write_all(&self.head)?;
        bump(&self.stats.responses_total);
        let mut left = len;
        while left > 0 {
            let want = buffer_len.min(usize::try_from(left).unwrap_or(usize::MAX));
            let n = file.read(&mut self.chunk[..want])?;
            if n == 0 {
                return Err(changed_under_us());
            }
            stream.write_all(&self.chunk[..n])?;
            if let Some(copy) = copy.as_mut() {
                copy.extend_from_slice(&self.chunk[..n]);
            }
            left -= n as u64;
        }
        if let Some(copy) = copy {
            self.fill_cache(&job.file, &copy);
        }
        Ok(())
    }
}

/// The file shrank after its length was announced: the connection cannot be reused.
fn changed_under_us() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "file shrank while being served",
    )
}
