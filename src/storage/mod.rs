pub mod filter_reader;
pub mod filter_table;
pub mod filter_writer;
pub mod heap_prefetch;
pub mod in_place;
pub mod overwrite;
pub mod page;
pub mod unlocked_write;
