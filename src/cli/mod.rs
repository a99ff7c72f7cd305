//! The subcommands that are more than a call into one stage: benchmarks and the correctness
//! self-test.

pub mod bench;
pub mod selftest;
pub mod shape_args;
