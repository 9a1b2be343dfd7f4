pub mod commit_fold;
pub mod fold_batch;
pub mod fold_trigger;
pub mod user_locks;
