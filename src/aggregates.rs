//! Aggregates: `bloom_agg(item [, capacity, error_rate])` and `bloom_union_agg(bloom)`,
//! both parallel safe (combine, serial and deserial functions).
//!
//! `bloom_agg` collects the items' hashes and builds the filter once, in the final function,
//! from the sorted distinct hashes: the filter then depends only on the set of items, so a
//! parallel plan returns byte for byte the filter a serial plan does, and a scaling filter
//! fills its layers in order instead of overfilling the first one by unions.

use crate::errors::{bad_argument, raise, OrRaise};
use crate::filter_arg::{bloom_datum, varlena_bytes, varlena_datum};
use crate::gucs::default_shape;
use crate::items::ItemType;
use crate::v1::{arg, return_null, v1_function};
use bloom_core::{Bloom, BloomView, Shape};
use pgrx::{pg_sys, PgMemoryContexts};

/// The memory context that outlives the aggregate's transition calls.
unsafe fn aggregate_context(fcinfo: pg_sys::FunctionCallInfo, function: &str) -> pg_sys::MemoryContext {
    let mut context: pg_sys::MemoryContext = std::ptr::null_mut();
    if unsafe { pg_sys::AggCheckCallContext(fcinfo, &mut context) } == 0 {
        bad_argument(format!("{function} must be called as part of an aggregate"));
    }
    context
}

/// Moves `state` into the aggregate context (dropped when that context goes away).
unsafe fn keep<T>(fcinfo: pg_sys::FunctionCallInfo, state: T, function: &str) -> pg_sys::Datum {
    unsafe {
        let context = aggregate_context(fcinfo, function);
        pg_sys::Datum::from(PgMemoryContexts::For(context).leak_and_drop_on_delete(state))
    }
}

/// The state behind an `internal` argument, if not NULL.
unsafe fn state_arg<'a, T>(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> Option<&'a mut T> {
    unsafe { arg(fcinfo, n).map(|d| &mut *d.cast_mut_ptr::<T>()) }
}

/// `bloom_agg`'s state: the shape to build and the hashes seen so far.
#[derive(Clone)]
struct ItemsState {
    shape: Shape,
    hashes: Vec<u64>,
    /// Length of the sorted, distinct prefix of `hashes`.
    sorted: usize,
}

impl ItemsState {
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

    fn build(&mut self) -> Bloom {
        self.compact();
        let mut filter = Bloom::new(self.shape).or_raise();
        for &h in &self.hashes {
            filter.insert_hash(h).or_raise();
        }
        filter
    }
}

/// Transition: `(state, item [, capacity, error_rate])`.
unsafe fn agg_add(fcinfo: pg_sys::FunctionCallInfo, item_type: ItemType) -> pg_sys::Datum {
    unsafe {
        let state = match state_arg::<ItemsState>(fcinfo, 0) {
            Some(_) => arg(fcinfo, 0).unwrap(),
            None => {
                let shape = if (*fcinfo).nargs >= 4 {
                    let capacity = arg(fcinfo, 2).map(|d| d.value() as i64);
                    let error_rate = arg(fcinfo, 3).map(|d| f64::from_bits(d.value() as u64));
                    let default = default_shape();
                    Shape::new(
                        capacity.unwrap_or(default.capacity as i64),
                        error_rate.unwrap_or(default.error_rate),
                        true,
                    )
                    .or_raise()
                } else {
                    default_shape()
                };
                Bloom::new(shape).or_raise(); // refuse an impossible shape on the first row
                let state = ItemsState { shape, hashes: Vec::new(), sorted: 0 };
                keep(fcinfo, state, "bloom_agg")
            }
        };
        if let Some(item) = arg(fcinfo, 1) {
            let s = &mut *state.cast_mut_ptr::<ItemsState>();
            s.push(item_type.hash(item));
        }
        state
    }
}

v1_function!(bloom_agg_add_int8, pg_finfo_bloom_agg_add_int8, |fcinfo| { agg_add(fcinfo, ItemType::Int8) });
v1_function!(bloom_agg_add_bytes, pg_finfo_bloom_agg_add_bytes, |fcinfo| { agg_add(fcinfo, ItemType::Bytes) });
v1_function!(bloom_agg_add_uuid, pg_finfo_bloom_agg_add_uuid, |fcinfo| { agg_add(fcinfo, ItemType::Uuid) });

v1_function!(bloom_agg_combine, pg_finfo_bloom_agg_combine, |fcinfo| {
    match (state_arg::<ItemsState>(fcinfo, 0), state_arg::<ItemsState>(fcinfo, 1)) {
        (_, None) => arg(fcinfo, 0).unwrap_or_else(|| return_null(fcinfo)),
        (None, Some(other)) => keep(fcinfo, other.clone(), "bloom_agg_combine"),
        (Some(state), Some(other)) => {
            if state.shape != other.shape {
                raise(bloom_core::Error::ShapeMismatch { left: state.shape, right: other.shape });
            }
            state.hashes.extend_from_slice(&other.hashes);
            state.compact();
            arg(fcinfo, 0).unwrap()
        }
    }
});

// Serialized `bloom_agg` state: capacity (u64), error rate (f64), scaling (u8), then the
// sorted distinct hashes, all little-endian.
v1_function!(bloom_agg_serialize, pg_finfo_bloom_agg_serialize, |fcinfo| {
    let state = state_arg::<ItemsState>(fcinfo, 0).unwrap();
    state.compact();
    let mut out = Vec::with_capacity(17 + 8 * state.hashes.len());
    out.extend_from_slice(&state.shape.capacity.to_le_bytes());
    out.extend_from_slice(&state.shape.error_rate.to_le_bytes());
    out.push(state.shape.scaling as u8);
    for h in &state.hashes {
        out.extend_from_slice(&h.to_le_bytes());
    }
    varlena_datum(&out)
});

v1_function!(bloom_agg_deserialize, pg_finfo_bloom_agg_deserialize, |fcinfo| {
    let bytes = varlena_bytes(arg(fcinfo, 0).unwrap());
    if bytes.len() < 17 || (bytes.len() - 17) % 8 != 0 {
        bad_argument("bloom_agg_deserialize: malformed aggregate state".into());
    }
    let shape = Shape {
        capacity: u64::from_le_bytes(bytes[0..8].try_into().unwrap()),
        error_rate: f64::from_le_bytes(bytes[8..16].try_into().unwrap()),
        scaling: bytes[16] != 0,
    };
    let hashes: Vec<u64> = bytes[17..]
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let sorted = hashes.len();
    keep(fcinfo, ItemsState { shape, hashes, sorted }, "bloom_agg_deserialize")
});

v1_function!(bloom_agg_final, pg_finfo_bloom_agg_final, |fcinfo| {
    match state_arg::<ItemsState>(fcinfo, 0) {
        Some(state) => bloom_datum(&state.build()),
        None => return_null(fcinfo),
    }
});

// bloom_union_agg: the state is the union so far.

v1_function!(bloom_union_agg_add, pg_finfo_bloom_union_agg_add, |fcinfo| {
    let Some(value) = arg(fcinfo, 1) else {
        return arg(fcinfo, 0).unwrap_or_else(|| return_null(fcinfo));
    };
    let view = BloomView::parse(varlena_bytes(value)).or_raise();
    match state_arg::<Bloom>(fcinfo, 0) {
        Some(state) => {
            state.union_with(&view).or_raise();
            arg(fcinfo, 0).unwrap()
        }
        None => keep(fcinfo, Bloom::from_view(&view), "bloom_union_agg"),
    }
});

v1_function!(bloom_union_agg_combine, pg_finfo_bloom_union_agg_combine, |fcinfo| {
    match (state_arg::<Bloom>(fcinfo, 0), state_arg::<Bloom>(fcinfo, 1)) {
        (_, None) => arg(fcinfo, 0).unwrap_or_else(|| return_null(fcinfo)),
        (None, Some(other)) => {
            let copy = Bloom::from_bytes(&other.to_bytes()).or_raise();
            keep(fcinfo, copy, "bloom_union_agg_combine")
        }
        (Some(state), Some(other)) => {
            let other_bytes = other.to_bytes();
            state.union_with(&BloomView::parse(&other_bytes).or_raise()).or_raise();
            arg(fcinfo, 0).unwrap()
        }
    }
});

v1_function!(bloom_union_agg_serialize, pg_finfo_bloom_union_agg_serialize, |fcinfo| {
    let state = state_arg::<Bloom>(fcinfo, 0).unwrap();
    varlena_datum(&state.to_bytes())
});

v1_function!(bloom_union_agg_deserialize, pg_finfo_bloom_union_agg_deserialize, |fcinfo| {
    let filter = Bloom::from_bytes(varlena_bytes(arg(fcinfo, 0).unwrap())).or_raise();
    keep(fcinfo, filter, "bloom_union_agg_deserialize")
});

v1_function!(bloom_union_agg_final, pg_finfo_bloom_union_agg_final, |fcinfo| {
    match state_arg::<Bloom>(fcinfo, 0) {
        Some(state) => bloom_datum(state),
        None => return_null(fcinfo),
    }
});
