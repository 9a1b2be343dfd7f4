//! Lock tags of the advisory lock method that no SQL function reaches: the SQL advisory
//! functions use a fourth field of 1 and 2 only, so no role can take or hold these (a role
//! that held pg_advisory_lock on a user's key once stalled that user's inserts for as long as
//! it liked). Every fourth field the library uses is here, so no two uses meet.

use pgrx::pg_sys;

/// What a private tag locks: its fourth field.
#[derive(Clone, Copy)]
pub enum PrivateLock {
    /// `seen_bloom._wait_for_snapshots`' transactions (relayout).
    WaitingMoves = 3,
    /// A filter table's folds at commit (user_locks).
    CommitFolds = 4,
    /// A user's rows in a filter table (user_locks).
    User = 5,
    /// A tracked table's maintenance: `expire`, `compact` and the background worker
    /// (ops::maintenance_lock).
    Maintenance = 6,
}

/// The tag of (`relation`, `key`) for `kind`, in this database.
pub fn private_tag(relation: pg_sys::Oid, key: u32, kind: PrivateLock) -> pg_sys::LOCKTAG {
    pg_sys::LOCKTAG {
        // SAFETY: a plain read of the backend's database, set at connection.
        locktag_field1: unsafe { pg_sys::MyDatabaseId }.to_u32(),
        locktag_field2: relation.to_u32(),
        locktag_field3: key,
        locktag_field4: kind as u16,
        locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
        locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
    }
}
