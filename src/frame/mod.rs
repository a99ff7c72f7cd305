//! Frames: image types, drawing and the papers' random images. Everything else
//! builds on these.

pub mod image;
pub mod jpeg;
pub mod mask;
pub mod page_lock;
pub mod random_image;
pub mod render;
