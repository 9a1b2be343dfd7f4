pub mod aggregates;
pub mod candidates;
pub mod functions;
pub mod type_io;
