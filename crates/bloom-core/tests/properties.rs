//! Property and statistical tests: no false negatives, measured false-positive rates,
//! union semantics, round trips, and robustness against arbitrary and forged bytes.

use bloom_core::{
    from_text, hash_i64, to_text, Bloom, BloomView, Error, Representation, Shape, MAX_CAPACITY,
};
use proptest::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

// ---------------------------------------------------------------------------------------
// An allocator that remembers, per thread, the largest single allocation and how many were
// made, so tests can show that parsing forged counts allocates nothing proportional to them
// and that probing allocates nothing at all.

struct Recording;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

fn record(size: usize) {
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
    let _ = COUNT.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Recording {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: the caller's arguments, passed on under the same contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: the caller's arguments, passed on under the same contract.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        // SAFETY: the caller's arguments, passed on under the same contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's arguments, passed on under the same contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Recording = Recording;

/// Runs `f` and returns its result with the largest allocation and the allocation count.
fn measure<T>(f: impl FnOnce() -> T) -> (T, usize, u64) {
    LARGEST.with(|l| l.set(0));
    let before = COUNT.with(Cell::get);
    let out = f();
    (out, LARGEST.with(Cell::get), COUNT.with(Cell::get) - before)
}

// ---------------------------------------------------------------------------------------
// Deterministic keys: SplitMix64, so statistical results are the same on every run.

struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// `cases` cases, without failure files (integration tests have no lib.rs for proptest to
/// place them next to; a failing case is printed with its seed instead).
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn shape(capacity: u64, p: f64, scaling: bool) -> Shape {
    Shape::new(capacity as i64, p, scaling).unwrap()
}

/// Adds items in order, stopping quietly where a fixed filter is full; returns the accepted.
fn fill(bloom: &mut Bloom, items: &[i64]) -> Vec<i64> {
    let mut accepted = Vec::new();
    for &i in items {
        match bloom.insert_hash(hash_i64(i)) {
            Ok(_) => accepted.push(i),
            Err(Error::Full { .. }) => assert!(!bloom.shape().scaling),
            Err(e) => panic!("unexpected {e}"),
        }
    }
    accepted
}

fn any_shape() -> impl Strategy<Value = Shape> {
    (
        1u64..3000,
        prop::sample::select(vec![0.5, 0.1, 0.01, 0.001, 1e-6]),
        any::<bool>(),
    )
        .prop_map(|(c, p, s)| shape(c, p, s))
}

// ---------------------------------------------------------------------------------------
// No false negatives.

proptest! {
    #![proptest_config(config(200))]

    #[test]
    fn added_items_are_always_found(s in any_shape(), items in prop::collection::vec(any::<i64>(), 0..6000)) {
        let mut bloom = Bloom::new(s).unwrap();
        let accepted = fill(&mut bloom, &items);
        let bytes = bloom.to_bytes();
        let view = BloomView::parse_validated(&bytes).unwrap();
        for &i in &accepted {
            prop_assert!(bloom.contains_hash(hash_i64(i)));
            prop_assert!(view.contains_hash(hash_i64(i)));
        }
        if !s.scaling {
            prop_assert!(bloom.cardinality() <= s.capacity);
        }
    }

    #[test]
    fn exact_form_has_no_false_positives(items in prop::collection::vec(any::<i64>(), 0..500), probes in prop::collection::vec(any::<i64>(), 0..500)) {
        let mut bloom = Bloom::new(shape(100_000, 0.01, true)).unwrap();
        fill(&mut bloom, &items);
        prop_assert_eq!(bloom.representation(), Representation::Exact);
        for p in probes {
            prop_assert_eq!(bloom.contains_hash(hash_i64(p)), items.contains(&p));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Measured false-positive rate on 1,000,000 fresh keys.

const FRESH_KEYS: u64 = 1_000_000;

/// Fills a filter with distinct keys until it counts `fill` items, then probes a million keys
/// that were never added (inserted keys have the low bit clear, probes have it set).
fn measured_fpr(s: Shape, fill: u64, seed: u64) -> (f64, u32, usize) {
    let mut bloom = Bloom::new(s).unwrap();
    let mut rng = SplitMix64(seed);
    while bloom.cardinality() < fill {
        bloom
            .insert_hash(hash_i64((rng.next() & !1) as i64))
            .unwrap();
    }
    let bytes = bloom.to_bytes();
    let view = BloomView::parse(&bytes).unwrap();
    let false_positives = (0..FRESH_KEYS)
        .filter(|_| view.contains_hash(hash_i64((rng.next() | 1) as i64)))
        .count();
    (
        false_positives as f64 / FRESH_KEYS as f64,
        view.layer_count(),
        bytes.len(),
    )
}

#[test]
fn false_positive_rate_stays_near_target() {
    let mut report = Vec::new();
    for (seed, target) in [(1u64, 0.01), (2, 0.001)] {
        for (label, scaling, times) in [
            ("fixed 1x", false, 1),
            ("scaling 1x", true, 1),
            ("scaling 4x", true, 4),
        ] {
            let s = shape(100_000, target, scaling);
            let (fpr, layers, bytes) = measured_fpr(s, 100_000 * times, seed);
            let line = format!(
                "target {target:<6} {label:<10}: measured fpr {fpr:.6} ({:.3} x target), {layers} layer(s), {bytes} bytes",
                fpr / target
            );
            println!("{line}");
            report.push(line);
            assert!(fpr <= 1.1 * target, "{}", report.join("\n"));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Union.

fn union_case() -> impl Strategy<Value = (Shape, Vec<i64>, Vec<i64>)> {
    (
        1u64..600,
        prop::sample::select(vec![0.1, 0.01, 0.001]),
        any::<bool>(),
    )
        .prop_flat_map(|(c, p, scaling)| {
            // A fixed filter must take each side whole, so each side stays within capacity.
            let max = if scaling {
                4 * c as usize + 50
            } else {
                c as usize
            };
            let side = prop::collection::vec(-5000i64..5000, 0..=max);
            (Just(shape(c, p, scaling)), side.clone(), side)
        })
}

proptest! {
    #![proptest_config(config(300))]

    #[test]
    fn union_answers_like_adding_both_sets((s, a_items, b_items) in union_case()) {
        let mut a = Bloom::new(s).unwrap();
        let mut b = Bloom::new(s).unwrap();
        let a_acc = fill(&mut a, &a_items);
        let b_acc = fill(&mut b, &b_items);
        prop_assert_eq!((a_acc.len(), b_acc.len()), (a_items.len(), b_items.len()));
        let (a_bytes, b_bytes) = (a.to_bytes(), b.to_bytes());

        let mut ab = a.clone();
        ab.union_with(&BloomView::parse(&b_bytes).unwrap()).unwrap();
        let mut ba = b.clone();
        ba.union_with(&BloomView::parse(&a_bytes).unwrap()).unwrap();

        let ab_bytes = ab.to_bytes();
        let ab_view = BloomView::parse_validated(&ab_bytes).unwrap();
        prop_assert!(BloomView::parse_validated(&ba.to_bytes()).is_ok());
        for &i in a_items.iter().chain(&b_items) {
            let h = hash_i64(i);
            prop_assert!(ab.contains_hash(h) && ba.contains_hash(h) && ab_view.contains_hash(h));
        }

        // Adding both sets in order, where the shape lets a single filter take them all.
        let mut both = Bloom::new(s).unwrap();
        let all: Vec<i64> = a_items.iter().chain(&b_items).copied().collect();
        if fill(&mut both, &all).len() == all.len() {
            for &i in &all {
                prop_assert!(both.contains_hash(hash_i64(i)));
            }
            if both.representation() == Representation::Exact {
                prop_assert_eq!(ab.representation(), Representation::Exact);
                prop_assert_eq!(&ab_bytes, &both.to_bytes());
                prop_assert_eq!(&ba.to_bytes(), &both.to_bytes());
            }
        }

        // The count: exact for an exact union; for split-block layers it is re-derived from
        // the OR-ed bits (so unions are order-free), an estimate near the distinct count.
        let distinct = all.iter().collect::<std::collections::BTreeSet<_>>().len() as f64;
        let n = ab.cardinality() as f64;
        if ab.representation() == Representation::Exact {
            prop_assert_eq!(n, distinct);
        } else {
            prop_assert!((n - distinct).abs() <= 0.25 * distinct + 8.0, "{} vs {}", n, distinct);
        }
        prop_assert_eq!(ab.cardinality(), ba.cardinality());
    }

    #[test]
    fn union_with_itself_changes_no_answer((s, items, _) in union_case()) {
        let mut a = Bloom::new(s).unwrap();
        fill(&mut a, &items);
        let bytes = a.to_bytes();
        let mut aa = a.clone();
        aa.union_with(&BloomView::parse(&bytes).unwrap()).unwrap();
        for probe in -6000i64..6000 {
            prop_assert_eq!(aa.contains_hash(hash_i64(probe)), a.contains_hash(hash_i64(probe)));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Encoding round trips.

proptest! {
    #![proptest_config(config(200))]

    #[test]
    fn bytes_and_text_round_trip(s in any_shape(), items in prop::collection::vec(any::<i64>(), 0..5000)) {
        let mut bloom = Bloom::new(s).unwrap();
        fill(&mut bloom, &items);
        let bytes = bloom.to_bytes();
        prop_assert_eq!(bytes.len(), bloom.encoded_len());
        let mut direct = vec![0u8; bloom.encoded_len()];
        bloom.encode_into(&mut direct);
        prop_assert_eq!(&direct, &bytes);

        let again = Bloom::from_bytes(&bytes).unwrap();
        prop_assert_eq!(&again, &bloom);
        prop_assert_eq!(&again.to_bytes(), &bytes);

        let text = to_text(&bytes);
        prop_assert_eq!(&from_text(&text).unwrap(), &bytes);
        prop_assert_eq!(&from_text(&text.to_uppercase().replacen("\\X", "\\x", 1)).unwrap(), &bytes);

        let view = BloomView::parse_validated(&bytes).unwrap();
        prop_assert_eq!(view.shape(), s);
        prop_assert_eq!(view.cardinality(), bloom.cardinality());
        let info = view.info();
        prop_assert_eq!(info.bytes, bytes.len() as u64);
        prop_assert_eq!(info.items, bloom.cardinality());
        prop_assert!(info.fill_ratio >= 0.0 && info.fill_ratio <= 1.0 && info.estimated_fpr >= 0.0 && info.estimated_fpr <= 1.0);
    }
}

// ---------------------------------------------------------------------------------------
// Untrusted input: never panic, never allocate in proportion to a forged count.

/// Valid encodings of every kind to mutate.
fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (c, p, scaling, n) in [
        (100_000, 0.01, true, 0),
        (100_000, 0.01, true, 3),
        (10, 0.01, false, 10),
        (20, 0.1, true, 60),
        (5, 0.3, true, 200),
    ] {
        let mut bloom = Bloom::new(shape(c, p, scaling)).unwrap();
        fill(&mut bloom, &(0..n).collect::<Vec<_>>());
        out.push(bloom.to_bytes());
    }
    out
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip {
        at: usize,
        xor: u8,
    },
    Truncate(usize),
    Extend(Vec<u8>),
    /// Overwrite 8 (or 4) bytes at a field offset with a chosen value.
    Forge {
        at: usize,
        value: u64,
        wide: bool,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    // Offsets of interesting fields: header counts and the first layers' headers.
    let fields = prop::sample::select(vec![
        12usize, 16, 24, 32, 40, 48, 56, 64, 104, 112, 120, 128, 136, 168, 176, 184, 192,
    ]);
    let values = prop::sample::select(vec![
        0u64,
        1,
        2,
        63,
        64,
        65,
        u32::MAX as u64,
        1 << 32,
        1 << 40,
        u64::MAX / 32,
        u64::MAX / 8,
        u64::MAX,
        0.5f64.to_bits(),
        f64::NAN.to_bits(),
    ]);
    prop_oneof![
        (any::<usize>(), 1u8..).prop_map(|(at, xor)| Mutation::Flip { at, xor }),
        any::<usize>().prop_map(Mutation::Truncate),
        prop::collection::vec(any::<u8>(), 1..100).prop_map(Mutation::Extend),
        (fields, values, any::<bool>()).prop_map(|(at, value, wide)| Mutation::Forge {
            at,
            value,
            wide
        }),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    match m {
        Mutation::Flip { at, xor } => {
            if !bytes.is_empty() {
                let i = at % bytes.len();
                bytes[i] ^= xor;
            }
        }
        Mutation::Truncate(at) => bytes.truncate(at % (bytes.len() + 1)),
        Mutation::Extend(tail) => bytes.extend_from_slice(tail),
        Mutation::Forge { at, value, wide } => {
            let field: Vec<u8> = if *wide {
                value.to_le_bytes().to_vec()
            } else {
                (*value as u32).to_le_bytes().to_vec()
            };
            if at + field.len() <= bytes.len() {
                bytes[*at..at + field.len()].copy_from_slice(&field);
            }
        }
    }
}

/// Everything a caller may do with untrusted bytes; must not panic. Allocations while
/// parsing stay within a small multiple of the input size.
fn exercise(bytes: &[u8]) -> Result<(), TestCaseError> {
    let bound = 4 * bytes.len() + 4096;
    let (structural, largest, _) = measure(|| BloomView::parse(bytes).map(|v| v.shape()));
    prop_assert!(
        largest <= bound,
        "parse allocated {largest} bytes for {} input bytes",
        bytes.len()
    );
    let (validated, largest, _) = measure(|| BloomView::parse_validated(bytes).is_ok());
    prop_assert!(largest <= bound, "parse_validated allocated {largest}");
    let (owned, largest, _) = measure(|| Bloom::from_bytes(bytes));
    prop_assert!(largest <= bound, "from_bytes allocated {largest}");
    let text = to_text(bytes);
    let (from_txt, largest, _) = measure(|| from_text(&text));
    prop_assert!(
        largest <= 2 * text.len() + 4096,
        "from_text allocated {largest}"
    );
    prop_assert_eq!(from_txt.as_deref(), Ok(bytes));

    prop_assert_eq!(validated, owned.is_ok());
    if validated {
        prop_assert!(structural.is_ok());
    }
    if let Ok(view) = BloomView::parse(bytes) {
        // Reads over a structurally valid but possibly unsorted body must not panic.
        for i in 0..50 {
            view.contains_hash(hash_i64(i));
        }
        let _ = view.info();
        let mut copy = Bloom::from_view(&view);
        let _ = copy.union_with(&view);
        prop_assert!(
            BloomView::parse(&copy.to_bytes()).is_ok(),
            "a union of a value with itself encodes validly"
        );
    }
    if let Ok(bloom) = owned {
        prop_assert_eq!(
            &bloom.to_bytes()[..],
            bytes,
            "a validated value re-encodes to itself"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        exercise(&bytes)?;
    }

    #[test]
    fn arbitrary_bytes_after_a_valid_header_never_panic(
        seed in 0usize..5,
        tail in prop::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut bytes = seeds()[seed][..40].to_vec();
        bytes.extend_from_slice(&tail);
        exercise(&bytes)?;
    }

    #[test]
    fn mutated_encodings_never_panic(seed in 0usize..5, mutations in prop::collection::vec(mutation(), 1..4)) {
        let mut bytes = seeds()[seed].clone();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        exercise(&bytes)?;
    }

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC*", hexish in "\\\\x[0-9a-fA-FgG ]{0,80}") {
        let _ = from_text(&s);
        if let Ok(bytes) = from_text(&hexish) {
            prop_assert_eq!(bytes.len() * 2 + 2, hexish.len());
            let _ = Bloom::from_bytes(&bytes);
        }
    }
}

#[test]
fn forged_huge_counts_are_refused_without_allocating() {
    let valid = &seeds()[3]; // scaling, two layers
    let forge = |at: usize, field: &[u8]| {
        let mut b = valid.clone();
        b[at..at + field.len()].copy_from_slice(field);
        b
    };
    let cases = [
        forge(12, &u32::MAX.to_le_bytes()),          // layer count
        forge(32, &u64::MAX.to_le_bytes()),          // items
        forge(64, &(u32::MAX as u64).to_le_bytes()), // block count of layer 0
        forge(64, &u64::MAX.to_le_bytes()),
        forge(56, &(1u64 << 62).to_le_bytes()), // layer items vs header
    ];
    for bytes in cases {
        let (result, largest, _) = measure(|| Bloom::from_bytes(&bytes));
        assert!(matches!(result, Err(Error::Malformed(_))), "{result:?}");
        assert!(largest < 4096, "allocated {largest}");
    }
    // An exact value claiming 2^61 items with 3 hashes of body.
    let mut exact = seeds()[1].clone();
    exact[32..40].copy_from_slice(&(1u64 << 61).to_le_bytes());
    let (result, largest, _) = measure(|| Bloom::from_bytes(&exact));
    assert!(matches!(result, Err(Error::Malformed(_))));
    assert!(largest < 4096);
}

#[test]
fn probing_does_not_allocate() {
    for bytes in seeds() {
        let view = BloomView::parse(&bytes).unwrap();
        let (_, _, count) = measure(|| {
            (0..1000)
                .filter(|&i| view.contains_hash(hash_i64(i)))
                .count()
        });
        assert_eq!(count, 0);
        let (_, _, count) = measure(|| BloomView::parse(&bytes).map(|v| v.cardinality()));
        assert_eq!(count, 0, "parse is allocation-free");
    }
}

// ---------------------------------------------------------------------------------------
// Limits.

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn fixed_filter_is_full_exactly_past_capacity(capacity in 1u64..60, p in prop::sample::select(vec![0.5, 0.01, 1e-5])) {
        let mut bloom = Bloom::new(shape(capacity, p, false)).unwrap();
        let mut key = 0i64;
        loop {
            let h = hash_i64(key);
            key += 1;
            let present = bloom.contains_hash(h);
            let before = bloom.cardinality();
            match bloom.insert_hash(h) {
                Ok(new) => {
                    prop_assert_eq!(new, !present);
                    prop_assert!(bloom.cardinality() <= capacity);
                }
                Err(Error::Full { capacity: c }) => {
                    prop_assert_eq!(c, capacity);
                    prop_assert_eq!(before, capacity);
                    prop_assert!(!present);
                    break;
                }
                Err(e) => return Err(TestCaseError::fail(e.to_string())),
            }
        }
        // Already-present items stay accepted as no-ops.
        prop_assert_eq!(bloom.insert_hash(hash_i64(0)), Ok(false));
    }
}

#[test]
fn too_large_shapes_are_refused_up_front() {
    for scaling in [false, true] {
        let s = Shape::new(500_000_000, 0.0001, scaling).unwrap();
        match Bloom::new(s) {
            Err(Error::TooLarge { bytes, limit }) => assert!(bytes > limit),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn shape_rejects_out_of_range_parameters() {
    for c in [0i64, -1, MAX_CAPACITY as i64 + 1] {
        assert!(
            matches!(Shape::new(c, 0.01, true), Err(Error::BadParameter(_))),
            "{c}"
        );
    }
    for p in [0.0, 1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.1] {
        assert!(
            matches!(Shape::new(100, p, true), Err(Error::BadParameter(_))),
            "{p}"
        );
    }
    assert!(Shape::new(MAX_CAPACITY as i64, 0.5, false).is_ok());
}
