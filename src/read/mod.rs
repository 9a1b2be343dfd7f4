pub mod unseen;
