pub mod citus;
pub mod unseen;
