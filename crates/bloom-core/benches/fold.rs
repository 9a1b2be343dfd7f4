//! A fold at commit's engine work per user row: `GenerationLayout::segment_insert` of the
//! one new hash a 20-row statement brings a user, into a layer row, which counts the row's
//! fill (every bit of the row: 1,152 bytes here) before it sets any.

use bloom_core::{hash_i64, FirstLayer, GenerationLayout, GenerationRows};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

fn fold(c: &mut Criterion) {
    // 1% over 6 generations, as the ingest benchmark's table: a user's open generation
    // grown into its second layer, whose segments are then written in place.
    let layout = GenerationLayout::new(0.01 / 6.0, FirstLayer::FillsOneRow).expect("layout");
    let mut rows = GenerationRows::default();
    let mut i = 0i64;
    while rows.top != Some(1) {
        rows.insert(&layout, hash_i64(i)).expect("insert");
        i += 1;
    }
    // As many again: the second layer's segments part full.
    for j in i..2 * i {
        rows.insert(&layout, hash_i64(j)).expect("insert");
    }
    let segment = layout.locate(hash_i64(2 * i - 1), 1).0;
    let bits = rows.row_bytes(1, segment);
    assert!(!bits.is_empty());
    let fresh: Vec<u64> = (1_000_000..2_000_000)
        .map(hash_i64)
        .filter(|&h| layout.locate(h, 1).0 == segment)
        .take(64)
        .collect();
    let mut group = c.benchmark_group("fold");
    let mut next = 0usize;
    group.bench_function(format!("segment_insert_1_hash_{}_bytes", bits.len()), |b| {
        b.iter(|| {
            next = (next + 1) % fresh.len();
            layout.segment_insert(1, segment, black_box(&bits), &fresh[next..next + 1])
        })
    });
    group.finish();
}

criterion_group!(benches, fold);
criterion_main!(benches);
