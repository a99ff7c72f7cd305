//! How a detector did on rendered frames against their truth: the share of the markers found
//! with their ID, the IDs reported where no such marker is (false IDs), and the corners' RMS
//! distance to the truth.

use serde::{Deserialize, Serialize};

/// A marker as a detector reports it or a renderer draws it: its ID and its corners in
/// OpenCV's order.
pub type IdCorners = (u32, [[f64; 2]; 4]);

/// The running score over frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MarkerScore {
    /// Markers in the frames (visible ones).
    pub truth: u64,
    /// Detections of a marker with its ID, at its place.
    pub found: u64,
    /// Detections with an ID that is not at their place.
    pub false_ids: u64,
    /// Sum of the squared corner distances of the markers found, and how many corners.
    pub squared_error: f64,
    pub corners: u64,
}

impl MarkerScore {
    /// One frame: `truth` are the markers there, `detected` what the detector reported. A
    /// detection is of a marker when the IDs agree and its centre lies within half the
    /// marker's side of the marker's centre.
    pub fn add(&mut self, truth: &[IdCorners], detected: &[IdCorners]) {
        self.truth += truth.len() as u64;
        for (id, corners) in detected {
            let here = centre(corners);
            let hit = truth.iter().find(|(tid, t)| {
                let c = centre(t);
                let side = (t[0][0] - t[1][0]).hypot(t[0][1] - t[1][1]);
                tid == id && (c[0] - here[0]).hypot(c[1] - here[1]) < 0.5 * side
            });
            match hit {
                Some((_, t)) => {
                    self.found += 1;
                    for (c, t) in corners.iter().zip(t) {
                        self.squared_error += (c[0] - t[0]).powi(2) + (c[1] - t[1]).powi(2);
                        self.corners += 1;
                    }
                }
                None => self.false_ids += 1,
            }
        }
    }

    /// Markers found per marker there (0 when there were none).
    pub fn rate(&self) -> f64 {
        self.found as f64 / self.truth.max(1) as f64
    }

    /// Root mean square corner distance of the markers found, pixels.
    pub fn corner_rms(&self) -> f64 {
        (self.squared_error / self.corners.max(1) as f64).sqrt()
    }
}

fn centre(c: &[[f64; 2]; 4]) -> [f64; 2] {
    [
        c.iter().map(|p| p[0]).sum::<f64>() / 4.0,
        c.iter().map(|p| p[1]).sum::<f64>() / 4.0,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_false_and_rms() {
        let square = |x: f64| [[x, 0.0], [x + 10.0, 0.0], [x + 10.0, 10.0], [x, 10.0]];
        let truth = [(1, square(0.0)), (2, square(50.0))];
        let mut shifted = square(0.0);
        shifted[0][0] += 0.5;
        let mut score = MarkerScore::default();
        // Marker 1 with one corner off by half a pixel, marker 2 missed, a wrong ID at 2's
        // place and an ID nowhere near its marker.
        score.add(
            &truth,
            &[(1, shifted), (3, square(50.0)), (2, square(200.0))],
        );
        assert_eq!((score.truth, score.found, score.false_ids), (2, 1, 2));
        assert_eq!(score.rate(), 0.5);
        assert!((score.corner_rms() - (0.25f64 / 4.0).sqrt()).abs() < 1e-12);
    }
}
