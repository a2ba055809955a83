//! A ring of provided buffers: the kernel picks one for each arrival of a multishot receive,
//! and the loop hands it back once the bytes are copied out.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::IoUring;

pub struct BufRing {
    entries: *mut BufRingEntry,
    layout: Layout,
    buffers: Vec<u8>,
    size: usize,
    count: u16,
    tail: u16,
    group: u16,
}

impl BufRing {
    /// Registers `count` (a power of two) buffers of `size` bytes as buffer group `group`.
    pub fn register(ring: &IoUring, count: u16, size: usize, group: u16) -> io::Result<BufRing> {
        assert!(count.is_power_of_two());
        let layout = Layout::from_size_align(usize::from(count) * 16, 4096)
            .map_err(|e| io::Error::other(e.to_string()))?;
        // SAFETY: a non-zero size and a valid alignment.
        let entries = unsafe { alloc_zeroed(layout) }.cast::<BufRingEntry>();
        if entries.is_null() {
            return Err(io::ErrorKind::OutOfMemory.into());
        }
        let mut ring_of = BufRing {
            entries,
            layout,
            buffers: vec![0; usize::from(count) * size],
            size,
            count,
            tail: 0,
            group,
        };
        for bid in 0..count {
            ring_of.recycle(bid);
        }
        // SAFETY: the entries stay allocated, page aligned, until `drop`, after the driver
        // has stopped every receive that may pick from them.
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(entries as u64, count, group, 0)?;
        }
        Ok(ring_of)
    }

    pub fn group(&self) -> u16 {
        self.group
    }

    /// The first `len` bytes of buffer `bid`.
    pub fn bytes(&self, bid: u16, len: usize) -> &[u8] {
        let start = usize::from(bid) * self.size;
        &self.buffers[start..start + len.min(self.size)]
    }

    /// Gives buffer `bid` back to the kernel.
    pub fn recycle(&mut self, bid: u16) {
        let at = usize::from(self.tail & (self.count - 1));
        // SAFETY: `at` is below `count`, the number of entries allocated.
        let entry = unsafe { &mut *self.entries.add(at) };
        entry.set_addr(self.buffers.as_ptr() as u64 + (usize::from(bid) * self.size) as u64);
        entry.set_len(self.size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
        // SAFETY: the tail field lies inside the first entry; the kernel reads it
        // concurrently, hence the atomic release store after the entry is written.
        let tail = unsafe { AtomicU16::from_ptr(BufRingEntry::tail(self.entries).cast_mut()) };
        tail.store(self.tail, Ordering::Release);
    }

    pub fn unregister(&self, ring: &IoUring) {
        let _ = ring.submitter().unregister_buf_ring(self.group);
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `register` with this layout.
        unsafe { dealloc(self.entries.cast(), self.layout) };
    }
}
