//! World coordinates: the mapping of image positions onto a world plane, from four or more
//! reference points (a homography, `homography`) after an optional lens undistortion
//! (`calibration`); `reference_file` reads and writes the points as a file.
//!
//! The stage sits below the labeling: it only knows points, and the pipeline applies it to
//! each component's position.

pub mod calibration;
pub mod homography;
pub mod reference_file;

use crate::error::{Error, Result};
use calibration::Calibration;
use homography::Homography;

/// One reference point: where it is in the image (pixels) and in the world (world units).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReferencePoint {
    pub image: [f64; 2],
    pub world: [f64; 2],
}

impl std::str::FromStr for ReferencePoint {
    type Err = Error;

    /// `x,y=X,Y`: image pixel (x, y) lies at world (X, Y).
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::Invalid(format!(
                "reference point '{s}': expected x,y=X,Y (image pixel = world position), e.g. 120.5,80=0,0"
            ))
        };
        let (image, world) = s.split_once('=').ok_or_else(bad)?;
        let pair = |t: &str| -> Result<[f64; 2]> {
            let (a, b) = t.split_once(',').ok_or_else(bad)?;
            let num = |v: &str| v.trim().parse::<f64>().ok().filter(|v| v.is_finite());
            Ok([num(a).ok_or_else(bad)?, num(b).ok_or_else(bad)?])
        };
        Ok(ReferencePoint {
            image: pair(image)?,
            world: pair(world)?,
        })
    }
}

impl std::fmt::Display for ReferencePoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{},{}={},{}",
            self.image[0], self.image[1], self.world[0], self.world[1]
        )
    }
}

/// Image → world: undistort (when calibrated), then the homography fitted to the reference
/// points (themselves undistorted first).
#[derive(Clone, Debug, PartialEq)]
pub struct WorldMapping {
    pub points: Vec<ReferencePoint>,
    pub calibration: Option<Calibration>,
    /// The world unit's name for display ("mm", "m", ...); may be empty.
    pub units: String,
    /// The frame size the calibration was made at (its file's `image_width`, `image_height`),
    /// when it says: frames of another size are refused (`check_frame_size`).
    pub image_size: Option<(u32, u32)>,
    homography: Homography,
}

impl WorldMapping {
    /// Fits the mapping; errors name the problem (too few points, points on one line).
    pub fn new(
        points: Vec<ReferencePoint>,
        calibration: Option<Calibration>,
        units: &str,
    ) -> Result<WorldMapping> {
        let image: Vec<[f64; 2]> = points
            .iter()
            .map(|p| match &calibration {
                Some(c) => c.undistort(p.image[0], p.image[1]),
                None => p.image,
            })
            .collect();
        let world: Vec<[f64; 2]> = points.iter().map(|p| p.world).collect();
        // Image positions closer than a pixel (1e-300 apart) fit a mapping that puts every
        // pixel of the frame at no finite place. Too few points are said first (by the fit).
        let spread = image
            .iter()
            .flat_map(|p| image.iter().map(move |q| (p[0] - q[0]).hypot(p[1] - q[1])))
            .fold(0.0, f64::max);
        if image.len() >= 4 && spread < 1.0 {
            return Err(Error::Invalid(format!(
                "the reference points' image positions are {spread:e} pixels apart at most; \
                 place them at least a pixel apart, spread over the plane"
            )));
        }
        let homography = Homography::fit(&image, &world)?;
        Ok(WorldMapping {
            points,
            calibration,
            units: units.trim().to_string(),
            image_size: None,
            homography,
        })
    }

    /// The mapping, made for frames of `size` (None: any).
    pub fn with_image_size(self, size: Option<(u32, u32)>) -> WorldMapping {
        WorldMapping {
            image_size: size,
            ..self
        }
    }

    /// Frames of `width`×`height` can be mapped: the calibration names no size or this one.
    pub fn check_frame_size(&self, width: u32, height: u32) -> Result<()> {
        match self.image_size {
            Some((w, h)) if (w, h) != (width, height) => Err(Error::Invalid(format!(
                "the calibration is of {w}×{h} images but the frames are {width}×{height}; \
                 give the calibration made for this camera at this size"
            ))),
            _ => Ok(()),
        }
    }

    /// Image pixels per world unit around image position (x, y): the square root of the
    /// area a world unit square covers in the image (NaN where the mapping is undefined).
    pub fn pixels_per_unit(&self, x: f64, y: f64) -> f64 {
        let [x0, y0] = self.to_world(x - 0.5, y);
        let [x1, y1] = self.to_world(x + 0.5, y);
        let [x2, y2] = self.to_world(x, y - 0.5);
        let [x3, y3] = self.to_world(x, y + 0.5);
        // The world area of one pixel: |det| of the mapping's Jacobian.
        let world_area = ((x1 - x0) * (y3 - y2) - (y1 - y0) * (x3 - x2)).abs();
        1.0 / world_area.sqrt()
    }

    pub fn homography(&self) -> &Homography {
        &self.homography
    }

    /// The world position of image position (x, y) (pixel-index coordinates); NaN where the
    /// plane's horizon maps to infinity.
    pub fn to_world(&self, x: f64, y: f64) -> [f64; 2] {
        let [u, v] = match &self.calibration {
            Some(c) => c.undistort(x, y),
            None => [x, y],
        };
        self.homography.apply(u, v).unwrap_or([f64::NAN, f64::NAN])
    }

    /// The largest distance between a reference point's world position and where the mapping
    /// puts its image position (0 for exactly four points): how well the points agree.
    pub fn max_residual(&self) -> f64 {
        self.points
            .iter()
            .map(|p| {
                let w = self.to_world(p.image[0], p.image[1]);
                (w[0] - p.world[0]).hypot(w[1] - p.world[1])
            })
            .fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_reference_points() {
        let p: ReferencePoint = "120.5, 80=0,-2.5".parse().unwrap();
        assert_eq!(p.image, [120.5, 80.0]);
        assert_eq!(p.world, [0.0, -2.5]);
        assert_eq!(p.to_string().parse::<ReferencePoint>().unwrap(), p);
        for bad in ["1,2", "1,2=3", "a,b=1,2", "1,2=3,inf", ""] {
            let err = bad.parse::<ReferencePoint>().unwrap_err().to_string();
            assert!(err.contains("expected x,y=X,Y"), "{bad}: {err}");
        }
    }

    #[test]
    fn image_positions_less_than_a_pixel_apart_are_refused() {
        let points = [(0.0, 0.0), (1e-300, 0.0), (1e-300, 1e-300), (0.0, 1e-300)]
            .iter()
            .zip([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
            .map(|(&(x, y), world)| ReferencePoint {
                image: [x, y],
                world,
            })
            .collect();
        let err = WorldMapping::new(points, None, "m")
            .unwrap_err()
            .to_string();
        assert!(err.contains("at least a pixel apart"), "{err}");
    }

    #[test]
    fn frames_of_another_size_than_the_calibration_are_refused() {
        let points = [(0.0, 0.0), (200.0, 0.0), (200.0, 100.0), (0.0, 100.0)]
            .iter()
            .map(|&(x, y)| ReferencePoint {
                image: [x, y],
                world: [x / 4.0, y / 4.0],
            })
            .collect();
        let m = WorldMapping::new(points, None, "mm").unwrap();
        assert!((m.pixels_per_unit(50.0, 50.0) - 4.0).abs() < 1e-9);
        assert!(m.check_frame_size(640, 480).is_ok());
        let sized = m.with_image_size(Some((640, 480)));
        assert!(sized.check_frame_size(640, 480).is_ok());
        let err = sized.check_frame_size(1280, 720).unwrap_err().to_string();
        assert!(err.contains("640×480") && err.contains("1280×720"), "{err}");
    }

    #[test]
    fn maps_a_rectified_square_and_undistorts_first() {
        let calibration = Calibration {
            fx: 500.0,
            fy: 500.0,
            cx: 320.0,
            cy: 240.0,
            dist: [-0.25, 0.07, 0.0005, -0.0003, 0.0],
        };
        // World square 0..100 mm seen through a pure scale + shift (then distorted).
        let ideal = |x: f64, y: f64| [100.0 + 4.0 * x, 50.0 + 4.0 * y];
        let points: Vec<ReferencePoint> = [
            (0.0, 0.0),
            (100.0, 0.0),
            (100.0, 100.0),
            (0.0, 100.0),
            (50.0, 20.0),
        ]
        .iter()
        .map(|&(x, y)| {
            let p = ideal(x, y);
            ReferencePoint {
                image: calibration.distort_pixel(p[0], p[1]),
                world: [x, y],
            }
        })
        .collect();
        let m = WorldMapping::new(points, Some(calibration), " mm ").unwrap();
        assert_eq!(m.units, "mm");
        assert!(m.max_residual() < 1e-6, "{}", m.max_residual());
        let observed = calibration.distort_pixel(ideal(37.0, 81.0)[0], ideal(37.0, 81.0)[1]);
        let w = m.to_world(observed[0], observed[1]);
        assert!(
            (w[0] - 37.0).abs() < 1e-6 && (w[1] - 81.0).abs() < 1e-6,
            "{w:?}"
        );
    }
}
