//! Probe cost per checked id, the number the hot read path lives on: 1,000 candidates
//! probed against a stored value, per representation, and the hash alone.

use bloom_core::{
    hash_i64, Bloom, BloomView, GenerationLayout, GenerationRows, Representation, Shape, WindowView,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

const CANDIDATES: i64 = 1_000;

fn filled(shape: Shape, items: i64) -> Vec<u8> {
    let mut bloom = Bloom::new(shape).expect("shape fits");
    for i in 0..items {
        bloom
            .insert_hash(hash_i64(i))
            .expect("scaling filter accepts");
    }
    bloom.to_bytes()
}

fn probe(c: &mut Criterion) {
    let default_shape = Shape::new(100_000, 0.01, true).expect("valid shape");
    let cases = [
        ("exact_15k", filled(default_shape, 15_000)),
        ("split_block_1_layer_100k", filled(default_shape, 100_000)),
        ("split_block_3_layers_400k", filled(default_shape, 400_000)),
    ];
    let mut group = c.benchmark_group("probe_1000_candidates");
    group.throughput(Throughput::Elements(CANDIDATES as u64));
    for (name, bytes) in &cases {
        let view = BloomView::parse(bytes).expect("own encoding parses");
        let expect_exact = name.starts_with("exact");
        assert_eq!(
            view.representation() == Representation::Exact,
            expect_exact,
            "{name}"
        );
        // Half members, half fresh ids, so both outcomes are measured.
        let candidates: Vec<i64> = (0..CANDIDATES)
            .map(|i| if i % 2 == 0 { i * 7 } else { 1_000_000_000 + i })
            .collect();
        group.bench_with_input(
            BenchmarkId::from_parameter(name),
            &candidates,
            |b, candidates| {
                b.iter(|| {
                    let view = BloomView::parse(black_box(bytes)).expect("parses");
                    candidates
                        .iter()
                        .filter(|&&id| view.contains_hash(hash_i64(id)))
                        .count()
                })
            },
        );
    }

    // A tracked user's window: 3,000 items over 6 generations of 500, as the trigger stores it.
    let layout = GenerationLayout::new(0.01 / 6.0).expect("valid rate");
    let generations: Vec<GenerationRows> = (0..6)
        .map(|g| {
            let mut rows = GenerationRows::default();
            for i in 0..500 {
                rows.insert(&layout, hash_i64(g * 500 + i)).expect("fits");
            }
            rows
        })
        .collect();
    let mut view = WindowView::default();
    for (g, rows) in generations.iter().enumerate() {
        for (l, segments) in rows.layers.iter().enumerate() {
            for (&s, bits) in segments {
                view.add_row(&layout, g as i32, l as i16, s, bits)
                    .expect("own rows");
            }
        }
    }
    view.seal(&layout);
    let candidates: Vec<i64> = (0..CANDIDATES)
        .map(|i| if i % 2 == 0 { i * 3 } else { 1_000_000_000 + i })
        .collect();
    group.bench_function("tracked_window_3000_items_6_generations", |b| {
        b.iter(|| {
            candidates
                .iter()
                .filter(|&&id| view.contains(&layout, hash_i64(black_box(id))))
                .count()
        })
    });
    let hashes: Vec<u64> = candidates.iter().map(|&id| hash_i64(id)).collect();
    group.bench_function("tracked_window_3000_items_6_generations_batch", |b| {
        b.iter(|| {
            let mut found = vec![false; hashes.len()];
            view.contains_each(&layout, black_box(&hashes), &mut found);
            found.iter().filter(|&&f| f).count()
        })
    });

    // A user at capacity: 100,000 items over 6 generations (layers 0-4, sparse at the top).
    let heavy: Vec<GenerationRows> = (0..6)
        .map(|g| {
            let mut rows = GenerationRows::default();
            for i in 0..16_667 {
                rows.insert(&layout, hash_i64(g * 16_667 + i))
                    .expect("fits");
            }
            rows
        })
        .collect();
    let mut heavy_view = WindowView::default();
    for (g, rows) in heavy.iter().enumerate() {
        for (l, segments) in rows.layers.iter().enumerate() {
            for (&s, bits) in segments {
                heavy_view
                    .add_row(&layout, g as i32, l as i16, s, bits)
                    .expect("own rows");
            }
        }
    }
    heavy_view.seal(&layout);
    group.bench_function("tracked_window_100k_items_6_generations", |b| {
        b.iter(|| {
            candidates
                .iter()
                .filter(|&&id| heavy_view.contains(&layout, hash_i64(black_box(id))))
                .count()
        })
    });
    group.bench_function("tracked_window_100k_items_6_generations_batch", |b| {
        b.iter(|| {
            let mut found = vec![false; hashes.len()];
            heavy_view.contains_each(&layout, black_box(&hashes), &mut found);
            found.iter().filter(|&&f| f).count()
        })
    });
    group.finish();

    let mut group = c.benchmark_group("hash");
    group.throughput(Throughput::Elements(CANDIDATES as u64));
    group.bench_function("hash_i64_1000", |b| {
        b.iter(|| (0..CANDIDATES).fold(0u64, |acc, i| acc ^ hash_i64(black_box(i))))
    });
    group.finish();
}

criterion_group!(benches, probe);
criterion_main!(benches);
