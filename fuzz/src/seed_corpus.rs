//! Writes the committed seed corpus: valid values of every representation the engine
//! produces, a few malformed ones (forged sizes, truncations), and tracking rows.
//! Usage (from fuzz/): cargo run --release --bin seed_corpus -- corpus
use bloom_core::{hash_i64, to_text, Bloom, FirstLayer, GenerationLayout, GenerationRows, Shape};
use std::path::Path;

fn filled(capacity: i64, p: f64, scaling: bool, items: i64) -> Vec<u8> {
    let mut b = Bloom::new(Shape::new(capacity, p, scaling).unwrap()).unwrap();
    for i in 0..items {
        let _ = b.insert_hash(hash_i64(i));
    }
    b.to_bytes()
}

fn patched(mut bytes: Vec<u8>, offset: usize, value: &[u8]) -> Vec<u8> {
    bytes[offset..offset + value.len()].copy_from_slice(value);
    bytes
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

fn main() {
    let root = std::env::args().nth(1).unwrap_or_else(|| "corpus".into());
    let root = Path::new(&root);

    // Valid values: exact (empty, a few, fixed), split-block fixed (1 layer), scaling with
    // several layers, a union of split-block values.
    let exact_empty = filled(100, 0.01, true, 0);
    let exact_few = filled(100, 0.01, true, 5);
    let exact_fixed = filled(10, 0.01, false, 10);
    let split_fixed = filled(20, 0.05, false, 20);
    let split_scaling = filled(10, 0.1, true, 80);
    let mut union = Bloom::from_bytes(&filled(10, 0.1, true, 30)).unwrap();
    union
        .union_with(&bloom_core::BloomView::parse(&split_scaling).unwrap())
        .unwrap();
    let union = union.to_bytes();
    let valid = [
        ("exact_empty", &exact_empty),
        ("exact_few", &exact_few),
        ("exact_fixed_full", &exact_fixed),
        ("split_fixed", &split_fixed),
        ("split_scaling_layers", &split_scaling),
        ("split_union", &union),
    ];
    // Malformed: forged sizes (items 2^40, layer count 2^32 - 1, block count 2^40),
    // truncated, trailing byte, bad magic.
    let malformed = [
        (
            "forged_items_2_40",
            patched(exact_few.clone(), 32, &(1u64 << 40).to_le_bytes()),
        ),
        (
            "forged_layers_max",
            patched(split_fixed.clone(), 12, &u32::MAX.to_le_bytes()),
        ),
        (
            "forged_blocks_2_40",
            patched(split_fixed.clone(), 64, &(1u64 << 40).to_le_bytes()),
        ),
        (
            "forged_capacity_max",
            patched(exact_few.clone(), 16, &u64::MAX.to_le_bytes()),
        ),
        ("truncated", exact_few[..exact_few.len() - 3].to_vec()),
        ("trailing", [split_fixed.as_slice(), &[0]].concat()),
        ("bad_magic", patched(exact_empty.clone(), 0, b"XBLM")),
    ];
    for (name, bytes) in valid.iter().map(|(n, b)| (*n, b.as_slice())) {
        write(&root.join("view"), name, bytes);
        write(&root.join("text"), name, to_text(bytes).as_bytes());
    }
    for (name, bytes) in &malformed {
        write(&root.join("view"), name, bytes);
        write(&root.join("text"), name, to_text(bytes).as_bytes());
    }
    write(
        &root.join("text"),
        "upper_case",
        to_text(&exact_few)
            .to_uppercase()
            .replace("\\X", "\\x")
            .as_bytes(),
    );
    write(&root.join("text"), "odd_digits", b"\\x53424c4d0");
    write(&root.join("text"), "bad_digit", b"\\x53424g");
    write(&root.join("text"), "no_prefix", b"53424c4d");

    // Tracking rows: the rows the fold writes for 30 items (exact row), 200 and 2,000 items
    // (layers), each encoded as the generation_rows target reads them.
    for (i, &items) in [30i64, 200, 2000].iter().enumerate() {
        let layout = GenerationLayout::new(0.01 / 6.0, FirstLayer::FillsOneRow).unwrap();
        let mut rows = GenerationRows::default();
        for n in 0..items {
            rows.insert(&layout, hash_i64(n)).unwrap();
        }
        let mut input = vec![0u8, 7];
        for &(layer, segment) in &rows.dirty {
            let bits = rows.row_bytes(layer, segment);
            input.extend_from_slice(&layer.to_le_bytes());
            input.extend_from_slice(&segment.to_le_bytes());
            input.extend_from_slice(&(bits.len() as u16).to_le_bytes());
            input.extend_from_slice(&bits);
        }
        write(
            &root.join("generation_rows"),
            &format!("rows_{items}_items"),
            &input,
        );
        if i == 1 {
            // The same rows with the first one cut short and a segment past the layer.
            let mut bad = input.clone();
            bad[8] = bad[8].wrapping_sub(8);
            write(&root.join("generation_rows"), "rows_bad_length", &bad);
            let mut far = input;
            far[4..8].copy_from_slice(&1000u32.to_le_bytes());
            write(
                &root.join("generation_rows"),
                "rows_segment_past_layer",
                &far,
            );
        }
    }
    eprintln!("seed corpus written under {}", root.display());
}
