pub mod commit_fold;
pub mod fold_batch;
pub mod fold_trigger;
pub mod group;
pub mod groups;
pub mod user_locks;
pub mod xact;
