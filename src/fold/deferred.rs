//! What a transaction deferred to its commit (see commit_fold): its impressions, kept flat,
//! and how each filter table's groups fold.

use crate::fold::group::{Group, Groups};
use crate::tracking::tracked_config::UserCap;
use pgrx::pg_sys;
use pgrx::pg_sys::SubTransactionId;
use std::collections::BTreeMap;

/// How a filter table's groups fold (its tracked table's configuration at the fold).
#[derive(Clone, Copy)]
pub struct TableFold {
    pub error_rate: f64,
    pub layout_number: i32,
    pub user_type: pg_sys::Oid,
    /// The role the statement folded as (the tracked table's owner, see owner): the
    /// commit folds as it too.
    pub role: pg_sys::Oid,
    pub cap: Option<UserCap>,
}

/// A deferred impression. Kept flat, one per row, and grouped by sorting at commit: the
/// maps of groups this replaced allocated per row and per group (malloc was 5 us of a
/// 20-row statement's 30 us of trigger work).
pub struct Pending {
    pub table: u32,
    pub generation: i32,
    /// The user's canonical bytes: `State::bytes[user_at..user_at + user_len]`.
    pub user_at: u32,
    pub user_len: u32,
    /// The user (a by-reference one copied into the transaction's memory).
    pub user: pg_sys::Datum,
    pub hash: u64,
    /// The subtransaction that deferred it.
    pub sub: SubTransactionId,
    /// The subtransaction of the read that folded it already (see fold_now), 0 if none:
    /// that fold's writes are undone if it aborts, and the hash is then folded again.
    pub folded_in: SubTransactionId,
}

#[derive(Default)]
pub struct State {
    pub tables: BTreeMap<u32, TableFold>,
    pub pending: Vec<Pending>,
    /// The users' canonical bytes, one after the other.
    pub bytes: Vec<u8>,
}

/// The canonical bytes of `p`'s user, in `bytes` (State::bytes).
pub fn user_bytes_in<'a>(bytes: &'a [u8], p: &Pending) -> &'a [u8] {
    &bytes[p.user_at as usize..(p.user_at + p.user_len) as usize]
}

impl State {
    pub fn user_bytes(&self, p: &Pending) -> &[u8] {
        user_bytes_in(&self.bytes, p)
    }

    /// `pending` grouped as the ordinary fold takes them.
    pub fn groups<'a>(&self, pending: impl Iterator<Item = &'a Pending>) -> Groups {
        let mut groups = Groups::new();
        for p in pending {
            let user_bytes = self.user_bytes(p);
            groups
                .entry((p.generation, user_bytes.to_vec()))
                .or_insert_with(|| Group {
                    user: p.user,
                    user_bytes: user_bytes.to_vec(),
                    generation: p.generation,
                    hashes: Vec::new(),
                })
                .hashes
                .push(p.hash);
        }
        groups
    }

    /// Empties the state, keeping a transaction's usual room (a bulk load's is given back).
    pub fn clear(&mut self) {
        const KEPT: usize = 1 << 12;
        self.tables.clear();
        self.pending.clear();
        self.pending.shrink_to(KEPT);
        self.bytes.clear();
        self.bytes.shrink_to(KEPT * 8);
    }
}
