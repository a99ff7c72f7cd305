//! What the window is asked for when it opens (`StartupOptions`: plain data the binary fills
//! from its command line), where its settings come from (the config file, else the built-in
//! defaults), and how the startup options go over them.

use super::config::{UiSettings, DEFAULT_CONFIG};
use crate::ccl::{BackendChoice, Connectivity};
use crate::error::{Error, Result};
use crate::fiducial::Dictionary;
use crate::geometry::reference_file::ReferenceFile;
use crate::pipeline::ComponentFilter;
use crate::source::camera_controls::Exposure;
use crate::threshold::spec::ThresholdSpec;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What the window is asked for when it opens. Each `Option` left `None` keeps the value of the
/// settings (config file, saved copy).
#[derive(Clone, Debug, Default)]
pub struct StartupOptions {
    /// The sources to open (`--source`, repeatable); empty keeps those of the settings.
    pub sources: Vec<String>,
    /// Config file; None = `./config/default.toml` when present, else the built-in defaults.
    pub config: Option<PathBuf>,
    pub threshold: Option<ThresholdSpec>,
    pub invert: bool,
    pub algorithm: Option<String>,
    pub connectivity: Option<Connectivity>,
    pub backend: Option<BackendChoice>,
    /// What a scripted run does (nothing, for a window a person uses).
    pub script: ScriptOptions,
    /// Inner window size in points.
    pub window_size: [f32; 2],
    pub renderer: RendererChoice,
    /// Open on the compare page and run the comparison on the first frame.
    pub compare: bool,
    /// Shape descriptors on (they are never turned off here).
    pub shapes: bool,
    /// Shape limits over those of the settings.
    pub shape_limits: ShapeLimits,
    /// Reference points for world coordinates, with calibration and units; without points the
    /// settings keep theirs.
    pub world: ReferenceFile,
    /// Live result streams, added to those of the settings.
    pub streams: Vec<String>,
    /// Camera exposure and gain, over those of the settings.
    pub exposure: Option<Exposure>,
    pub gain: Option<u32>,
    /// Square fiducials to look for (turns detection on); empty keeps the settings' choice.
    pub markers: Vec<Arc<Dictionary>>,
    /// Side of the markers' black square, for their poses, over the settings' own.
    pub marker_length: Option<f64>,
    /// The `MARKERSCOPE_*` knobs (`crate::tuning::Tuning::from_env`).
    pub tuning: crate::tuning::Tuning,
}

/// The scripted modes: close after N frames, save a screenshot, measure the redraw rate.
#[derive(Clone, Debug, Default)]
pub struct ScriptOptions {
    /// Close the window after this many frames were shown.
    pub exit_after_frames: Option<u64>,
    /// Save a PNG of the window after `exit_after_frames` frames (default 30), then close
    /// it.
    pub screenshot: Option<PathBuf>,
    /// Measure the redraw rate for this many seconds on a fixed frame of
    /// `bench_components` components, print it, and close.
    pub bench_ui: Option<f64>,
    pub bench_components: u32,
    /// In the benchmark, keep showing the same frame (no texture upload per redraw).
    pub bench_same_frame: bool,
}

impl ScriptOptions {
    /// Whether the window runs a script (it then neither reads nor saves its settings, nor
    /// its size and place).
    pub fn is_scripted(&self) -> bool {
        self.exit_after_frames.is_some() || self.bench_ui.is_some()
    }
}

/// Circularity and inertia-ratio limits; each `None` keeps the settings' own.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ShapeLimits {
    pub min_circularity: Option<f64>,
    pub max_circularity: Option<f64>,
    pub min_inertia_ratio: Option<f64>,
    pub max_inertia_ratio: Option<f64>,
}

impl ShapeLimits {
    /// `base` with the limits given here.
    pub fn over(&self, base: ComponentFilter) -> ComponentFilter {
        ComponentFilter {
            min_circularity: self.min_circularity.or(base.min_circularity),
            max_circularity: self.max_circularity.or(base.max_circularity),
            min_inertia_ratio: self.min_inertia_ratio.or(base.min_inertia_ratio),
            max_inertia_ratio: self.max_inertia_ratio.or(base.max_inertia_ratio),
            ..base
        }
    }
}

/// The renderer eframe draws the window with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RendererChoice {
    /// OpenGL through glow. Under software rendering (Mesa's llvmpipe, e.g. Xvfb) it redraws
    /// about 4× faster than wgpu on lavapipe, so it is the default.
    #[default]
    Glow,
    /// wgpu (Vulkan, else OpenGL).
    Wgpu,
}

impl StartupOptions {
    /// Puts what these options name over `settings` (applied last, after the config file and
    /// the saved copy).
    pub fn apply_to(&self, settings: &mut UiSettings) {
        self.apply_sources(settings);
        self.apply_values(settings);
        // What the options name holds for every source, over the sources' own keys too.
        for source in &mut settings.sources {
            self.apply_values(source);
        }
    }

    /// The sources named at start replace those of the settings: one source without sections
    /// is the settings' `[source]`; otherwise each is a section, its own (the one that names the
    /// same spec) where the settings have one, else the defaults.
    fn apply_sources(&self, settings: &mut UiSettings) {
        match self.sources.as_slice() {
            [] => {}
            [one] if settings.sources.is_empty() => settings.source = one.clone(),
            specs => {
                settings.sources = specs
                    .iter()
                    .map(|spec| {
                        let own = settings.sources.iter().find(|s| s.source == *spec);
                        own.cloned().unwrap_or_else(|| settings.defaults_for(spec))
                    })
                    .collect();
            }
        }
    }

    /// Puts what these options name, apart from the sources, over `settings`.
    fn apply_values(&self, settings: &mut UiSettings) {
        if let Some(t) = self.threshold {
            settings.threshold = t;
        }
        settings.invert |= self.invert;
        if let Some(a) = &self.algorithm {
            settings.algorithm = Some(a.clone());
        }
        if let Some(c) = self.connectivity {
            settings.connectivity = c;
        }
        if let Some(b) = self.backend {
            settings.backend = b;
        }
        // Limits that do not fit those of the settings (a minimum above a maximum) leave them.
        let filter = self.shape_limits.over(settings.filter);
        if filter.validate().is_ok() {
            settings.filter = filter;
        }
        settings.shapes |= self.shapes;
        self.apply_world(settings);
        if self.exposure.is_some() {
            settings.camera.exposure = self.exposure;
        }
        if self.gain.is_some() {
            settings.camera.gain = self.gain;
        }
        for url in &self.streams {
            if !settings.streams.contains(url) {
                settings.streams.push(url.clone());
            }
        }
        if !self.markers.is_empty() {
            settings.markers.enabled = true;
            settings.markers.dictionaries = self.markers.clone();
        }
        if self.marker_length.is_some() {
            settings.markers.length = self.marker_length;
        }
    }

    /// Reference points given at start replace those of the settings, with their calibration
    /// and units.
    fn apply_world(&self, settings: &mut UiSettings) {
        if self.world.points.is_empty() {
            return;
        }
        settings.world_points = self.world.points.clone();
        settings.calibration = self
            .world
            .calibration
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        settings.world_units = self.world.units.clone();
        if settings.refit_world().is_err() {
            settings.world = None;
        }
    }
}

/// Settings from the config file (explicit path, else ./config/default.toml when present, else
/// the built-in copy of it). Problems are returned, not fatal; only an explicit config file
/// that cannot be read is an error.
pub fn load_config(path: Option<&Path>) -> Result<(UiSettings, Vec<String>)> {
    let mut settings = UiSettings::default();
    let (text, origin) = match path {
        // Bounded: `/dev/zero` is refused, not read until memory runs out.
        Some(p) => (
            Error::read_text_input(p).map_err(|e| Error::io(p, e))?,
            p.display().to_string(),
        ),
        None => {
            let local = Path::new("config/default.toml");
            match Error::read_text_input(local) {
                Ok(t) => (t, local.display().to_string()),
                Err(_) => (DEFAULT_CONFIG.to_string(), "built-in defaults".to_string()),
            }
        }
    };
    let problems = settings.apply_toml(&text, &origin);
    Ok((settings, problems))
}

/// "auto" = camera 0 when one is found, else the synthetic demo.
pub fn resolve_source(spec: &str) -> String {
    if !spec.eq_ignore_ascii_case("auto") {
        return spec.to_string();
    }
    match crate::source::devices::cameras() {
        Ok(list) if !list.is_empty() => "camera:0".into(),
        _ => "synthetic".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--source` given several times: each source takes the section naming its spec, else the
    /// defaults; the other options apply to every source. Once, without sections: the
    /// settings' own source, as with one source.
    #[test]
    fn sources_named_at_start_take_their_sections_and_the_options() {
        let mut settings = UiSettings::default();
        let problems = settings.apply_toml(
            "[[sources]]\nsource.spec = \"a\"\nthreshold.spec = \"fixed:90\"\n\
             [[sources]]\nsource.spec = \"b\"\nthreshold.spec = \"otsu\"\n",
            "t.toml",
        );
        assert!(problems.is_empty(), "{problems:?}");
        let opts = StartupOptions {
            sources: vec!["b".into(), "c".into()],
            invert: true,
            ..StartupOptions::default()
        };
        let mut asked = settings.clone();
        opts.apply_to(&mut asked);
        let sources = asked.source_settings();
        let got: Vec<(&str, ThresholdSpec, bool)> = sources
            .iter()
            .map(|s| (s.source.as_str(), s.threshold, s.invert))
            .collect();
        assert_eq!(
            got,
            [
                ("b", ThresholdSpec::Otsu, true),
                ("c", ThresholdSpec::default(), true)
            ]
        );

        let one = StartupOptions {
            sources: vec!["synthetic".into()],
            ..StartupOptions::default()
        };
        let mut plain = UiSettings::default();
        one.apply_to(&mut plain);
        assert_eq!(
            (plain.source.as_str(), plain.sources.len()),
            ("synthetic", 0)
        );
    }

    /// A config file that never ends is refused with its size, not read until memory runs
    /// out; the reason is said once where the error is printed with its causes.
    #[test]
    fn an_endless_config_file_is_refused() {
        let err = load_config(Some(Path::new("/dev/zero")))
            .map(|_| ())
            .unwrap_err();
        let printed = format!("{:#}", anyhow::Error::from(err));
        assert!(
            printed.contains("/dev/zero") && printed.matches("larger than").count() == 1,
            "{printed}"
        );
    }
}
