//! The window's settings: defaults, `config/default.toml`, the copy eframe saves at exit, and
//! command-line overrides, in that order.
//!
//! The saved copy is the same TOML as the config file, so one reader validates both. A bad
//! value never stops the window: it is reported, and that key keeps the value it had.

use super::tracks::{DEFAULT_TAIL_FRAMES, TAIL_FRAMES_MAX, TAIL_FRAMES_MIN};
use crate::ccl::BackendChoice;
use crate::ccl::{algorithm_info, Connectivity};
use crate::geometry::calibration::Calibration;
use crate::geometry::{ReferencePoint, WorldMapping};
use crate::output::stream::StreamSpec;
use crate::pipeline::{ComponentFilter, PipelineSettings};
use crate::source::camera_controls::CameraControls;
use crate::threshold::spec::ThresholdSpec;
use std::fmt::Write as _;
use std::sync::Arc;

/// The config file shipped with the project; also the built-in defaults (a test checks that
/// it parses cleanly to `UiSettings::default()`).
pub const DEFAULT_CONFIG: &str = include_str!("../../config/default.toml");

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
        }
    }

    /// Applies the keys found in `text` (TOML, the layout of `config/default.toml`). Returns one
    /// message per problem, naming `origin` and the key; the affected keys are left unchanged.
    pub fn apply_toml(&mut self, text: &str, origin: &str) -> Vec<String> {
        let mut problems = Vec::new();
        let filter_before = self.filter;
        let table: toml::Table = match text.parse() {
            Ok(t) => t,
            Err(e) => {
                let why = e.to_string().lines().next().unwrap_or_default().to_string();
                return vec![format!(
                    "{origin}: not valid TOML ({why}); using the defaults"
                )];
            }
        };
        let mut bad = |key: &str, why: String| {
            problems.push(format!(
                "{origin}: {key}: {why}; keeping the previous value"
            ))
        };
        for (section, value) in &table {
            let Some(keys) = value.as_table() else {
                bad(section, "expected a [section] table".into());
                continue;
            };
            for (key, value) in keys {
                let full = format!("{section}.{key}");
                if let Err(why) = self.apply_key(&full, value) {
                    bad(&full, why);
                }
            }
        }
        if let Err(e) = self.filter.validate() {
            problems.push(format!("{origin}: {e}; keeping the previous filter"));
            self.filter = filter_before;
        }
        if table.contains_key("world") {
            if let Err(why) = self.refit_world() {
                problems.push(format!("{origin}: {why}; positions stay in pixels"));
            }
        }
        problems
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

    fn apply_key(&mut self, key: &str, value: &toml::Value) -> Result<(), String> {
        let text = || {
            value
                .as_str()
                .ok_or_else(|| format!("expected a string, got {value}"))
        };
        let flag = || {
            value
                .as_bool()
                .ok_or_else(|| format!("expected true or false, got {value}"))
        };
        // A shape limit: 0 = none; else a number >= 0 (at most `top`).
        let ratio = |top: Option<f64>| {
            let v = value
                .as_float()
                .or_else(|| value.as_integer().map(|n| n as f64))
                .ok_or_else(|| format!("expected a number, got {value}"))?;
            match v {
                0.0 => Ok(None),
                v if v.is_finite() && v > 0.0 && top.is_none_or(|t| v <= t) => Ok(Some(v)),
                _ => Err(format!(
                    "expected 0 (no limit) or a number in {}, got {v}",
                    if top.is_some() { "0..=1" } else { "0.. " }.trim()
                )),
            }
        };
        let count = || match value.as_integer() {
            Some(n) if n >= 0 => Ok((n > 0).then_some(n as u64)),
            _ => Err(format!("expected a whole number >= 0, got {value}")),
        };
        match key {
            "source.spec" => {
                let s = text()?.trim();
                if s.is_empty() {
                    return Err("empty; use \"auto\" or a source spec".into());
                }
                self.source = s.to_string();
            }
            "threshold.spec" => {
                self.threshold = text()?.parse().map_err(|e: crate::Error| e.to_string())?
            }
            "threshold.invert" => self.invert = flag()?,
            "labeling.connectivity" => {
                self.connectivity = value
                    .as_integer()
                    .and_then(|n| u8::try_from(n).ok())
                    .and_then(Connectivity::from_number)
                    .ok_or_else(|| format!("expected 4 or 8, got {value}"))?
            }
            "labeling.algorithm" => {
                let name = text()?.trim();
                self.algorithm = if name.is_empty() {
                    None
                } else {
                    Some(algorithm_info(name).map_err(|e| e.to_string())?.name.into())
                };
            }
            "labeling.backend" => {
                self.backend = parse_backend(text()?)
                    .ok_or_else(|| format!("expected auto, cpu or cuda, got {value}"))?
            }
            "filter.min_area" => self.filter.min_area = count()?,
            "filter.max_area" => self.filter.max_area = count()?,
            "filter.max_aspect" => {
                let a = value
                    .as_float()
                    .or_else(|| value.as_integer().map(|n| n as f64))
                    .ok_or_else(|| format!("expected a number, got {value}"))?;
                self.filter.max_aspect = match a {
                    0.0 => None,
                    a if a.is_finite() && a >= 1.0 => Some(a),
                    _ => return Err(format!("expected 0 (no limit) or a number >= 1, got {a}")),
                };
            }
            "filter.min_circularity" => self.filter.min_circularity = ratio(None)?,
            "filter.max_circularity" => self.filter.max_circularity = ratio(None)?,
            "filter.min_inertia_ratio" => self.filter.min_inertia_ratio = ratio(Some(1.0))?,
            "filter.max_inertia_ratio" => self.filter.max_inertia_ratio = ratio(Some(1.0))?,
            "labeling.shapes" => self.shapes = flag()?,
            "world.points" => {
                let items = value.as_array().ok_or_else(|| {
                    format!("expected a list of \"x,y=X,Y\" strings, got {value}")
                })?;
                self.world_points = items
                    .iter()
                    .map(|v| {
                        v.as_str()
                            .ok_or_else(|| format!("expected a \"x,y=X,Y\" string, got {v}"))?
                            .parse::<ReferencePoint>()
                            .map_err(|e| e.to_string())
                    })
                    .collect::<Result<_, _>>()?;
            }
            "world.calibration" => self.calibration = text()?.trim().to_string(),
            "world.units" => self.world_units = text()?.trim().to_string(),
            "view.mode" => {
                self.view = ViewMode::parse(text()?)
                    .ok_or_else(|| format!("expected grey, binary or labels, got {value}"))?
            }
            "view.overlays" => self.overlays = flag()?,
            "view.ids" => self.ids = flag()?,
            "view.tails" => self.show_tails = flag()?,
            "view.tail_frames" => {
                self.tail_frames = value
                    .as_integer()
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|n| (TAIL_FRAMES_MIN..=TAIL_FRAMES_MAX).contains(n))
                    .ok_or_else(|| {
                        format!(
                            "expected a whole number in {TAIL_FRAMES_MIN}..={TAIL_FRAMES_MAX}, \
                             got {value}"
                        )
                    })?
            }
            "stream.urls" => {
                let list = value
                    .as_array()
                    .ok_or_else(|| format!("expected a list of addresses, got {value}"))?;
                let mut urls = Vec::with_capacity(list.len());
                for v in list {
                    let url = v
                        .as_str()
                        .ok_or_else(|| format!("expected an address string, got {v}"))?;
                    StreamSpec::parse(url).map_err(|e| e.to_string())?;
                    urls.push(url.trim().to_string());
                }
                self.streams = urls;
            }
            "camera.exposure" => {
                self.camera.exposure = match value {
                    toml::Value::String(s) if s.trim().is_empty() => None,
                    toml::Value::String(s) => {
                        Some(s.parse().map_err(|e: crate::Error| e.to_string())?)
                    }
                    toml::Value::Integer(n) => Some(
                        n.to_string()
                            .parse()
                            .map_err(|e: crate::Error| e.to_string())?,
                    ),
                    _ => {
                        return Err(format!(
                            "expected \"\" (the camera's own), \"auto\" or a number, got {value}"
                        ))
                    }
                }
            }
            "camera.gain" => {
                self.camera.gain = match value.as_integer() {
                    Some(-1) => None,
                    Some(n) => Some(u32::try_from(n).map_err(|_| {
                        format!("expected -1 (the camera's own) or a whole number >= 0, got {n}")
                    })?),
                    None => {
                        return Err(format!(
                            "expected -1 (the camera's own) or a whole number >= 0, got {value}"
                        ))
                    }
                }
            }
            "camera.resolution" => {
                self.camera.resolution = match text()?.trim() {
                    "" => None,
                    r => Some(
                        crate::source::camera_controls::parse_resolution(r)
                            .map_err(|e| e.to_string())?,
                    ),
                }
            }
            "camera.fps" => {
                self.camera.fps = match value.as_integer().map(u32::try_from) {
                    Some(Ok(0)) => None,
                    Some(Ok(n)) => Some(n),
                    _ => {
                        return Err(format!(
                        "expected 0 (the camera's own) or a whole number of frames/s, got {value}"
                    ))
                    }
                }
            }
            "camera.format" => {
                self.camera.format = match text()?.trim() {
                    "" => None,
                    f => Some(f.parse().map_err(|e: crate::Error| e.to_string())?),
                }
            }
            _ => return Err("unknown key".into()),
        }
        Ok(())
    }

    /// The settings as TOML in the layout of `config/default.toml` (what eframe saves).
    pub fn to_toml(&self) -> String {
        let mut s = String::new();
        let q = |v: &str| toml::Value::String(v.to_string()).to_string();
        let _ = writeln!(s, "[source]\nspec = {}\n", q(&self.source));
        let _ = writeln!(
            s,
            "[threshold]\nspec = {}\ninvert = {}\n",
            q(&self.threshold.to_string()),
            self.invert
        );
        let _ = writeln!(
            s,
            "[labeling]\nconnectivity = {}\nalgorithm = {}\nbackend = {}\nshapes = {}\n",
            self.connectivity.number(),
            q(self.algorithm.as_deref().unwrap_or("")),
            q(backend_name(self.backend)),
            self.shapes
        );
        let _ = writeln!(
            s,
            "[filter]\nmin_area = {}\nmax_area = {}\nmax_aspect = {:?}\nmin_circularity = {:?}\n\
             max_circularity = {:?}\nmin_inertia_ratio = {:?}\nmax_inertia_ratio = {:?}\n",
            self.filter.min_area.unwrap_or(0),
            self.filter.max_area.unwrap_or(0),
            self.filter.max_aspect.unwrap_or(0.0),
            self.filter.min_circularity.unwrap_or(0.0),
            self.filter.max_circularity.unwrap_or(0.0),
            self.filter.min_inertia_ratio.unwrap_or(0.0),
            self.filter.max_inertia_ratio.unwrap_or(0.0)
        );
        let points: Vec<String> = self
            .world_points
            .iter()
            .map(|p| q(&p.to_string()))
            .collect();
        let _ = writeln!(
            s,
            "[world]\npoints = [{}]\ncalibration = {}\nunits = {}\n",
            points.join(", "),
            q(&self.calibration),
            q(&self.world_units)
        );
        let _ = writeln!(
            s,
            "[view]\nmode = {}\noverlays = {}\nids = {}\ntails = {}\ntail_frames = {}\n",
            q(self.view.name()),
            self.overlays,
            self.ids,
            self.show_tails,
            self.tail_frames
        );
        let urls: Vec<String> = self.streams.iter().map(|u| q(u)).collect();
        let _ = writeln!(s, "[stream]\nurls = [{}]\n", urls.join(", "));
        let exposure = self
            .camera
            .exposure
            .map_or(String::new(), |e| e.to_string());
        let resolution = self
            .camera
            .resolution
            .map_or(String::new(), |(w, h)| format!("{w}x{h}"));
        let format = self.camera.format.map_or("", |f| f.name());
        let _ = write!(
            s,
            "[camera]\nexposure = {}\ngain = {}\nresolution = {}\nfps = {}\nformat = {}",
            q(&exposure),
            self.camera.gain.map_or(-1, i64::from),
            q(&resolution),
            self.camera.fps.unwrap_or(0),
            q(format)
        );
        s
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
mod tests {
    use super::*;

    #[test]
    fn shipped_config_is_the_default() {
        let mut s = UiSettings {
            source: "x".into(),
            invert: true,
            view: ViewMode::Labels,
            ..UiSettings::default()
        };
        let problems = s.apply_toml(DEFAULT_CONFIG, "config/default.toml");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(s, UiSettings::default());
    }

    #[test]
    fn round_trips_through_toml() {
        let s = UiSettings {
            source: "clip \"a\".mp4".into(),
            threshold: ThresholdSpec::Adaptive { window: 31, c: 2.5 },
            invert: true,
            connectivity: Connectivity::Four,
            algorithm: Some("lsl".into()),
            backend: BackendChoice::Cpu,
            filter: ComponentFilter {
                min_area: Some(4),
                max_area: Some(900),
                max_aspect: Some(3.5),
                min_circularity: Some(0.7),
                max_circularity: Some(1.25),
                min_inertia_ratio: Some(0.5),
                max_inertia_ratio: None,
            },
            view: ViewMode::Binary,
            overlays: false,
            ids: false,
            show_tails: false,
            tail_frames: 120,
            shapes: true,
            world_points: ["0,0=0,0", "100,0=10,0", "100,50=10,5", "0,50=0,5"]
                .iter()
                .map(|p| p.parse().unwrap())
                .collect(),
            calibration: String::new(),
            world_units: "cm".into(),
            world: None,
            streams: vec!["osc://127.0.0.1:3333".into(), "ws://0.0.0.0:9000".into()],
            camera: CameraControls {
                exposure: Some(crate::source::camera_controls::Exposure::Manual(120)),
                gain: Some(3),
                resolution: Some((1280, 720)),
                fps: Some(120),
                format: Some(crate::source::camera_controls::PixelFormat::Yuyv),
            },
        };
        let mut s = s;
        s.refit_world().unwrap();
        assert!(s.world.is_some());
        let mut back = UiSettings::default();
        let problems = back.apply_toml(&s.to_toml(), "saved");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(back, s);
    }

    #[test]
    fn every_threshold_method_round_trips_and_a_bad_k_is_reported() {
        for threshold in [
            ThresholdSpec::Fixed(9),
            ThresholdSpec::Otsu,
            ThresholdSpec::Triangle,
            ThresholdSpec::Background { k: 3.5 },
            ThresholdSpec::Adaptive {
                window: 15,
                c: -1.0,
            },
        ] {
            let s = UiSettings {
                threshold,
                ..UiSettings::default()
            };
            let mut back = UiSettings {
                threshold: ThresholdSpec::Fixed(1),
                ..UiSettings::default()
            };
            assert!(back.apply_toml(&s.to_toml(), "saved").is_empty());
            assert_eq!(back, s);
        }
        let mut s = UiSettings::default();
        let problems = s.apply_toml("[threshold]\nspec = \"background:-2\"\n", "t.toml");
        assert!(
            problems.len() == 1
                && problems[0].contains("t.toml: threshold.spec:")
                && problems[0].contains(">= 0"),
            "{problems:?}"
        );
        assert_eq!(s, UiSettings::default());
    }

    #[test]
    fn bad_values_are_reported_and_keep_the_defaults() {
        let mut s = UiSettings::default();
        let problems = s.apply_toml(
            "[threshold]\nspec = \"fixed:300\"\ninvert = \"yes\"\n[labeling]\nconnectivity = 6\n\
             algorithm = \"nope\"\nbackend = \"gpu\"\n[filter]\nmin_area = -1\nmax_aspect = 0.5\n\
             [view]\nmode = \"rainbow\"\ncolour = 1\n[labelling]\nx = 1\n",
            "test.toml",
        );
        assert_eq!(s, UiSettings::default());
        assert_eq!(problems.len(), 10, "{problems:#?}");
        for key in [
            "threshold.spec",
            "threshold.invert",
            "labeling.connectivity",
            "labeling.algorithm",
            "labeling.backend",
            "filter.min_area",
            "filter.max_aspect",
            "view.mode",
            "view.colour",
            "labelling.x",
        ] {
            assert!(
                problems
                    .iter()
                    .any(|p| p.contains(&format!("test.toml: {key}:"))),
                "no message for {key}: {problems:#?}"
            );
        }
        // A file from before the tail keys leaves them at their defaults.
        let problems = s.apply_toml("[view]\nids = false\n", "old.toml");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!((s.show_tails, s.tail_frames), (true, DEFAULT_TAIL_FRAMES));
        s = UiSettings::default();
        // Tail lengths out of range are reported and keep the previous value.
        for bad in ["1", "301", "-5", "30.5", "\"30\""] {
            let problems = s.apply_toml(&format!("[view]\ntail_frames = {bad}\n"), "t.toml");
            assert!(
                problems.len() == 1 && problems[0].contains("t.toml: view.tail_frames:"),
                "{bad}: {problems:?}"
            );
        }
        assert_eq!(s, UiSettings::default());
        assert!(s
            .apply_toml("[view]\ntail_frames = 300\ntails = false\n", "t")
            .is_empty());
        assert_eq!((s.tail_frames, s.show_tails), (300, false));
        s = UiSettings::default();

        // Camera modes: what is wrong is named, the values stay.
        let problems = s.apply_toml(
            "[camera]\nresolution = \"1280\"\nfps = -2\nformat = \"h264\"\n",
            "c.toml",
        );
        assert_eq!(problems.len(), 3, "{problems:?}");
        for (key, says) in [
            ("resolution", "WIDTHxHEIGHT"),
            ("fps", "frames/s"),
            ("format", "'h264'"),
        ] {
            assert!(
                problems
                    .iter()
                    .any(|p| p.starts_with(&format!("c.toml: camera.{key}:")) && p.contains(says)),
                "{key}: {problems:?}"
            );
        }
        assert_eq!(s, UiSettings::default());

        let broken = s.apply_toml("[threshold\nspec = 1", "broken.toml");
        assert_eq!(broken.len(), 1);
        assert!(
            broken[0].contains("broken.toml: not valid TOML"),
            "{broken:?}"
        );
        assert_eq!(s, UiSettings::default());
    }
}
