//! The `[[sources]]` sections of the settings file: the window's sources, each with the keys a
//! source keeps of its own (its spec, threshold, world coordinates, mask and markers) over the
//! top-level keys, which are the defaults of every source. Every other key (labeling, filter,
//! view, streams, camera) is one for all sources.

use super::UiSettings;
use toml::Value;

/// The name of the sections' array.
pub const SOURCES_KEY: &str = "sources";

/// The sections a `[[sources]]` entry may hold.
pub const PER_SOURCE: [&str; 5] = ["source", "threshold", "world", "mask", "markers"];

/// Why a section of another name is refused in a source's section.
pub(super) fn not_per_source(section: &str) -> String {
    format!(
        "[{section}] is shared by every source, not one source's (a [[sources]] section holds \
         {}); set it at the top level",
        PER_SOURCE.join(", ")
    )
}

impl UiSettings {
    /// Reads the `[[sources]]` array: each entry these settings (the defaults) with its own
    /// keys. A section that names no source is left out; a bad value in one keeps the
    /// default; each problem names the source (number and spec) and the key.
    pub(super) fn read_sources(&mut self, value: &Value, origin: &str) -> Vec<String> {
        let Some(entries) = value.as_array() else {
            return vec![format!(
                "{origin}: {SOURCES_KEY}: expected [[{SOURCES_KEY}]] sections; keeping the \
                 previous sources"
            )];
        };
        let mut problems = Vec::new();
        let mut sources = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            match self.read_source(i + 1, entry, origin) {
                Ok((source, found)) => {
                    sources.push(source);
                    problems.extend(found);
                }
                Err(why) => problems.push(why),
            }
        }
        self.sources = sources;
        problems
    }

    /// Source number `n`'s section: its settings and the problems found in it.
    fn read_source(
        &self,
        n: usize,
        entry: &Value,
        origin: &str,
    ) -> Result<(UiSettings, Vec<String>), String> {
        let left_out = |why: &str| format!("{origin}: source {n}: {why}; this source is left out");
        let table = entry
            .as_table()
            .ok_or_else(|| left_out("expected a [[sources]] section"))?;
        let spec = table
            .get("source")
            .and_then(Value::as_table)
            .and_then(|s| s.get("spec"))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                left_out("source.spec: missing or not a string; each section names its source")
            })?;
        let mut source = self.defaults_for(spec);
        let named = format!("{origin}: source {n} ({spec})");
        let mut problems = source.apply_table(table, &named, |s| PER_SOURCE.contains(&s));
        if table.contains_key(SOURCES_KEY) {
            problems.push(format!(
                "{named}: {SOURCES_KEY}: a source has no sources of its own"
            ));
        }
        Ok((source, problems))
    }

    /// The settings of a source opened from `spec` without a section: these (the defaults).
    pub fn defaults_for(&self, spec: &str) -> UiSettings {
        UiSettings {
            source: spec.to_string(),
            sources: Vec::new(),
            ..self.clone()
        }
    }

    /// These settings' own keys (`PER_SOURCE`), with every other key from `shared`.
    pub fn with_shared(&self, shared: &UiSettings) -> UiSettings {
        UiSettings {
            source: self.source.clone(),
            threshold: self.threshold,
            invert: self.invert,
            world_points: self.world_points.clone(),
            calibration: self.calibration.clone(),
            world_units: self.world_units.clone(),
            world: self.world.clone(),
            mask_file: self.mask_file.clone(),
            markers: self.markers.clone(),
            sources: Vec::new(),
            ..shared.clone()
        }
    }

    /// The settings of each source the window opens: one per section, else these alone.
    pub fn source_settings(&self) -> Vec<UiSettings> {
        if self.sources.is_empty() {
            return vec![self.clone()];
        }
        self.sources.iter().map(|s| s.with_shared(self)).collect()
    }

    /// What a window of several sources saves: these defaults with the shared keys of
    /// `shared` (the sources' common ones), and a section per source.
    pub fn with_sections(&self, shared: &UiSettings, sources: &[UiSettings]) -> UiSettings {
        let mut top = self.with_shared(shared);
        top.sources = sources.iter().map(|s| s.with_shared(&top)).collect();
        top
    }
}
