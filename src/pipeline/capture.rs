//! The capture thread: pulls frames from the source, paces files played in real time, and
//! thresholds (and packs, for GPU algorithms) each frame before the worker sees it, in one pass
//! and into reused buffers — unless the labeler thresholds on the GPU itself (`MaskMaker`).

use super::engine::may_fall_back;
use super::markers::on_stage_pool;
use super::queue::{Captured, Item};
use super::ring::BufferRing;
use super::{
    ms, resolve_algorithm, Control, Delivery, PipelineEvent, PipelineSettings, Shared,
    SourceCommand, LIVE_EVENT_QUEUE, STOP_POLL,
};
use crate::ccl::{algorithm_info, Backend, Backends, StepTime};
use crate::error::Error;
use crate::frame::image::{BinaryImage, PackedBinary};
use crate::frame::mask::{Mask, PixelMask};
use crate::frame::page_lock::PageLocker;
use crate::source::{Frame, FrameSource};
use crate::threshold::binarize::{self, Applied, Binarizer, Outputs};
use crate::threshold::levels::ThresholdLevels;
use crate::threshold::spec::ThresholdSpec;
use crossbeam_channel::{Receiver, TryRecvError};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Playback state of the capture thread.
pub(super) struct Playback {
    pub(super) playing: bool,
    /// Deliver one frame while paused.
    pub(super) step: bool,
    /// 1.0 = a file's real frame rate, 0 = as fast as possible (live sources pace themselves).
    pub(super) speed: f64,
    /// The source has ended or failed; wait for a seek or a new source.
    pub(super) ended: bool,
    /// Wall clock and media time of the first frame since the pacing (re)started.
    pub(super) pace: Option<(Instant, f64)>,
    pub(super) last_size: Option<(u32, u32)>,
    /// Frames captured from the current source.
    pub(super) frames: u64,
}

/// The pipeline is stopping (the worker's side is gone or a stop was asked): the capture loop
/// ends.
struct Stopping;

/// The capture thread: one turn per control message or frame until the pipeline stops.
pub(super) fn capture_loop(
    shared: &Shared,
    control: &Receiver<Control>,
    source: Box<dyn FrameSource>,
) {
    let mut capture = Capture::new(shared, source);
    while !shared.stopping() {
        if capture.turn(control).is_err() {
            break;
        }
    }
}

/// The capture thread's state between frames.
struct Capture<'a> {
    shared: &'a Shared,
    source: Option<Box<dyn FrameSource>>,
    play: Playback,
    /// Where the current settings' masks are made, cached per settings value (and whether the
    /// worker had given the GPU up).
    maker_for: Option<(Arc<PipelineSettings>, bool, MaskMaker)>,
    last_threshold_error: Option<String>,
    /// The mask (by identity) and frame size last said to need scaling.
    mask_noticed: Option<(usize, (u32, u32))>,
    buffers: CaptureBuffers,
    /// What the source was last told of frames on the GPU (`keep_frames_on_gpu`); None: not
    /// told yet.
    frames_on_gpu: Option<bool>,
}

impl<'a> Capture<'a> {
    fn new(shared: &'a Shared, source: Box<dyn FrameSource>) -> Self {
        let play = Playback {
            playing: true,
            step: false,
            speed: match shared.delivery {
                Delivery::Live => 1.0,
                Delivery::Lossless => 0.0,
            },
            ended: false,
            pace: None,
            last_size: None,
            frames: 0,
        };
        // Results waiting for a live consumer, and the one it shows.
        let mut buffers = CaptureBuffers::new(shared.queue.capacity + 2, LIVE_EVENT_QUEUE + 1);
        buffers.locker = shared.backends.page_locker();
        Capture {
            shared,
            source: Some(page_locked(shared, source)),
            play,
            maker_for: None,
            last_threshold_error: None,
            mask_noticed: None,
            buffers,
            frames_on_gpu: None,
        }
    }

    /// One turn: a control message applied, or the next frame pulled, paced, checked,
    /// thresholded and handed to the worker.
    fn turn(&mut self, control: &Receiver<Control>) -> Result<(), Stopping> {
        if let Some(message) = self.receive(control)? {
            return self.apply(message);
        }
        self.say_where_frames_go();
        let Some(mut frame) = self.pull_frame()? else {
            return Ok(());
        };
        self.pace(&mut frame);
        if !self.check_size(&frame)? {
            return Ok(());
        }
        let size = (frame.grey.width, frame.grey.height);
        self.play.frames += 1;
        self.shared.captured.fetch_add(1, Ordering::Relaxed);
        let settings = self.shared.settings();
        self.notice_mask_scaling(&settings, size)?;
        let maker = self.mask_maker(&settings);
        self.hand_over(frame, settings, maker)
    }

    fn push(&self, item: Item) -> Result<(), Stopping> {
        if self.shared.push(item) {
            Ok(())
        } else {
            Err(Stopping)
        }
    }

    fn push_event(&self, event: PipelineEvent) -> Result<(), Stopping> {
        self.push(Item::Event(event))
    }

    /// The next control message: waited for while there is nothing to play, else only taken
    /// when one is there.
    fn receive(&self, control: &Receiver<Control>) -> Result<Option<Control>, Stopping> {
        let play = &self.play;
        let idle = self.source.is_none() || play.ended || (!play.playing && !play.step);
        if idle {
            return control.recv().map(Some).map_err(|_| Stopping);
        }
        match control.try_recv() {
            Ok(m) => Ok(Some(m)),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err(Stopping),
        }
    }

    fn apply(&mut self, message: Control) -> Result<(), Stopping> {
        match message {
            Control::Stop => return Err(Stopping),
            Control::Source(new) => {
                self.source = Some(page_locked(self.shared, new));
                self.frames_on_gpu = None;
                self.play.ended = false;
                self.play.pace = None;
                self.play.last_size = None;
                self.play.frames = 0;
            }
            Control::Close(done) => {
                // Dropping the source frees its device (a camera to open again).
                self.source = None;
                let _ = done.send(());
            }
            Control::Command(command) => {
                if !apply_command(self.shared, &mut self.play, &mut self.source, command) {
                    return Err(Stopping);
                }
            }
        }
        Ok(())
    }

    /// The source's next frame, after what it skipped and its notices on the way (in stream
    /// order); None at its end or on an error, both said to the worker.
    fn pull_frame(&mut self) -> Result<Option<Frame>, Stopping> {
        let Some(src) = self.source.as_mut() else {
            return Ok(None);
        };
        let pulled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| src.next_frame()))
            .unwrap_or_else(|_| {
                Err(Error::Invalid(format!(
                    "{}: the source crashed while reading a frame",
                    src.describe()
                )))
            });
        let skipped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| src.take_skipped()))
            .unwrap_or_default();
        let notices = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| src.take_notices()))
            .unwrap_or_default();
        for s in skipped {
            self.push_event(PipelineEvent::Skipped(s))?;
        }
        for n in notices {
            self.push_event(PipelineEvent::Notice(n))?;
        }
        match pulled {
            Ok(Some(frame)) => Ok(Some(frame)),
            Ok(None) => {
                self.play.ended = true;
                self.push_event(PipelineEvent::EndOfStream {
                    frames: self.play.frames,
                })?;
                Ok(None)
            }
            Err(e) => {
                self.play.ended = true;
                self.push_event(PipelineEvent::SourceError(e.to_string()))?;
                Ok(None)
            }
        }
    }

    /// A file played in real time waits for its frame's time.
    fn pace(&mut self, frame: &mut Frame) {
        self.play.step = false;
        let live = self.source.as_ref().is_some_and(|s| s.is_live());
        if !live && self.play.speed > 0.0 {
            wait_until_due(self.shared, &mut self.play, frame.time_s);
            // Latency counts from when the frame is due, not from when it was decoded ahead.
            frame.captured_at = Instant::now();
        }
    }

    /// False when a new frame size cannot be held (the source ends with a clear error instead
    /// of a process killed for memory half way); a size change is said.
    fn check_size(&mut self, frame: &Frame) -> Result<bool, Stopping> {
        let size = (frame.grey.width, frame.grey.height);
        if self.play.last_size != Some(size) {
            if let Err(e) = crate::frame::image::check_frame_memory(size.0, size.1) {
                self.play.ended = true;
                let why = format!("frame {}: {e}", frame.index);
                self.push_event(PipelineEvent::SourceError(why))?;
                return Ok(false);
            }
        }
        if let Some(prev) = self.play.last_size.filter(|&p| p != size) {
            let notice = format!(
                "frame size changed from {}x{} to {}x{} at frame {}",
                prev.0, prev.1, size.0, size.1, frame.index
            );
            self.push_event(PipelineEvent::Notice(notice))?;
        }
        self.play.last_size = Some(size);
        Ok(true)
    }

    /// Says once per mask and frame size that the settings' mask is scaled to the frames.
    fn notice_mask_scaling(
        &mut self,
        settings: &PipelineSettings,
        size: (u32, u32),
    ) -> Result<(), Stopping> {
        let Some(mask) = &settings.mask else {
            return Ok(());
        };
        let key = (Arc::as_ptr(mask) as usize, size);
        let other_size = mask.pixel_size().filter(|&p| p != size);
        if let (Some((w, h)), false) = (other_size, self.mask_noticed == Some(key)) {
            self.mask_noticed = Some(key);
            let notice = format!(
                "the mask is {w}x{h} and the frames {}x{}: the mask is scaled to the frames \
                 (nearest pixel); make it at the frame size to place it exactly",
                size.0, size.1
            );
            self.push_event(PipelineEvent::Notice(notice))?;
        }
        Ok(())
    }

    /// Where this frame's mask is made, kept while the settings (and the GPU's state) stay.
    fn mask_maker(&mut self, settings: &Arc<PipelineSettings>) -> MaskMaker {
        let gpu_given_up = self.shared.gpu_given_up.load(Ordering::Relaxed);
        match &self.maker_for {
            Some((s, given_up, maker)) if Arc::ptr_eq(s, settings) && *given_up == gpu_given_up => {
                *maker
            }
            _ => {
                let maker = MaskMaker::for_settings(settings, &self.shared.backends, gpu_given_up);
                self.maker_for = Some((settings.clone(), gpu_given_up, maker));
                maker
            }
        }
    }

    /// Tells the source whether the frames its hardware decoder makes on the GPU may stay there
    /// (`FrameSource::keep_frames_on_gpu`): where the labeler thresholds them on the GPU and
    /// nothing on the way reads their pixels (the marker detector does; the window's view
    /// copies the frames it shows).
    fn say_where_frames_go(&mut self) {
        let settings = self.shared.settings();
        let keep = keeps_frames_on_gpu(self.mask_maker(&settings), &settings);
        if self.frames_on_gpu != Some(keep) {
            if let Some(source) = self.source.as_mut() {
                source.keep_frames_on_gpu(keep);
            }
            self.frames_on_gpu = Some(keep);
        }
    }

    /// Thresholds the frame (or stages it for a labeler that does) and hands it to the worker;
    /// a thresholding error is said once until it changes.
    fn hand_over(
        &mut self,
        frame: Frame,
        settings: Arc<PipelineSettings>,
        maker: MaskMaker,
    ) -> Result<(), Stopping> {
        let shared = self.shared;
        let captured = match maker {
            MaskMaker::Host { pack } => {
                let (buffers, asked) = (&mut self.buffers, Arc::clone(&settings));
                on_stage_pool(&asked, &shared.backends, || {
                    threshold_frame(frame, settings, pack, buffers)
                })
            }
            MaskMaker::Labeler => {
                // Staged only when the worker is behind: then the copy runs beside its work.
                // A frame the worker takes at once is uploaded faster by the worker itself,
                // without the hand-over of a staged copy between two threads. A frame already
                // in page-locked memory goes up from there, uncopied.
                // A frame on the GPU is copied there (`GreyStage::threshold_into`).
                let stage = shared.queue.waiting_frames() > 0
                    && frame.grey.device_plane().is_none()
                    && !frame.grey.page_locked();
                let backends = stage.then_some(&*shared.backends);
                grey_only(frame, settings, backends, &mut self.buffers)
            }
        };
        let item = match captured {
            Ok(captured) => {
                self.last_threshold_error = None;
                Item::Frame(Box::new(captured))
            }
            Err(why) if self.last_threshold_error.as_deref() == Some(&why) => return Ok(()),
            Err(why) => {
                self.last_threshold_error = Some(why.clone());
                Item::Event(PipelineEvent::EngineError(why))
            }
        };
        self.push(item)
    }
}

/// `source`, told to write its frames into page-locked buffers when there is a GPU to upload
/// them to (`FrameSource::set_page_locker`).
fn page_locked(shared: &Shared, mut source: Box<dyn FrameSource>) -> Box<dyn FrameSource> {
    if let Some(locker) = shared.backends.page_locker() {
        source.set_page_locker(locker);
    }
    source
}

/// Applies a playback command; false when the pipeline is stopping.
pub(super) fn apply_command(
    shared: &Shared,
    play: &mut Playback,
    source: &mut Option<Box<dyn FrameSource>>,
    command: SourceCommand,
) -> bool {
    match command {
        SourceCommand::Play => {
            play.playing = true;
            play.pace = None;
        }
        SourceCommand::Pause => play.playing = false,
        SourceCommand::Step => play.step = true,
        SourceCommand::Speed(speed) => {
            play.speed = if speed.is_finite() {
                speed.max(0.0)
            } else {
                0.0
            };
            play.pace = None;
        }
        SourceCommand::CameraControls(controls) => {
            if let Some(src) = source.as_mut() {
                // Refusals come back as notices with the next frame.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    src.set_camera_controls(&controls)
                }));
            }
        }
        SourceCommand::Seek(index) => {
            let Some(src) = source.as_mut() else {
                return true;
            };
            match src.seek(index) {
                Ok(()) => {
                    play.ended = false;
                    play.pace = None;
                    // Paused: show the frame sought to.
                    play.step = !play.playing;
                }
                Err(e) => return shared.push(Item::Event(PipelineEvent::Notice(e.to_string()))),
            }
        }
    }
    true
}

/// Sleeps until a file's frame at media time `time_s` is due at the current speed. A frame
/// more than half a second late (after a pause, a slow worker, a loop) restarts the clock.
pub(super) fn wait_until_due(shared: &Shared, play: &mut Playback, time_s: f64) {
    let now = Instant::now();
    let (wall0, media0) = *play.pace.get_or_insert((now, time_s));
    let offset = (time_s - media0) / play.speed;
    if !(0.0..1e6).contains(&offset) {
        play.pace = Some((now, time_s));
        return;
    }
    let due = wall0 + Duration::from_secs_f64(offset);
    if now > due + Duration::from_millis(500) {
        play.pace = Some((now, time_s));
        return;
    }
    while !shared.stopping() {
        let left = due.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(STOP_POLL));
    }
}

/// The capture thread's thresholding state: the one-pass thresholder and the rings of output
/// buffers it writes into (a steady stream of frames of one size allocates no mask).
pub(super) struct CaptureBuffers {
    binarizer: Binarizer,
    bytes: BufferRing<BinaryImage>,
    packed: BufferRing<PackedBinary>,
    levels: BufferRing<ThresholdLevels>,
    mask: MaskFit,
    /// Page-locks the packed masks' buffers (each once, when first reused) for the GPU's DMA,
    /// when there is a GPU.
    locker: Option<Arc<dyn PageLocker>>,
}

/// The settings' mask at the frames' size: made once per (mask, frame size), not per frame.
#[derive(Default)]
pub(super) struct MaskFit {
    fitted: Option<(Arc<Mask>, u32, u32, Arc<PixelMask>)>,
}

impl MaskFit {
    fn fit(
        &mut self,
        mask: &Arc<Mask>,
        width: u32,
        height: u32,
    ) -> crate::error::Result<Arc<PixelMask>> {
        match &self.fitted {
            Some((m, w, h, fitted)) if Arc::ptr_eq(m, mask) && (*w, *h) == (width, height) => {
                Ok(fitted.clone())
            }
            _ => {
                let fitted = Arc::new(mask.fit(width, height)?);
                self.fitted = Some((mask.clone(), width, height, fitted.clone()));
                Ok(fitted)
            }
        }
    }
}

impl CaptureBuffers {
    /// Rings of `frames_in_flight` buffers (the frames the queue holds, plus the one the worker
    /// labels and the one being thresholded); the byte masks also go out with the results (the
    /// window's mask view), so that ring may hold `results_held` more.
    pub(super) fn new(frames_in_flight: usize, results_held: usize) -> Self {
        Self {
            binarizer: Binarizer::new(),
            bytes: BufferRing::new(frames_in_flight + results_held),
            packed: BufferRing::new(frames_in_flight),
            levels: BufferRing::new(frames_in_flight),
            mask: MaskFit::default(),
            locker: None,
        }
    }
}

fn empty_bytes() -> BinaryImage {
    BinaryImage {
        width: 0,
        height: 0,
        data: Vec::new(),
    }
}

fn empty_packed() -> PackedBinary {
    PackedBinary {
        width: 0,
        height: 0,
        words_per_row: 0,
        lock: Default::default(),
        words: Vec::new(),
    }
}

fn empty_levels() -> ThresholdLevels {
    ThresholdLevels::Local {
        width: 0,
        height: 0,
        levels: Vec::new(),
    }
}

/// Whether frames a hardware decoder leaves on the GPU stay there for settings whose masks
/// `maker` makes: the labeler thresholds them on the GPU, and no marker detector reads every
/// frame's pixels.
fn keeps_frames_on_gpu(maker: MaskMaker, settings: &PipelineSettings) -> bool {
    maker == MaskMaker::Labeler && settings.markers.is_none()
}

/// Whether a pipeline with `settings` on `backends` keeps the frames a hardware decoder leaves
/// on the GPU there (`FrameSource::keep_frames_on_gpu`), as long as the GPU does not fail.
pub fn frames_stay_on_gpu(settings: &PipelineSettings, backends: &Backends) -> bool {
    keeps_frames_on_gpu(MaskMaker::for_settings(settings, backends, false), settings)
}

/// Where a frame's mask is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MaskMaker {
    /// Here, on the capture thread: bytes for CPU algorithms, packed bits for GPU ones.
    Host { pack: bool },
    /// By the labeler, where it runs (`Labeler::label_grey`: on the GPU, which then gets the
    /// grey frame alone, once, for the mask and the sub-pixel centroids alike).
    Labeler,
}

impl MaskMaker {
    /// `gpu_given_up`: the worker moved to the CPU after a GPU failure (`--backend auto`).
    pub(super) fn for_settings(
        settings: &PipelineSettings,
        backends: &Backends,
        gpu_given_up: bool,
    ) -> Self {
        if gpu_given_up && may_fall_back(settings) {
            return MaskMaker::Host { pack: false };
        }
        let Ok(resolved) = resolve_algorithm(settings, backends) else {
            return MaskMaker::Host { pack: false };
        };
        // Only where the labeler will do it (else the worker would threshold every frame):
        // shape descriptors come from a host mask (`label_shapes`), and sub-pixel centroids
        // need a labeler that computes them on the device. The window's mask view needs the
        // mask on the host, and an adaptive threshold has no single level for the device to
        // apply. A mask (`frame::mask`) goes with the frame and is applied where it is packed.
        let on_device = resolved.backend == Backend::Cuda
            && algorithm_info(resolved.name).is_ok_and(|info| {
                info.thresholds_grey && (!settings.subpixel || info.subpixel_on_device)
            })
            && !(settings.shapes || settings.filter.has_shape_limits())
            && !settings.want_binary
            && !matches!(settings.threshold, ThresholdSpec::Adaptive { .. });
        if on_device {
            MaskMaker::Labeler
        } else {
            MaskMaker::Host {
                pack: resolved.backend == Backend::Cuda,
            }
        }
    }
}

/// A frame for a labeler that thresholds it itself: here it is at most copied into page-locked
/// memory for the GPU's DMA (`stage_on`; step "stage grey"), so that the worker's upload is the
/// DMA alone. With a mask in the settings, the mask at the frame's size goes with it.
fn grey_only(
    frame: Frame,
    settings: Arc<PipelineSettings>,
    stage_on: Option<&Backends>,
    buffers: &mut CaptureBuffers,
) -> std::result::Result<Captured, String> {
    let mut steps = vec![StepTime::new("capture", frame.decode_ms)];
    let t = Instant::now();
    let staged_grey = stage_on.and_then(|b| b.stage_grey(&frame.grey));
    if staged_grey.is_some() {
        steps.push(StepTime::new("stage grey", t.elapsed().as_secs_f64() * 1e3));
    }
    let pixel_mask = match &settings.mask {
        Some(mask) => Some(
            buffers
                .mask
                .fit(mask, frame.grey.width, frame.grey.height)
                .map_err(|e| format!("mask: {e}"))?,
        ),
        None => None,
    };
    Ok(Captured {
        steps,
        frame,
        settings,
        binary: None,
        packed: None,
        levels: None,
        pixel_mask,
        staged_grey,
    })
}

/// Thresholds a frame on the capture thread, in one pass, into reused buffers: packed bits for
/// GPU algorithms (`pack`), bytes for CPU ones and for the window's mask view, and the levels
/// when sub-pixel centroids weigh pixels by them (the mask is made from those very levels).
/// One step, "threshold+pack" when it packs, "threshold" otherwise.
pub(super) fn threshold_frame(
    frame: Frame,
    settings: Arc<PipelineSettings>,
    pack: bool,
    buffers: &mut CaptureBuffers,
) -> std::result::Result<Captured, String> {
    let mut steps = vec![StepTime::new("capture", frame.decode_ms)];
    let t = Instant::now();
    let threshold_err = |e: Error| format!("threshold {}: {e}", settings.threshold);
    let (grey, invert, spec) = (&*frame.grey, settings.invert, &settings.threshold);
    let (want_bytes, subpixel) = (!pack || settings.want_binary, settings.subpixel);
    let CaptureBuffers {
        binarizer,
        bytes,
        packed,
        levels,
        mask: buffers_mask,
        locker,
    } = buffers;
    let mut bytes_buf = want_bytes.then(|| bytes.claim(empty_bytes));
    let mut packed_buf = pack.then(|| packed.claim(empty_packed));
    // A buffer that held a mask before is being reused: page-locked below (a new one is not,
    // as in `source::frame_pool`: under a slow consumer new buffers come and go).
    let reused = packed_buf.as_ref().is_some_and(|p| !p.words.is_empty());
    let mut levels_buf = subpixel.then(|| levels.claim(empty_levels));
    // Local levels are written into the vector of a `Local` slot.
    let level_vec = match levels_buf.as_deref_mut() {
        Some(slot) => {
            if !matches!(slot, ThresholdLevels::Local { .. }) {
                *slot = empty_levels();
            }
            match slot {
                ThresholdLevels::Local {
                    width,
                    height,
                    levels,
                } => {
                    (*width, *height) = (grey.width, grey.height);
                    Some(levels)
                }
                ThresholdLevels::Global(_) => None,
            }
        }
        None => None,
    };
    let out = Outputs {
        bytes: bytes_buf.as_deref_mut(),
        packed: packed_buf.as_deref_mut(),
        levels: level_vec,
    };
    let applied = match binarizer.run(grey, spec, invert, out) {
        Ok(Some(applied)) => applied,
        // A local method without a one-pass form: its levels first, then the mask from them.
        Ok(None) => {
            let computed = ThresholdLevels::compute(grey, spec, invert).map_err(threshold_err)?;
            let out = Outputs {
                bytes: bytes_buf.as_deref_mut(),
                packed: packed_buf.as_deref_mut(),
                levels: None,
            };
            let applied = match &computed {
                ThresholdLevels::Global(t) => {
                    binarize::global(grey, *t, invert, out).map(|()| Applied::Global(*t))
                }
                ThresholdLevels::Local { levels, .. } => {
                    binarize::per_pixel(grey, levels, invert, out).map(|()| Applied::PerPixel)
                }
            }
            .map_err(threshold_err)?;
            if let Some(slot) = levels_buf.as_deref_mut() {
                *slot = computed;
            }
            applied
        }
        Err(e) => return Err(threshold_err(e)),
    };
    if let (Some(slot), Applied::Global(t)) = (levels_buf, applied) {
        *slot = ThresholdLevels::Global(t);
    }
    if let Some(mask) = &settings.mask {
        let mask = buffers_mask
            .fit(mask, grey.width, grey.height)
            .map_err(|e| format!("mask: {e}"))?;
        mask.apply(
            bytes_buf.map(|b| b.data.as_mut_slice()),
            packed_buf.as_deref_mut().map(|p| p.words.as_mut_slice()),
        );
    }
    if let (Some(packed), Some(locker), true) = (packed_buf, locker.as_deref(), reused) {
        packed.lock(locker);
    }
    steps.push(StepTime::new(
        if pack { "threshold+pack" } else { "threshold" },
        ms(t),
    ));
    Ok(Captured {
        frame,
        settings,
        binary: want_bytes.then(|| bytes.share()),
        packed: pack.then(|| packed.share()),
        levels: subpixel.then(|| levels.share()),
        pixel_mask: None,
        staged_grey: None,
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::image::GrayImage;
    use crate::source::synthetic::MarkerScene;
    use crate::threshold::apply;
    use crate::threshold::spec::ThresholdSpec;
    use std::collections::{HashSet, VecDeque};

    fn frame(grey: &GrayImage, index: u64) -> Frame {
        Frame {
            index,
            time_s: 0.0,
            grey: grey.clone().into(),
            captured_at: Instant::now(),
            decode_ms: 0.0,
            name: String::new(),
        }
    }

    /// The packed masks' buffers are page-locked when first reused, and stay so.
    #[test]
    fn packed_buffers_are_page_locked_when_reused() {
        use crate::frame::page_lock::testing::CountingLocker;
        let scene = MarkerScene::new(96, 64, 3).unwrap();
        let mut buffers = CaptureBuffers::new(2, 0);
        let counting = Arc::new(CountingLocker::default());
        buffers.locker = Some(counting.clone());
        let settings = Arc::new(PipelineSettings::default());
        let mut locked = Vec::new();
        for i in 0..4 {
            let c = threshold_frame(
                frame(&scene.render(i), i),
                settings.clone(),
                true,
                &mut buffers,
            )
            .unwrap();
            locked.push(c.packed.as_ref().unwrap().page_locked());
            // Dropped at once: the next frame reuses the buffer.
        }
        assert_eq!(locked, [false, true, true, true]);
        assert_eq!(counting.made(), 1);
    }

    /// Every combination of threshold kind, polarity, sub-pixel levels, packing and mask view
    /// gives what the two-step path gave, with three frames in flight at any time (queue and
    /// worker): the buffers cycle through the ring, none is made after the first frames.
    #[test]
    fn one_pass_matches_the_two_step_path_and_reuses_its_buffers() {
        let scene = MarkerScene::new(203, 117, 2).unwrap();
        let mut buffers = CaptureBuffers::new(4, 0);
        let (mut byte_ptrs, mut word_ptrs) = (HashSet::new(), HashSet::new());
        let specs = [
            ThresholdSpec::Fixed(90),
            ThresholdSpec::Otsu,
            ThresholdSpec::Adaptive { window: 15, c: 3.0 },
        ];
        for spec in specs {
            for (invert, subpixel, pack, want_binary) in
                (0..16).map(|k| (k & 1 != 0, k & 2 != 0, k & 4 != 0, k & 8 != 0))
            {
                let settings = Arc::new(PipelineSettings {
                    threshold: spec,
                    invert,
                    subpixel,
                    want_binary,
                    ..PipelineSettings::default()
                });
                let what = format!(
                    "{spec} invert {invert} subpixel {subpixel} pack {pack} view {want_binary}"
                );
                let mut in_flight = VecDeque::new();
                let mut level_ptrs = HashSet::new();
                for i in 0..10 {
                    let grey = scene.render(i);
                    let c = threshold_frame(frame(&grey, i), settings.clone(), pack, &mut buffers)
                        .unwrap();
                    let (expected, levels) = if subpixel {
                        let levels = ThresholdLevels::compute(&grey, &spec, invert).unwrap();
                        (levels.mask(&grey, invert).unwrap(), Some(levels))
                    } else {
                        (apply(&grey, &spec, invert).unwrap(), None)
                    };
                    assert_eq!(c.levels.as_deref(), levels.as_ref(), "{what}");
                    match (&c.binary, !pack || want_binary) {
                        (Some(b), true) => {
                            assert!(**b == expected, "{what}: bytes");
                            byte_ptrs.insert(b.data.as_ptr());
                        }
                        (None, false) => {}
                        (b, _) => panic!("{what}: byte mask present = {}", b.is_some()),
                    }
                    match (&c.packed, pack) {
                        (Some(p), true) => {
                            assert!(**p == expected.pack(), "{what}: packed");
                            word_ptrs.insert(p.words.as_ptr());
                        }
                        (None, false) => {}
                        (p, _) => panic!("{what}: packed mask present = {}", p.is_some()),
                    }
                    if let Some(ThresholdLevels::Local { levels, .. }) = c.levels.as_deref() {
                        level_ptrs.insert(levels.as_ptr());
                    }
                    let names: Vec<&str> = c.steps.iter().map(|s| s.step.as_str()).collect();
                    let threshold = if pack { "threshold+pack" } else { "threshold" };
                    assert_eq!(names, ["capture", threshold], "{what}");
                    in_flight.push_back(c);
                    if in_flight.len() > 3 {
                        in_flight.pop_front();
                    }
                }
                assert!(
                    level_ptrs.len() <= 4,
                    "{what}: {} level buffers",
                    level_ptrs.len()
                );
            }
        }
        // One frame size throughout: the first buffers served every frame.
        assert!(byte_ptrs.len() <= 4, "{} byte buffers", byte_ptrs.len());
        assert!(word_ptrs.len() <= 4, "{} packed buffers", word_ptrs.len());
    }
}
