pub mod batches;
pub mod compact;
pub mod maintenance_lock;
pub mod maintenance_worker;
pub mod relayout;
pub mod segments;
