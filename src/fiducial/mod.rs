//! Square fiducials: ArUco and AprilTag markers that carry an ID and give a pose.
//!
//! - [`dictionary`]: OpenCV's predefined dictionaries (embedded tables) and its dictionary files.
//! - [`marker_image`]: marker images to print, equal to `cv2.aruco.generateImageMarker`.
//! - [`pose`]: the square-marker pose (IPPE), equal to `cv2.solvePnP(..., SOLVEPNP_IPPE_SQUARE)`.
//!
//! The stage sits above the labeling: it uses frames, geometry and the connected components.

pub mod dictionary;
pub mod marker_image;
pub mod pose;

pub use dictionary::{Dictionary, Identified};
pub use marker_image::{generate_marker, marker_svg};
pub use pose::{estimate_pose, Pose};
