//! Encoded sizes the product promises (a per-user filter must stay small enough to live in
//! a table row or a TOASTed value cheaply). Sizes include no varlena header, hence the - 4.

use bloom_core::{hash_i64, Bloom, Representation, Shape};

fn filled(shape: Shape, items: i64) -> Bloom {
    let mut bloom = Bloom::new(shape).unwrap();
    for i in 0..items {
        bloom.insert_hash(hash_i64(i)).unwrap();
    }
    bloom
}

#[test]
fn fixed_100k_at_1_percent() {
    let bloom = filled(Shape::new(100_000, 0.01, false).unwrap(), 100_000);
    let len = bloom.encoded_len();
    println!("fixed (100000, 0.01) with 100,000 adds: {len} bytes");
    assert_eq!(bloom.representation(), Representation::SplitBlock);
    assert!(len <= 135_000 - 4, "{len}");
}

#[test]
fn scaling_100k_at_1_percent() {
    let bloom = filled(Shape::new(100_000, 0.01, true).unwrap(), 100_000);
    let len = bloom.encoded_len();
    println!("scaling (100000, 0.01) with 100,000 adds: {len} bytes");
    assert!(len <= 150_000 - 4, "{len}");
}

#[test]
fn two_hundred_items_stay_exact() {
    let bloom = filled(Shape::new(100_000, 0.01, true).unwrap(), 200);
    let len = bloom.encoded_len();
    println!("default shape with 200 adds: {len} bytes");
    assert_eq!(bloom.representation(), Representation::Exact);
    assert!(len <= 1_696, "{len}");
}
