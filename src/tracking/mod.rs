pub mod caches;
pub mod generations;
pub mod item_hash;
pub mod layout;
pub mod predicate;
pub mod tracked_config;
