//! The pure engine of seen_bloom: item hashing, the exact and split-block representations,
//! scaling, and the versioned byte format of docs/FORMAT.md. No PostgreSQL types here; the
//! pgrx glue hashes SQL values with [`hash_i64`]/[`hash_bytes`], probes stored bytes through
//! [`BloomView`] and builds new values with [`Bloom`].
//!
//! Safe Rust throughout, but for the SIMD and BMI2 kernels (hash.rs, window.rs,
//! exact_set.rs, xor_set.rs, static_set.rs), the xor filters' unchecked slot reads
//! (xor_set.rs), the answer flags' 8-byte writes (flags.rs) and the popcnt count (sbbf.rs),
//! each allowed by name.
#![deny(unsafe_code)]

mod bit_record;
mod compacted;
mod distinct;
mod error;
mod exact_set;
mod family;
mod filter;
mod flags;
mod generation;
mod hash;
mod info;
mod layers;
mod layout;
mod sbbf;
mod shape;
mod sizing;
mod static_set;
mod text;
mod view;
mod window;
mod xor_set;

pub use bit_record::{
    apply_fragments, for_each_fragment, push_fragment, BadFragment, Fragment, NO_BIT,
};
pub use compacted::{
    build_compacted, build_compacted_blocks, build_compacted_elias_fano, build_compacted_static,
    compacted_header, part_of, Compacted, CompactedHeader, COMPACTED_HEADER_BYTES, COMPACTED_LAYER,
    STATIC_ROW_BYTES,
};
pub use distinct::DistinctHashes;
pub use error::Error;
pub use family::{ItemFamily, ItemGuard};
pub use filter::{sort_for_insertion, Bloom};
pub use generation::{
    ChangedBlocks, FirstLayer, GenerationLayout, GenerationRows, EXACT_LAYER, MAX_LAYERS,
    MOVED_GENERATION, MOVED_LAYER, SEGMENT_BLOCKS,
};
pub use hash::{
    hash_bytes, hash_i64, hash_i64_each, hash_i64_extend, murmur3_x64_128, HASH_MURMUR3_X64_128,
    SEED,
};
pub use info::{Info, LayerInfo};
pub use layout::Representation;
pub use sbbf::{
    block_contains, block_index, block_insert, blocks_fill, blocks_fpr, layer_hash, BLOCK_BYTES,
};
pub use shape::{Shape, MAX_CAPACITY, MAX_LAYER_BYTES, MAX_VALUE_BYTES};
pub use sizing::{blocks_for, layer_bytes, layer_shape, modelled_fpr};
pub use static_set::{build_static, static_bits_for, StaticSet, STATIC_HEADER_BYTES};
pub use text::{from_text, to_text};
pub use view::BloomView;
pub use window::WindowView;
