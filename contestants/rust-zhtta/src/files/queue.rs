//! The shared request queue between the listener side and the responder threads, in the
//! seed's two disciplines: FIFO (the starting code) and SPT (zhtta-v3).

use crate::clock::lock;
use crate::config::Schedule;
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Condvar, Mutex};

/// A job in the SPT heap: ordered by size, then by arrival so equal sizes stay FIFO.
struct Sized<T> {
    size: u64,
    arrival: u64,
    job: T,
}

impl<T> Sized<T> {
    fn key(&self) -> (u64, u64) {
        (self.size, self.arrival)
    }
}

impl<T> PartialEq for Sized<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl<T> Eq for Sized<T> {}

impl<T> PartialOrd for Sized<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Sized<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

enum Pending<T> {
    Fifo(VecDeque<T>),
    Spt {
        heap: BinaryHeap<Reverse<Sized<T>>>,
        arrivals: u64,
    },
}

pub struct JobQueue<T> {
    pending: Mutex<Pending<T>>,
    ready: Condvar,
}

impl<T> JobQueue<T> {
    pub fn new(schedule: Schedule) -> JobQueue<T> {
        let pending = match schedule {
            Schedule::Fifo => Pending::Fifo(VecDeque::new()),
            Schedule::Spt => Pending::Spt {
                heap: BinaryHeap::new(),
                arrivals: 0,
            },
        };
        JobQueue {
            pending: Mutex::new(pending),
            ready: Condvar::new(),
        }
    }

    /// `size` is the processing-time estimate (the file size); FIFO ignores it.
    pub fn push(&self, job: T, size: u64) {
        {
            let mut pending = lock(&self.pending);
            match &mut *pending {
                Pending::Fifo(queue) => queue.push_back(job),
                Pending::Spt { heap, arrivals } => {
                    *arrivals += 1;
                    heap.push(Reverse(Sized {
                        size,
                        arrival: *arrivals,
                        job,
                    }));
                }
            }
        }
        self.ready.notify_one();
    }

    /// Blocks until a job is queued, then takes the one its discipline says is next.
    pub fn pop(&self) -> T {
        let mut pending = lock(&self.pending);
        loop {
            let next = match &mut *pending {
                Pending::Fifo(queue) => queue.pop_front(),
                Pending::Spt { heap, .. } => heap.pop().map(|Reverse(sized)| sized.job),
            };
            if let Some(job) = next {
                return job;
            }
            pending = self
                .ready
                .wait(pending)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        match &*lock(&self.pending) {
            Pending::Fifo(queue) => queue.len(),
            Pending::Spt { heap, .. } => heap.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::mpsc;
    use std::thread;
    use std::time::Duration;

    const SIZES: [u64; 6] = [500_000, 10, 7_000, 1, 10, 300];

    fn drain(queue: &JobQueue<usize>) -> Vec<usize> {
        (0..SIZES.len()).map(|_| queue.pop()).collect()
    }

    fn fill(schedule: Schedule) -> JobQueue<usize> {
        let queue = JobQueue::new(schedule);
        for (index, size) in SIZES.iter().enumerate() {
            queue.push(index, *size);
        }
        queue
    }

    #[test]
    fn fifo_serves_in_arrival_order() {
        assert_eq!(drain(&fill(Schedule::Fifo)), vec![0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn spt_serves_smallest_first_and_ties_in_arrival_order() {
        // Sizes 1, 10 (index 1), 10 (index 4), 300, 7000, 500000.
        assert_eq!(drain(&fill(Schedule::Spt)), vec![3, 1, 4, 5, 2, 0]);
    }

    /// A busy responder finishes its job; what it takes next under SPT is the smallest of
    /// everything that queued up meanwhile, not the oldest.
    #[test]
    fn spt_responder_takes_the_smallest_waiting_job() {
        let queue = Arc::new(JobQueue::new(Schedule::Spt));
        let (served_tx, served_rx) = mpsc::channel();
        let (gate_tx, gate_rx) = mpsc::channel::<()>();
        let responder = {
            let queue = Arc::clone(&queue);
            thread::spawn(move || {
                for _ in 0..4 {
                    let size: u64 = queue.pop();
                    served_tx.send(size).unwrap();
                    if size == 999 {
                        gate_rx.recv().unwrap();
                    }
                }
            })
        };
        queue.push(999, 999);
        assert_eq!(served_rx.recv_timeout(Duration::from_secs(5)).unwrap(), 999);
        for size in [800, 5, 60] {
            queue.push(size, size);
        }
        assert_eq!(queue.len(), 3);
        gate_tx.send(()).unwrap();
        let order: Vec<u64> = (0..3)
            .map(|_| served_rx.recv_timeout(Duration::from_secs(5)).unwrap())
            .collect();
        assert_eq!(order, vec![5, 60, 800]);
        responder.join().unwrap();
    }
}
