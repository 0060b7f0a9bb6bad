//! Weighted file-size distributions and their seeded draws.
//!
//! The study drew each client's file size from a short list (e.g. 2, 5,
//! 10 and 20 MB) with weights. [`SizeDist`] is such a list with relative
//! weights; [`SizeDist::draw`] maps one 64-bit random value onto it, so a
//! seeded generator reproduces every size of a run. On the command line a
//! distribution is written `2M:5,5M:3,10M:2,20M:1` (a size without
//! `:WEIGHT` weighs 1, so `2M,5M` is uniform).

use std::str::FromStr;

use crate::sizes::{SizeError, parse_size};

/// A size distribution could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DistError {
    /// No sizes at all.
    #[error("a size distribution needs at least one size")]
    Empty,
    /// Sizes and weights differ in number.
    #[error("{sizes} sizes but {weights} weights")]
    Mismatch {
        /// Number of sizes.
        sizes: usize,
        /// Number of weights.
        weights: usize,
    },
    /// A weight is negative or not a number, or all weights are zero.
    #[error("invalid weight {0}: weights must be finite, ≥ 0 and not all 0")]
    Weight(f64),
    /// A size is malformed.
    #[error(transparent)]
    Size(#[from] SizeError),
    /// A `:WEIGHT` suffix is not a number.
    #[error("invalid weight in {0:?} (expected SIZE or SIZE:WEIGHT, e.g. 2M:0.5)")]
    WeightText(String),
}

/// File sizes with relative weights (they need not add up to 1: `.5`,
/// `.3`, `.2`, `.1` mean 5/11, 3/11, 2/11 and 1/11, as Python's
/// `random.choices` reads them).
#[derive(Debug, Clone, PartialEq)]
pub struct SizeDist {
    sizes: Vec<u64>,
    weights: Vec<f64>,
}

impl SizeDist {
    /// Every size equally likely.
    pub fn uniform(sizes: Vec<u64>) -> Result<SizeDist, DistError> {
        let weights = vec![1.0; sizes.len()];
        SizeDist::weighted(sizes, weights)
    }

    /// `sizes[i]` with relative weight `weights[i]`.
    pub fn weighted(sizes: Vec<u64>, weights: Vec<f64>) -> Result<SizeDist, DistError> {
        if sizes.is_empty() {
            return Err(DistError::Empty);
        }
        if sizes.len() != weights.len() {
            return Err(DistError::Mismatch {
                sizes: sizes.len(),
                weights: weights.len(),
            });
        }
        if let Some(bad) = weights.iter().find(|w| !(w.is_finite() && **w >= 0.0)) {
            return Err(DistError::Weight(*bad));
        }
        if weights.iter().sum::<f64>() <= 0.0 {
            return Err(DistError::Weight(0.0));
        }
        Ok(SizeDist { sizes, weights })
    }

    /// One fixed size.
    pub fn fixed(size: u64) -> SizeDist {
        SizeDist {
            sizes: vec![size],
            weights: vec![1.0],
        }
    }

    /// The sizes, in the order given.
    pub fn sizes(&self) -> &[u64] {
        &self.sizes
    }

    /// The relative weights, in the order given.
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// The probability of `sizes()[index]` (its weight over the sum).
    pub fn probability(&self, index: usize) -> f64 {
        let total: f64 = self.weights.iter().sum();
        self.weights.get(index).map_or(0.0, |w| w / total)
    }

    /// The expected size.
    pub fn mean(&self) -> f64 {
        (0..self.sizes.len())
            .map(|index| self.sizes[index] as f64 * self.probability(index))
            .sum()
    }

    /// The index that the random value `random` picks.
    pub fn draw_index(&self, random: u64) -> usize {
        // 53 random bits → a uniform number in [0, total weight).
        let unit = (random >> 11) as f64 / (1u64 << 53) as f64;
        let mut left = unit * self.weights.iter().sum::<f64>();
        for (index, weight) in self.weights.iter().enumerate() {
            if left < *weight {
                return index;
            }
            left -= weight;
        }
        // Rounding at the very top: the last size with a weight.
        self.weights
            .iter()
            .rposition(|weight| *weight > 0.0)
            .unwrap_or(0)
    }

    /// The size that the random value `random` picks.
    pub fn draw(&self, random: u64) -> u64 {
        self.sizes[self.draw_index(random)]
    }

    /// The same distribution with every size multiplied by `factor`
    /// (rounded; a non-zero size stays at least 1 byte).
    pub fn scaled(&self, factor: f64) -> SizeDist {
        let sizes = self
            .sizes
            .iter()
            .map(|&size| {
                let scaled = (size as f64 * factor).round() as u64;
                if size > 0 { scaled.max(1) } else { 0 }
            })
            .collect();
        SizeDist {
            sizes,
            weights: self.weights.clone(),
        }
    }
}

impl FromStr for SizeDist {
    type Err = DistError;

    /// `SIZE[:WEIGHT],...`, e.g. `2M:5,5M:3,10M:2,20M:1` or `64K,1M`.
    fn from_str(text: &str) -> Result<SizeDist, DistError> {
        let mut sizes = Vec::new();
        let mut weights = Vec::new();
        for item in text.split(',').filter(|item| !item.trim().is_empty()) {
            let (size, weight) = match item.split_once(':') {
                Some((size, weight)) => (
                    size,
                    weight
                        .trim()
                        .parse::<f64>()
                        .map_err(|_| DistError::WeightText(item.to_owned()))?,
                ),
                None => (item, 1.0),
            };
            sizes.push(parse_size(size)?);
            weights.push(weight);
        }
        SizeDist::weighted(sizes, weights)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::splitmix64;

    #[test]
    fn draws_follow_the_relative_weights() {
        let dist = SizeDist::weighted(vec![2, 5, 10, 20], vec![0.5, 0.3, 0.2, 0.1]).expect("valid");
        let mut counts = [0usize; 4];
        let draws = 10_000;
        for i in 0..draws {
            counts[dist.draw_index(splitmix64(i))] += 1;
        }
        for (index, count) in counts.iter().enumerate() {
            let share = *count as f64 / draws as f64;
            let expected = dist.probability(index);
            assert!(
                (share - expected).abs() < 0.02,
                "size {index}: {share:.3} drawn, {expected:.3} expected ({counts:?})"
            );
        }
        assert!((dist.probability(0) - 5.0 / 11.0).abs() < 1e-12);
    }

    #[test]
    fn zero_weights_are_never_drawn_even_at_the_top() {
        let dist = SizeDist::weighted(vec![1, 2, 3], vec![1.0, 1.0, 0.0]).expect("valid");
        for random in [0, u64::MAX, u64::MAX - 1, 1 << 63] {
            assert_ne!(dist.draw(random), 3);
        }
    }

    #[test]
    fn the_command_line_form_parses_and_rejects_nonsense() {
        let dist: SizeDist = "2M:5,5M:3".parse().expect("parses");
        assert_eq!(dist.sizes(), &[2 << 20, 5 << 20]);
        assert_eq!(dist.weights(), &[5.0, 3.0]);
        let uniform: SizeDist = "64K,1M".parse().expect("parses");
        assert_eq!(uniform.weights(), &[1.0, 1.0]);
        assert!(matches!("".parse::<SizeDist>(), Err(DistError::Empty)));
        assert!(matches!(
            "2M:x".parse::<SizeDist>(),
            Err(DistError::WeightText(_))
        ));
        assert!(matches!(
            "2M:-1".parse::<SizeDist>(),
            Err(DistError::Weight(_))
        ));
        assert!(matches!(
            "2M:0,5M:0".parse::<SizeDist>(),
            Err(DistError::Weight(_))
        ));
        assert!(matches!("2Q".parse::<SizeDist>(), Err(DistError::Size(_))));
    }

    #[test]
    fn scaling_multiplies_every_size_and_keeps_the_weights() {
        let dist = SizeDist::weighted(vec![100, 1000, 0], vec![1.0, 2.0, 3.0]).expect("valid");
        let scaled = dist.scaled(0.01);
        assert_eq!(scaled.sizes(), &[1, 10, 0]);
        assert_eq!(scaled.weights(), dist.weights());
        assert_eq!(dist.scaled(0.0001).sizes(), &[1, 1, 0], "never 0 bytes");
    }
}
