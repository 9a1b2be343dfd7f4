//! Untrusted bytes into the engine's byte parser (the path of text input, binary receive and
//! the bytea cast), then every read operation on what parses, and the write operations whose
//! output must parse again.
#![no_main]

use bloom_core::{hash_bytes, layer_bytes, layer_shape, Bloom, BloomView};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The structural parse (stored values) must never panic; the validated one (values from
    // outside) accepts a subset of it.
    let structural = BloomView::parse(data);
    let Ok(view) = BloomView::parse_validated(data) else {
        if let Ok(view) = structural {
            // Stored-but-unvalidated bytes are still probed safely.
            probe(&view, data, false);
            let owned = Bloom::from_view(&view);
            let _ = owned.to_bytes();
        }
        return;
    };
    assert!(
        structural.is_ok(),
        "validated parse accepted what the structural one refused"
    );
    assert_eq!(view.as_bytes(), data);
    probe(&view, data, true);

    // An owned copy encodes back to the same bytes, and agrees with the view.
    let owned = Bloom::from_view(&view);
    assert_eq!(
        owned.to_bytes(),
        data,
        "owned copy does not encode to its input"
    );
    assert_eq!(owned.cardinality(), view.cardinality());
    for i in 0..8u64 {
        let h = hash_bytes(&[data.len() as u8, i as u8]);
        assert_eq!(owned.contains_hash(h), view.contains_hash(h));
    }

    // The write operations: a union with itself, a union into a fresh filter of the same
    // shape, one add. They may open a layer of the shape's schedule, whose size follows the
    // header's capacity and error rate, not the input's length: a 100-byte value of a
    // 300M-item shape claiming a full first layer, or an exact value of capacity 4 at an
    // error rate near 1e-18 holding 5 hashes, once made one add or union allocate ~700 MB.
    // The engine now refuses any new layer past MAX_LAYER_BYTES (256 MiB, 54000) before
    // allocating it (docs/SECURITY.md); shapes whose layers pass 16 MB are still left to the
    // parse checks above, only so that the fuzzer keeps its speed (a 256 MiB layer per input
    // would take most of its time).
    let shape = view.shape();
    let next = view.layer_count();
    let small = [0, 1, next, next.saturating_add(1)].iter().all(|&i| {
        let (capacity, error_rate) = layer_shape(&shape, i);
        layer_bytes(capacity, error_rate) <= 16 << 20
    });
    if !small {
        return;
    }
    // A union with itself holds the same items and its bytes are valid.
    let mut union = Bloom::from_view(&view);
    if union.union_with(&view).is_ok() {
        let bytes = union.to_bytes();
        let again = BloomView::parse_validated(&bytes).expect("union output must be valid");
        for h in view.exact_items() {
            assert!(again.contains_hash(h), "union lost an item");
        }
    }

    // Into a fresh filter of the same shape, then one add: the output stays valid and keeps
    // every item (a fixed filter at capacity refuses the add).
    if let Ok(mut fresh) = Bloom::new(view.shape()) {
        if fresh.union_with(&view).is_ok() {
            let added = hash_bytes(data);
            if fresh.insert_hash(added).is_ok() {
                let bytes = fresh.to_bytes();
                let again = BloomView::parse_validated(&bytes).expect("add output must be valid");
                assert!(again.contains_hash(added), "added item missing");
                for h in view.exact_items() {
                    assert!(again.contains_hash(h), "add lost an item");
                }
            }
        }
    }
});

/// Read operations; `validated` values (exact hashes ascending) must find each stored hash.
fn probe(view: &BloomView, data: &[u8], validated: bool) {
    let info = view.info();
    let _ = (
        info,
        view.cardinality(),
        view.layer_count(),
        view.representation(),
    );
    let _ = view.shape().to_string();
    for h in view.exact_items() {
        let found = view.contains_hash(h);
        assert!(found || !validated, "exact item not found by contains");
    }
    for i in 0..16u8 {
        let _ = view.contains_hash(hash_bytes(&[i, data.len() as u8]));
    }
    let _ = view.contains_hash(0);
    let _ = view.contains_hash(u64::MAX);
}
