//! Golden bytes: these pin docs/FORMAT.md. A stored value must read the same forever, so a
//! change here is a format change, never a refactoring. The expected bytes were printed once
//! from the implementation and checked against an independent Python implementation of
//! FORMAT.md (MurmurHash3, header, salts, layer hashing, sizing model); do not regenerate them.

use bloom_core::{
    from_text, hash_bytes, hash_i64, to_text, Bloom, BloomView, ItemFamily, ItemGuard,
    Representation, Shape,
};

fn hex(s: &str) -> Vec<u8> {
    from_text(&format!("\\x{s}")).expect("test literal is hex")
}

fn build(
    capacity: i64,
    error_rate: f64,
    scaling: bool,
    items: impl IntoIterator<Item = i64>,
) -> Bloom {
    let mut bloom = Bloom::new(Shape::new(capacity, error_rate, scaling).unwrap()).unwrap();
    for i in items {
        bloom.admit(ItemFamily::Integer).unwrap();
        bloom.insert_hash(hash_i64(i)).unwrap();
    }
    bloom
}

/// Checks both directions: we build exactly these bytes, and these bytes read back.
fn assert_golden(bloom: &Bloom, expected_hex: &str) {
    let expected = hex(expected_hex);
    assert_eq!(to_text(&bloom.to_bytes()), to_text(&expected));
    assert_eq!(Bloom::from_bytes(&expected).as_ref(), Ok(bloom));
}

#[test]
fn item_hashes() {
    assert_eq!(hash_i64(42), 0xd7d6_dedb_d23b_db67);
    assert_eq!(hash_i64(1), 0x44b5_f9e8_7819_f73d);
    assert_eq!(hash_i64(2), 0x4319_ea4b_04ee_a067);
    assert_eq!(hash_i64(3), 0x77ae_35a4_85b0_7c16);
    assert_eq!(hash_bytes(b"abc"), 0x6d02_7beb_948d_d1d5);
    // uuid a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11 as its 16 bytes.
    let uuid = hex("a0eebc999c0b4ef8bb6d6bb9bd380a11");
    assert_eq!(hash_bytes(&uuid), 0x0fd3_7425_0ae8_9e4c);
}

/// Version 1 values (written by 0.1.0 to 0.3.0): they must read, answer and write back
/// byte for byte forever.
const V1_EMPTY: &str =
    "53424c4d0101010100b1ed5e00000000a0860100000000007b14ae47e17a843f0000000000000000";
const V1_EXACT_1_2_3: &str =
    "53424c4d0101010100b1ed5e00000000a0860100000000007b14ae47e17a843f0300000000000000\
                              67a0ee044bea19433df71978e8f9b544167cb085a435ae77";
const V1_FIXED_SPLIT_1_TO_10: &str =
    "53424c4d0101020000b1ed5e010000000a000000000000007b14ae47e17a843f0a00000000000000\
     0a000000000000007b14ae47e17a843f0a000000000000000100000000000000\
     0004be208200121c032338207aa22000a0a204a81c2a10025060943028504070";

#[test]
fn version_1_values_still_read_and_write_back_unchanged() {
    for (fixture, items) in [
        (V1_EMPTY, 0),
        (V1_EXACT_1_2_3, 3),
        (V1_FIXED_SPLIT_1_TO_10, 10),
    ] {
        let bytes = hex(fixture);
        let view = BloomView::parse_validated(&bytes).unwrap();
        assert_eq!(view.version(), 1);
        assert_eq!(view.guard(), ItemGuard::Unrecorded);
        assert!((1..=items).all(|i| view.contains_hash(hash_i64(i))));
        // Any family may be added to an unrecorded value, which stays version 1.
        let mut bloom = Bloom::from_bytes(&bytes).unwrap();
        assert_eq!(bloom.to_bytes(), bytes);
        bloom.admit(ItemFamily::Bytes).unwrap();
        assert_eq!(bloom.guard(), ItemGuard::Unrecorded);
        assert_eq!(bloom.to_bytes()[4], 1);
    }
}

#[test]
fn empty_default_filter() {
    // SBLM, v2, murmur3, exact, scaling (no family yet) | seed | 0 layers | capacity 100000 | 0.01 | 0 items
    assert_golden(
        &build(100_000, 0.01, true, []),
        "53424c4d02010101\
         00b1ed5e\
         00000000\
         a086010000000000\
         7b14ae47e17a843f\
         0000000000000000",
    );
}

#[test]
fn exact_filter_with_1_2_3() {
    // v2, flags: scaling | integer family (0x02).
    let bloom = build(100_000, 0.01, true, 1..=3);
    assert_golden(
        &bloom,
        "53424c4d02010103\
         00b1ed5e\
         00000000\
         a086010000000000\
         7b14ae47e17a843f\
         0300000000000000\
         67a0ee044bea1943\
         3df71978e8f9b544\
         167cb085a435ae77",
    );
    let bytes = bloom.to_bytes();
    let view = BloomView::parse_validated(&bytes).unwrap();
    assert_eq!(view.representation(), Representation::Exact);
    assert!((1..=3).all(|i| view.contains_hash(hash_i64(i))));
    assert!(!view.contains_hash(hash_i64(4)));
}

#[test]
fn small_fixed_split_block_filter() {
    // Capacity 10 at 1% needs one block, so the exact form holds 64 / 8 = 8 hashes and the
    // ninth add promotes.
    let bloom = build(10, 0.01, false, 1..=10);
    assert_golden(
        &bloom,
        "53424c4d02010202\
         00b1ed5e\
         01000000\
         0a00000000000000\
         7b14ae47e17a843f\
         0a00000000000000\
         0a000000000000007b14ae47e17a843f0a000000000000000100000000000000\
         0004be208200121c032338207aa22000a0a204a81c2a10025060943028504070",
    );
}

#[test]
fn scaling_filter_with_two_layers() {
    // Capacity 20 at 10%, scaling: layer 0 holds 20 at 6% in 1 block, layer 1 holds 40 at
    // 2.4% in 2 blocks and is probed with the remixed hash.
    let bloom = build(20, 0.1, true, 1..=60);
    assert_golden(
        &bloom,
        "53424c4d02010203\
         00b1ed5e\
         02000000\
         1400000000000000\
         9a9999999999b93f\
         3b00000000000000\
         1400000000000000b81e85eb51b8ae3f14000000000000000100000000000000\
         0184beac8213363ed36738a9fae62073a3aa15a9be2e90865c60deb138584f70\
         2800000000000000fa7e6abc7493983f27000000000000000200000000000000\
         1be49a7176a027a58e0e4e5c392a8e2294900e65b2436a35a9088e709a230aaa\
         554bc3b819f14bc3c51c46e1d3aa6e1dfacc532c3e494786e761c25a97930899",
    );
}

#[test]
fn text_form() {
    let bloom = build(100_000, 0.01, true, []);
    assert_eq!(
        to_text(&bloom.to_bytes()),
        "\\x53424c4d0201010100b1ed5e00000000a0860100000000007b14ae47e17a843f0000000000000000"
    );
}

#[test]
fn a_version_2_value_refuses_another_family() {
    let bloom = build(100_000, 0.01, true, 1..=3);
    let bytes = bloom.to_bytes();
    let view = BloomView::parse_validated(&bytes).unwrap();
    assert_eq!(view.guard(), ItemGuard::Holds(ItemFamily::Integer));
    assert!(view.guard().check(ItemFamily::Integer).is_ok());
    assert!(view.guard().check(ItemFamily::Bytes).is_err());
    let mut again = Bloom::from_bytes(&bytes).unwrap();
    assert!(again.admit(ItemFamily::Uuid).is_err());
    assert_eq!(
        again.to_bytes(),
        bytes,
        "a refused add leaves the value as it was"
    );
    // Two family bits at once are malformed.
    let mut two = bytes.clone();
    two[7] |= 0x04;
    assert!(BloomView::parse(&two).is_err());
}
