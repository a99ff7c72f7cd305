//! The subcommands that are more than a call into one stage: file analysis, benchmarks and the
//! correctness self-test.

pub mod analyze;
pub mod bench;
pub mod interrupt;
pub mod selftest;
pub mod shape_args;
