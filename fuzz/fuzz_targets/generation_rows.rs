//! Stored filter-table rows (layer, segment, bits) into the tracking engine's row checks:
//! the read path (`WindowView`, behind seen_bloom.unseen / has_seen, compacted rows of layer
//! -2 included: seed `rows_compacted`) and the write path
//! (`GenerationRows`, behind the trigger's fold), then adds and probes on what loaded.
//!
//! Input: byte 0 picks a layout; byte 1 the number of hashes to add; then records of
//! `layer: i16 LE, segment: u32 LE, len: u16 LE, bits[len]` until the input runs out.
#![no_main]

use bloom_core::{hash_bytes, FirstLayer, GenerationLayout, GenerationRows, WindowView};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

/// Per-generation error budgets: the default (1% over 6 generations), 0.1%, a coarse one; each
/// in every layout (byte 0 picks one of the six).
const RATES: [f64; 3] = [0.01 / 6.0, 0.001 / 6.0, 0.5];

fn layouts() -> &'static [GenerationLayout] {
    static L: OnceLock<Vec<GenerationLayout>> = OnceLock::new();
    L.get_or_init(|| {
        FirstLayer::ALL
            .iter()
            .flat_map(|&first| RATES.iter().map(move |&p| (p, first)))
            .map(|(p, first)| GenerationLayout::new(p, first).unwrap())
            .collect()
    })
}

struct Record<'a> {
    layer: i16,
    segment: u32,
    bits: &'a [u8],
}

fn records(mut rest: &[u8]) -> Vec<Record<'_>> {
    let mut out = Vec::new();
    while rest.len() >= 8 {
        let layer = i16::from_le_bytes([rest[0], rest[1]]);
        let segment = u32::from_le_bytes([rest[2], rest[3], rest[4], rest[5]]);
        let len = usize::from(u16::from_le_bytes([rest[6], rest[7]]));
        rest = &rest[8..];
        let bits = &rest[..len.min(rest.len())];
        rest = &rest[bits.len()..];
        out.push(Record {
            layer,
            segment,
            bits,
        });
    }
    out
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let layout = &layouts()[usize::from(data[0]) % layouts().len()];
    let adds = usize::from(data[1] % 64);
    // Rows of any layer, the highest included: the read and write paths are sparse by
    // segment, so a row costs its own bytes, never its whole layer's (docs/SECURITY.md).
    let rows: Vec<Record> = records(&data[2..]);

    // Read path: several generations' rows, malformed ones refused, then probes.
    let mut window = WindowView::default();
    let mut accepted = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        if window
            .add_row(layout, (i % 3) as i32, r.layer, r.segment, r.bits)
            .is_ok()
        {
            accepted.push(r);
        }
    }
    window.seal(layout);
    for r in &accepted {
        if r.layer == bloom_core::EXACT_LAYER {
            for c in r.bits.chunks_exact(8) {
                let h = u64::from_le_bytes(c.try_into().unwrap());
                assert!(window.contains(layout, h), "stored exact hash not found");
            }
        }
    }
    for i in 0..16u8 {
        let _ = window.contains(layout, hash_bytes(&[i, data[1]]));
    }

    // Write path: load the rows of one generation (the fold reads rows by a unique key, so
    // later duplicates replace earlier ones), add items, and check they are all found and
    // every dirty row is one the read path accepts.
    let mut rows_state = GenerationRows::default();
    for r in &rows {
        if rows_state.load(layout, r.layer, r.segment, r.bits).is_err() {
            return;
        }
    }
    let added: Vec<u64> = (0..adds).map(|i| hash_bytes(&[i as u8, data[0]])).collect();
    let needed = GenerationRows::needed(layout, rows_state.top, &added);
    assert!(!needed.is_empty() || added.is_empty());
    for &h in &added {
        if rows_state.insert(layout, h).is_err() {
            return;
        }
        assert!(rows_state.contains(layout, h), "added item not found");
    }
    let written: Vec<(i16, u32, Vec<u8>)> = rows_state
        .dirty
        .iter()
        .map(|&(layer, segment)| (layer, segment, rows_state.row_bytes(layer, segment)))
        .collect();
    let mut reread = WindowView::default();
    for (layer, segment, bytes) in &written {
        reread
            .add_row(layout, 0, *layer, *segment, bytes)
            .expect("a row the fold writes must be readable");
    }
});
