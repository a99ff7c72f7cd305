//! What the product carries of a marker from frame to frame: the detection, its dictionary's
//! name, its track (the marker's identity over time) and, with a calibration and a marker
//! length, its pose; and the settings that turn marker detection on in a pipeline.
//!
//! A marker's track is its identity, not a tracker's guess: the same number for the same
//! (dictionary, ID) in every frame, through any occlusion, and never two numbers for one ID.
//! Marker tracks are numbered apart from the component tracker's tracks (which count up from
//! 1): the marker with ID `id` of the k-th dictionary of `MarkerSettings::dictionaries`
//! (from 0) is track `MARKER_TRACKS + k · DICTIONARY_TRACKS + id` (`marker_track`), so
//! 1000000000000007 is marker 7 of the first dictionary. The numbers stay below 2⁵³, exact
//! in JSON.

use super::detect::Marker;
use super::dictionary::Dictionary;
use super::params::DetectorParams;
use super::pose::Pose;
use crate::error::{Error, Result};
use crate::geometry::calibration::Calibration;
use std::sync::Arc;

/// The first marker track number: far above any component track (at ten million new tracks a
/// second the component tracker takes three years to reach it).
pub const MARKER_TRACKS: u64 = 1_000_000_000_000_000;
/// Track numbers each dictionary spans (more than any dictionary's markers).
pub const DICTIONARY_TRACKS: u64 = 1_000_000;

/// The track of marker `id` of the dictionary at `dictionary` in the settings' list.
pub fn marker_track(dictionary: usize, id: u32) -> u64 {
    MARKER_TRACKS + dictionary as u64 * DICTIONARY_TRACKS + id as u64
}

/// Whether `track` is a marker's track (`marker_track`) rather than a component's.
pub fn is_marker_track(track: u64) -> bool {
    track >= MARKER_TRACKS
}

/// One marker seen in one frame.
#[derive(Clone, Debug, PartialEq)]
pub struct MarkerObservation {
    pub marker: Marker,
    /// The name of the marker's dictionary (`Dictionary::name`).
    pub dictionary: Arc<str>,
    /// The marker's track: one per (dictionary, ID), kept through occlusion (`marker_track`).
    pub track: u64,
    /// Rotation and translation in the camera frame, in the unit of the marker length; None
    /// without a calibration and a marker length.
    pub pose: Option<Pose>,
    /// The marker's centre in world coordinates; None without a world mapping.
    pub world: Option<[f64; 2]>,
}

/// Marker detection in a pipeline: which dictionaries, the detector's settings, and the side
/// length of the printed markers and the lens calibration when poses are wanted.
#[derive(Clone, Debug, PartialEq)]
pub struct MarkerSettings {
    pub dictionaries: Vec<Arc<Dictionary>>,
    pub params: DetectorParams,
    /// Side of the markers' black square, in the unit the poses are wanted in.
    pub marker_length: Option<f64>,
    /// The camera's calibration (OpenCV's camera matrix and distortion), needed for poses.
    pub calibration: Option<Calibration>,
}

impl MarkerSettings {
    /// The markers of `dictionaries` with the detector's defaults, no pose.
    pub fn new(dictionaries: Vec<Arc<Dictionary>>) -> Self {
        Self {
            dictionaries,
            params: DetectorParams::default(),
            marker_length: None,
            calibration: None,
        }
    }

    /// Whether a pose is wanted for every marker (a marker length and a calibration).
    pub fn wants_pose(&self) -> bool {
        self.marker_length.is_some() && self.calibration.is_some()
    }

    /// What is wrong with the settings, before any frame: no dictionary, the same one twice, a
    /// marker length that is not a positive number or comes without a calibration, bad
    /// threshold windows.
    pub fn validate(&self) -> Result<()> {
        if self.dictionaries.is_empty() {
            return Err(Error::Invalid("give at least one marker dictionary".into()));
        }
        for (k, d) in self.dictionaries.iter().enumerate() {
            if self.dictionaries[..k].iter().any(|e| e.name() == d.name()) {
                return Err(Error::Invalid(format!(
                    "marker dictionary {} is given twice",
                    d.name()
                )));
            }
            if d.len() as u64 > DICTIONARY_TRACKS {
                return Err(Error::Invalid(format!(
                    "marker dictionary {} has {} markers; at most {DICTIONARY_TRACKS} are supported",
                    d.name(),
                    d.len()
                )));
            }
        }
        if let Some(length) = self.marker_length {
            if !(length.is_finite() && length > 0.0) {
                return Err(Error::Invalid(format!(
                    "marker length {length}: give a positive length"
                )));
            }
            if self.calibration.is_none() {
                return Err(Error::Invalid(
                    "a marker length gives poses only with the camera's calibration \
                     (--calibration FILE)"
                        .into(),
                ));
            }
        }
        self.params.windows().map(|_| ())
    }
}
