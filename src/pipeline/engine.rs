//! Which algorithm labels a frame, and the CPU fallback of `--backend auto`.

use super::PipelineSettings;
use crate::ccl::descriptors::ShapeSums;
use crate::ccl::subpixel::{GreyWeights, SubpixelCentroid};
use crate::ccl::{
    algorithm_info, unsupported_connectivity, Backend, BackendChoice, Backends, CentroidRows,
    Connectivity, Job, Keep, LabelRequest, Labeler, Labeling, Mask, RowFilter, ShapeRows,
    Submission, Want,
};
use crate::error::{Error, Result};
use crate::frame::grey::FrameGrey;
use crate::frame::mask::PixelMask;
use crate::threshold::levels::ThresholdLevels;
use crate::threshold::spec::ThresholdSpec;
use crate::threshold::{GreyInput, StagedGrey};
use std::sync::Arc;
use std::time::Instant;

/// The algorithm that settings ask for, on the backends this process has.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedAlgorithm {
    pub name: &'static str,
    pub backend: Backend,
    /// Said once to the user when `auto` had to fall back to the CPU (`"CPU backend: <why>"`).
    pub notice: Option<String>,
}

/// What the settings ask of the labeler for each frame.
fn job(settings: &PipelineSettings) -> Job {
    if settings.want_labels {
        Job::Labels
    } else if settings.subpixel {
        Job::WeightedStats
    } else {
        Job::Stats
    }
}

/// Picks the algorithm for `settings` and checks everything `Backends::create` would, without
/// making it: unknown name, unsupported connectivity, CUDA asked for but missing. `analyze`
/// calls it before starting so that a bad request fails before the first frame.
pub fn resolve_algorithm(
    settings: &PipelineSettings,
    backends: &Backends,
) -> Result<ResolvedAlgorithm> {
    let connectivity = settings.connectivity;
    let cuda_missing = backends.cuda_unavailable_reason();
    if let (BackendChoice::Cuda, Some(reason)) = (settings.backend, &cuda_missing) {
        return Err(Error::Invalid(format!(
            "--backend cuda: the CUDA backend is unavailable: {reason}"
        )));
    }
    let mut notice = None;
    let info = match &settings.algorithm {
        Some(name) => algorithm_info(name)?,
        None => {
            let backend = match (settings.backend, &cuda_missing) {
                (BackendChoice::Cpu, _) => Backend::Cpu,
                (BackendChoice::Auto, Some(reason)) => {
                    notice = Some(format!("CPU backend: {reason}"));
                    Backend::Cpu
                }
                _ => Backend::Cuda,
            };
            let info =
                algorithm_info(backends.default_algorithm(backend, connectivity, job(settings)))?;
            if backend == Backend::Cuda && info.backend == Backend::Cpu {
                // default_algorithm falls back to the CPU when no CUDA algorithm fits.
                let why = format!("no CUDA algorithm supports {connectivity}-connectivity");
                if settings.backend == BackendChoice::Cuda {
                    return Err(Error::Invalid(format!(
                        "--backend cuda: {why}; use --connectivity 4 or --backend cpu"
                    )));
                }
                notice = Some(format!("CPU backend: {why}"));
            }
            info
        }
    };
    if settings.backend == BackendChoice::Cpu && info.backend != Backend::Cpu {
        return Err(Error::Invalid(format!(
            "--backend cpu: algorithm '{}' runs on {}; choose a CPU algorithm ({}) or --backend auto",
            info.name,
            info.backend,
            crate::ccl::algorithms()
                .iter()
                .filter(|a| a.backend == Backend::Cpu)
                .map(|a| a.name)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if settings.backend == BackendChoice::Cuda && info.backend != Backend::Cuda {
        return Err(Error::Invalid(format!(
            "--backend cuda: algorithm '{}' runs on the {}, not on CUDA",
            info.name, info.backend
        )));
    }
    if !info.supports(connectivity) {
        return Err(unsupported_connectivity(info.name, connectivity));
    }
    if let (Backend::Cuda, Some(reason)) = (info.backend, &cuda_missing) {
        return Err(Error::CudaUnavailable(format!(
            "algorithm '{}' needs CUDA: {reason}",
            info.name
        )));
    }
    Ok(ResolvedAlgorithm {
        name: info.name,
        backend: info.backend,
        notice,
    })
}

/// A frame as the engine gets it.
pub(super) enum FrameInput<'a> {
    /// The mask the capture thread made, with the grey frame and its levels when sub-pixel
    /// centroids are wanted.
    Mask {
        mask: Mask<'a>,
        weights: Option<GreyWeights<'a>>,
    },
    /// The grey frame alone: the labeler thresholds it where it runs (`Labeler::label_grey`),
    /// or, where it does not, the engine does here.
    Grey {
        grey: &'a FrameGrey,
        threshold: &'a ThresholdSpec,
        invert: bool,
        subpixel: bool,
        /// The pixels analysed (the settings' mask at the frame's size); `None`: all.
        pixel_mask: Option<&'a Arc<PixelMask>>,
        /// The frame in page-locked memory (`Captured::staged_grey`).
        staged: Option<&'a StagedGrey>,
    },
}

/// What a labeler delivers for one frame: the labeling, the sub-pixel centroids and the shape
/// sums of the kept components (each when asked).
pub(super) type Labeled = (
    Labeling,
    Option<Vec<SubpixelCentroid>>,
    Option<Vec<ShapeSums>>,
);

/// What one frame asks of the labeler.
pub(super) struct FrameRequest<'a> {
    pub(super) input: FrameInput<'a>,
    pub(super) want: Want,
    /// The components whose grey-weighted centroids are wanted (sub-pixel mode).
    pub(super) keep: Keep<'a>,
    /// The area and aspect limits, for labelers that drop rejected rows themselves
    /// (`Labeler::set_row_filter`); `keep` accepts no row they reject.
    pub(super) rows: RowFilter,
    /// Shape sums too, of the components `keep` accepts.
    pub(super) shapes: bool,
    /// Leave the detections on the device for the GPU tracker, where the labeler can
    /// (`Labeler::keep_detections_on_device`).
    pub(super) device_detections: bool,
    /// Frame index, for messages.
    pub(super) frame: u64,
}

/// The engine's labeler, with the CPU fallback of `--backend auto`: when the GPU fails on a
/// frame (a CUDA error, out of GPU memory, a failed launch) and the user chose neither the
/// backend nor the algorithm, the CPU labels that frame again, and every later one; the user is
/// told once, with the GPU's error. No frame is lost to it: the frames in flight when it
/// happens are labeled again on the CPU too, in order.
#[derive(Default)]
pub(super) struct EngineLabeler {
    /// The instance of the current algorithm for frames labeled on the spot.
    pub(super) labeler: Option<Box<dyn Labeler>>,
    /// Why the GPU was given up, once it was.
    pub(super) gpu_failed: Option<String>,
    /// Idle instances of the same algorithm (`Labeler::twin`) for frames in flight.
    spares: Vec<Box<dyn Labeler>>,
    /// Instances out with a frame in flight.
    in_flight: usize,
    /// Changes whenever the instances are replaced (another algorithm, the fallback, a crash):
    /// a frame queued on an older instance is labeled again when it completes.
    generation: u64,
    /// One frame at a time from now on: an instance for one more frame found too little GPU
    /// memory for its buffers.
    one_at_a_time: bool,
}

/// A frame handed to `EngineLabeler::submit`, to be taken back by `complete`, in order.
pub(super) enum Pending {
    /// Labeled at submission: a labeler that keeps one frame at a time, or an input it does
    /// not take in flight.
    Done(std::result::Result<(Labeled, ResolvedAlgorithm), String>),
    /// To be labeled when it completes, by the blocking calls, once the frames before it have
    /// given their instances' GPU memory back (`EngineLabeler::one_at_a_time`).
    Later,
    /// Queued on `labeler`'s stream.
    Queued {
        labeler: Box<dyn Labeler>,
        resolved: ResolvedAlgorithm,
        generation: u64,
    },
}

impl Pending {
    /// Is its result there already (nothing to wait for)?
    pub(super) fn is_done(&self) -> bool {
        matches!(self, Pending::Done(_))
    }

    /// Is the frame labeled on the GPU?
    pub(super) fn on_gpu(&self) -> bool {
        match self {
            Pending::Done(Ok((_, resolved))) => resolved.backend == Backend::Cuda,
            Pending::Done(Err(_)) => false,
            Pending::Later | Pending::Queued { .. } => true,
        }
    }
}

/// The GPU may be given up for the CPU only where the user chose neither backend nor algorithm.
pub(super) fn may_fall_back(settings: &PipelineSettings) -> bool {
    settings.backend == BackendChoice::Auto && settings.algorithm.is_none()
}

/// The request as `Labeler::submit` takes it: the frame's input with nothing the blocking calls
/// alone compute (no label image or shape sums; sub-pixel centroids of a grey frame only).
fn submission<'a>(request: &FrameRequest<'a>) -> Option<Submission<'a>> {
    if request.shapes || request.want.labels() {
        return None;
    }
    match request.input {
        FrameInput::Grey {
            grey,
            threshold,
            invert,
            subpixel,
            pixel_mask,
            staged,
        } => {
            let input = GreyInput {
                grey,
                threshold,
                invert,
                pixel_mask,
                staged,
            };
            Some(match subpixel {
                true => Submission::WeightedGrey(input),
                false => Submission::Grey(input),
            })
        }
        FrameInput::Mask {
            mask,
            weights: None,
        } => Some(Submission::Mask(mask)),
        _ => None,
    }
}

impl EngineLabeler {
    /// With `first` as the labeler of the first frames (`Pipeline::start_with_labeler`).
    pub(super) fn new(first: Option<Box<dyn Labeler>>) -> Self {
        Self {
            labeler: first,
            ..Self::default()
        }
    }

    /// Labels one frame; returns the labeling, the sub-pixel centroids (when asked) and the
    /// algorithm that did it. `notify` gets the one-line messages for the user.
    pub(super) fn label(
        &mut self,
        settings: &PipelineSettings,
        backends: &Backends,
        request: &FrameRequest<'_>,
        notify: &mut dyn FnMut(String),
    ) -> std::result::Result<(Labeled, ResolvedAlgorithm), String> {
        let resolved = self.resolve(settings, backends)?;
        if let Some(notice) = &resolved.notice {
            notify(notice.clone());
        }
        match self.run(resolved.name, settings.connectivity, backends, request) {
            Ok(labeled) => Ok((labeled, resolved)),
            Err(e) => self.failed(e, &resolved, settings, backends, request, notify),
        }
    }

    /// After `resolved` failed on the request with `e`: under `auto`, a GPU failure gives the
    /// GPU up and labels the frame on the CPU; anything else is the frame's error.
    fn failed(
        &mut self,
        e: Error,
        resolved: &ResolvedAlgorithm,
        settings: &PipelineSettings,
        backends: &Backends,
        request: &FrameRequest<'_>,
        notify: &mut dyn FnMut(String),
    ) -> std::result::Result<(Labeled, ResolvedAlgorithm), String> {
        if !(may_fall_back(settings) && self.gpu_failed.is_none() && e.is_gpu_failure()) {
            return Err(format!("{} on frame {}: {e}", resolved.name, request.frame));
        }
        let why = format!("{} failed on frame {}: {e}", resolved.name, request.frame);
        self.gpu_failed = Some(why.clone());
        self.forget_instances();
        notify(format!("CPU backend from now on: {why}"));
        let cpu = self.resolve(settings, backends)?;
        match self.run(cpu.name, settings.connectivity, backends, request) {
            Ok(labeled) => Ok((labeled, cpu)),
            Err(e) => Err(format!("{} on frame {}: {e}", cpu.name, request.frame)),
        }
    }

    /// Drops every idle instance; those out with a frame are dropped when it completes, and
    /// that frame is labeled again.
    pub(super) fn forget_instances(&mut self) {
        self.labeler = None;
        self.spares.clear();
        self.generation += 1;
        self.one_at_a_time = false;
    }

    /// Frames the current labeler keeps in flight at once (1 before the first frame).
    pub(super) fn frames_in_flight(&self) -> usize {
        self.labeler
            .as_ref()
            .map_or(1, |l| l.frames_in_flight().max(1))
    }

    /// Starts one frame: queued on an instance of its own where the labeler takes it in flight
    /// and fewer than `frames_in_flight` are out, else labeled here and now (`label`).
    pub(super) fn submit(
        &mut self,
        settings: &PipelineSettings,
        backends: &Backends,
        request: &FrameRequest<'_>,
        notify: &mut dyn FnMut(String),
    ) -> Pending {
        let Some(frame) = submission(request) else {
            return Pending::Done(self.label(settings, backends, request, notify));
        };
        if self.one_at_a_time && self.in_flight > 0 {
            return Pending::Later;
        }
        let resolved = match self.resolve(settings, backends) {
            Ok(resolved) => resolved,
            Err(e) => return Pending::Done(Err(e)),
        };
        if let Some(notice) = &resolved.notice {
            notify(notice.clone());
        }
        let mut instance = match self.take_instance(resolved.name, settings.connectivity, backends)
        {
            Ok(Some(instance)) => instance,
            Ok(None) => return Pending::Done(self.label(settings, backends, request, notify)),
            Err(e) => {
                return Pending::Done(
                    self.failed(e, &resolved, settings, backends, request, notify),
                )
            }
        };
        instance.set_row_filter(request.rows);
        instance.keep_detections_on_device(request.device_detections);
        match instance.submit(LabelRequest::new(
            frame,
            settings.connectivity,
            request.want,
        )) {
            Ok(true) => {
                self.in_flight += 1;
                Pending::Queued {
                    labeler: instance,
                    resolved,
                    generation: self.generation,
                }
            }
            Ok(false) => {
                self.spares.push(instance);
                Pending::Done(self.label(settings, backends, request, notify))
            }
            // The GPU holds the buffers of the frames in flight, not those of one more: this
            // frame waits for them, and the frames after it go one at a time.
            Err(e) if self.in_flight > 0 && e.is_out_of_gpu_memory() => {
                self.one_at_a_time = true;
                notify(format!(
                    "{}: one frame at a time on the GPU ({e})",
                    resolved.name
                ));
                Pending::Later
            }
            Err(e) => Pending::Done(self.failed(e, &resolved, settings, backends, request, notify)),
        }
    }

    /// An idle instance of `name` for one more frame in flight (a new `twin` while fewer than
    /// `frames_in_flight` exist); None when the labeler keeps one frame at a time.
    fn take_instance(
        &mut self,
        name: &'static str,
        connectivity: Connectivity,
        backends: &Backends,
    ) -> Result<Option<Box<dyn Labeler>>> {
        let primary = self.instance(name, connectivity, backends)?;
        let limit = primary.frames_in_flight();
        if limit <= 1 || self.one_at_a_time {
            return Ok(None);
        }
        if let Some(spare) = self.spares.pop() {
            return Ok(Some(spare));
        }
        if self.in_flight >= limit {
            return Ok(None);
        }
        let primary = self.instance(name, connectivity, backends)?;
        primary.twin().map(Some)
    }

    /// The result of a submitted frame (waits for it). A frame queued on instances that were
    /// replaced since (the GPU given up on an earlier frame, or another algorithm) is labeled
    /// again, here.
    pub(super) fn complete(
        &mut self,
        pending: Pending,
        settings: &PipelineSettings,
        backends: &Backends,
        request: &FrameRequest<'_>,
        notify: &mut dyn FnMut(String),
    ) -> std::result::Result<(Labeled, ResolvedAlgorithm), String> {
        let (mut labeler, resolved, generation) = match pending {
            Pending::Done(result) => return result,
            Pending::Later => {
                // The frames before it have completed: their instances' memory goes back.
                self.spares.clear();
                return self.label(settings, backends, request, notify);
            }
            Pending::Queued {
                labeler,
                resolved,
                generation,
            } => (labeler, resolved, generation),
        };
        self.in_flight = self.in_flight.saturating_sub(1);
        // Waited for even when it is not used: its buffers are then free to go.
        let completed = labeler.complete(request.keep);
        if generation != self.generation {
            drop(labeler);
            return self.label(settings, backends, request, notify);
        }
        self.spares.push(labeler);
        match completed {
            Ok((labeling, centroids)) => Ok(((labeling, centroids, None), resolved)),
            Err(e) => self.failed(e, &resolved, settings, backends, request, notify),
        }
    }

    /// The settings' algorithm, or the CPU's default once the GPU was given up (`auto` only).
    pub(super) fn resolve(
        &self,
        settings: &PipelineSettings,
        backends: &Backends,
    ) -> std::result::Result<ResolvedAlgorithm, String> {
        if self.gpu_failed.is_some() && may_fall_back(settings) {
            return Ok(ResolvedAlgorithm {
                name: backends.default_algorithm(
                    Backend::Cpu,
                    settings.connectivity,
                    job(settings),
                ),
                backend: Backend::Cpu,
                notice: None,
            });
        }
        resolve_algorithm(settings, backends).map_err(|e| e.to_string())
    }

    /// The instance of `name` for frames labeled on the spot, made when the algorithm changes
    /// (which lets the instances of the old one go).
    fn instance(
        &mut self,
        name: &'static str,
        connectivity: Connectivity,
        backends: &Backends,
    ) -> Result<&mut Box<dyn Labeler>> {
        if self.labeler.as_ref().is_none_or(|l| l.name() != name) {
            self.forget_instances();
            self.labeler = Some(backends.create(name, connectivity)?);
        }
        Ok(self.labeler.as_mut().expect("made above"))
    }

    /// Runs algorithm `name` on the request, creating the labeler when it changes.
    pub(super) fn run(
        &mut self,
        name: &'static str,
        connectivity: Connectivity,
        backends: &Backends,
        request: &FrameRequest<'_>,
    ) -> Result<Labeled> {
        let labeler = self.instance(name, connectivity, backends)?;
        // Where the labeler does not filter, the worker does (`Labeling::filtered`).
        labeler.set_row_filter(request.rows);
        labeler.keep_detections_on_device(request.device_detections);
        let (mask, weights) = match request.input {
            FrameInput::Mask { mask, weights } => (mask, weights),
            FrameInput::Grey {
                grey,
                threshold,
                invert,
                subpixel,
                pixel_mask,
                staged,
            } => {
                let keep = subpixel.then_some(request.keep);
                // Shape descriptors come with a mask labeling (`label_shapes`).
                if !request.shapes {
                    let input = GreyInput {
                        grey,
                        threshold,
                        invert,
                        pixel_mask,
                        staged,
                    };
                    let grey_request = LabelRequest::new(&input, connectivity, request.want);
                    if let Some(out) = labeler.label_grey(grey_request, keep)? {
                        return Ok((out.labeling, out.centroids, None));
                    }
                }
                // Not where the labeler runs: threshold here, as the capture thread would.
                let t = Instant::now();
                let levels = ThresholdLevels::compute(grey, threshold, invert)?;
                let mut mask = levels.mask(grey, invert)?;
                if let Some(pixel_mask) = pixel_mask {
                    pixel_mask.apply(Some(&mut mask.data), None);
                }
                let threshold_ms = t.elapsed().as_secs_f64() * 1e3;
                let weights = GreyWeights {
                    grey,
                    levels: &levels,
                    invert,
                };
                let mut done = label_mask(
                    labeler.as_mut(),
                    Mask::Bytes(&mask),
                    subpixel.then_some(&weights),
                    connectivity,
                    request,
                )?;
                done.0
                    .timings
                    .insert(0, crate::ccl::StepTime::new("threshold", threshold_ms));
                return Ok(done);
            }
        };
        label_mask(
            labeler.as_mut(),
            mask,
            weights.as_ref(),
            connectivity,
            request,
        )
    }
}

/// Labels a mask made on the host (with the sub-pixel centroids when `weights` are given, and
/// the shape sums when the request asks).
fn label_mask(
    labeler: &mut dyn Labeler,
    mask: Mask<'_>,
    weights: Option<&GreyWeights<'_>>,
    connectivity: Connectivity,
    request: &FrameRequest<'_>,
) -> Result<Labeled> {
    let (run, keep) = (
        LabelRequest::new(mask, connectivity, request.want),
        request.keep,
    );
    if request.shapes {
        let (labeling, centroids, sums) = labeler.label_shapes(run, ShapeRows { keep, weights })?;
        return Ok((labeling, centroids, Some(sums)));
    }
    match weights {
        Some(weights) => {
            let (labeling, centroids) =
                labeler.label_weighted(run, CentroidRows { weights, keep })?;
            Ok((labeling, Some(centroids), None))
        }
        None => Ok((labeler.label_mask(run)?, None, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::image::BinaryImage;

    /// A request for the statistics of `input` (frame 0), with the centroids of the rows `keep`
    /// accepts when the input asks for them.
    fn stats_request<'a>(input: FrameInput<'a>, keep: Keep<'a>) -> FrameRequest<'a> {
        FrameRequest {
            input,
            want: Want::Stats,
            keep,
            rows: RowFilter::default(),
            shapes: false,
            device_detections: false,
            frame: 0,
        }
    }

    /// A grey frame thresholded where the labeler runs, with its sub-pixel centroids.
    fn weighted_grey<'a>(grey: &'a FrameGrey, threshold: &'a ThresholdSpec) -> FrameInput<'a> {
        FrameInput::Grey {
            grey,
            threshold,
            invert: false,
            subpixel: true,
            pixel_mask: None,
            staged: None,
        }
    }

    /// Stands in for a GPU labeler whose device fails (named like the CPU default, which is what
    /// `auto` resolves to on a machine without a GPU, so the engine keeps it for the first frame).
    struct FailingLabeler {
        error: fn() -> Error,
    }

    impl Labeler for FailingLabeler {
        fn name(&self) -> &'static str {
            "lsl"
        }
        fn label_mask(&mut self, _: LabelRequest<Mask<'_>>) -> Result<Labeling> {
            Err((self.error)())
        }
    }

    fn out_of_memory() -> Error {
        Error::Cuda {
            step: "allocating device buffers".into(),
            why: "out of memory".into(),
        }
    }

    fn two_blobs() -> BinaryImage {
        BinaryImage::from_fn(16, 8, |x, y| (1..4).contains(&y) && !(4..=10).contains(&x)).unwrap()
    }

    fn label_once(
        engine: &mut EngineLabeler,
        settings: &PipelineSettings,
        image: &BinaryImage,
        frame: u64,
        notices: &mut Vec<String>,
    ) -> std::result::Result<(u32, ResolvedAlgorithm), String> {
        let input = FrameInput::Mask {
            mask: Mask::Bytes(image),
            weights: None,
        };
        let request = FrameRequest {
            frame,
            ..stats_request(input, &crate::ccl::keep_all)
        };
        // Only the fallback's notices: `auto` on this GPU-less machine also says "CPU backend: …".
        let ((labeling, _, _), resolved) =
            engine.label(settings, &Backends::cpu_only(), &request, &mut |n| {
                if n.starts_with("CPU backend from now on") {
                    notices.push(n)
                }
            })?;
        Ok((labeling.count, resolved))
    }

    #[test]
    fn a_gpu_failure_under_auto_moves_to_the_cpu_without_losing_the_frame() {
        let mut engine = EngineLabeler {
            labeler: Some(Box::new(FailingLabeler {
                error: out_of_memory,
            })),
            gpu_failed: None,
            ..EngineLabeler::default()
        };
        let settings = PipelineSettings::default();
        let image = two_blobs();
        let mut notices = Vec::new();
        let (count, resolved) =
            label_once(&mut engine, &settings, &image, 7, &mut notices).unwrap();
        assert_eq!(count, 2, "the failed frame is labeled again on the CPU");
        assert_eq!(resolved.backend, Backend::Cpu);
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert!(
            notices[0].starts_with("CPU backend from now on: lsl failed on frame 7: CUDA error")
                && notices[0].contains("out of memory"),
            "{}",
            notices[0]
        );
        // Later frames stay on the CPU, silently.
        let (count, resolved) =
            label_once(&mut engine, &settings, &image, 8, &mut notices).unwrap();
        assert_eq!((count, resolved.backend), (2, Backend::Cpu));
        assert_eq!(notices.len(), 1);
    }

    #[test]
    fn no_fallback_when_the_user_chose_or_the_input_is_at_fault() {
        let image = two_blobs();
        // The algorithm was chosen: its failure is the frame's error.
        let chosen = PipelineSettings {
            algorithm: Some("lsl".into()),
            ..PipelineSettings::default()
        };
        let mut engine = EngineLabeler {
            labeler: Some(Box::new(FailingLabeler {
                error: out_of_memory,
            })),
            gpu_failed: None,
            ..EngineLabeler::default()
        };
        let mut notices = Vec::new();
        let err = label_once(&mut engine, &chosen, &image, 3, &mut notices).unwrap_err();
        assert!(err.starts_with("lsl on frame 3: CUDA error"), "{err}");
        assert!(notices.is_empty() && engine.gpu_failed.is_none());
        // Not a GPU failure (a bad input): no fallback either.
        let mut engine = EngineLabeler {
            labeler: Some(Box::new(FailingLabeler {
                error: || Error::Invalid("packed mask has an unexpected row pitch".into()),
            })),
            gpu_failed: None,
            ..EngineLabeler::default()
        };
        let err = label_once(
            &mut engine,
            &PipelineSettings::default(),
            &image,
            4,
            &mut notices,
        )
        .unwrap_err();
        assert!(err.contains("unexpected row pitch"), "{err}");
        assert!(notices.is_empty() && engine.gpu_failed.is_none());
    }

    /// A grey frame for a labeler that does not threshold it itself (any CPU one, or a GPU one
    /// after the fallback) is thresholded by the engine: the same components and centroids as
    /// from the capture thread's mask, and the time of it as a step.
    #[test]
    fn a_grey_input_the_labeler_declines_is_thresholded_here() {
        use crate::source::synthetic::MarkerScene;
        let grey = FrameGrey::from(MarkerScene::new(320, 240, 1).unwrap().render(3));
        let spec = ThresholdSpec::Background { k: 5.0 };
        let settings = PipelineSettings::default();
        let backends = Backends::cpu_only();
        let levels = ThresholdLevels::compute(&grey, &spec, false).unwrap();
        let mask = levels.mask(&grey, false).unwrap();
        let weights = GreyWeights {
            grey: &grey,
            levels: &levels,
            invert: false,
        };
        let run = |input: FrameInput<'_>| {
            let request = stats_request(input, &crate::ccl::keep_all);
            let mut engine = EngineLabeler::default();
            engine
                .label(&settings, &backends, &request, &mut |_| {})
                .unwrap()
        };
        let ((from_mask, mask_centroids, _), _) = run(FrameInput::Mask {
            mask: Mask::Bytes(&mask),
            weights: Some(weights),
        });
        let ((from_grey, grey_centroids, _), resolved) = run(weighted_grey(&grey, &spec));
        assert_eq!(resolved.backend, Backend::Cpu);
        assert!(from_mask.count >= 10, "{} markers", from_mask.count);
        assert_eq!(from_grey.count, from_mask.count);
        assert_eq!(from_grey.stats, from_mask.stats);
        assert_eq!(grey_centroids, mask_centroids);
        assert_eq!(from_grey.timings[0].step, "threshold");
        // The settings' mask goes with the grey frame: here all but the left half is masked.
        let keep = (0..grey.height)
            .flat_map(|_| (0..grey.width).map(|x| u8::from(x < grey.width / 2)))
            .collect();
        let pixel_mask = Arc::new(PixelMask::from_keep(grey.width, grey.height, keep).unwrap());
        let ((masked, _, _), _) = run(FrameInput::Grey {
            grey: &grey,
            threshold: &spec,
            invert: false,
            subpixel: false,
            pixel_mask: Some(&pixel_mask),
            staged: None,
        });
        let stats = masked.stats.unwrap();
        assert!(!stats.is_empty() && stats.len() < from_mask.count as usize);
        assert!(stats.iter().all(|c| c.left + c.width <= grey.width / 2));
    }

    /// Takes grey frames with their sub-pixel centroids in flight, as the GPU labelers do,
    /// on the host: the frame labeled at `submit`, its centroids at `complete`, of the
    /// rows the `keep` given there accepts.
    #[derive(Default)]
    struct WeightedInFlight {
        frame: Option<(FrameGrey, Labeling)>,
        submitted: Arc<std::sync::atomic::AtomicUsize>,
        /// Instances made by `twin` so far; with `memory_for`, the twins past that many find
        /// too little GPU memory.
        twins: Arc<std::sync::atomic::AtomicUsize>,
        memory_for: Option<usize>,
        twin_number: usize,
    }

    impl Labeler for WeightedInFlight {
        fn name(&self) -> &'static str {
            "lsl"
        }
        fn label_mask(&mut self, request: LabelRequest<Mask<'_>>) -> Result<Labeling> {
            crate::ccl::cpu::lsl::Lsl::new().label_mask(request)
        }
        fn submit(&mut self, request: LabelRequest<Submission<'_>>) -> Result<bool> {
            let Submission::WeightedGrey(g) = request.input else {
                return Ok(false);
            };
            if self.memory_for.is_some_and(|n| self.twin_number > n) {
                return Err(Error::Cuda {
                    step: "allocating buffers".into(),
                    why: "a 320x240 frame needs about 9 MiB of GPU memory, 1 MiB are free".into(),
                });
            }
            let levels = ThresholdLevels::compute(g.grey, g.threshold, g.invert)?;
            let mask = levels.mask(g.grey, g.invert)?;
            let labeling =
                crate::ccl::cpu::lsl::Lsl::new().label(&mask, request.connectivity, Want::Both)?;
            self.frame = Some((g.grey.clone(), labeling));
            self.submitted
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(true)
        }
        fn complete(&mut self, keep: Keep<'_>) -> Result<crate::ccl::Completed> {
            let (grey, labeling) = self.frame.take().expect("a frame was submitted");
            let spec = ThresholdSpec::Background { k: 5.0 };
            let levels = ThresholdLevels::compute(&grey, &spec, false)?;
            let weights = GreyWeights {
                grey: &grey,
                levels: &levels,
                invert: false,
            };
            let (labels, stats) = (labeling.labels.as_ref(), labeling.stats.as_deref());
            let centroids =
                weights.centroids(labels.expect("labels"), stats.unwrap_or(&[]), keep)?;
            Ok((
                Labeling {
                    labels: None,
                    ..labeling
                },
                Some(centroids),
            ))
        }
        fn frames_in_flight(&self) -> usize {
            2
        }
        fn twin(&self) -> Result<Box<dyn Labeler>> {
            let n = 1 + self
                .twins
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(Box::new(WeightedInFlight {
                frame: None,
                submitted: self.submitted.clone(),
                twins: self.twins.clone(),
                memory_for: self.memory_for,
                twin_number: n,
            }))
        }
    }

    /// A grey frame whose sub-pixel centroids are wanted goes in flight where the labeler
    /// takes it so (`Submission::WeightedGrey`), and comes back with the centroids of the rows
    /// the request keeps: the rows and centroids of the blocking path.
    #[test]
    fn a_grey_frame_with_centroids_in_flight_gives_the_centroids_of_the_kept_rows() {
        use crate::source::synthetic::MarkerScene;
        let grey = FrameGrey::from(MarkerScene::new(320, 240, 1).unwrap().render(3));
        let spec = ThresholdSpec::Background { k: 5.0 };
        let settings = PipelineSettings::default();
        let backends = Backends::cpu_only();
        let large = |c: &crate::ccl::stats::ComponentStats| c.area >= 40;
        let request = stats_request(weighted_grey(&grey, &spec), &large);
        let ((blocking, blocking_centroids, _), _) = EngineLabeler::default()
            .label(&settings, &backends, &request, &mut |_| {})
            .unwrap();
        let in_flight = WeightedInFlight::default();
        let submitted = in_flight.submitted.clone();
        let mut engine = EngineLabeler::new(Some(Box::new(in_flight)));
        let pending = engine.submit(&settings, &backends, &request, &mut |_| {});
        assert!(!pending.is_done(), "the frame went in flight");
        let ((labeling, centroids, _), _) = engine
            .complete(pending, &settings, &backends, &request, &mut |_| {})
            .unwrap();
        assert_eq!(submitted.load(std::sync::atomic::Ordering::Relaxed), 1);
        let centroids = centroids.expect("centroids");
        assert_eq!(labeling.stats, blocking.stats);
        assert_eq!(Some(&centroids), blocking_centroids.as_ref());
        let kept = blocking.stats.unwrap().iter().filter(|c| large(c)).count();
        assert!(kept >= 5 && centroids.len() == kept, "{kept} kept");
    }

    /// An instance for a second frame in flight that finds too little GPU memory: that frame
    /// and the next wait for the first to complete and are labeled by the blocking calls, the
    /// user is told once, and later frames go one at a time; every frame gets its rows.
    #[test]
    fn too_little_gpu_memory_for_one_more_frame_in_flight_takes_one_at_a_time() {
        use crate::source::synthetic::MarkerScene;
        let scene = MarkerScene::new(320, 240, 1).unwrap();
        let greys: Vec<FrameGrey> = (0..4).map(|i| scene.render(i).into()).collect();
        let spec = ThresholdSpec::Background { k: 5.0 };
        let settings = PipelineSettings::default();
        let backends = Backends::cpu_only();
        let request = |grey| stats_request(weighted_grey(grey, &spec), &crate::ccl::keep_all);
        let mut blocking = EngineLabeler::default();
        let expected: Vec<Labeled> = (greys.iter())
            .map(|g| {
                let r = request(g);
                blocking
                    .label(&settings, &backends, &r, &mut |_| {})
                    .unwrap()
                    .0
            })
            .collect();
        let labeler = WeightedInFlight {
            memory_for: Some(1),
            ..WeightedInFlight::default()
        };
        let submitted = labeler.submitted.clone();
        let mut engine = EngineLabeler::new(Some(Box::new(labeler)));
        // Only this notice: `auto` on this GPU-less machine also says "CPU backend: …".
        let notices = std::cell::RefCell::new(Vec::new());
        let told = || {
            |n: String| {
                if !n.starts_with("CPU backend") {
                    notices.borrow_mut().push(n)
                }
            }
        };
        let mut pending = Vec::new();
        for g in &greys[..3] {
            let r = request(g);
            pending.push(engine.submit(&settings, &backends, &r, &mut told()));
        }
        assert!(matches!(pending[0], Pending::Queued { .. }));
        assert!(matches!(pending[1], Pending::Later) && matches!(pending[2], Pending::Later));
        let said = notices.borrow().clone();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].starts_with("lsl: one frame at a time on the GPU (CUDA error"),
            "{}",
            said[0]
        );
        for (i, p) in pending.into_iter().enumerate() {
            let r = request(&greys[i]);
            let ((labeling, centroids, _), _) = engine
                .complete(p, &settings, &backends, &r, &mut told())
                .unwrap();
            assert_eq!(labeling.stats, expected[i].0.stats, "frame {i}");
            assert_eq!(centroids, expected[i].1, "frame {i}");
        }
        // Nothing in flight: the next frame is labeled at submission.
        let r = request(&greys[3]);
        let last = engine.submit(&settings, &backends, &r, &mut told());
        let Pending::Done(Ok(((labeling, centroids, _), _))) = last else {
            panic!("labeled at submission");
        };
        assert_eq!(
            (labeling.stats, centroids),
            (expected[3].0.stats.clone(), expected[3].1.clone())
        );
        assert_eq!(submitted.load(std::sync::atomic::Ordering::Relaxed), 1);
        assert_eq!(notices.borrow().len(), 1);
    }

    #[test]
    fn gpu_failures_are_told_apart_from_input_errors() {
        assert!(out_of_memory().is_gpu_failure());
        assert!(Error::CudaUnavailable("no driver".into()).is_gpu_failure());
        assert!(Error::context("frame 3", out_of_memory()).is_gpu_failure());
        assert!(!Error::Invalid("bad".into()).is_gpu_failure());
    }
}
