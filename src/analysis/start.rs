//! Opening the source, learning the static mask and starting the pipeline.

use super::{AnalyzeOptions, LEARNED_MASK_MARGIN};
use crate::ccl::{BackendChoice, Backends};
use crate::error::{Error, Result};
use crate::frame::mask::{Mask, StaticMaskLearner};
use crate::pipeline::{
    frames_stay_on_gpu, resolve_algorithm, Delivery, EventPolicy, Pipeline, PipelineSettings,
    SetMember,
};
use crate::source::live_schedule::StartSignal;
use crate::source::video::{nvdec_by_default_for, VideoDecoding};
use crate::source::{FrameSource, OpenOptions, SourceSpec, TimeStamp};
use std::sync::Arc;
use std::time::Instant;

/// An analysis under way: the pipeline on the opened source, and what the summary reports
/// about it.
pub struct Started {
    /// Every result comes as an event (lossless delivery of results; a live source may still
    /// drop frames before labeling).
    pub pipeline: Pipeline,
    /// The source as opened ("clip.mp4 (h264 1920×1080 @30, 300 frames)").
    pub description: String,
    pub algorithm: String,
    pub live: bool,
    /// Frames to expect, when the source knows (and `max_frames` bounds it).
    pub total: Option<u64>,
    /// The mask applied to every frame: `opts`' masks and the learned static mask (empty: none).
    pub mask: Mask,
    /// Frames `--learn-mask` took from the source before the analysis.
    pub learned_frames: u64,
    /// The source's nominal frame rate, when it knows it (frame sets of several sources).
    pub fps: Option<f64>,
    /// What its frames' times measure, and, for a live source, the moment they count from.
    pub time_stamp: TimeStamp,
    pub clock_origin: Option<Instant>,
}

/// A source opened and its run decided (`Started` but the pipeline): what starts its pipeline
/// alone, or with the other sources' (`Pipeline::start_set`).
pub(super) struct Opened {
    pub(super) member: SetMember,
    pub(super) facts: Facts,
}

/// What the summary reports of an opened source.
pub(super) struct Facts {
    description: String,
    algorithm: String,
    live: bool,
    total: Option<u64>,
    mask: Mask,
    learned_frames: u64,
    fps: Option<f64>,
    time_stamp: TimeStamp,
    clock_origin: Option<Instant>,
}

impl Opened {
    /// Starts its pipeline alone: every result comes as an event.
    pub(super) fn start(self) -> Result<Started> {
        let SetMember {
            source,
            settings,
            delivery,
            backends,
        } = self.member;
        let pipeline =
            Pipeline::start_with(source, settings, delivery, backends, EventPolicy::Lossless)?;
        Ok(self.facts.started(pipeline))
    }
}

impl Facts {
    /// With the pipeline that runs its source.
    pub(super) fn started(self, pipeline: Pipeline) -> Started {
        Started {
            pipeline,
            description: self.description,
            algorithm: self.algorithm,
            live: self.live,
            total: self.total,
            mask: self.mask,
            learned_frames: self.learned_frames,
            fps: self.fps,
            time_stamp: self.time_stamp,
            clock_origin: self.clock_origin,
        }
    }
}

/// Opens `spec` (image sources read every header here, so bad files fail before any
/// decoding), learns the static mask when asked (`--learn-mask`: from the source's first
/// frames) and adds it to `mask`, resolves the algorithm and starts the pipeline with `opts`'
/// settings: what `run` analyses, and what the Python package's `analyze` iterates over.
pub fn start(
    opts: &AnalyzeOptions,
    spec: &SourceSpec,
    mask: Mask,
    notice: &mut dyn FnMut(&str),
) -> Result<Started> {
    open_together(opts, spec, mask, notice, None, (backends_for(opts), 1))?.start()
}

/// `start` up to the pipeline: a live synthetic source waiting for `together` before its
/// first frame (the sources of one run start capturing at once), on `backends`, one of
/// `sources` sources (of several, each file takes one NVDEC decoder,
/// `Tuning::nvdec_decoders_for`, and `auto` decodes by `nvdec_by_default_for` the number of
/// sources).
pub(super) fn open_together(
    opts: &AnalyzeOptions,
    spec: &SourceSpec,
    mask: Mask,
    notice: &mut dyn FnMut(&str),
    together: Option<StartSignal>,
    (backends, sources): (Backends, usize),
) -> Result<Opened> {
    let (width, height) = opts.synthetic_size.unwrap_or((
        crate::source::synthetic::DEFAULT_WIDTH,
        crate::source::synthetic::DEFAULT_HEIGHT,
    ));
    let source = spec.open_with(&OpenOptions {
        realtime: false,
        synthetic_width: width,
        synthetic_height: height,
        camera: opts.camera,
        // Auto without a GPU in use (none there, or the CPU backend asked for), or on a host
        // whose cores decode faster: the CPU.
        video_decoding: match opts.decoding {
            VideoDecoding::Auto
                if backends.gpu_name().is_none() || !nvdec_by_default_for(sources) =>
            {
                VideoDecoding::Cpu
            }
            decoding => decoding,
        },
        nvdec_decoders: opts.tuning.nvdec_decoders_for(sources),
        // In the engine's context the frames can stay on the GPU; elsewhere each decoder makes
        // a context of its own: there its copies to the host queue behind nothing of the
        // engine's (one file with markers 683–728 against 731–784 frames/s, four with an
        // adaptive threshold 452–538 against 615–737, on an H200). A recording reads every
        // frame's pixels: its frames come to the host as the decoder gives them.
        nvdec_in_engine_context: opts.record.is_none()
            && frames_stay_on_gpu(&pipeline_settings(opts, &mask), &backends),
        start: together,
    })?;
    open_on(opts, source, backends, mask, notice)
}

/// The pipeline's settings for `opts` with `mask`.
fn pipeline_settings(opts: &AnalyzeOptions, mask: &Mask) -> PipelineSettings {
    PipelineSettings {
        threshold: opts.threshold,
        invert: opts.invert,
        connectivity: opts.connectivity,
        algorithm: opts.algorithm.clone(),
        backend: opts.backend,
        filter: opts.filter,
        want_labels: false,
        want_binary: false,
        subpixel: opts.subpixel,
        shapes: opts.shapes,
        world: opts.world.clone(),
        mask: (!mask.is_empty()).then(|| Arc::new(mask.clone())),
        markers: opts.markers.clone(),
    }
}

/// The backends `opts` asks for: the CPU alone, or the detected ones.
pub fn backends_for(opts: &AnalyzeOptions) -> Backends {
    match opts.backend {
        BackendChoice::Cpu => Backends::cpu_only_tuned(&opts.tuning),
        BackendChoice::Auto | BackendChoice::Cuda => Backends::detect_tuned(&opts.tuning),
    }
}

/// `start` on a source the caller opened (the Python package's frames from an iterable).
pub fn start_on(
    opts: &AnalyzeOptions,
    source: Box<dyn FrameSource>,
    backends: Backends,
    mask: Mask,
    notice: &mut dyn FnMut(&str),
) -> Result<Started> {
    open_on(opts, source, backends, mask, notice)?.start()
}

/// `start_on` up to the pipeline.
fn open_on(
    opts: &AnalyzeOptions,
    mut source: Box<dyn FrameSource>,
    backends: Backends,
    mut mask: Mask,
    notice: &mut dyn FnMut(&str),
) -> Result<Opened> {
    source.set_skip_damaged(opts.skip_damaged);
    let mut learned_frames = 0;
    if let Some(n) = opts.learn_mask {
        let learner = learn_static_mask(source.as_mut(), n, opts)?;
        learned_frames = u64::from(learner.frames());
        let learned = learner.finish()?;
        notice(&format!(
            "learned a static mask from {} frame(s): {} pixel(s) masked",
            learner.frames(),
            learned.masked_pixels()
        ));
        mask = mask.and(Mask {
            pixels: Some(learned),
            rois: Vec::new(),
        })?;
    }
    let settings = pipeline_settings(opts, &mask);
    let algorithm = resolve_algorithm(&settings, &backends)?.name.to_string();
    let description = source.describe();
    let live = source.is_live();
    let (fps, time_stamp, clock_origin) =
        (source.fps(), source.time_stamp(), source.clock_origin());
    let total = match (source.frame_count(), opts.max_frames) {
        (Some(n), Some(m)) => Some(n.min(m)),
        (n, m) => n.or(m),
    };
    // A live source (camera) drops frames the worker cannot keep up with, and counts them;
    // every result that is made is delivered.
    let delivery = if live {
        Delivery::Live
    } else {
        Delivery::Lossless
    };
    let facts = Facts {
        description,
        algorithm,
        live,
        total,
        mask,
        learned_frames,
        fps,
        time_stamp,
        clock_origin,
    };
    Ok(Opened {
        member: SetMember {
            source,
            settings,
            delivery,
            backends: Arc::new(backends),
        },
        facts,
    })
}

/// Learns a static mask from the next `n` frames of `source` (thresholded as the analysis
/// will be); fewer when the source ends first, none is an error.
fn learn_static_mask(
    source: &mut dyn FrameSource,
    n: u64,
    opts: &AnalyzeOptions,
) -> Result<StaticMaskLearner> {
    let mut learner = StaticMaskLearner::new(LEARNED_MASK_MARGIN);
    for _ in 0..n {
        if let Some(signal) = super::interrupt::requested() {
            return Err(Error::Interrupted {
                signal,
                name: super::interrupt::signal_name(signal),
            });
        }
        let Some(frame) = source.next_frame()? else {
            break;
        };
        learner.add(&crate::threshold::apply(
            &frame.grey,
            &opts.threshold,
            opts.invert,
        )?);
    }
    if learner.frames() == 0 {
        return Err(Error::Invalid(format!(
            "{}: no frame to learn the mask from (--learn-mask {n})",
            opts.input
        )));
    }
    Ok(learner)
}
