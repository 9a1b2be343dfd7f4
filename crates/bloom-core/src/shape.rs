//! What a filter was created for: capacity, target error rate and whether it scales.
//! Every filter built or combined by the engine is checked against these limits.

use crate::error::Error;
use std::fmt;

/// Largest capacity a filter may be created with (FORMAT.md header, offset 16).
pub const MAX_CAPACITY: u64 = 1_000_000_000;

/// Payload bytes that fit a varlena (1 GB - 1) together with its 4-byte header.
pub const MAX_VALUE_BYTES: u64 = 0x3FFF_FFFF - 4;

/// Largest split-block layer (header and blocks) the engine creates: 256 MiB. A new layer is
/// allocated whole by one add (or by the promotion of an exact filter), so without this bound a
/// value of a few bytes (say `bloom_empty(4, 1e-19)` past its capacity, or a forged value of
/// a huge shape whose only layer claims to be full) makes the next add allocate up to the
/// 1 GB value limit. Shapes whose first layer passes it are refused when created (54000).
pub const MAX_LAYER_BYTES: u64 = 256 << 20;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    pub capacity: u64,
    pub error_rate: f64,
    pub scaling: bool,
}

impl Shape {
    /// A validated shape. Takes `i64` because SQL hands over a signed bigint, so a negative
    /// capacity is reported as out of range rather than wrapping.
    pub fn new(capacity: i64, error_rate: f64, scaling: bool) -> Result<Shape, Error> {
        let capacity = u64::try_from(capacity)
            .ok()
            .filter(|c| (1..=MAX_CAPACITY).contains(c))
            .ok_or_else(|| {
                Error::BadParameter(format!(
                    "bloom filter capacity must be between 1 and {MAX_CAPACITY}, got {capacity}"
                ))
            })?;
        if !is_valid_error_rate(error_rate) {
            return Err(Error::BadParameter(format!(
                "bloom filter error rate must be greater than 0 and less than 1, got {error_rate}"
            )));
        }
        Ok(Shape {
            capacity,
            error_rate,
            scaling,
        })
    }

    /// Whether two shapes are the same filter family: the error rate must be bit-equal,
    /// because it decides the layer sizes and a rounding difference would change them.
    pub fn same_as(&self, other: &Shape) -> bool {
        self.capacity == other.capacity
            && self.error_rate.to_bits() == other.error_rate.to_bits()
            && self.scaling == other.scaling
    }
}

/// A finite error rate strictly between 0 and 1 (NaN fails both comparisons).
pub(crate) fn is_valid_error_rate(p: f64) -> bool {
    p > 0.0 && p < 1.0
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.scaling { "scaling" } else { "fixed" };
        write!(
            f,
            "(capacity {}, error_rate {}, {kind})",
            self.capacity, self.error_rate
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_allowed_range() {
        assert!(Shape::new(1, 0.5, false).is_ok());
        assert!(Shape::new(MAX_CAPACITY as i64, 1e-12, true).is_ok());
        assert!(Shape::new(100_000, f64::MIN_POSITIVE, true).is_ok());
        assert!(Shape::new(100_000, 1.0 - f64::EPSILON, true).is_ok());
    }

    #[test]
    fn rejects_capacity_out_of_range() {
        for c in [0, -1, i64::MIN, MAX_CAPACITY as i64 + 1, i64::MAX] {
            match Shape::new(c, 0.01, true) {
                Err(Error::BadParameter(m)) => {
                    assert!(m.contains("between 1 and 1000000000"), "{m}")
                }
                other => panic!("capacity {c}: {other:?}"),
            }
        }
    }

    #[test]
    fn rejects_error_rate_out_of_range() {
        for p in [
            0.0,
            -0.0,
            1.0,
            -0.5,
            1.5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            match Shape::new(10, p, false) {
                Err(Error::BadParameter(m)) => assert!(m.contains("error rate"), "{m}"),
                other => panic!("error rate {p}: {other:?}"),
            }
        }
    }
}
