//! Weighted paths (seed 001: requests spread over a file set by popularity). Each request
//! picks its path by weighted random choice from a seeded generator, so a run is repeatable.

use std::cell::RefCell;

use rand::distr::weighted::WeightedIndex;
use rand::distr::Distribution;
use rand::SeedableRng;
use rand_xorshift::XorShiftRng;

use crate::plan::WeightedPath;

/// Picks an index into the path list; one per worker (not shared across threads).
pub struct PathPicker {
    table: WeightedIndex<f64>,
    rng: RefCell<XorShiftRng>,
}

impl PathPicker {
    /// `None` for fewer than two paths: there is nothing to choose.
    pub fn new(paths: &[WeightedPath], seed: u64, worker: usize) -> Option<PathPicker> {
        if paths.len() < 2 {
            return None;
        }
        let table = WeightedIndex::new(paths.iter().map(|p| p.weight)).ok()?;
        Some(PathPicker {
            table,
            rng: RefCell::new(XorShiftRng::seed_from_u64(worker_seed(seed, worker))),
        })
    }

    pub fn pick(&self) -> usize {
        self.table.sample(&mut *self.rng.borrow_mut())
    }
}

/// Workers draw from different streams of the same seed (golden-ratio spacing).
fn worker_seed(seed: u64, worker: usize) -> u64 {
    seed.wrapping_add((worker as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(weights: &[f64]) -> Vec<WeightedPath> {
        weights
            .iter()
            .enumerate()
            .map(|(i, &weight)| WeightedPath {
                path: format!("/{i}"),
                weight,
            })
            .collect()
    }

    #[test]
    fn picks_follow_the_weights_and_the_seed() {
        let list = paths(&[1.0, 3.0]);
        let picker = PathPicker::new(&list, 7, 0).unwrap();
        let picks: Vec<usize> = (0..4000).map(|_| picker.pick()).collect();
        let ones = picks.iter().filter(|&&i| i == 1).count() as f64;
        assert!((ones / 4000.0 - 0.75).abs() < 0.03, "{ones}");
        let again = PathPicker::new(&list, 7, 0).unwrap();
        assert!(picks.iter().all(|&i| i == again.pick()));
        let other = PathPicker::new(&list, 8, 0).unwrap();
        assert!(picks.iter().any(|&i| i != other.pick()));
    }

    #[test]
    fn one_path_needs_no_picker() {
        assert!(PathPicker::new(&paths(&[2.0]), 1, 0).is_none());
    }
}
