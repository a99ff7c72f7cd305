//! The detector's settings, with OpenCV's defaults where the method is the same.

use crate::error::{Error, Result};

/// The detector's settings. The defaults follow OpenCV's `aruco::DetectorParameters` where the
/// method is the same (threshold windows, size limits, error rates).
#[derive(Clone, Debug, PartialEq)]
pub struct DetectorParams {
    /// Threshold windows (odd pixel sizes): from `window_min` to `window_max` by `window_step`.
    pub window_min: u32,
    pub window_max: u32,
    pub window_step: u32,
    /// Dark = grey ≤ the window's mean − this.
    pub threshold_constant: f64,
    /// A candidate's outline, in pixels, between these shares of the image's longer side.
    pub min_perimeter_rate: f64,
    pub max_perimeter_rate: f64,
    /// Polygon fit tolerance, as a share of the outline's length.
    pub polygon_accuracy_rate: f64,
    /// Shortest side, as a share of the outline's length.
    pub min_corner_distance_rate: f64,
    /// Corners at least this many pixels inside the image.
    pub min_distance_to_border: u32,
    /// Share of each cell's side left out at its edges when the cell is sampled.
    pub cell_margin: f64,
    /// Cells whose grey values spread less than this are no marker.
    pub min_cell_std_dev: f64,
    /// Border cells that may read white, as a share of the marker's inner cells.
    pub max_border_error_rate: f64,
    /// Bits corrected, as a share of the dictionary's maximum correction bits.
    pub error_correction_rate: f64,
    /// Sub-pixel corners from edge-line fits; a candidate whose sides show no clean, straight
    /// dark-to-light edge is rejected. Off: the corners of the outline's polygon.
    pub refine_corners: bool,
}

impl Default for DetectorParams {
    fn default() -> Self {
        Self {
            window_min: 3,
            window_max: 23,
            window_step: 10,
            threshold_constant: 7.0,
            min_perimeter_rate: 0.03,
            max_perimeter_rate: 4.0,
            polygon_accuracy_rate: 0.03,
            min_corner_distance_rate: 0.05,
            min_distance_to_border: 3,
            cell_margin: 0.18,
            min_cell_std_dev: 5.0,
            max_border_error_rate: 0.35,
            error_correction_rate: 0.6,
            refine_corners: true,
        }
    }
}

impl DetectorParams {
    /// The threshold windows, smallest first.
    pub fn windows(&self) -> Result<Vec<u32>> {
        let (lo, hi, step) = (self.window_min, self.window_max, self.window_step);
        if lo < 3 || lo % 2 == 0 || hi < lo || step == 0 || step % 2 == 1 {
            return Err(Error::Invalid(format!(
                "marker threshold windows {lo} to {hi} by {step}: give odd sizes from 3 up and an \
                 even step above 0"
            )));
        }
        Ok((lo..=hi).step_by(step as usize).collect())
    }
}
