//! markerscope: real-time marker detection by connected-component labeling and analysis.
//!
//! Data flows one way: source → threshold → labeling/analysis (CPU or CUDA) → consumers.

pub mod bench;
pub mod ccl;
pub mod error;
pub mod image;
pub mod random_image;
pub mod selftest;
pub mod shapes;
pub mod stats;

pub use error::{Error, Result};
