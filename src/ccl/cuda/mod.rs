//! CUDA backend of the labeling: the labelers and their stages, on the device of `crate::gpu`.

pub mod analysis;
pub mod bke;
pub mod buffers;
pub mod descriptors;
pub mod detections;
pub mod device;
pub mod dlp;
pub mod downloads;
pub mod flsl;
pub mod frame_graph;
pub mod ha4;
pub mod komura;
pub mod launches;
pub mod mask_input;
pub mod pixel;
pub mod playne;
pub mod results;
pub mod shibata;
pub mod subpixel;
pub mod timing;
