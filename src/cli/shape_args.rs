//! The shape and world-coordinate flags, shared by `analyze` and the window.

use crate::error::{Error, Result};
use crate::geometry::calibration::Calibration;
use crate::geometry::reference_file::ReferenceFile;
use crate::geometry::{ReferencePoint, WorldMapping};
use crate::pipeline::ComponentFilter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(clap::Args, Clone, Debug, Default, PartialEq)]
pub struct ShapeArgs {
    /// Also compute each component's shape descriptors (the mu20 … circularity columns).
    #[arg(long)]
    pub shapes: bool,
    /// Keep components with at least this circularity, 4π·area/perimeter² (disc ≈ 1, square ≈ 0.88).
    #[arg(long, value_name = "C")]
    pub min_circularity: Option<f64>,
    /// Keep components with at most this circularity (0: no limit, as in the config file).
    #[arg(long, value_name = "C")]
    pub max_circularity: Option<f64>,
    /// Keep components with at least this inertia ratio, minor²/major² of the equivalent
    /// ellipse (1 = round, 0 = a line; OpenCV's SimpleBlobDetector).
    #[arg(long, value_name = "R")]
    pub min_inertia_ratio: Option<f64>,
    /// Keep components with at most this inertia ratio (0: no limit, as in the config file).
    #[arg(long, value_name = "R")]
    pub max_inertia_ratio: Option<f64>,
    /// A reference point for world coordinates, image pixel = world position: x,y=X,Y.
    /// Four or more (no three on one line) give the x_world, y_world columns.
    #[arg(long = "world-point", value_name = "x,y=X,Y", value_parser = parse_point)]
    pub world_points: Vec<ReferencePoint>,
    /// Lens calibration applied before the world mapping: OpenCV's camera_matrix and
    /// distortion_coefficients (cv2.FileStorage YAML, or JSON).
    #[arg(long, value_name = "PATH")]
    pub calibration: Option<PathBuf>,
    /// The world unit's name, shown in the window ("mm", "m", ...).
    #[arg(long, value_name = "NAME", default_value = "")]
    pub world_units: String,
    /// Reference points (and calibration, units) from a file: a `[world]` table as in the
    /// config file, as the window's "Save points" writes it. --calibration and --world-units
    /// given too take precedence. With several sources (`analyze A B …`), once per source in
    /// the sources' order for a mapping of each (one file for all applies to every source).
    #[arg(
        long = "world-file",
        value_name = "PATH",
        conflicts_with = "world_points"
    )]
    pub world_files: Vec<PathBuf>,
}

fn parse_point(s: &str) -> std::result::Result<ReferencePoint, String> {
    s.parse().map_err(|e: Error| e.to_string())
}

impl ShapeArgs {
    /// `base` with the limits these flags set (0 is no limit, as in the config file); an error
    /// names a minimum above its maximum or a value out of range.
    pub fn filter(&self, base: ComponentFilter) -> Result<ComponentFilter> {
        let mut f = base;
        let set = |slot: &mut Option<f64>, v: Option<f64>| {
            if let Some(v) = v {
                *slot = (v != 0.0).then_some(v);
            }
        };
        set(&mut f.min_circularity, self.min_circularity);
        set(&mut f.max_circularity, self.max_circularity);
        set(&mut f.min_inertia_ratio, self.min_inertia_ratio);
        set(&mut f.max_inertia_ratio, self.max_inertia_ratio);
        f.validate().map_err(|e| {
            Error::Invalid(format!(
                "{e} (--min-/--max-circularity, --min-/--max-inertia-ratio)"
            ))
        })?;
        Ok(f)
    }

    /// The reference points, calibration and units the flags give, the (first) --world-file
    /// read: the window's one world mapping.
    #[cfg(feature = "gui")]
    pub fn reference(&self) -> Result<ReferenceFile> {
        self.reference_of(self.world_files.first().map(PathBuf::as_path))
    }

    /// The reference points, calibration and units the flags give, `file` (a --world-file)
    /// read.
    fn reference_of(&self, file: Option<&Path>) -> Result<ReferenceFile> {
        let mut out = match file {
            Some(path) => ReferenceFile::load(path)
                .map_err(|e| Error::Invalid(format!("--world-file: {e}")))?,
            None => ReferenceFile::default(),
        };
        out.points.extend(self.world_points.iter().copied());
        if self.calibration.is_some() {
            out.calibration = self.calibration.clone();
        }
        if !self.world_units.trim().is_empty() {
            out.units = self.world_units.trim().to_string();
        }
        Ok(out)
    }

    /// The world mapping the flags describe; None without --world-point or --world-file.
    /// Errors: a calibration file that cannot be read or parsed, too few or degenerate
    /// points, a calibration without points, more than one --world-file. (The window's
    /// check; `analyze` asks `worlds_for`.)
    #[cfg(any(feature = "gui", test))]
    pub fn world(&self) -> Result<Option<Arc<WorldMapping>>> {
        self.world_for(false)
    }

    /// `world`, where a --calibration without points is no error when it serves the marker
    /// poses (`calibration_for_poses`).
    pub fn world_for(&self, calibration_for_poses: bool) -> Result<Option<Arc<WorldMapping>>> {
        match self.world_files.as_slice() {
            [] => self.mapping(None, calibration_for_poses),
            [file] => self.mapping(Some(file), calibration_for_poses),
            files => Err(Error::Invalid(format!(
                "--world-file is given {} times; it takes one here (several only for as many \
                 sources of `analyze`)",
                files.len()
            ))),
        }
    }

    /// The mappings of `analyze`: one per --world-file, in order, when it is given more than
    /// once; else the one mapping of `world_for` (or none).
    pub fn worlds_for(&self, calibration_for_poses: bool) -> Result<Vec<Arc<WorldMapping>>> {
        if self.world_files.len() < 2 {
            return Ok(self.world_for(calibration_for_poses)?.into_iter().collect());
        }
        self.world_files
            .iter()
            .map(|file| {
                self.mapping(Some(file), calibration_for_poses)?
                    .ok_or_else(|| {
                        Error::Invalid(format!(
                            "--world-file {}: gives no world mapping",
                            file.display()
                        ))
                    })
            })
            .collect()
    }

    /// The mapping of `file` (None: of the --world-point flags) and the other flags.
    fn mapping(
        &self,
        file: Option<&Path>,
        calibration_for_poses: bool,
    ) -> Result<Option<Arc<WorldMapping>>> {
        let reference = self.reference_of(file)?;
        let flag = match file {
            Some(path) => format!("--world-file {}", path.display()),
            None => "--world-point".to_string(),
        };
        if reference.points.is_empty() {
            if file.is_some() {
                return Err(Error::Invalid(format!(
                    "{flag}: the file has no reference points; it needs four or more in \
                     world.points (\"x,y=X,Y\")"
                )));
            }
            return match &self.calibration {
                Some(_) if calibration_for_poses => Ok(None),
                Some(path) => Err(Error::Invalid(format!(
                    "--calibration {}: needs four or more --world-point x,y=X,Y to map onto",
                    path.display()
                ))),
                None => Ok(None),
            };
        }
        let (calibration, size) = match reference.calibration.as_deref() {
            Some(path) => {
                let (calibration, size) = Calibration::load_with_size(path)?;
                (Some(calibration), size)
            }
            None => (None, None),
        };
        let mapping = WorldMapping::new(reference.points, calibration, &reference.units)
            .map_err(|e| Error::Invalid(format!("{flag}: {e}")))?;
        Ok(Some(Arc::new(mapping.with_image_size(size))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message of the error `args.filter` gives.
    fn filter_error(args: ShapeArgs) -> String {
        args.filter(ComponentFilter::default())
            .unwrap_err()
            .to_string()
    }

    /// 0 is no limit, on the command line as in the config file.
    #[test]
    fn a_zero_limit_is_no_limit() {
        let args = ShapeArgs {
            max_circularity: Some(0.0),
            max_inertia_ratio: Some(0.0),
            min_circularity: Some(0.0),
            ..ShapeArgs::default()
        };
        let f = args.filter(ComponentFilter::default()).unwrap();
        assert_eq!(f, ComponentFilter::default());
    }

    #[test]
    fn min_above_max_and_bad_points_are_refused() {
        let err = filter_error(ShapeArgs {
            min_circularity: Some(0.9),
            max_circularity: Some(0.5),
            ..ShapeArgs::default()
        });
        assert!(
            err.contains("min circularity 0.9 is above max circularity 0.5"),
            "{err}"
        );
        let err = filter_error(ShapeArgs {
            min_inertia_ratio: Some(1.5),
            ..ShapeArgs::default()
        });
        assert!(
            err.contains("inertia ratio 1.5") && err.contains("0..=1"),
            "{err}"
        );
        let three: Vec<ReferencePoint> = ["0,0=0,0", "1,0=1,0", "0,1=0,1"]
            .iter()
            .map(|p| p.parse().unwrap())
            .collect();
        let args = ShapeArgs {
            world_points: three,
            ..ShapeArgs::default()
        };
        let err = args.world().unwrap_err().to_string();
        assert!(
            err.contains("3 reference points") && err.contains("at least 4"),
            "{err}"
        );
        let args = ShapeArgs {
            calibration: Some("cam.yaml".into()),
            ..ShapeArgs::default()
        };
        let err = args.world().unwrap_err().to_string();
        assert!(err.contains("needs four or more --world-point"), "{err}");
        assert_eq!(ShapeArgs::default().world().unwrap(), None);
    }

    #[test]
    fn a_world_file_gives_the_mapping_and_names_itself_in_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("points.toml");
        let file = ReferenceFile {
            points: ["0,0=0,0", "100,0=10,0", "100,50=10,5", "0,50=0,5"]
                .iter()
                .map(|p| p.parse().unwrap())
                .collect(),
            calibration: None,
            units: "cm".into(),
        };
        std::fs::write(&path, file.to_toml()).unwrap();
        let args = ShapeArgs {
            world_files: vec![path.clone()],
            ..ShapeArgs::default()
        };
        let world = args.world().unwrap().unwrap();
        assert_eq!(world.units, "cm");
        let w = world.to_world(50.0, 25.0);
        assert!(
            (w[0] - 5.0).abs() < 1e-9 && (w[1] - 2.5).abs() < 1e-9,
            "{w:?}"
        );
        let args = ShapeArgs {
            world_units: "mm".into(),
            ..args
        };
        assert_eq!(args.world().unwrap().unwrap().units, "mm");

        std::fs::write(
            &path,
            "[world]\npoints = [\"0,0=0,0\", \"1,1=1,1\", \"2,2=2,2\", \"3,3=3,3\"]\n",
        )
        .unwrap();
        let err = args.world().unwrap_err().to_string();
        assert!(
            err.starts_with("--world-file ") && err.contains("one line"),
            "{err}"
        );
        std::fs::write(&path, "[world]\npoints = []\n").unwrap();
        let err = args.world().unwrap_err().to_string();
        assert!(err.contains("has no reference points"), "{err}");
        let args = ShapeArgs {
            world_files: vec![dir.path().join("missing.toml")],
            ..ShapeArgs::default()
        };
        let err = args.world().unwrap_err().to_string();
        assert!(
            err.starts_with("--world-file: ") && err.contains("missing.toml"),
            "{err}"
        );
    }
}
