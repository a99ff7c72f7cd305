//! Square fiducials: ArUco and AprilTag markers that carry an ID and give a pose.
//!
//! - [`dictionary`]: OpenCV's predefined dictionaries (embedded tables) and its dictionary files.
//! - [`marker_image`]: marker images to print, equal to `cv2.aruco.generateImageMarker`;
//!   [`marker_sheet`]: sheets of them with their IDs and the scale (`glyphs`: the PNG's font).
//! - [`mod@detect`]: detection on the CPU (the reference for the GPU detector): [`candidates`]
//!   (local threshold, components, outlines, quads), [`corners`] (sub-pixel corners from edge
//!   lines), [`decode`] (cells, Otsu, border check, code), with the settings in [`params`].
//! - `gpu` (with the `cuda` feature): the same detection on the GPU, checked against the CPU's
//!   by `markerscope selftest`; [`backend`]: the one the product calls, on either.
//! - [`pose`]: the square-marker pose (IPPE), equal to `cv2.solvePnP(..., SOLVEPNP_IPPE_SQUARE)`.
//! - [`observation`]: a marker as the product carries it (track, pose, world position) and the
//!   settings that turn detection on in a pipeline.
//! - [`render`]: test frames with known truth (markers under perspective, blur, noise, uneven
//!   light); [`score`]: a detector's rate, false IDs and corner error against that truth.
//!
//! The stage sits above the labeling: it uses frames, geometry and the connected components.
//! docs/algorithms.md ("Square fiducials") describes the method and its sources.

pub mod backend;
pub mod candidates;
pub mod corners;
pub mod decode;
pub mod detect;
pub mod dictionary;
mod glyphs;
#[cfg(feature = "cuda")]
pub mod gpu;
pub mod marker_image;
pub mod marker_sheet;
pub mod observation;
pub mod params;
pub mod pose;
pub mod render;
pub mod score;

pub use backend::MarkerDetector;
pub use detect::{detect, Detections, Detector, Marker};
pub use dictionary::{Dictionary, Identified};
pub use marker_image::{generate_marker, marker_svg};
pub use observation::{marker_track, MarkerObservation, MarkerSettings};
pub use params::DetectorParams;
pub use pose::{estimate_pose, Pose};

#[cfg(test)]
mod tests {
    use super::render::{render_scene, SceneSpec};
    use super::*;

    /// Every rendered marker found with its ID and corners near the truth, nothing else.
    #[test]
    fn finds_rendered_markers_with_their_ids_and_corners() {
        for (name, seed) in [
            ("DICT_4X4_50", 3),
            ("DICT_APRILTAG_36h11", 4),
            ("DICT_7X7_1000", 5),
        ] {
            let dict = Dictionary::predefined(name).unwrap();
            let spec = SceneSpec {
                width: 960,
                height: 540,
                markers: 8,
                min_side: 50.0,
                max_side: 110.0,
                seed,
                ..SceneSpec::default()
            };
            let scene = render_scene(&dict, &spec).unwrap();
            let found = detect(&scene.image, &DetectorParams::default(), &[&dict]).unwrap();
            assert_eq!(
                found.markers.len(),
                scene.markers.len(),
                "{name}: {found:?}"
            );
            for truth in &scene.markers {
                let m = found
                    .markers
                    .iter()
                    .find(|m| m.id == truth.id)
                    .unwrap_or_else(|| panic!("{name}: marker {} missed", truth.id));
                for k in 0..4 {
                    let c = m.corner(k);
                    let d = (c[0] - truth.corners[k][0]).hypot(c[1] - truth.corners[k][1]);
                    assert!(
                        d < 0.5,
                        "{name} marker {} corner {k}: {c:?} vs {:?}",
                        m.id,
                        truth.corners[k]
                    );
                }
            }
        }
    }
}
