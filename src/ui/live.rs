//! The window's feed from the live pipeline (camera, video, images, synthetic demo).

use super::state::{FrameFeed, SourceInfo};
use crate::ccl::Backends;
use crate::error::Result;
use crate::pipeline::{
    Delivery, Pipeline, PipelineCounters, PipelineEvent, PipelineSettings, SourceCommand,
};
use crate::source::camera_controls::CameraControls;
use crate::source::{FrameSource, OpenOptions, SourceSpec};
use std::sync::Arc;
use std::time::Duration;

pub struct LiveFeed {
    pipeline: Pipeline,
    /// Set on a camera when one is opened; exposure and gain also while it streams.
    camera: CameraControls,
    /// The spec and controls the running source was opened with.
    opened: (String, CameraControls),
}

/// How long a camera may take to stop streaming before it is opened again.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(3);

/// The camera index a spec names, if it names one.
fn camera_index(spec: &str) -> Option<u32> {
    match SourceSpec::parse(spec) {
        Ok(SourceSpec::Camera { index, .. }) => Some(index),
        _ => None,
    }
}

/// Opens `spec` and describes what was opened. Videos loop (live viewing).
fn open_source(spec: &str, camera: CameraControls) -> Result<(Box<dyn FrameSource>, SourceInfo)> {
    let mut parsed = SourceSpec::parse(spec)?;
    if let SourceSpec::Video { looping, .. } = &mut parsed {
        *looping = true;
    }
    let source = parsed.open_with(&OpenOptions {
        camera,
        ..OpenOptions::default()
    })?;
    let info = SourceInfo {
        description: source.describe(),
        is_live: source.is_live(),
        frame_count: source.frame_count(),
        fps: source.fps(),
        camera: source.camera_capabilities(),
    };
    Ok((source, info))
}

impl LiveFeed {
    /// Opens `spec` and starts the pipeline on it with live delivery (old frames are dropped
    /// when labeling falls behind, so the window always shows the newest result).
    pub fn start(
        spec: &str,
        settings: &super::UiSettings,
        backends: Arc<Backends>,
    ) -> Result<(Self, SourceInfo)> {
        let (source, info) = open_source(spec, settings.camera)?;
        let pipeline = Pipeline::start(
            source,
            settings.pipeline_settings(),
            Delivery::Live,
            backends,
        )?;
        Ok((
            Self {
                pipeline,
                camera: settings.camera,
                opened: (spec.to_string(), settings.camera),
            },
            info,
        ))
    }
}

impl FrameFeed for LiveFeed {
    fn poll(&mut self) -> Vec<PipelineEvent> {
        self.pipeline.events().try_iter().collect()
    }

    fn set_settings(&mut self, settings: &PipelineSettings) {
        self.pipeline.set_settings(settings.clone());
    }

    fn command(&mut self, command: SourceCommand) {
        self.pipeline.command(command);
    }

    fn open(&mut self, spec: &str) -> Result<SourceInfo> {
        // The camera streaming now holds its device: it stops before it is opened again.
        let reopening = camera_index(spec).is_some_and(|i| camera_index(&self.opened.0) == Some(i));
        if reopening {
            self.pipeline.close_source(CLOSE_TIMEOUT);
        }
        match open_source(spec, self.camera) {
            Ok((source, info)) => {
                self.pipeline.set_source(source);
                self.opened = (spec.to_string(), self.camera);
                Ok(info)
            }
            Err(e) if reopening => {
                // The new mode failed: the camera streams on as it was.
                let (old, controls) = self.opened.clone();
                if let Ok((source, _)) = open_source(&old, controls) {
                    self.pipeline.set_source(source);
                }
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    fn counters(&self) -> PipelineCounters {
        self.pipeline.counters()
    }

    fn set_camera_controls(&mut self, controls: CameraControls) {
        // Exposure and gain reach the streaming camera at once (other sources ignore them).
        if (controls.exposure, controls.gain) != (self.camera.exposure, self.camera.gain) {
            self.pipeline
                .command(SourceCommand::CameraControls(controls));
        }
        self.camera = controls;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_camera_is_recognised_whatever_its_mode() {
        assert_eq!(camera_index("camera:2:640x480@30"), Some(2));
        assert_eq!(camera_index("camera:2"), Some(2));
        assert_eq!(camera_index("synthetic"), None);
    }
}
