//! The window's settings: defaults, `config/default.toml`, the copy eframe saves at exit, and
//! the startup options, in that order.
//!
//! The saved copy is the same TOML as the config file, so one reader validates both
//! (`knobs`: every key with what it means and how it is read; `write`: the TOML the window
//! saves). A bad value never stops the window: it is reported, and that key keeps the value
//! it had.

mod knobs;
mod sources;
mod write;

use super::tracks::DEFAULT_TAIL_FRAMES;
use crate::ccl::{BackendChoice, Connectivity};
use crate::fiducial::{DetectorParams, Dictionary, MarkerSettings};
use crate::geometry::calibration::Calibration;
use crate::geometry::{ReferencePoint, WorldMapping};
use crate::pipeline::{ComponentFilter, PipelineSettings};
use crate::source::camera_controls::CameraControls;
use crate::threshold::spec::ThresholdSpec;
use std::sync::Arc;

/// The config file shipped with the project; also the built-in defaults (a test checks that
/// it parses cleanly to `UiSettings::default()`).
pub const DEFAULT_CONFIG: &str = include_str!("../../../config/default.toml");

/// What the frame view shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewMode {
    Grey,
    Binary,
    Labels,
}

impl ViewMode {
    pub const ALL: [ViewMode; 3] = [ViewMode::Grey, ViewMode::Binary, ViewMode::Labels];

    pub fn name(self) -> &'static str {
        match self {
            ViewMode::Grey => "grey",
            ViewMode::Binary => "binary",
            ViewMode::Labels => "labels",
        }
    }

    pub fn parse(s: &str) -> Option<ViewMode> {
        ViewMode::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s.trim()))
    }
}

/// Everything the window remembers between runs.
#[derive(Clone, Debug, PartialEq)]
pub struct UiSettings {
    /// A source spec as on the command line, or "auto".
    pub source: String,
    pub threshold: ThresholdSpec,
    pub invert: bool,
    pub connectivity: Connectivity,
    /// Registry name; None = the backend's fastest.
    pub algorithm: Option<String>,
    pub backend: BackendChoice,
    pub filter: ComponentFilter,
    pub view: ViewMode,
    pub overlays: bool,
    pub ids: bool,
    /// Fading trajectory tails behind tracked components.
    pub show_tails: bool,
    /// Frames a tail spans (`TAIL_FRAMES_MIN..=TAIL_FRAMES_MAX`).
    pub tail_frames: u32,
    /// Shape descriptors for the table and the CSV export (always on with a shape limit).
    pub shapes: bool,
    /// The `[world]` section as given: reference points, calibration file ("" = none), units.
    pub world_points: Vec<ReferencePoint>,
    pub calibration: String,
    pub world_units: String,
    /// The mapping fitted to them (`refit_world`); None = pixels only.
    pub world: Option<Arc<WorldMapping>>,
    /// Live result streams (`crate::output::stream` addresses), opened at start.
    pub streams: Vec<String>,
    /// Exposure and gain (also while it streams), resolution, frame rate and pixel format set
    /// on a camera when it is opened.
    pub camera: CameraControls,
    /// Square fiducials: whether they are looked for, in which dictionaries, and their size.
    pub markers: MarkerChoice,
    /// The mask file (PNG or `.toml` region) loaded at start; "" = none.
    pub mask_file: String,
    /// The `[[sources]]` sections: one source each, its own keys (`sources::PER_SOURCE`) over
    /// these settings, which are the defaults of every source. Empty: one source, these.
    pub sources: Vec<UiSettings>,
}

/// The dictionary the window looks for until another is chosen.
pub const DEFAULT_MARKER_DICTIONARY: &str = "DICT_4X4_50";

/// Square fiducials in the window.
#[derive(Clone, Debug, PartialEq)]
pub struct MarkerChoice {
    pub enabled: bool,
    /// OpenCV's predefined dictionaries to look for (kept while detection is off).
    pub dictionaries: Vec<Arc<Dictionary>>,
    /// Side of the markers' black square, in the unit the poses are wanted in; None = no poses.
    pub length: Option<f64>,
}

impl Default for MarkerChoice {
    fn default() -> Self {
        Self {
            enabled: false,
            dictionaries: Dictionary::predefined(DEFAULT_MARKER_DICTIONARY)
                .map(Arc::new)
                .into_iter()
                .collect(),
            length: None,
        }
    }
}

impl MarkerChoice {
    /// What the pipeline is asked for: None while detection is off or no dictionary is chosen.
    /// Poses need the lens `calibration` (the world mapping's) as well as the marker length.
    pub fn settings(&self, calibration: Option<Calibration>) -> Option<Arc<MarkerSettings>> {
        (self.enabled && !self.dictionaries.is_empty()).then(|| {
            Arc::new(MarkerSettings {
                dictionaries: self.dictionaries.clone(),
                params: DetectorParams::default(),
                marker_length: self.length,
                calibration,
            })
        })
    }
}

impl Default for UiSettings {
    fn default() -> Self {
        Self {
            source: "auto".into(),
            threshold: ThresholdSpec::default(),
            invert: false,
            connectivity: Connectivity::Eight,
            algorithm: None,
            backend: BackendChoice::Auto,
            filter: ComponentFilter::default(),
            view: ViewMode::Grey,
            overlays: true,
            ids: true,
            show_tails: true,
            tail_frames: DEFAULT_TAIL_FRAMES,
            shapes: false,
            world_points: Vec::new(),
            calibration: String::new(),
            world_units: String::new(),
            world: None,
            streams: Vec::new(),
            camera: CameraControls::default(),
            markers: MarkerChoice::default(),
            mask_file: String::new(),
            sources: Vec::new(),
        }
    }
}

impl UiSettings {
    /// The pipeline's share of the settings (the label and mask downloads follow the view).
    pub fn pipeline_settings(&self) -> PipelineSettings {
        PipelineSettings {
            threshold: self.threshold,
            invert: self.invert,
            connectivity: self.connectivity,
            algorithm: self.algorithm.clone(),
            backend: self.backend,
            filter: self.filter,
            want_labels: self.view == ViewMode::Labels,
            want_binary: self.view == ViewMode::Binary,
            subpixel: true,
            shapes: self.shapes,
            world: self.world.clone(),
            mask: None,
            markers: self
                .markers
                .settings(self.world.as_ref().and_then(|w| w.calibration)),
        }
    }

    /// Fits `world` to `world_points` and `calibration` (None without points). On a problem
    /// (a calibration file that does not parse, too few or degenerate points) `world` is None
    /// and the message says why.
    pub fn refit_world(&mut self) -> Result<(), String> {
        self.world = None;
        if self.world_points.is_empty() {
            return match self.calibration.is_empty() {
                true => Ok(()),
                false => Err(format!(
                    "world: calibration {} is unused without reference points (4 or more)",
                    self.calibration
                )),
            };
        }
        let calibration = match self.calibration.as_str() {
            "" => None,
            path => Some(Calibration::load(std::path::Path::new(path)).map_err(|e| e.to_string())?),
        };
        let mapping = WorldMapping::new(self.world_points.clone(), calibration, &self.world_units)
            .map_err(|e| format!("world: {e}"))?;
        self.world = Some(Arc::new(mapping));
        Ok(())
    }
}

pub fn parse_backend(s: &str) -> Option<BackendChoice> {
    match s.trim().to_ascii_lowercase().as_str() {
        "auto" => Some(BackendChoice::Auto),
        "cpu" => Some(BackendChoice::Cpu),
        "cuda" => Some(BackendChoice::Cuda),
        _ => None,
    }
}

pub fn backend_name(b: BackendChoice) -> &'static str {
    match b {
        BackendChoice::Auto => "auto",
        BackendChoice::Cpu => "cpu",
        BackendChoice::Cuda => "cuda",
    }
}

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
