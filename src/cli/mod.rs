//! The subcommands that are more than a call into one stage: benchmarks, the correctness
//! self-test, and markers to print.

pub mod bench;
pub mod fiducial_args;
pub mod marker;
pub mod selftest;
pub mod shape_args;
