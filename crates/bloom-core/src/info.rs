//! `bloom_info`: what a stored value is and how full it is, for people and monitoring.

use crate::layout::Representation;
use crate::sbbf::{block_fpr, block_popcount, BLOCK_BYTES};
use crate::view::BloomView;
use serde::Serialize;

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Info {
    pub format_version: u8,
    /// The family of items it holds ("integer", "text", "uuid"); null before the first item,
    /// and for format version 1 values, which do not record it.
    pub item_family: Option<&'static str>,
    /// "exact" or "split_block".
    pub representation: &'static str,
    pub hash: &'static str,
    pub seed: u32,
    pub capacity: u64,
    pub error_rate: f64,
    pub scaling: bool,
    pub layers: u32,
    pub items: u64,
    /// Encoded length of the value.
    pub bytes: u64,
    /// Set bits over all bits of all layers; for exact, items / capacity.
    pub fill_ratio: f64,
    /// Chance that a fresh item is reported present, from the actual bits: 0 for exact.
    pub estimated_fpr: f64,
    pub layer_details: Vec<LayerInfo>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct LayerInfo {
    pub capacity: u64,
    pub error_rate: f64,
    pub items: u64,
    pub blocks: u64,
    pub bytes: u64,
    pub fill_ratio: f64,
    /// Mean over blocks of the product over lanes of the lane's fill: an item lands in one
    /// block and needs one bit in each lane.
    pub estimated_fpr: f64,
}

pub(crate) fn info_of(view: &BloomView<'_>) -> Info {
    let shape = view.shape();
    let mut set_bits = 0u64;
    let mut all_bits = 0u64;
    let layer_details: Vec<LayerInfo> = view
        .layers()
        .map(|layer| {
            let blocks = layer.blocks.len() as u64;
            let set: u64 = layer
                .blocks
                .iter()
                .map(|b| u64::from(block_popcount(b)))
                .sum();
            let fpr_sum: f64 = layer.blocks.iter().map(block_fpr).sum();
            set_bits += set;
            all_bits += 256 * blocks;
            LayerInfo {
                capacity: layer.header.capacity,
                error_rate: layer.header.error_rate,
                items: layer.header.items,
                blocks,
                bytes: 32 + BLOCK_BYTES as u64 * blocks,
                fill_ratio: set as f64 / (256 * blocks) as f64,
                estimated_fpr: fpr_sum / blocks as f64,
            }
        })
        .collect();
    let (fill_ratio, estimated_fpr) = match view.representation() {
        Representation::Exact => (view.cardinality() as f64 / shape.capacity as f64, 0.0),
        Representation::SplitBlock => (
            set_bits as f64 / all_bits as f64,
            1.0 - layer_details
                .iter()
                .map(|l| 1.0 - l.estimated_fpr)
                .product::<f64>(),
        ),
    };
    Info {
        format_version: view.version(),
        item_family: view.guard().family().map(|f| f.name()),
        representation: view.representation().name(),
        hash: "murmur3_x64_128",
        seed: view.seed(),
        capacity: shape.capacity,
        error_rate: shape.error_rate,
        scaling: shape.scaling,
        layers: view.layer_count(),
        items: view.cardinality(),
        bytes: view.as_bytes().len() as u64,
        fill_ratio,
        estimated_fpr,
        layer_details,
    }
}

#[cfg(test)]
mod tests {
    use crate::{hash_i64, Bloom, BloomView, Shape};

    #[test]
    fn exact_info() {
        let mut bloom = Bloom::new(Shape::new(100, 0.01, true).unwrap()).unwrap();
        for i in 0..5 {
            bloom.insert_hash(hash_i64(i)).unwrap();
        }
        let bytes = bloom.to_bytes();
        let info = BloomView::parse(&bytes).unwrap().info();
        assert_eq!(info.representation, "exact");
        assert_eq!((info.items, info.layers, info.bytes), (5, 0, 40 + 40));
        assert_eq!(info.fill_ratio, 0.05);
        assert_eq!(info.estimated_fpr, 0.0);
        assert!(info.layer_details.is_empty());
        let json = serde_json::to_value(&info).unwrap();
        assert_eq!(json["hash"], "murmur3_x64_128");
        assert_eq!(json["seed"], 0x5EED_B100u32);
    }

    #[test]
    fn split_block_info_tracks_the_target() {
        let mut bloom = Bloom::new(Shape::new(10_000, 0.01, false).unwrap()).unwrap();
        for i in 0..10_000 {
            bloom.insert_hash(hash_i64(i)).unwrap();
        }
        let bytes = bloom.to_bytes();
        let info = BloomView::parse(&bytes).unwrap().info();
        assert_eq!(info.representation, "split_block");
        assert_eq!(info.layers, 1);
        let layer = &info.layer_details[0];
        assert_eq!(layer.bytes + 40, info.bytes);
        // Blocks are sized for about 24 items each, so a lane's 32 bits are about half set.
        assert!(
            layer.fill_ratio > 0.4 && layer.fill_ratio < 0.6,
            "{layer:?}"
        );
        assert!(
            info.estimated_fpr > 0.005 && info.estimated_fpr < 0.012,
            "{info:?}"
        );
        assert!(
            (info.estimated_fpr - layer.estimated_fpr).abs() < 1e-15,
            "one layer: the total is that layer's"
        );
    }
}
