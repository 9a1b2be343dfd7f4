//! The value-level SQL functions: bloom_empty, bloom_add, bloom_contains, bloom_unseen,
//! bloom_union, bloom_cardinality, bloom_info.

use crate::bloom::candidates::{keep_unseen, CandidateHashes};
use crate::pg::args::Args;
use crate::pg::errors::OrRaise;
use crate::pg::gucs::{default_shape, DEFAULT_CAPACITY, DEFAULT_ERROR_RATE};
use crate::pg::item_array::bool_array;
use crate::pg::v1::v1_function;
use crate::pg::varlena::bloom_datum;
use bloom_core::{Bloom, Shape};
use pgrx::pg_sys;
use pgrx::{IntoDatum, JsonB};

/// The filter an add starts from: a copy of argument 0, or a default filter when it is NULL.
fn filter_to_update(args: &Args) -> Bloom {
    match args.bloom(0) {
        Some(view) => Bloom::from_view(&view),
        None => Bloom::new(default_shape()).or_raise(),
    }
}

/// What an add of a NULL item (or item array) returns: the filter unchanged, NULL for NULL.
fn unchanged_filter(args: &Args) -> pg_sys::Datum {
    args.passed(0).unwrap_or_else(|| args.return_null())
}

v1_function!(bloom_empty, pg_finfo_bloom_empty, |args| {
    let capacity = args.int8(0).unwrap_or(DEFAULT_CAPACITY.get() as i64);
    let error_rate = args.float8(1).unwrap_or(DEFAULT_ERROR_RATE.get());
    let scaling = args.bool(2).unwrap_or(true);
    let shape = Shape::new(capacity, error_rate, scaling).or_raise();
    bloom_datum(&Bloom::new(shape).or_raise())
});

/// `bloom_add(bloom, item)`: a NULL item returns the filter unchanged (NULL stays NULL).
fn add_one(args: &Args) -> pg_sys::Datum {
    let Some(item) = args.item(1) else {
        return unchanged_filter(args);
    };
    let mut filter = filter_to_update(args);
    filter.admit(item.item_type.family()).or_raise();
    filter.insert_hash(item.hash()).or_raise();
    bloom_datum(&filter)
}

v1_function!(bloom_add_int8, pg_finfo_bloom_add_int8, |args| {
    add_one(args)
});
v1_function!(bloom_add_bytes, pg_finfo_bloom_add_bytes, |args| {
    add_one(args)
});
v1_function!(bloom_add_uuid, pg_finfo_bloom_add_uuid, |args| {
    add_one(args)
});

v1_function!(bloom_add_array, pg_finfo_bloom_add_array, |args| {
    let Some(items) = args.items(1) else {
        return unchanged_filter(args);
    };
    let mut filter = filter_to_update(args);
    // An array without items adds nothing and records nothing.
    if items.has_items() {
        filter.admit(items.item_type.family()).or_raise();
    }
    for item in items.items().flatten() {
        filter.insert_hash(item.hash()).or_raise();
    }
    bloom_datum(&filter)
});

/// `bloom_contains(bloom, item)`, strict.
fn contains_one(args: &Args) -> pg_sys::Datum {
    let view = args.bloom(0).unwrap();
    let item = args.item(1).unwrap();
    view.guard().check(item.item_type.family()).or_raise();
    pg_sys::Datum::from(view.contains_hash(item.hash()))
}

v1_function!(bloom_contains_int8, pg_finfo_bloom_contains_int8, |args| {
    contains_one(args)
});
v1_function!(
    bloom_contains_bytes,
    pg_finfo_bloom_contains_bytes,
    |args| { contains_one(args) }
);
v1_function!(bloom_contains_uuid, pg_finfo_bloom_contains_uuid, |args| {
    contains_one(args)
});

v1_function!(
    bloom_contains_array,
    pg_finfo_bloom_contains_array,
    |args| {
        let view = args.bloom(0).unwrap();
        let items = args.items(1).unwrap();
        if items.has_items() {
            view.guard().check(items.item_type.family()).or_raise();
        }
        let answers: Vec<Option<bool>> = items
            .items()
            .map(|item| item.map(|item| view.contains_hash(item.hash())))
            .collect();
        bool_array(&answers)
    }
);

v1_function!(bloom_unseen, pg_finfo_bloom_unseen, |args| {
    let Some(candidates) = args.items(1) else {
        return args.return_null();
    };
    let view = args.bloom(0);
    if let Some(view) = view.as_ref().filter(|_| candidates.has_items()) {
        view.guard().check(candidates.item_type.family()).or_raise();
    }
    let hashes = CandidateHashes::of(&candidates);
    keep_unseen(&candidates, &hashes, |i| {
        view.as_ref()
            .is_some_and(|v| hashes.get(i).is_some_and(|h| v.contains_hash(h)))
    })
});

v1_function!(bloom_union, pg_finfo_bloom_union, |args| {
    let mut union = Bloom::from_view(&args.bloom(0).unwrap());
    union.union_with(&args.bloom(1).unwrap()).or_raise();
    bloom_datum(&union)
});

v1_function!(bloom_cardinality, pg_finfo_bloom_cardinality, |args| {
    pg_sys::Datum::from(args.bloom(0).unwrap().cardinality() as i64)
});

v1_function!(bloom_info, pg_finfo_bloom_info, |args| {
    let json = serde_json::to_value(args.bloom(0).unwrap().info()).expect("bloom info serializes");
    JsonB(json).into_datum().expect("jsonb datum")
});
