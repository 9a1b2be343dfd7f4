//! The one error type of the engine. The glue maps each variant to a SQLSTATE, so the
//! variants follow what the user must do differently, not where the error was found.

use crate::shape::Shape;
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// Bytes or text that are not a valid bloom value (SQLSTATE 22P02 in the glue).
    Malformed(String),
    /// A capacity or error rate outside the allowed range (22023); the message names the range.
    BadParameter(String),
    /// A fixed filter refused a new item because it already holds `capacity` items (54000).
    Full { capacity: u64 },
    /// The value would need `bytes` payload bytes, more than [`crate::MAX_VALUE_BYTES`], or
    /// a new layer `bytes`, more than [`crate::MAX_LAYER_BYTES`]: `limit` says which (54000).
    TooLarge { bytes: u64, limit: u64 },
    /// Two filters of different shapes cannot be combined (22000).
    ShapeMismatch { left: Shape, right: Shape },
    /// A value that holds items of one family asked to add or look up another (42804).
    FamilyMismatch {
        holds: crate::ItemFamily,
        given: crate::ItemFamily,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Malformed(detail) => write!(f, "invalid bloom filter value: {detail}"),
            Error::BadParameter(detail) => f.write_str(detail),
            Error::Full { capacity } => write!(
                f,
                "bloom filter is full: it holds its capacity of {capacity} items and does not scale; \
                 create it with a larger capacity or with scaling enabled"
            ),
            Error::TooLarge { bytes, limit } if *limit == crate::shape::MAX_VALUE_BYTES => write!(
                f,
                "bloom filter would need {bytes} bytes, more than the largest value PostgreSQL can store \
                 ({limit} bytes); use a smaller capacity or a larger error rate"
            ),
            Error::TooLarge { bytes, limit } => write!(
                f,
                "bloom filter layer would need {bytes} bytes, more than the largest layer seen_bloom \
                 allocates ({limit} bytes); use a smaller capacity or a larger error rate"
            ),
            Error::ShapeMismatch { left, right } => write!(
                f,
                "cannot combine bloom filters of different shapes: {left} and {right}"
            ),
            Error::FamilyMismatch { holds, given } => write!(
                f,
                "this bloom filter holds {} items, not {} ones: they would never match; cast the \
                 item to {} (an untyped parameter is taken as text)",
                holds.name(),
                given.name(),
                holds.cast_to()
            ),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_mismatch_names_both_shapes() {
        let left = Shape {
            capacity: 100_000,
            error_rate: 0.01,
            scaling: true,
        };
        let right = Shape {
            capacity: 5000,
            error_rate: 0.01,
            scaling: false,
        };
        assert_eq!(
            Error::ShapeMismatch { left, right }.to_string(),
            "cannot combine bloom filters of different shapes: \
             (capacity 100000, error_rate 0.01, scaling) and (capacity 5000, error_rate 0.01, fixed)"
        );
    }

    #[test]
    fn full_and_too_large_say_what_to_do() {
        let full = Error::Full { capacity: 10 }.to_string();
        assert!(full.contains("10") && full.contains("scaling"), "{full}");
        let large = Error::TooLarge {
            bytes: 2_000_000_000,
            limit: crate::MAX_VALUE_BYTES,
        }
        .to_string();
        assert!(
            large.contains("2000000000") && large.contains("error rate"),
            "{large}"
        );
        let layer = Error::TooLarge {
            bytes: 705_000_000,
            limit: crate::MAX_LAYER_BYTES,
        }
        .to_string();
        assert!(
            layer.contains("705000000") && layer.contains("268435456") && layer.contains("layer"),
            "{layer}"
        );
    }
}
