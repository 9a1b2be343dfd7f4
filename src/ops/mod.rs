pub mod batches;
pub mod compact;
pub mod relayout;
pub mod segments;
