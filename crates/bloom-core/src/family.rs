//! Item families, recorded in a value since format version 2 (docs/FORMAT.md).
//!
//! Items of one family that are equal hash alike (`42::int` and `42::bigint`; `'a'::text`
//! and `'a'::bytea`); items of two families never meet, so a filter of integers asked about
//! the text '5' answers "absent" for everything. That mistake is easy to make without seeing
//! it: an untyped parameter (`bloom_add(f, $1)` with the number 5 bound as unknown) resolves
//! to the text overload. A version 2 value records the family of its items; adding or
//! probing another family is refused (`FamilyMismatch`, 42804 in the glue). Version 1 values
//! recorded nothing and keep accepting anything.

use crate::error::Error;

/// A kind of SQL item whose values hash comparably.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemFamily {
    /// smallint, integer, bigint (hashed as the little-endian i64).
    Integer,
    /// text, varchar, bytea (hashed as their bytes).
    Bytes,
    /// uuid (its 16 bytes).
    Uuid,
}

impl ItemFamily {
    pub const ALL: [ItemFamily; 3] = [ItemFamily::Integer, ItemFamily::Bytes, ItemFamily::Uuid];

    /// The family's name in messages and `bloom_info`.
    pub fn name(self) -> &'static str {
        match self {
            ItemFamily::Integer => "integer",
            ItemFamily::Bytes => "text",
            ItemFamily::Uuid => "uuid",
        }
    }

    /// The SQL type to cast another family's values to, for hints.
    pub fn cast_to(self) -> &'static str {
        match self {
            ItemFamily::Integer => "bigint",
            ItemFamily::Bytes => "text",
            ItemFamily::Uuid => "uuid",
        }
    }

    fn flag(self) -> u8 {
        match self {
            ItemFamily::Integer => 0x02,
            ItemFamily::Bytes => 0x04,
            ItemFamily::Uuid => 0x08,
        }
    }
}

/// The header flag bits that record the family (version 2).
pub(crate) const FAMILY_FLAGS: u8 = 0x0e;

/// What a value knows of its items' family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemGuard {
    /// Format version 1: not recorded; items of any family are accepted.
    Unrecorded,
    /// Version 2 without a family yet: the first item added sets it.
    Open,
    /// Version 2 holding items of this family only.
    Holds(ItemFamily),
}

impl ItemGuard {
    /// The guard a header declares: version 1 records none; version 2 at most one family bit.
    pub(crate) fn from_header(version: u8, flags: u8) -> Result<ItemGuard, Error> {
        if version == 1 {
            return Ok(ItemGuard::Unrecorded);
        }
        let bits = flags & FAMILY_FLAGS;
        match ItemFamily::ALL.iter().find(|f| f.flag() == bits) {
            _ if bits == 0 => Ok(ItemGuard::Open),
            Some(&family) => Ok(ItemGuard::Holds(family)),
            None => Err(Error::Malformed(format!(
                "more than one item family recorded (flag bits {bits:#04x})"
            ))),
        }
    }

    /// The format version a value with this guard is written in.
    pub(crate) fn version(self) -> u8 {
        match self {
            ItemGuard::Unrecorded => 1,
            _ => 2,
        }
    }

    /// The header flag bits of the family.
    pub(crate) fn flags(self) -> u8 {
        match self {
            ItemGuard::Holds(family) => family.flag(),
            _ => 0,
        }
    }

    /// The guard as one byte, for state outside a value (an aggregate's serial form): its
    /// header flag bits, or 0x80 for a version 1 value's unrecorded family.
    pub fn code(self) -> u8 {
        match self {
            ItemGuard::Unrecorded => 0x80,
            guard => guard.flags(),
        }
    }

    /// The guard of `code`; None for a byte `code` never gives.
    pub fn from_code(code: u8) -> Option<ItemGuard> {
        match code {
            0x80 => Some(ItemGuard::Unrecorded),
            _ if code & !FAMILY_FLAGS == 0 => ItemGuard::from_header(2, code).ok(),
            _ => None,
        }
    }

    pub fn family(self) -> Option<ItemFamily> {
        match self {
            ItemGuard::Holds(family) => Some(family),
            _ => None,
        }
    }

    /// Whether items of `given` may be looked up: not when the value holds another family
    /// (they would all be reported absent).
    pub fn check(self, given: ItemFamily) -> Result<(), Error> {
        match self {
            ItemGuard::Holds(holds) if holds != given => {
                Err(Error::FamilyMismatch { holds, given })
            }
            _ => Ok(()),
        }
    }

    /// The guard after adding an item of `given`, or `FamilyMismatch`.
    pub fn admit(self, given: ItemFamily) -> Result<ItemGuard, Error> {
        self.check(given)?;
        Ok(match self {
            ItemGuard::Open => ItemGuard::Holds(given),
            other => other,
        })
    }

    /// The guard of a union: unrecorded if either side is (its items could be anything),
    /// else the one family both hold.
    pub fn union(self, other: ItemGuard) -> Result<ItemGuard, Error> {
        match (self, other) {
            (ItemGuard::Unrecorded, _) | (_, ItemGuard::Unrecorded) => Ok(ItemGuard::Unrecorded),
            (ItemGuard::Open, g) | (g, ItemGuard::Open) => Ok(g),
            (ItemGuard::Holds(a), ItemGuard::Holds(b)) if a == b => Ok(self),
            (ItemGuard::Holds(holds), ItemGuard::Holds(given)) => {
                Err(Error::FamilyMismatch { holds, given })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERY_GUARD: [ItemGuard; 5] = [
        ItemGuard::Unrecorded,
        ItemGuard::Open,
        ItemGuard::Holds(ItemFamily::Integer),
        ItemGuard::Holds(ItemFamily::Bytes),
        ItemGuard::Holds(ItemFamily::Uuid),
    ];

    #[test]
    fn headers_round_trip() {
        for guard in EVERY_GUARD {
            assert_eq!(
                ItemGuard::from_header(guard.version(), guard.flags() | 1),
                Ok(guard)
            );
        }
        assert!(ItemGuard::from_header(2, 0x06).is_err());
        for guard in EVERY_GUARD {
            assert_eq!(ItemGuard::from_code(guard.code()), Some(guard));
        }
        assert_eq!(ItemGuard::from_code(0x06), None);
        assert_eq!(ItemGuard::from_code(0x01), None);
        // Version 1 ignores nothing: its other flag bits are refused by the header check.
        assert_eq!(ItemGuard::from_header(1, 0), Ok(ItemGuard::Unrecorded));
    }

    #[test]
    fn a_family_once_set_refuses_the_others() {
        let integers = ItemGuard::Open.admit(ItemFamily::Integer).unwrap();
        assert_eq!(integers, ItemGuard::Holds(ItemFamily::Integer));
        assert_eq!(integers.admit(ItemFamily::Integer), Ok(integers));
        assert_eq!(
            integers.admit(ItemFamily::Bytes),
            Err(Error::FamilyMismatch {
                holds: ItemFamily::Integer,
                given: ItemFamily::Bytes
            })
        );
        assert!(integers.check(ItemFamily::Uuid).is_err());
        assert!(ItemGuard::Open.check(ItemFamily::Uuid).is_ok());
        for family in ItemFamily::ALL {
            assert_eq!(
                ItemGuard::Unrecorded.admit(family),
                Ok(ItemGuard::Unrecorded)
            );
        }
    }

    #[test]
    fn unions_keep_one_family() {
        let int = ItemGuard::Holds(ItemFamily::Integer);
        let text = ItemGuard::Holds(ItemFamily::Bytes);
        assert_eq!(int.union(ItemGuard::Open), Ok(int));
        assert_eq!(ItemGuard::Open.union(int), Ok(int));
        assert_eq!(int.union(int), Ok(int));
        assert!(int.union(text).is_err());
        assert_eq!(int.union(ItemGuard::Unrecorded), Ok(ItemGuard::Unrecorded));
    }
}
