//! Frames: image types, drawing, the papers' random images and a disc-grid test frame; what
//! the host CPU can do for the per-pixel loops.
//! Everything else builds on these.

pub mod cpu;
pub mod disc_grid;
pub mod grey;
pub mod image;
pub mod jpeg;
pub mod mask;
pub mod page_lock;
pub mod random_image;
pub mod render;
