//! Aggregates: `bloom_agg(item [, capacity, error_rate])` and `bloom_union_agg(bloom)`,
//! both parallel safe (combine, serial and deserial functions).
//!
//! Both collect 64-bit item hashes and build the filter once, in the final function, with
//! `Bloom::from_hashes`: the result then depends only on the set of items, so a parallel plan
//! returns byte for byte the filter a serial plan does, and a scaling filter fills its layers
//! in order instead of overfilling its first layer by unions of partial filters.
//! `bloom_union_agg` collects the hashes of exact inputs and ORs split-block inputs (whose
//! item counts are re-derived from the bits, so the OR is order-free too).

use crate::pg::args::Args;
use crate::pg::errors::{bad_argument, raise, OrRaise};
use crate::pg::gucs::default_shape;
use crate::pg::v1::v1_function;
use crate::pg::varlena::{bloom_datum, varlena_datum};
use bloom_core::{Bloom, BloomView, Error, ItemGuard, Representation, Shape};
use pgrx::{pg_sys, PgMemoryContexts};

/// Moves `state` into the aggregate's memory context (dropped when that context goes away).
fn keep(args: &Args, state: AggState) -> pg_sys::Datum {
    let context = args.aggregate_context();
    pg_sys::Datum::from(PgMemoryContexts::For(context).leak_and_drop_on_delete(state))
}

/// The state behind the `internal` argument `n`, if not NULL.
// The state lives in the aggregate's memory context, not in `args`: a mutable borrow of
// it from a shared Args is what fmgr hands the support function.
#[allow(clippy::mut_from_ref)]
fn state_arg(args: &Args, n: usize) -> Option<&mut AggState> {
    // Outside an aggregate an `internal` argument could be anything (22023).
    args.aggregate_context();
    // SAFETY: inside an aggregate, a non-null internal argument of these support functions is
    // the state one of them made with `keep` (the aggregates' declarations name no other),
    // in the aggregate's context, alive for the call; the executor passes it to one call at
    // a time.
    args.internal(n)
        .map(|p| unsafe { &mut *(p as *mut AggState) })
}

/// Both aggregates' state: the shape, the hashes collected (8 bytes per distinct item), and
/// the OR of split-block inputs (bloom_union_agg only).
#[derive(Clone)]
struct AggState {
    shape: Shape,
    hashes: Vec<u64>,
    /// Length of the sorted, distinct prefix of `hashes`.
    sorted: usize,
    split: Option<Bloom>,
    /// The family of the items collected so far (docs/FORMAT.md, version 2).
    guard: ItemGuard,
}

impl AggState {
    fn new(shape: Shape) -> AggState {
        AggState {
            shape,
            hashes: Vec::new(),
            sorted: 0,
            split: None,
            guard: ItemGuard::Open,
        }
    }

    fn require_shape(&self, other: Shape) {
        if !self.shape.same_as(&other) {
            raise(Error::ShapeMismatch {
                left: self.shape,
                right: other,
            });
        }
    }

    /// Sorts and deduplicates, keeping memory near 8 bytes per distinct item.
    fn compact(&mut self) {
        if self.sorted != self.hashes.len() {
            self.hashes.sort_unstable();
            self.hashes.dedup();
            self.sorted = self.hashes.len();
        }
    }

    fn push(&mut self, h: u64) {
        self.hashes.push(h);
        if self.hashes.len() >= 2 * self.sorted.max(1 << 16) {
            self.compact();
        }
    }

    fn add_filter(&mut self, view: &BloomView) {
        self.require_shape(view.shape());
        self.guard = self.guard.union(view.guard()).or_raise();
        match view.representation() {
            Representation::Exact => view.exact_items().for_each(|h| self.push(h)),
            Representation::SplitBlock => match &mut self.split {
                Some(split) => split.union_with(view).or_raise(),
                None => self.split = Some(Bloom::from_view(view)),
            },
        }
    }

    fn merge(&mut self, other: &AggState) {
        self.require_shape(other.shape);
        self.guard = self.guard.union(other.guard).or_raise();
        if let Some(split) = &other.split {
            let bytes = split.to_bytes();
            self.add_filter(&BloomView::parse(&bytes).or_raise());
        }
        self.hashes.extend_from_slice(&other.hashes);
        self.compact();
    }

    fn build(&mut self) -> Bloom {
        self.compact();
        let mut collected = Bloom::from_hashes(self.shape, self.hashes.clone()).or_raise();
        collected.merge_guard(self.guard).or_raise();
        match &self.split {
            None => collected,
            Some(split) => {
                let mut union = split.clone();
                let bytes = collected.to_bytes();
                union
                    .union_with(&BloomView::parse(&bytes).or_raise())
                    .or_raise();
                union
            }
        }
    }

    /// capacity (u64), error rate (f64), scaling (u8), guard (u8), hash count (u64), the sorted distinct
    /// hashes, then the split-block part as a bloom value if there is one; little-endian.
    fn serialize(&mut self) -> Vec<u8> {
        self.compact();
        let mut out = Vec::with_capacity(26 + 8 * self.hashes.len());
        out.extend_from_slice(&self.shape.capacity.to_le_bytes());
        out.extend_from_slice(&self.shape.error_rate.to_le_bytes());
        out.push(self.shape.scaling as u8);
        out.push(self.guard.code());
        out.extend_from_slice(&(self.hashes.len() as u64).to_le_bytes());
        for h in &self.hashes {
            out.extend_from_slice(&h.to_le_bytes());
        }
        if let Some(split) = &self.split {
            out.extend_from_slice(&split.to_bytes());
        }
        out
    }

    fn deserialize(bytes: &[u8]) -> AggState {
        let malformed = || -> ! { bad_argument("malformed seen_bloom aggregate state".into()) };
        let word = |at: usize| -> [u8; 8] {
            bytes
                .get(at..at + 8)
                .and_then(|w| w.try_into().ok())
                .unwrap_or_else(|| malformed())
        };
        let shape = Shape::new(
            i64::from_le_bytes(word(0)),
            f64::from_le_bytes(word(8)),
            *bytes.get(16).unwrap_or_else(|| malformed()) != 0,
        )
        .or_raise();
        let guard = bytes
            .get(17)
            .and_then(|&code| ItemGuard::from_code(code))
            .unwrap_or_else(|| malformed());
        let count = u64::from_le_bytes(word(18));
        let hashes_end = count
            .checked_mul(8)
            .and_then(|n| n.checked_add(26))
            .filter(|&end| end <= bytes.len() as u64)
            .unwrap_or_else(|| malformed()) as usize;
        let mut state = AggState::new(shape);
        state.guard = guard;
        state.hashes = bytes[26..hashes_end]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        state.sorted = state.hashes.len();
        if hashes_end < bytes.len() {
            state.add_filter(&BloomView::parse(&bytes[hashes_end..]).or_raise());
        }
        state
    }
}

/// The shape given to `bloom_agg(item, capacity, error_rate)` (arguments 2 and 3), or the default.
fn agg_shape(args: &Args) -> Shape {
    let default = default_shape();
    if args.nargs() < 4 {
        return default;
    }
    let capacity = args.int8(2).unwrap_or(default.capacity as i64);
    let error_rate = args.float8(3).unwrap_or(default.error_rate);
    Shape::new(capacity, error_rate, true).or_raise()
}

/// bloom_agg's transition: `(state, item [, capacity, error_rate])`.
fn agg_add(args: &Args) -> pg_sys::Datum {
    let state = match args.passed(0) {
        Some(state) => state,
        None => {
            let shape = agg_shape(args);
            Bloom::new(shape).or_raise(); // refuse an impossible shape on the first row
            keep(args, AggState::new(shape))
        }
    };
    if let Some(item) = args.item(1) {
        let state = state_arg(args, 0).unwrap_or_else(|| {
            // The state made just above: read it back through the datum returned.
            // SAFETY: `keep` returned a pointer to an AggState in the aggregate context.
            unsafe { &mut *state.cast_mut_ptr::<AggState>() }
        });
        state.guard = state.guard.admit(item.item_type.family()).or_raise();
        state.push(item.hash());
    }
    state
}

v1_function!(bloom_agg_add_int8, pg_finfo_bloom_agg_add_int8, |args| {
    agg_add(args)
});
v1_function!(bloom_agg_add_bytes, pg_finfo_bloom_agg_add_bytes, |args| {
    agg_add(args)
});
v1_function!(bloom_agg_add_uuid, pg_finfo_bloom_agg_add_uuid, |args| {
    agg_add(args)
});

v1_function!(bloom_union_agg_add, pg_finfo_bloom_union_agg_add, |args| {
    let Some(view) = args.bloom(1) else {
        return args.passed(0).unwrap_or_else(|| args.return_null());
    };
    match state_arg(args, 0) {
        Some(state) => {
            state.add_filter(&view);
            args.passed(0).unwrap()
        }
        None => {
            let mut state = AggState::new(view.shape());
            state.add_filter(&view);
            keep(args, state)
        }
    }
});

// Combine, serial, deserial and final functions, shared by both aggregates.

v1_function!(bloom_agg_combine, pg_finfo_bloom_agg_combine, |args| {
    match (state_arg(args, 0), state_arg(args, 1)) {
        (_, None) => args.passed(0).unwrap_or_else(|| args.return_null()),
        (None, Some(other)) => {
            let copy = other.clone();
            keep(args, copy)
        }
        (Some(state), Some(other)) => {
            state.merge(other);
            args.passed(0).unwrap()
        }
    }
});

v1_function!(bloom_agg_serialize, pg_finfo_bloom_agg_serialize, |args| {
    varlena_datum(&state_arg(args, 0).unwrap().serialize())
});

v1_function!(
    bloom_agg_deserialize,
    pg_finfo_bloom_agg_deserialize,
    |args| {
        args.aggregate_context();
        let state = AggState::deserialize(args.bytes(0).unwrap());
        keep(args, state)
    }
);

v1_function!(bloom_agg_final, pg_finfo_bloom_agg_final, |args| {
    match state_arg(args, 0) {
        Some(state) => bloom_datum(&state.build()),
        None => args.return_null(),
    }
});
