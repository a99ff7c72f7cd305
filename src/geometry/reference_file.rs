//! A reference-point file: the `[world]` section of the config file on its own (points,
//! calibration, units), as the window saves it. `--world-file` reads it, and so does the
//! window's `--config`, since it is a config file with one section.

use super::ReferencePoint;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReferenceFile {
    pub points: Vec<ReferencePoint>,
    /// The lens calibration file, as written ("" in the file = none).
    pub calibration: Option<PathBuf>,
    pub units: String,
}

impl ReferenceFile {
    pub fn load(path: &Path) -> Result<ReferenceFile> {
        let text = Error::read_text_input(path).map_err(|e| Error::io(path, e))?;
        ReferenceFile::parse(&text)
            .map_err(|why| Error::Invalid(format!("{}: {why}", path.display())))
    }

    /// Reads the `[world]` table; other tables are left to the window's config reader.
    pub fn parse(text: &str) -> std::result::Result<ReferenceFile, String> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let why = e.to_string();
            format!(
                "not valid TOML ({})",
                why.lines().next().unwrap_or_default()
            )
        })?;
        let world = table
            .get("world")
            .and_then(|w| w.as_table())
            .ok_or("no [world] table (points = [\"x,y=X,Y\", ...], calibration, units)")?;
        let string = |key: &str| -> std::result::Result<String, String> {
            match world.get(key) {
                None => Ok(String::new()),
                Some(v) => v
                    .as_str()
                    .map(|s| s.trim().to_string())
                    .ok_or_else(|| format!("world.{key}: expected a string, got {v}")),
            }
        };
        let points = match world.get("points") {
            None => Vec::new(),
            Some(v) => v
                .as_array()
                .ok_or_else(|| format!("world.points: expected a list of \"x,y=X,Y\", got {v}"))?
                .iter()
                .map(|p| {
                    p.as_str()
                        .ok_or_else(|| {
                            format!("world.points: expected a \"x,y=X,Y\" string, got {p}")
                        })?
                        .parse::<ReferencePoint>()
                        .map_err(|e| format!("world.points: {e}"))
                })
                .collect::<std::result::Result<_, _>>()?,
        };
        let calibration = string("calibration")?;
        Ok(ReferenceFile {
            points,
            calibration: (!calibration.is_empty()).then(|| PathBuf::from(calibration)),
            units: string("units")?,
        })
    }

    /// The file's text: a `[world]` table in the layout of `config/default.toml`.
    pub fn to_toml(&self) -> String {
        let q = |s: &str| toml::Value::String(s.to_string()).to_string();
        let points: Vec<String> = self.points.iter().map(|p| q(&p.to_string())).collect();
        let calibration = self
            .calibration
            .as_ref()
            .map_or(String::new(), |p| p.display().to_string());
        format!(
            "[world]\n# Reference points \"x,y=X,Y\": image pixel (x, y) lies at world (X, Y).\n\
             points = [{}]\ncalibration = {}\nunits = {}\n",
            points.join(", "),
            q(&calibration),
            q(&self.units)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_bad_files_say_what_is_wrong() {
        let file = ReferenceFile {
            points: [
                "102,88=0,0",
                "1180,95=500,0",
                "1175,640=500,300",
                "98.5,650=0,300",
            ]
            .iter()
            .map(|p| p.parse().unwrap())
            .collect(),
            calibration: Some("cam \"1\".yaml".into()),
            units: "mm".into(),
        };
        assert_eq!(ReferenceFile::parse(&file.to_toml()).unwrap(), file);
        // The window's whole config file is one too.
        let config = format!("[view]\nids = true\n{}", file.to_toml());
        assert_eq!(ReferenceFile::parse(&config).unwrap(), file);
        for (text, says) in [
            ("[view]\nids = true\n", "no [world] table"),
            ("[world]\npoints = [\"1,2=3\"]\n", "expected x,y=X,Y"),
            ("[world]\npoints = 4\n", "world.points: expected a list"),
            ("[world]\nunits = 3\n", "world.units: expected a string"),
            ("[world\n", "not valid TOML"),
        ] {
            let err = ReferenceFile::parse(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
        let err = ReferenceFile::load(Path::new("/nonexistent/points.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nonexistent/points.toml"), "{err}");
    }
}
