//! markerscope: real-time marker detection by connected-component labeling and analysis.
//!
//! Data flows one way: source → capture/threshold → labeling and analysis (CPU or CUDA) →
//! filter/track → consumers. The modules are the stages, each using only the ones listed
//! above it:
//!
//! - [`error`]: the one error type.
//! - [`tuning`]: the `MARKERSCOPE_*` environment variables, read once into plain data.
//! - [`frame`]: image types, drawing, the papers' random images.
//! - `gpu`: the CUDA device, kernel files, staging and launch helpers (feature `cuda`).
//! - [`threshold`]: grey → mask on the host and the device, the levels, the packing.
//! - [`ccl`]: labeling and per-component statistics (CPU and CUDA), sub-pixel centroids.
//! - [`fiducial`]: square markers (ArUco, AprilTag): dictionaries, detection, pose.
//! - [`source`]: cameras, video files, images, the synthetic demo.
//! - [`track`]: the multi-object tracker.
//! - [`pipeline`]: the capture thread and the engine worker that join the stages for a stream.
//! - [`output`]: result files.
//! - [`analysis`]: a whole source analysed into result files (`markerscope analyze`, the Python package).
//!
//! The `markerscope` binary adds its subcommands (`cli`: `bench`, `selftest`) and the window
//! (`ui`) on top; they are not part of the library.

pub mod analysis;
pub mod ccl;
pub mod error;
pub mod fiducial;
pub mod frame;
pub mod geometry;
#[cfg(feature = "cuda")]
pub mod gpu;
pub mod output;
pub mod pipeline;
pub mod source;
pub mod threshold;
pub mod track;
pub mod tuning;

pub use error::{Error, Result};
