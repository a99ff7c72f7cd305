//! Lens calibration: OpenCV's pinhole model with radial and tangential distortion (camera matrix
//! and k1 k2 p1 p2, optionally k3), read from the YAML that `cv2.FileStorage` writes or a JSON
//! equivalent, and the undistortion of image points (what `cv2.undistortPoints` computes, with
//! the camera matrix as the new projection, so the result stays in pixels).

use crate::error::{Error, Result};
use std::path::Path;

/// Camera matrix and distortion coefficients.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    pub fx: f64,
    pub fy: f64,
    pub cx: f64,
    pub cy: f64,
    /// k1, k2, p1, p2, k3 (k3 = 0 when the file gives four).
    pub dist: [f64; 5],
}

/// Names OpenCV's samples and tools use for the two matrices.
const MATRIX_KEYS: [&str; 4] = ["camera_matrix", "cameraMatrix", "K", "mtx"];
const DIST_KEYS: [&str; 5] = [
    "distortion_coefficients",
    "dist_coeffs",
    "distCoeffs",
    "dist",
    "D",
];

impl Calibration {
    /// Reads a calibration file: JSON when it starts with `{`, OpenCV YAML otherwise.
    pub fn load(path: &Path) -> Result<Calibration> {
        Self::load_with_size(path).map(|(calibration, _)| calibration)
    }

    /// `load`, and the image size the file says it was calibrated at (`image_width` and
    /// `image_height`, as OpenCV's calibration sample writes them), when it says.
    pub fn load_with_size(path: &Path) -> Result<(Calibration, Option<(u32, u32)>)> {
        let text = Error::read_text_input(path).map_err(|e| {
            Error::Invalid(format!(
                "calibration file {}: cannot read it: {e}",
                path.display()
            ))
        })?;
        let bad = |why: String| {
            Error::Invalid(format!(
                "calibration file {}: {why}; expected OpenCV's camera_matrix (3x3) and \
                 distortion_coefficients (k1 k2 p1 p2 [k3]) as cv2.FileStorage writes them, \
                 or the same keys in JSON",
                path.display()
            ))
        };
        let calibration = Self::parse(&text).map_err(bad)?;
        let size = image_size(&text)
            .map_err(|why| Error::Invalid(format!("calibration file {}: {why}", path.display())))?;
        Ok((calibration, size))
    }

    /// Parses the text of a calibration file (JSON or OpenCV YAML).
    pub fn parse(text: &str) -> std::result::Result<Calibration, String> {
        let (matrix, dist) = if text.trim_start().starts_with('{') {
            let v: serde_json::Value =
                serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
            let get = |keys: &[&str]| {
                keys.iter()
                    .find_map(|k| v.get(*k))
                    .ok_or_else(|| format!("no {} key", keys[0]))
                    .and_then(json_numbers)
            };
            (get(&MATRIX_KEYS)?, get(&DIST_KEYS)?)
        } else {
            (
                yaml_matrix(text, &MATRIX_KEYS)?,
                yaml_matrix(text, &DIST_KEYS)?,
            )
        };
        Self::from_values(&matrix, &dist)
    }

    fn from_values(m: &[f64], d: &[f64]) -> std::result::Result<Calibration, String> {
        if m.len() != 9 {
            return Err(format!("the camera matrix has {} values, not 9", m.len()));
        }
        if !(4..=5).contains(&d.len()) && d.len() != 8 && d.len() != 12 && d.len() != 14 {
            return Err(format!(
                "{} distortion coefficients, expected 4 or 5 (k1 k2 p1 p2 [k3])",
                d.len()
            ));
        }
        if d.len() > 5 && d[5..].iter().any(|&v| v != 0.0) {
            return Err(
                "the rational, thin-prism or tilt coefficients (beyond k3) are not supported; \
                 calibrate without CALIB_RATIONAL_MODEL"
                    .into(),
            );
        }
        if m.iter().chain(d).any(|v| !v.is_finite()) {
            return Err("a value is not a finite number".into());
        }
        if m[0] <= 0.0 || m[4] <= 0.0 || m[1] != 0.0 || m[3] != 0.0 || m[6..] != [0.0, 0.0, 1.0] {
            return Err(format!(
                "the camera matrix [{}] is not of the form [fx 0 cx; 0 fy cy; 0 0 1] with fx, fy > 0",
                m.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(" ")
            ));
        }
        let mut dist = [0.0; 5];
        for (o, v) in dist.iter_mut().zip(d) {
            *o = *v;
        }
        Ok(Calibration {
            fx: m[0],
            fy: m[4],
            cx: m[2],
            cy: m[5],
            dist,
        })
    }

    /// Where the lens moves the ideal normalised point (x, y) (OpenCV's distortion model).
    fn distort(&self, x: f64, y: f64) -> (f64, f64) {
        let [k1, k2, p1, p2, k3] = self.dist;
        let r2 = x * x + y * y;
        let radial = 1.0 + r2 * (k1 + r2 * (k2 + r2 * k3));
        (
            x * radial + 2.0 * p1 * x * y + p2 * (r2 + 2.0 * x * x),
            y * radial + p1 * (r2 + 2.0 * y * y) + 2.0 * p2 * x * y,
        )
    }

    /// The ideal (undistorted) pixel position of the observed pixel (u, v): OpenCV's fixed-point
    /// iteration, run until it moves less than 1e-12 (at most 200 steps).
    pub fn undistort(&self, u: f64, v: f64) -> [f64; 2] {
        let (xd, yd) = ((u - self.cx) / self.fx, (v - self.cy) / self.fy);
        let [k1, k2, p1, p2, k3] = self.dist;
        let (mut x, mut y) = (xd, yd);
        for _ in 0..200 {
            let r2 = x * x + y * y;
            let icdist = 1.0 / (1.0 + r2 * (k1 + r2 * (k2 + r2 * k3)));
            let dx = 2.0 * p1 * x * y + p2 * (r2 + 2.0 * x * x);
            let dy = p1 * (r2 + 2.0 * y * y) + 2.0 * p2 * x * y;
            let (nx, ny) = ((xd - dx) * icdist, (yd - dy) * icdist);
            let moved = (nx - x).abs() + (ny - y).abs();
            (x, y) = (nx, ny);
            if moved < 1e-12 || !moved.is_finite() {
                break;
            }
        }
        [x * self.fx + self.cx, y * self.fy + self.cy]
    }

    /// The observed pixel of the ideal pixel (u, v) (the inverse of `undistort`).
    pub fn distort_pixel(&self, u: f64, v: f64) -> [f64; 2] {
        let (x, y) = self.distort((u - self.cx) / self.fx, (v - self.cy) / self.fy);
        [x * self.fx + self.cx, y * self.fy + self.cy]
    }
}

/// The image size a calibration file names (`image_width`, `image_height`: a number each, in
/// YAML or JSON); None when it names neither. One without the other, or a size that is not a
/// whole number of pixels from 1, is an error.
pub fn image_size(text: &str) -> std::result::Result<Option<(u32, u32)>, String> {
    let value = |key: &str| -> Option<String> {
        if text.trim_start().starts_with('{') {
            let v: serde_json::Value = serde_json::from_str(text).ok()?;
            Some(v.get(key)?.to_string())
        } else {
            text.lines().find_map(|line| {
                let rest = line.trim_start().strip_prefix(key)?.trim_start();
                Some(rest.strip_prefix(':')?.trim().to_string())
            })
        }
    };
    let pixels = |key: &str, v: String| {
        v.parse::<u32>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("{key}: '{v}' is not a number of pixels"))
    };
    match (value("image_width"), value("image_height")) {
        (None, None) => Ok(None),
        (Some(w), Some(h)) => Ok(Some((
            pixels("image_width", w)?,
            pixels("image_height", h)?,
        ))),
        _ => Err("it gives one of image_width and image_height without the other".into()),
    }
}

/// The numbers of a JSON matrix: a flat list, a list of rows, or `{"data": [...]}`.
fn json_numbers(v: &serde_json::Value) -> std::result::Result<Vec<f64>, String> {
    let v = v.get("data").unwrap_or(v);
    let mut out = Vec::new();
    let items = v
        .as_array()
        .ok_or_else(|| format!("expected a list of numbers, got {v}"))?;
    for item in items {
        match item {
            serde_json::Value::Array(row) => {
                for x in row {
                    out.push(x.as_f64().ok_or_else(|| format!("not a number: {x}"))?);
                }
            }
            x => out.push(x.as_f64().ok_or_else(|| format!("not a number: {x}"))?),
        }
    }
    Ok(out)
}

/// The `data: [ ... ]` of the first `key: !!opencv-matrix` of `keys` in cv2.FileStorage YAML.
fn yaml_matrix(text: &str, keys: &[&str]) -> std::result::Result<Vec<f64>, String> {
    let start = text
        .lines()
        .scan(0usize, |offset, line| {
            let at = *offset;
            *offset += line.len() + 1;
            Some((at, line))
        })
        .find(|(_, line)| {
            keys.iter().any(|k| {
                line.strip_prefix(k)
                    .is_some_and(|rest| rest.trim_start().starts_with(':'))
            })
        })
        .map(|(at, _)| at)
        .ok_or_else(|| format!("no {} entry", keys[0]))?;
    let rest = &text[start..];
    let data = rest
        .find("data:")
        .ok_or_else(|| format!("{}: no data: [...] list", keys[0]))?;
    let rest = &rest[data + 5..];
    let open = rest
        .find('[')
        .ok_or_else(|| format!("{}: no [ after data:", keys[0]))?;
    let close = rest[open..]
        .find(']')
        .ok_or_else(|| format!("{}: the data list has no closing ]", keys[0]))?;
    rest[open + 1..open + close]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<f64>()
                .map_err(|_| format!("{}: '{s}' is not a number", keys[0]))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "%YAML:1.0\n---\ncamera_matrix: !!opencv-matrix\n   rows: 3\n   cols: 3\n   \
dt: d\n   data: [ 8.0e+02, 0., 6.4e+02, 0., 8.1e+02,\n       3.6e+02, 0., 0., 1. ]\n\
distortion_coefficients: !!opencv-matrix\n   rows: 1\n   cols: 5\n   dt: d\n   data: [ -0.21, 0.05, 1.0e-03, -5.0e-04, 0.01 ]\n";

    #[test]
    fn reads_opencv_yaml_and_json() {
        let c = Calibration::parse(YAML).unwrap();
        assert_eq!((c.fx, c.fy, c.cx, c.cy), (800.0, 810.0, 640.0, 360.0));
        assert_eq!(c.dist, [-0.21, 0.05, 1e-3, -5e-4, 0.01]);
        let json = r#"{"camera_matrix": [[800, 0, 640], [0, 810, 360], [0, 0, 1]],
                       "dist_coeffs": [-0.21, 0.05, 0.001, -0.0005]}"#;
        let j = Calibration::parse(json).unwrap();
        assert_eq!(j.dist, [-0.21, 0.05, 1e-3, -5e-4, 0.0]);
        assert_eq!((j.fx, j.cy), (800.0, 360.0));
    }

    #[test]
    fn reads_the_image_size_the_calibration_was_made_at() {
        assert_eq!(image_size(YAML), Ok(None));
        let yaml = format!("{YAML}image_width: 1280\nimage_height: 720\n");
        assert_eq!(image_size(&yaml), Ok(Some((1280, 720))));
        let json = r#"{"image_width": 640, "image_height": 480, "K": [1, 0, 2, 0, 1, 3, 0, 0, 1]}"#;
        assert_eq!(image_size(json), Ok(Some((640, 480))));
        let err = image_size("image_width: 640\n").unwrap_err();
        assert!(err.contains("without the other"), "{err}");
        let err = image_size("image_width: 64.5\nimage_height: 480\n").unwrap_err();
        assert!(err.contains("'64.5' is not a number of pixels"), "{err}");
    }

    #[test]
    fn undistort_inverts_distort() {
        let c = Calibration::parse(YAML).unwrap();
        for (u, v) in [
            (640.0, 360.0),
            (10.0, 15.0),
            (1270.0, 700.0),
            (300.5, 520.25),
        ] {
            let d = c.distort_pixel(u, v);
            let back = c.undistort(d[0], d[1]);
            assert!(
                (back[0] - u).abs() < 1e-6 && (back[1] - v).abs() < 1e-6,
                "{u},{v}: {back:?}"
            );
        }
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        for (text, expected) in [
            ("{ not json", "not valid JSON"),
            ("{\"camera_matrix\": [1,2,3]}", "no distortion_coefficients"),
            ("camera_matrix: !!opencv-matrix\n data: [1, 0, 2, 0, 1, 3, 0, 0, 1]\n", "no distortion_coefficients"),
            (
                "camera_matrix: !!opencv-matrix\n data: [1, 0, 2, 0, 1, 3, 0, 0]\ndist_coeffs: !!opencv-matrix\n data: [0, 0, 0, 0]\n",
                "8 values, not 9",
            ),
            (
                "K:\n data: [1, 0, 2, 0, 1, 3, 0, 0, 1]\nD:\n data: [0, 0, x, 0]\n",
                "'x' is not a number",
            ),
            (
                "K:\n data: [1, 0, 2, 0, 1, 3, 0, 0, 1]\nD:\n data: [0, 0, 0]\n",
                "3 distortion coefficients",
            ),
            (
                "K:\n data: [-1, 0, 2, 0, 1, 3, 0, 0, 1]\nD:\n data: [0, 0, 0, 0]\n",
                "not of the form",
            ),
            ("hello", "no camera_matrix entry"),
        ] {
            let err = Calibration::parse(text).unwrap_err();
            assert!(err.contains(expected), "{text:?}: {err}");
        }
        let err = Calibration::load(Path::new("/nonexistent/calib.yaml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/nonexistent/calib.yaml") && err.contains("cannot read"),
            "{err}"
        );
    }
}
