//! markerscope: real-time marker detection by connected-component labeling and analysis.
//!
//! Data flows one way: source → threshold → labeling/analysis (CPU or CUDA) → consumers.

pub mod analyze;
pub mod bench;
pub mod ccl;
pub mod devices;
pub mod error;
pub mod export;
pub mod image;
pub mod pipeline;
pub mod random_image;
pub mod render;
pub mod selftest;
pub mod shapes;
pub mod source;
pub mod stats;
pub mod subpixel;
pub mod threshold;
pub mod track;
#[cfg(feature = "gui")]
pub mod ui;

pub use error::{Error, Result};
