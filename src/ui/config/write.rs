//! The settings as the window saves them: TOML in the layout of `config/default.toml`, every
//! key of `KNOBS` in its section.

use super::{backend_name, UiSettings};
use std::fmt::Write as _;

impl UiSettings {
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
        let names: Vec<String> = self
            .markers
            .dictionaries
            .iter()
            .map(|d| q(d.name()))
            .collect();
        let _ = writeln!(
            s,
            "[markers]\nenabled = {}\ndictionaries = [{}]\nlength = {:?}\n",
            self.markers.enabled,
            names.join(", "),
            self.markers.length.unwrap_or(0.0)
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
