//! The settings as the window saves them: TOML in the layout of `config/default.toml`, every
//! key of `KNOBS` in its section, then a `[[sources]]` section per source with the keys a
//! source keeps of its own.

use super::{backend_name, UiSettings};
use std::fmt::Write as _;

/// A string as a TOML value (quoted, escaped).
fn q(v: &str) -> String {
    toml::Value::String(v.to_string()).to_string()
}

/// A list of strings as a TOML array.
fn list<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = items.map(q).collect();
    format!("[{}]", quoted.join(", "))
}

impl UiSettings {
    /// The settings as TOML in the layout of `config/default.toml` (what eframe saves).
    pub fn to_toml(&self) -> String {
        let mut s = String::new();
        self.write_source(&mut s, "");
        self.write_threshold(&mut s, "");
        self.write_labeling(&mut s);
        self.write_filter(&mut s);
        self.write_world(&mut s, "");
        self.write_view(&mut s);
        self.write_markers(&mut s, "");
        self.write_mask(&mut s, "");
        self.write_stream(&mut s);
        self.write_camera(&mut s);
        for source in &self.sources {
            let _ = writeln!(s, "\n[[{}]]", super::sources::SOURCES_KEY);
            source.write_own(&mut s);
        }
        s
    }

    /// The keys a source keeps of its own, as the sub-tables of its `[[sources]]` section.
    fn write_own(&self, s: &mut String) {
        let prefix = format!("{}.", super::sources::SOURCES_KEY);
        self.write_source(s, &prefix);
        self.write_threshold(s, &prefix);
        self.write_world(s, &prefix);
        self.write_markers(s, &prefix);
        self.write_mask(s, &prefix);
    }

    fn write_source(&self, s: &mut String, prefix: &str) {
        let _ = writeln!(s, "[{prefix}source]\nspec = {}\n", q(&self.source));
    }

    fn write_threshold(&self, s: &mut String, prefix: &str) {
        let _ = writeln!(
            s,
            "[{prefix}threshold]\nspec = {}\ninvert = {}\n",
            q(&self.threshold.to_string()),
            self.invert
        );
    }

    fn write_labeling(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "[labeling]\nconnectivity = {}\nalgorithm = {}\nbackend = {}\nshapes = {}\n",
            self.connectivity.number(),
            q(self.algorithm.as_deref().unwrap_or("")),
            q(backend_name(self.backend)),
            self.shapes
        );
    }

    fn write_filter(&self, s: &mut String) {
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
    }

    fn write_world(&self, s: &mut String, prefix: &str) {
        let points: Vec<String> = self.world_points.iter().map(|p| p.to_string()).collect();
        let _ = writeln!(
            s,
            "[{prefix}world]\npoints = {}\ncalibration = {}\nunits = {}\n",
            list(points.iter().map(String::as_str)),
            q(&self.calibration),
            q(&self.world_units)
        );
    }

    fn write_view(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "[view]\nmode = {}\noverlays = {}\nids = {}\ntails = {}\ntail_frames = {}\n",
            q(self.view.name()),
            self.overlays,
            self.ids,
            self.show_tails,
            self.tail_frames
        );
    }

    fn write_markers(&self, s: &mut String, prefix: &str) {
        let _ = writeln!(
            s,
            "[{prefix}markers]\nenabled = {}\ndictionaries = {}\nlength = {:?}\n",
            self.markers.enabled,
            list(self.markers.dictionaries.iter().map(|d| d.name())),
            self.markers.length.unwrap_or(0.0)
        );
    }

    fn write_mask(&self, s: &mut String, prefix: &str) {
        let _ = writeln!(s, "[{prefix}mask]\nfile = {}\n", q(&self.mask_file));
    }

    fn write_stream(&self, s: &mut String) {
        let urls = list(self.streams.iter().map(String::as_str));
        let _ = writeln!(s, "[stream]\nurls = {urls}\n");
    }

    fn write_camera(&self, s: &mut String) {
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
            "[camera]\nexposure = {}\ngain = {}\nresolution = {}\nfps = {}\nformat = {}\n",
            q(&exposure),
            self.camera.gain.map_or(-1, i64::from),
            q(&resolution),
            self.camera.fps.unwrap_or(0),
            q(format)
        );
    }
}
