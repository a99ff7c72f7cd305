//! The test suite: one crate, a module per subject, so the library is linked into one test
//! binary instead of one per file. `cargo test --profile ci --test tests layering` runs a
//! module; `.ci/test` runs them all (the window's tests inside a virtual X display).

mod util;

mod bench;
mod binarize;
mod cli;
mod doc_links;
mod faults;
mod fiducial;
mod fuzz_inputs;
mod layering;
mod lsl_vs_oracle;
mod markers;
mod mutation;
mod opencv_compare;
mod outputs;
mod pipeline;
mod rows;
mod sources;
mod track_demo;
mod world;

// Peak memory read from /proc.
#[cfg(target_os = "linux")]
mod memory;
// Video decoding with FFmpeg's libraries.
#[cfg(feature = "video")]
mod video_segments;

// The window: the real binary on an X display (driven headless, it is `ui`'s unit tests).
#[cfg(feature = "gui")]
mod gui_e2e;
