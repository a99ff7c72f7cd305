//! A fixed frame for the window (`frame::disc_grid`: bright discs on a dark ramp), labeled once per
//! settings change on the calling thread. The redraw benchmark (`--bench-ui`) and the UI tests
//! use it; live sources go through the pipeline.

use super::state::{FrameFeed, SourceInfo};
use crate::ccl::stats::ComponentStats;
use crate::ccl::StepTime;
use crate::ccl::{Backends, Want};
use crate::error::{Error, Result};
use crate::frame::image::GrayImage;
use crate::pipeline::{
    FrameResult, FrameTimings, PipelineCounters, PipelineEvent, PipelineSettings, SourceCommand,
};
use std::sync::Arc;
use std::time::Instant;

/// Thresholds and labels `grey` with `settings` on the CPU backend or the GPU, as one frame.
pub fn label_frame(
    grey: Arc<GrayImage>,
    index: u64,
    settings: &PipelineSettings,
    backends: &Backends,
) -> Result<FrameResult> {
    let start = Instant::now();
    let mut binary = crate::threshold::apply(&grey, &settings.threshold, settings.invert)?;
    if let Some(mask) = &settings.mask {
        mask.fit(grey.width, grey.height)?
            .apply(Some(&mut binary.data), None);
    }
    let threshold_ms = start.elapsed().as_secs_f64() * 1e3;
    let resolved = crate::pipeline::resolve_algorithm(settings, backends)?;
    let name = resolved.name;
    let mut labeler = backends.create(name, settings.connectivity)?;
    let out = labeler.label(&binary, settings.connectivity, Want::Both)?;
    let all = out.stats.unwrap_or_default();
    let filter_start = Instant::now();
    let mut components: Vec<ComponentStats> = all
        .iter()
        .filter(|c| settings.filter.accepts(c))
        .copied()
        .collect();
    let filter = settings.filter;
    let mut shapes = Vec::new();
    if settings.shapes || filter.has_shape_limits() {
        if let Some(labels) = &out.labels {
            shapes = crate::ccl::descriptors::describe_of(labels, &components, &|_| true)?;
        }
        let mut passes = shapes.iter().map(|d| filter.accepts_shape(d));
        components.retain(|_| passes.next().unwrap_or(false));
        shapes.retain(|d| filter.accepts_shape(d));
    }
    let world = match &settings.world {
        Some(m) => components
            .iter()
            .map(|c| m.to_world(c.centroid_x, c.centroid_y))
            .collect(),
        None => Vec::new(),
    };
    let mut steps = vec![StepTime::new("threshold", threshold_ms)];
    steps.extend(out.timings);
    steps.push(StepTime::new(
        "filter",
        filter_start.elapsed().as_secs_f64() * 1e3,
    ));
    Ok(FrameResult {
        index,
        time_s: 0.0,
        name: String::new(),
        grey: grey.into(),
        binary: settings.want_binary.then(|| Arc::new(binary)),
        labels: if settings.want_labels {
            out.labels.map(Arc::new)
        } else {
            None
        },
        // One fixed frame: each component is its own track.
        track_ids: (1..=components.len() as u64).collect(),
        ended_tracks: Vec::new(),
        subpixel: Vec::new(),
        shapes,
        world,
        markers: Vec::new(),
        components,
        all_count: out.count,
        timings: FrameTimings {
            steps,
            latency_ms: start.elapsed().as_secs_f64() * 1e3,
        },
        algorithm: name,
        backend: resolved.backend,
        connectivity: settings.connectivity,
    })
}

/// A feed that shows one fixed frame. With `every_poll`, it hands the same frame over again as a
/// new frame at every poll, so each redraw also re-uploads the texture (the benchmark's worst
/// case); otherwise only after a settings change.
pub struct StillFeed {
    grey: Arc<GrayImage>,
    backends: Arc<Backends>,
    settings: Option<PipelineSettings>,
    current: Option<Arc<FrameResult>>,
    pending: Vec<PipelineEvent>,
    every_poll: bool,
    counters: PipelineCounters,
}

impl StillFeed {
    pub fn new(grey: GrayImage, backends: Arc<Backends>, every_poll: bool) -> Self {
        Self {
            grey: Arc::new(grey),
            backends,
            settings: None,
            current: None,
            pending: Vec::new(),
            every_poll,
            counters: PipelineCounters::default(),
        }
    }
}

impl FrameFeed for StillFeed {
    fn poll(&mut self) -> Vec<PipelineEvent> {
        if self.every_poll {
            if let Some(f) = &self.current {
                let mut again = FrameResult::clone(f);
                again.index = self.counters.processed;
                self.counters.processed += 1;
                self.counters.captured += 1;
                self.pending.push(PipelineEvent::Frame(Arc::new(again)));
            }
        }
        std::mem::take(&mut self.pending)
    }

    fn set_settings(&mut self, settings: &PipelineSettings) {
        if self.settings.as_ref() == Some(settings) {
            return;
        }
        self.settings = Some(settings.clone());
        let index = self.counters.processed;
        match label_frame(self.grey.clone(), index, settings, &self.backends) {
            Ok(f) => {
                let f = Arc::new(f);
                self.counters.processed += 1;
                self.counters.captured += 1;
                self.current = Some(f.clone());
                self.pending.push(PipelineEvent::Frame(f));
            }
            Err(e) => self.pending.push(PipelineEvent::EngineError(e.to_string())),
        }
    }

    fn command(&mut self, _command: SourceCommand) {}

    fn open(&mut self, spec: &str) -> Result<SourceInfo> {
        Err(Error::Invalid(format!(
            "cannot open '{spec}': this window shows a fixed test frame"
        )))
    }

    fn counters(&self) -> PipelineCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::disc_grid::disc_grid;

    #[test]
    fn disc_grid_has_one_component_per_disc() {
        let grey = Arc::new(disc_grid(200, 100, 10, 5, 6.0).unwrap());
        let settings = crate::ui::UiSettings::default().pipeline_settings();
        let f = label_frame(grey, 0, &settings, &Backends::cpu_only()).unwrap();
        assert_eq!(f.components.len(), 50);
        assert_eq!(f.all_count, 50);
        assert!(f.components.iter().all(|c| c.width == 12 && c.height == 12));
        assert!(disc_grid(100, 100, 10, 10, 5.0).is_err());
    }

    #[test]
    fn filter_keeps_within_limits() {
        let grey = Arc::new(disc_grid(200, 100, 10, 5, 6.0).unwrap());
        let mut settings = crate::ui::UiSettings::default().pipeline_settings();
        settings.filter.max_area = Some(10);
        let f = label_frame(grey, 0, &settings, &Backends::cpu_only()).unwrap();
        assert_eq!((f.components.len(), f.all_count), (0, 50));
    }
}
