//! The application-layer file cache of the seed's final zhtta, done so that it helps: the
//! lock covers only map updates. Disk reads happen before `insert`, socket writes after
//! `get` (on a shared `Arc`), and evicted buffers are freed after the lock is released.
//! Two responders missing the same file at once both read it; that costs one redundant
//! read, never a responder waiting on another one's disk IO.

use super::path::FileStamp;
use crate::clock::lock;
use crate::config::{CacheConfig, CachePolicy};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

struct Entry {
    data: Arc<[u8]>,
    stamp: FileStamp,
    /// Position in the eviction order: smaller goes first.
    rank: u64,
}

#[derive(Default)]
struct Index {
    entries: HashMap<PathBuf, Entry>,
    eviction_order: BTreeMap<u64, PathBuf>,
    used_bytes: u64,
    clock: u64,
}

impl Index {
    fn next_rank(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn remove(&mut self, path: &Path) -> Option<Arc<[u8]>> {
        let entry = self.entries.remove(path)?;
        self.eviction_order.remove(&entry.rank);
        self.used_bytes -= entry.data.len() as u64;
        Some(entry.data)
    }
}

pub struct FileCache {
    capacity_bytes: u64,
    policy: CachePolicy,
    index: Mutex<Index>,
}

impl FileCache {
    pub fn new(config: CacheConfig) -> FileCache {
        FileCache {
            capacity_bytes: config.capacity_bytes,
            policy: config.policy,
            index: Mutex::new(Index::default()),
        }
    }

    /// Whether a file of this size may be cached at all.
    pub fn fits(&self, len: u64) -> bool {
        len <= self.capacity_bytes
    }

    /// The cached bytes if they are still those of the file as last stat'ed.
    pub fn get(&self, path: &Path, stamp: FileStamp) -> Option<Arc<[u8]>> {
        let stale;
        {
            let mut index = lock(&self.index);
            let fresh = index.entries.get(path).map(|entry| entry.stamp == stamp)?;
            if fresh {
                if self.policy == CachePolicy::Lru {
                    self.promote(&mut index, path);
                }
                return index.entries.get(path).map(|entry| Arc::clone(&entry.data));
            }
            stale = index.remove(path);
        }
        drop(stale);
        None
    }

    fn promote(&self, index: &mut Index, path: &Path) {
        let rank = index.next_rank();
        if let Some(entry) = index.entries.get_mut(path) {
            let old = std::mem::replace(&mut entry.rank, rank);
            if let Some(key) = index.eviction_order.remove(&old) {
                index.eviction_order.insert(rank, key);
            }
        }
    }

    pub fn insert(&self, path: &Path, stamp: FileStamp, data: Arc<[u8]>) {
        let len = data.len() as u64;
        if !self.fits(len) {
            return;
        }
        let mut evicted = Vec::new();
        {
            let mut index = lock(&self.index);
            evicted.extend(index.remove(path));
            while index.used_bytes + len > self.capacity_bytes {
                let Some((_, victim)) = index.eviction_order.pop_first() else {
                    break;
                };
                let entry = index.entries.remove(&victim).expect("ordered entry exists");
                index.used_bytes -= entry.data.len() as u64;
                evicted.push(entry.data);
            }
            let rank = index.next_rank();
            index.eviction_order.insert(rank, path.to_path_buf());
            index
                .entries
                .insert(path.to_path_buf(), Entry { data, stamp, rank });
            index.used_bytes += len;
        }
        drop(evicted);
    }

    #[cfg(test)]
    fn cached_paths(&self) -> Vec<PathBuf> {
        let index = lock(&self.index);
        index.eviction_order.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(len: u64) -> FileStamp {
        FileStamp {
            len,
            modified: None,
        }
    }

    fn cache(policy: CachePolicy, capacity_bytes: u64) -> FileCache {
        FileCache::new(CacheConfig {
            capacity_bytes,
            policy,
        })
    }

    fn put(cache: &FileCache, name: &str, len: usize) {
        cache.insert(Path::new(name), stamp(len as u64), vec![b'x'; len].into());
    }

    fn hit(cache: &FileCache, name: &str, len: u64) -> bool {
        cache.get(Path::new(name), stamp(len)).is_some()
    }

    #[test]
    fn lru_evicts_the_least_recently_used() {
        let cache = cache(CachePolicy::Lru, 30);
        put(&cache, "a", 10);
        put(&cache, "b", 10);
        put(&cache, "c", 10);
        assert!(hit(&cache, "a", 10));
        put(&cache, "d", 10);
        assert!(!hit(&cache, "b", 10), "b was used longest ago");
        assert!(hit(&cache, "a", 10) && hit(&cache, "c", 10) && hit(&cache, "d", 10));
    }

    #[test]
    fn fifo_evicts_the_oldest_insert_however_often_used() {
        let cache = cache(CachePolicy::Fifo, 30);
        put(&cache, "a", 10);
        put(&cache, "b", 10);
        put(&cache, "c", 10);
        assert!(hit(&cache, "a", 10));
        put(&cache, "d", 10);
        assert!(!hit(&cache, "a", 10), "a was inserted first");
        assert_eq!(
            cache.cached_paths(),
            vec![PathBuf::from("b"), PathBuf::from("c"), PathBuf::from("d")]
        );
    }

    #[test]
    fn capacity_is_in_bytes_and_large_files_are_not_cached() {
        let cache = cache(CachePolicy::Lru, 25);
        put(&cache, "big", 26);
        assert!(!hit(&cache, "big", 26));
        put(&cache, "a", 10);
        put(&cache, "b", 10);
        put(&cache, "c", 20);
        assert_eq!(cache.cached_paths(), vec![PathBuf::from("c")]);
    }

    #[test]
    fn a_changed_file_is_a_miss_and_leaves_the_cache() {
        let cache = cache(CachePolicy::Lru, 100);
        put(&cache, "a", 10);
        assert!(!hit(&cache, "a", 11));
        assert!(cache.cached_paths().is_empty());
    }

    #[test]
    fn reinserting_replaces_without_double_counting() {
        let cache = cache(CachePolicy::Lru, 20);
        put(&cache, "a", 10);
        put(&cache, "a", 10);
        put(&cache, "b", 10);
        assert!(hit(&cache, "a", 10) && hit(&cache, "b", 10));
    }
}
