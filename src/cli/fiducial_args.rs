//! The square-fiducial flags (`--markers`, `--marker-length`), for `analyze` and the window.

use crate::error::{Error, Result};
use crate::fiducial::MarkerSettings;
use std::path::Path;
use std::sync::Arc;

#[derive(clap::Args, Clone, Debug, Default, PartialEq)]
pub struct FiducialArgs {
    /// Find square fiducials of these dictionaries in every frame (comma-separated or
    /// repeated): OpenCV's names (DICT_4X4_50 … DICT_7X7_1000, DICT_ARUCO_ORIGINAL,
    /// DICT_APRILTAG_16h5/25h9/36h10/36h11, DICT_ARUCO_MIP_36h12) or an OpenCV dictionary
    /// file (.yml, .yaml, .json). The rows are then one per marker per frame.
    #[arg(long, value_name = "DICT[,DICT…]")]
    pub markers: Vec<String>,
    /// Side of the markers' black square (any unit: the poses come in it): each marker's
    /// rotation and translation (rvec, tvec columns); needs --markers and --calibration.
    #[arg(long, value_name = "L")]
    pub marker_length: Option<f64>,
}

impl FiducialArgs {
    /// The marker settings the flags ask for (None without --markers), with `calibration`
    /// (`--calibration`) for the poses. Errors before any frame: --marker-length without
    /// --markers or without a calibration, an unknown dictionary (with the list of names), a
    /// damaged dictionary file.
    pub fn settings(&self, calibration: Option<&Path>) -> Result<Option<Arc<MarkerSettings>>> {
        if self.markers.is_empty() {
            return match self.marker_length {
                Some(_) => Err(Error::Invalid(
                    "--marker-length needs --markers DICT (the markers whose poses are wanted)"
                        .into(),
                )),
                None => Ok(None),
            };
        }
        let settings = crate::analysis::marker_settings(
            &self.markers,
            self.marker_length,
            calibration.filter(|_| self.marker_length.is_some()),
        )?;
        Ok(Some(Arc::new(settings)))
    }

    /// Whether --calibration serves the marker poses (then it needs no world points).
    pub fn uses_calibration(&self) -> bool {
        !self.markers.is_empty() && self.marker_length.is_some()
    }
}
