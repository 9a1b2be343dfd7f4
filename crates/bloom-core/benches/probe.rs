//! Probe cost per checked id, the number the hot read path lives on: 1,000 candidates
//! probed against a stored value, per representation, and the hash alone.

use bloom_core::{
    build_compacted, build_compacted_blocks, build_compacted_elias_fano, build_compacted_static,
    hash_i64, hash_i64_each, Bloom, BloomView, DistinctHashes, FirstLayer, GenerationLayout,
    GenerationRows, Representation, Shape, WindowView, COMPACTED_LAYER, EXACT_LAYER,
    STATIC_ROW_BYTES,
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

    // Tracked users' windows, as the trigger stores them, in both layouts: 6 generations
    // each, 1,000 items in all (layout 1: two layers per generation; layout 2: exact rows),
    // 3,000 (layout 1: two layers; layout 2: one) and 100,000 (a user at capacity, sparse at
    // the top layer). Each probed one candidate at a time and as a batch.
    let candidates: Vec<i64> = (0..CANDIDATES)
        .map(|i| if i % 2 == 0 { i * 3 } else { 1_000_000_000 + i })
        .collect();
    let hashes: Vec<u64> = candidates.iter().map(|&id| hash_i64(id)).collect();
    let fresh: Vec<u64> = (0..CANDIDATES)
        .map(|i| hash_i64(2_000_000_000 + i))
        .collect();
    let users = [
        ("1000_items", 167),
        ("3000_items", 500),
        ("100k_items", 16_667),
    ];
    for (first, (user, per_generation)) in FirstLayer::ALL
        .iter()
        .flat_map(|&first| users.iter().map(move |u| (first, u)))
    {
        let layout = GenerationLayout::new(0.01 / 6.0, first).expect("valid rate");
        let per_generation = *per_generation;
        let name = format!("layout{}_{user}", first.number().unwrap_or(0));
        let generations = user_generations(&layout, per_generation);
        let exact_rows: Vec<Vec<u8>> = generations
            .iter()
            .map(|rows| rows.row_bytes(EXACT_LAYER, 0))
            .collect();
        let view = window_of(&layout, &generations, &exact_rows);
        group.bench_function(format!("tracked_window_{name}_6_generations"), |b| {
            b.iter(|| {
                candidates
                    .iter()
                    .filter(|&&id| view.contains(&layout, hash_i64(black_box(id))))
                    .count()
            })
        });
        group.bench_function(format!("tracked_window_{name}_6_generations_batch"), |b| {
            b.iter(|| {
                let mut found = vec![false; hashes.len()];
                view.contains_each(&layout, black_box(&hashes), &mut found);
                found.iter().filter(|&&f| f).count()
            })
        });
        let sets = new_sets(per_generation);
        let mut next = 0usize;
        group.bench_function(
            format!("tracked_window_{name}_6_generations_batch_new_sets"),
            |b| b.iter(|| probe_next_set(&view, &layout, &sets, &mut next)),
        );
        // A feed's usual batch: candidates the user has not seen.
        group.bench_function(
            format!("tracked_window_{name}_6_generations_batch_unseen"),
            |b| {
                b.iter(|| {
                    let mut found = vec![false; fresh.len()];
                    view.contains_each(&layout, black_box(&fresh), &mut found);
                    found.iter().filter(|&&f| f).count()
                })
            },
        );
    }
    // The same users after `compact`: their window as one compacted filter at 0.5%, as the
    // routine compaction leaves it (an xor filter cut into rows of STATIC_ROW_BYTES;
    // split-block blocks in one row for a light user), and beside them the Elias-Fano set
    // development builds wrote and the static filter where blocks are used.
    let more = [
        ("3000_items_elias_fano", 500),
        ("300_items_blocks", 50),
        ("300_items_static", 50),
    ];
    for (user, per_generation) in users.into_iter().chain(more) {
        let mut held: Vec<u64> = (0..6 * per_generation).map(hash_i64).collect();
        let e = 0.01 / 2.0;
        let rows = if user.ends_with("_blocks") {
            vec![build_compacted_blocks(&mut held, e, 1, 6).expect("builds")]
        } else if user.ends_with("_elias_fano") {
            build_compacted_elias_fano(&mut held, e, 1, 6, STATIC_ROW_BYTES).expect("builds")
        } else {
            build_compacted_static(&mut held, e, 1, 6, STATIC_ROW_BYTES).expect("builds")
        };
        let layout = GenerationLayout::new(0.01 / 6.0, FirstLayer::FillsOneRow).expect("valid");
        let mut view = WindowView::default();
        for (part, bits) in rows.iter().enumerate() {
            view.add_row(&layout, 6, COMPACTED_LAYER, part as u32, bits)
                .expect("own rows");
        }
        view.seal(&layout).expect("every part present");
        let sets = new_sets(per_generation);
        let mut next = 0usize;
        group.bench_function(format!("compacted_{user}_batch_new_sets"), |b| {
            b.iter(|| probe_next_set(&view, &layout, &sets, &mut next))
        });
    }
    // Users as the sizing section leaves them at a routine compact's peak (just before it:
    // the closed generations compacted at error_rate / 2, the open one's fifth of the items
    // folded into its rows, an exact row below 192 items) and right after it (all compacted).
    for (user, items, rate) in [
        ("10_items_1pct", 10, 0.01),
        ("300_items_0.1pct", 300, 0.001),
        ("3000_items_1pct", 3000, 0.01),
        ("3000_items_0.1pct", 3000, 0.001),
    ] {
        let layout = GenerationLayout::new(rate / 6.0, FirstLayer::FillsOneRow).expect("valid");
        let open_items = items / 5;
        let sets = held_and_fresh_sets(items);
        for state in ["peak", "after"] {
            let compacted_items = if state == "peak" {
                items - open_items
            } else {
                items
            };
            let mut closed: Vec<u64> = (0..compacted_items).map(hash_i64).collect();
            let rows =
                build_compacted(&mut closed, rate / 2.0, 1, 5, STATIC_ROW_BYTES).expect("builds");
            let mut open = GenerationRows::default();
            if state == "peak" {
                for i in compacted_items..items {
                    open.insert(&layout, hash_i64(i)).expect("fits");
                }
            }
            let exact = open.row_bytes(EXACT_LAYER, 0);
            let open = [open];
            let mut view = window_of(&layout, &open, std::slice::from_ref(&exact));
            for (part, bits) in rows.iter().enumerate() {
                view.add_row(&layout, 5, COMPACTED_LAYER, part as u32, bits)
                    .expect("own rows");
            }
            view.seal(&layout).expect("every part present");
            let mut next = 0usize;
            group.bench_function(format!("{state}_{user}_batch_new_sets"), |b| {
                b.iter(|| probe_next_set(&view, &layout, &sets, &mut next))
            });
        }
    }
    group.finish();

    // An open generation's exact row of 66 hashes alone, then with 6 of them sharing their
    // top 9 bits (the set's home slot: 2 overflow its window), as about a tenth of the exact
    // rows of 60 to 300 hashes do.
    let mut group = c.benchmark_group("exact_row_1000_candidates");
    let layout = GenerationLayout::new(0.001 / 6.0, FirstLayer::FillsOneRow).expect("valid");
    let sharing: Vec<i64> = (10_000_000..)
        .filter(|&i| hash_i64(i) >> 55 == 0)
        .take(6)
        .collect();
    for (name, ids) in [
        ("66_hashes", (0..66).collect::<Vec<i64>>()),
        ("66_hashes_2_overflowing", (0..60).chain(sharing).collect()),
    ] {
        let mut open = GenerationRows::default();
        for &i in &ids {
            open.insert(&layout, hash_i64(i)).expect("fits");
        }
        assert!(open.top.is_none(), "an exact row only");
        let exact = open.row_bytes(EXACT_LAYER, 0);
        let open = [open];
        let view = window_of(&layout, &open, std::slice::from_ref(&exact));
        let sets = held_and_fresh_sets(66);
        let mut next = 0usize;
        group.bench_function(name, |b| {
            b.iter(|| probe_next_set(&view, &layout, &sets, &mut next))
        });
    }
    group.finish();

    // The answer's de-duplication: 1,000 distinct candidates, a new set per call (64 in turn).
    let mut group = c.benchmark_group("distinct_1000_candidates");
    let sets: Vec<Vec<u64>> = (0..64i64)
        .map(|k| {
            (0..CANDIDATES)
                .map(|i| hash_i64(5_000_000_000 + k * CANDIDATES + i))
                .collect()
        })
        .collect();
    let mut next = 0usize;
    group.bench_function("new_sets", |b| {
        b.iter(|| {
            next = (next + 1) % sets.len();
            let hashes = black_box(&sets[next]);
            let mut set = DistinctHashes::over(hashes, hashes.len());
            (0..hashes.len()).filter(|&i| set.insert(i)).count()
        })
    });
    group.finish();

    let mut group = c.benchmark_group("hash");
    group.throughput(Throughput::Elements(CANDIDATES as u64));
    group.bench_function("hash_i64_1000", |b| {
        b.iter(|| (0..CANDIDATES).fold(0u64, |acc, i| acc ^ hash_i64(black_box(i))))
    });
    let values: Vec<[u8; 8]> = (0..CANDIDATES)
        .map(|i| (3_000_000_000 + i).to_ne_bytes())
        .collect();
    group.bench_function("hash_i64_each_1000", |b| {
        b.iter(|| hash_i64_each(black_box(&values)))
    });
    group.bench_function("hash_i64_map_collect_1000", |b| {
        b.iter(|| {
            black_box(&values)
                .iter()
                .map(|v| hash_i64(i64::from_ne_bytes(*v)))
                .collect::<Vec<u64>>()
        })
    });
    group.finish();
}

/// As in a server, every call brings candidates the branch predictor has not seen (a loop
/// over one fixed set lets it learn the set's outcomes): 64 sets to take in turn, half items
/// a user of 6 generations of `per_generation` items holds, half fresh ids.
fn new_sets(per_generation: i64) -> Vec<Vec<u64>> {
    (0..64i64)
        .map(|k| {
            (0..CANDIDATES)
                .map(|i| match i % 2 {
                    0 => hash_i64((k * 7919 + i * 13) % (6 * per_generation)),
                    _ => hash_i64(3_000_000_000 + k * CANDIDATES + i),
                })
                .collect()
        })
        .collect()
}

/// 64 sets of candidates, half of them among the `items` a user holds (`hash_i64(0..items)`),
/// half fresh.
fn held_and_fresh_sets(items: i64) -> Vec<Vec<u64>> {
    (0..64i64)
        .map(|k| {
            (0..CANDIDATES)
                .map(|i| match i % 2 {
                    0 => hash_i64((k * 7919 + i * 13) % items),
                    _ => hash_i64(3_000_000_000 + k * CANDIDATES + i),
                })
                .collect()
        })
        .collect()
}

/// One batch probe of the next of `sets`; the candidates found.
fn probe_next_set(
    view: &WindowView,
    layout: &GenerationLayout,
    sets: &[Vec<u64>],
    next: &mut usize,
) -> usize {
    *next = (*next + 1) % sets.len();
    let hashes = &sets[*next];
    let mut found = vec![false; hashes.len()];
    view.contains_each(layout, black_box(hashes), &mut found);
    found.iter().filter(|&&f| f).count()
}

/// Six generations of one user, `per_generation` items each, folded as the trigger does.
fn user_generations(layout: &GenerationLayout, per_generation: i64) -> Vec<GenerationRows> {
    (0..6)
        .map(|g| {
            let mut rows = GenerationRows::default();
            for i in 0..per_generation {
                rows.insert(layout, hash_i64(g * per_generation + i))
                    .expect("fits");
            }
            rows
        })
        .collect()
}

/// The read path's view of those generations' stored rows.
fn window_of<'a>(
    layout: &GenerationLayout,
    generations: &'a [GenerationRows],
    exact_rows: &'a [Vec<u8>],
) -> WindowView<'a> {
    let mut view = WindowView::default();
    for (g, rows) in generations.iter().enumerate() {
        if rows.exact.is_some() {
            view.add_row(layout, g as i32, EXACT_LAYER, 0, &exact_rows[g])
                .expect("own rows");
        }
        for (l, segments) in rows.layers.iter().enumerate() {
            for (&s, bits) in segments {
                view.add_row(layout, g as i32, l as i16, s, bits)
                    .expect("own rows");
            }
        }
    }
    view.seal(layout).expect("every part present");
    view
}

criterion_group!(benches, probe);
criterion_main!(benches);
