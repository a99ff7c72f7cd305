//! What the product carries of a marker from frame to frame: the detection, its dictionary's
//! name, its track (the marker's identity over time) and, with a calibration and a marker
//! length, its pose; and the settings that turn marker detection on in a pipeline.

use super::detect::Marker;
use super::dictionary::Dictionary;
use super::params::DetectorParams;
use super::pose::Pose;
use std::sync::Arc;

/// One marker seen in one frame.
#[derive(Clone, Debug, PartialEq)]
pub struct MarkerObservation {
    pub marker: Marker,
    /// The name of the marker's dictionary (`Dictionary::name`).
    pub dictionary: Arc<str>,
    /// The marker's track: one per (dictionary, ID), kept through occlusion.
    pub track: u64,
    /// Rotation and translation in the camera frame, in the unit of the marker length; None
    /// without a calibration and a marker length.
    pub pose: Option<Pose>,
    /// The marker's centre in world coordinates; None without a world mapping.
    pub world: Option<[f64; 2]>,
}

/// Marker detection in a pipeline: which dictionaries, the detector's settings, and the side
/// length of the printed markers when poses are wanted.
#[derive(Clone, Debug, PartialEq)]
pub struct MarkerSettings {
    pub dictionaries: Vec<Arc<Dictionary>>,
    pub params: DetectorParams,
    /// Side of the markers' black square, in the unit the poses are wanted in.
    pub marker_length: Option<f64>,
}
