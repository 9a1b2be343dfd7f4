//! How many blocks a layer gets, and the capacity and error rate of each scaling layer
//! (FORMAT.md, "Sizing and scaling"). These decide the bytes of new values only; parsing
//! never re-checks them.
//!
//! Everything here uses only IEEE-754 additions, multiplications and divisions (no `ln`,
//! `exp` or `powi`, whose last bit varies between C libraries and CPUs), so every build on
//! every machine sizes a layer identically. Union relies on that: layers of the same index
//! must have the same block count.

use crate::sbbf::BLOCK_BYTES;
use crate::shape::Shape;

/// Largest block count the format can record (FORMAT.md: `B` is 1 ..= 2^32 - 1).
pub(crate) const MAX_BLOCKS: u64 = u32::MAX as u64;

/// Bytes of a layer header in the split-block body.
pub(crate) const LAYER_HEADER_BYTES: u64 = 32;

/// Past this many items per block the modelled rate is 1 to the last bit of an f64: the
/// Poisson mass below 6,000 items per block is under 1e-300, and a block with 6,000 items
/// misses one of its bits with probability 8 * (31/32)^6000 < 1e-80. Answering 1 here keeps
/// the sum finite in work (it needs about 40 * sqrt(load) terms otherwise).
const SATURATED_LOAD: f64 = 10_000.0;

/// A Poisson weight this small relative to the running sums no longer changes them.
const NEGLIGIBLE: f64 = 1e-18;

/// The chance that one lane bit of an item is already set in a block holding `j` items,
/// for each of the eight lanes: `(1 - (31/32)^j)^8`, with `miss = (31/32)^j` passed in so
/// the caller can step it by one multiplication per term.
#[inline]
fn all_bits_set(miss: f64) -> f64 {
    let hit = 1.0 - miss;
    let hit2 = hit * hit;
    let hit4 = hit2 * hit2;
    hit4 * hit4
}

/// `(31/32)^n` by repeated squaring: deterministic, unlike `powi`.
fn lane_miss_pow(mut n: u64) -> f64 {
    let mut base = 31.0 / 32.0;
    let mut acc = 1.0;
    while n > 0 {
        if n & 1 == 1 {
            acc *= base;
        }
        base *= base;
        n >>= 1;
    }
    acc
}

/// Modelled false-positive rate of one split-block layer holding `items` items in `blocks`
/// blocks: `sum_j Poisson(j; items/blocks) * (1 - (31/32)^j)^8`.
///
/// The Poisson weights are computed relative to the weight at the mode (which is set to 1)
/// by stepping `w_{j+1} = w_j * lambda / (j + 1)` outwards in both directions, and the sum is
/// divided by the sum of the weights at the end. Nothing is ever near the underflow range,
/// whatever the load, and no factorial or `lgamma` is needed.
pub fn modelled_fpr(items: f64, blocks: u64) -> f64 {
    if blocks == 0 {
        return 1.0;
    }
    let lambda = items / blocks as f64;
    if lambda.is_nan() || lambda >= SATURATED_LOAD {
        return 1.0;
    }
    if lambda <= 0.0 {
        return 0.0;
    }

    let mode = lambda.floor() as u64;
    let mode_miss = lane_miss_pow(mode);
    let mut weights = 1.0;
    let mut fpr = all_bits_set(mode_miss);

    // Upwards from the mode: the weights shrink by lambda / (j + 1) < 1 each step, so once the
    // geometric bound on everything left is negligible against both sums, stop.
    let (mut j, mut w, mut miss) = (mode, 1.0f64, mode_miss);
    loop {
        j += 1;
        w *= lambda / j as f64;
        miss *= 31.0 / 32.0;
        let ratio = lambda / (j + 1) as f64;
        let rest_bound = if ratio < 1.0 {
            w / (1.0 - ratio)
        } else {
            f64::INFINITY
        };
        weights += w;
        fpr += w * all_bits_set(miss);
        if w == 0.0 || (rest_bound <= NEGLIGIBLE * fpr && rest_bound <= NEGLIGIBLE * weights) {
            break;
        }
    }

    // Downwards from the mode to 0: the weights shrink by j / lambda each step and the
    // per-term rate shrinks too, so the same bound applies.
    let (mut j, mut w, mut miss) = (mode, 1.0f64, mode_miss);
    while j > 0 {
        w *= j as f64 / lambda;
        j -= 1;
        miss /= 31.0 / 32.0;
        weights += w;
        fpr += w * all_bits_set(miss);
        let ratio = j as f64 / lambda;
        let rest_bound = w / (1.0 - ratio);
        if w == 0.0 || (rest_bound <= NEGLIGIBLE * weights && rest_bound <= NEGLIGIBLE * fpr) {
            break;
        }
    }

    (fpr / weights).clamp(0.0, 1.0)
}

/// The fewest blocks whose modelled rate for `capacity` items is at most `error_rate`.
/// Saturates at the format's largest block count, which is far past any storable value, so
/// a caller's size check turns an unreachable rate into `TooLarge`.
pub fn blocks_for(capacity: u64, error_rate: f64) -> u64 {
    let items = capacity as f64;
    if modelled_fpr(items, MAX_BLOCKS) > error_rate {
        return MAX_BLOCKS;
    }
    // Invariant: fpr(hi) <= error_rate, and every count below lo fails.
    let (mut lo, mut hi) = (1u64, MAX_BLOCKS);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if modelled_fpr(items, mid) <= error_rate {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    hi
}

/// Capacity and error rate of layer `layer`: a fixed filter's only layer has the filter's
/// own; a scaling filter's layer `i` holds `capacity * 2^i` at `p * 0.6 * 0.4^i`, so the
/// rates sum to less than `p` however many layers are added. Repeated doubling and
/// multiplication (saturating) keep the numbers identical on every machine.
pub fn layer_shape(shape: &Shape, layer: u32) -> (u64, f64) {
    if !shape.scaling {
        return (shape.capacity, shape.error_rate);
    }
    let mut capacity = shape.capacity;
    let mut error_rate = shape.error_rate * 0.6;
    for _ in 0..layer {
        capacity = capacity.saturating_mul(2);
        error_rate *= 0.4;
    }
    (capacity, error_rate)
}

/// Encoded bytes of a layer (its 32-byte header and blocks) sized for `capacity` at `error_rate`.
pub fn layer_bytes(capacity: u64, error_rate: f64) -> u64 {
    LAYER_HEADER_BYTES + BLOCK_BYTES as u64 * blocks_for(capacity, error_rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The textbook sum with an explicit pmf, usable where nothing underflows.
    fn naive_fpr(items: f64, blocks: u64) -> f64 {
        let lambda = items / blocks as f64;
        let mut pmf = (-lambda).exp();
        let mut sum = 0.0;
        for j in 0..2000u32 {
            sum += pmf * (1.0 - (31.0f64 / 32.0).powi(j as i32)).powi(8);
            pmf *= lambda / f64::from(j + 1);
        }
        sum
    }

    #[test]
    fn matches_the_textbook_sum() {
        for &(items, blocks) in &[
            (1.0, 1u64),
            (10.0, 1),
            (100.0, 1),
            (100_000.0, 4000),
            (100_000.0, 10_000),
            (5.0, 1000),
            (300.0, 1),
        ] {
            let (got, want) = (modelled_fpr(items, blocks), naive_fpr(items, blocks));
            assert!(
                (got - want).abs() <= 1e-10 * want,
                "items {items} blocks {blocks}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn does_not_underflow_for_heavy_loads() {
        for lambda in [500.0, 745.0, 1000.0, 2000.0, 5000.0, 9999.0] {
            let p = modelled_fpr(lambda, 1);
            assert!(p > 0.99 && p <= 1.0, "lambda {lambda}: {p}");
        }
        assert_eq!(modelled_fpr(1e9, 1), 1.0);
        assert_eq!(modelled_fpr(0.0, 10), 0.0);
        assert_eq!(modelled_fpr(10.0, 0), 1.0);
    }

    #[test]
    fn tiny_loads_give_tiny_rates() {
        // One item in a huge filter: it only collides with itself, so the rate is about
        // lambda * (1/32)^8.
        let p = modelled_fpr(1.0, MAX_BLOCKS);
        let lambda = 1.0 / MAX_BLOCKS as f64;
        assert!(
            p > 0.0 && (p / (lambda * (1.0f64 / 32.0).powi(8)) - 1.0).abs() < 1e-6,
            "{p}"
        );
    }

    #[test]
    fn rate_falls_as_blocks_grow() {
        let mut last = 1.0;
        for blocks in (1..20_000).step_by(97) {
            let p = modelled_fpr(100_000.0, blocks);
            assert!(p <= last, "blocks {blocks}");
            last = p;
        }
    }

    #[test]
    fn blocks_for_is_the_fewest_that_meet_the_target() {
        for &(n, p) in &[
            (1u64, 0.5),
            (10, 0.01),
            (100_000, 0.01),
            (100_000, 0.001),
            (1_000_000, 1e-6),
        ] {
            let b = blocks_for(n, p);
            assert!(modelled_fpr(n as f64, b) <= p);
            assert!(
                b == 1 || modelled_fpr(n as f64, b - 1) > p,
                "n {n} p {p} b {b}"
            );
        }
    }

    #[test]
    fn unreachable_rates_saturate() {
        assert_eq!(blocks_for(1_000_000_000, 1e-300), MAX_BLOCKS);
        assert!(layer_bytes(1_000_000_000, 1e-300) > crate::shape::MAX_VALUE_BYTES);
    }

    #[test]
    fn scaling_layers_double_and_tighten() {
        let shape = Shape {
            capacity: 1000,
            error_rate: 0.01,
            scaling: true,
        };
        assert_eq!(layer_shape(&shape, 0), (1000, 0.01 * 0.6));
        assert_eq!(layer_shape(&shape, 2), (4000, 0.01 * 0.6 * 0.4 * 0.4));
        let total: f64 = (0..64).map(|i| layer_shape(&shape, i).1).sum();
        // The geometric series sums to p * (1 - 0.4^64); allow the rounding of 64 additions.
        assert!(total <= 0.01 * (1.0 + 1e-12), "{total}");
        assert_eq!(
            layer_shape(&shape, 63).0,
            u64::MAX,
            "saturates instead of wrapping"
        );
        let fixed = Shape {
            scaling: false,
            ..shape
        };
        assert_eq!(layer_shape(&fixed, 0), (1000, 0.01));
    }
}
