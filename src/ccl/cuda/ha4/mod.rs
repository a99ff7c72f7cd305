//! Rust wrapper of `kernels/ha4.cu`: HA4 (one pixel per lane), HA4_64 (two pixels per lane),
//! HA4w (one mask word per lane), HA8 (HA4w with the 8-connectivity row merge) and `naive`
//! (HA4w / HA8 labels, then the generic per-pixel analysis stage of `cuda::analysis`).
//!
//! Buffers are sized for the current frame size and kept between frames; only a size change
//! reallocates. Every step is bracketed by CUDA events, so each kernel and transfer has its time.

mod kernels;
mod launches;
mod set;

use super::analysis::Analysis;
use super::buffers::{ensure_label_image, GpuStats, Lookback, OtfFeatures};
use super::descriptors::DescriptorStage;
use super::detections::{DetectionsKernel, DeviceDetections};
use super::downloads::{download_labels, StatsDownload};
use super::frame_graph::{FrameGraphs, GraphFrames, GraphKey, GRAPH_STEP};
use super::launches::{check_connectivity, PackKernels};
use super::mask_input::MaskInput;
use super::mask_input::{DeviceMask, MaskStaging};
use super::results::ResultDownload;
use super::subpixel::{raw_device_ptr, FrameStrides, SubpixelStage};
use super::timing::{StepTimings, Steps};
use crate::ccl::descriptors::ShapeSums;
use crate::ccl::frame_set::GreySet;
use crate::ccl::stats::ComponentStats;
use crate::ccl::subpixel::{GreyWeights, SubpixelCentroid};
use crate::ccl::{
    CentroidRows, Completed, Connectivity, GreyLabeling, Keep, LabelRequest, Labeler, Labeling,
    Mask, ResidentTiming, RowFilter, ShapeRows, StepTime, Submission, Want, DEVICE_DETECTIONS_STEP,
    STATISTICS_ROWS_STEP, SUBPIXEL_ROWS_STEP,
};
use crate::error::{Error, Result};
use crate::frame::image::{BinaryImage, LabelImage, PackedBinary};
use crate::gpu::buffers::{alloc_err, check_free_memory, reuse_or_alloc};
use crate::gpu::events::StepEvents;
use crate::gpu::kernels::KernelFile;
use crate::gpu::{cuda_err, Gpu};
use crate::threshold::gpu::GreyStage;
use crate::threshold::spec::ThresholdSpec;
use crate::threshold::GreyInput;
use cudarc::driver::{CudaEvent, CudaSlice};
use kernels::Kernels;
use launches::{Accumulate, BorderMerge, NumberSlots, Relabel, StripLabel};
use std::sync::Arc;
use std::time::Instant;

/// Rows per strip in `strip_label` (one warp per row, so 32 × rows threads per block); the
/// paper's choice. `Ha4::set_strip_rows` changes it for tuning.
const STRIP_ROWS: u32 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// 32 pixels per warp step, one per lane.
    Ha4,
    /// 64 pixels per warp step, two per lane (64-bit masks).
    Ha4x64,
    /// 1024 pixels per warp step, one 32-bit mask word per lane, with per-lane and warp-level
    /// aggregation of the features (our variant; the same kernels and merge rules otherwise).
    Words,
    /// HA8: `Words` with the 8-connectivity merge between rows (segments touching diagonally).
    Words8,
    /// Naive CCA: `Words` (4-connectivity) or `Words8` (8) labels, then one set of feature
    /// atomics per foreground pixel (the papers' baseline).
    Naive,
    /// HA+CD: `Words` / `Words8` labeling, features once per segment through conflict
    /// detection (one atomic per component per warp step).
    Cd,
    /// HA+OTF: `Words` / `Words8` labeling where every segment starts with its own features
    /// and each label merge moves them to the new root (Lemaitre et al. Algorithm 2); no
    /// feature pass.
    Otf,
}

impl Variant {
    pub fn connectivities(self) -> &'static [Connectivity] {
        match self {
            Variant::Ha4 | Variant::Ha4x64 | Variant::Words => &[Connectivity::Four],
            Variant::Words8 => &[Connectivity::Eight],
            Variant::Naive | Variant::Cd | Variant::Otf => {
                &[Connectivity::Four, Connectivity::Eight]
            }
        }
    }
}

/// Device and pinned host buffers for one frame size.
struct Buffers {
    mask: DeviceMask,
    /// Equivalence labels; only segment heads are ever written or read.
    eq: CudaSlice<u32>,
    /// Output label image (allocated on first use: CCA alone never needs it).
    out: Option<CudaSlice<u32>>,
    /// Root index -> final component index (only written at roots).
    slot: CudaSlice<u32>,
    lookback: Lookback,
    row_offset: CudaSlice<u32>,
    /// Component count.
    total: CudaSlice<u32>,
    /// Per-component statistics, capacity = the most components an image this size can have.
    stats: CudaSlice<GpuStats>,
    /// HA+OTF features per label, indexed by a head's rank label (Variant::Otf only).
    feat: Option<OtfFeatures>,
}

impl Buffers {
    /// The buffers of a `width × height` frame.
    fn alloc(gpu: &Gpu, variant: Variant, width: u32, height: u32) -> Result<Buffers> {
        let pixels = width as usize * height as usize;
        let words_per_row = PackedBinary::words_per_row_for(width);
        // 4-connectivity: at most one component per two pixels (checkerboard), plus one.
        let max_components = pixels.div_ceil(2) + 1;
        let feat_bytes = if variant == Variant::Otf {
            pixels * OtfFeatures::BYTES_PER_ELEMENT
        } else {
            0
        };
        let needed = pixels * (1 + 4 + 4)
            + words_per_row * 4 * height as usize
            + max_components * 40
            + feat_bytes;
        check_free_memory(gpu, needed, width, height)?;
        let s = &gpu.stream;
        // SAFETY (all `alloc`s): every element is written by a kernel before it is read:
        // eq/slot/stats only at heads/roots after initialisation, row offsets by number_slots.
        let buffers = unsafe {
            Buffers {
                mask: DeviceMask::alloc(s, width, height)?,
                eq: s.alloc::<u32>(pixels).map_err(alloc_err)?,
                out: None,
                slot: s.alloc::<u32>(pixels).map_err(alloc_err)?,
                lookback: Lookback::new(gpu, height)?,
                row_offset: s.alloc::<u32>(height as usize).map_err(alloc_err)?,
                total: s.alloc_zeros::<u32>(1).map_err(alloc_err)?,
                stats: s.alloc::<GpuStats>(max_components).map_err(alloc_err)?,
                feat: if variant == Variant::Otf {
                    Some(OtfFeatures::alloc(gpu, pixels)?)
                } else {
                    None
                },
            }
        };
        Ok(buffers)
    }
}

pub struct Ha4 {
    gpu: Arc<Gpu>,
    variant: Variant,
    kernels: Kernels,
    pack: PackKernels,
    buffers: Option<Buffers>,
    /// The count alone (benchmarks).
    download: StatsDownload,
    /// The count and the statistics rows of a frame, in one copy.
    results: ResultDownload,
    /// Page-locked copies of the mask for its upload.
    staged: MaskStaging,
    /// One CUDA graph per frame shape and settings (statistics without a label image).
    graphs: FrameGraphs,
    events: StepEvents,
    strip_rows: u32,
    /// The per-pixel analysis stage (Variant::Naive only).
    analysis: Option<Analysis>,
    /// Connectivity of the current run.
    connectivity: Connectivity,
    /// Grey-weighted centroids (created on the first `label_weighted`).
    subpixel: Option<SubpixelStage>,
    /// Shape descriptor sums (created on the first `label_shapes`).
    descriptors: Option<DescriptorStage>,
    /// The grey frame on the device, for the sub-pixel centroids and the device threshold.
    grey: GreyStage,
    /// Leave each frame's detections on the device (`Labeler::keep_detections_on_device`);
    /// their kernel, loaded with the first.
    detections_on_device: bool,
    detections: Option<DetectionsKernel>,
    /// Recorded after a frame's results are queued for download, when its sub-pixel sums are
    /// queued behind them (`SubpixelStage::launch_early`): the host waits for the count alone.
    count_ready: Option<CudaEvent>,
    /// The grey frame `submit` queued, until `complete` takes it.
    submitted: Option<QueuedGrey>,
    /// Frames the pipeline may keep submitted at once (`Labeler::frames_in_flight`).
    frames_in_flight: usize,
    /// The first labels of a frame set's frames (`set`), made with the first set.
    set_starts: Option<set::SetStarts>,
    /// The frame set `submit_grey_set` queued, until `complete_grey_set` takes it.
    submitted_set: Option<set::QueuedSet>,
}

/// A grey frame queued up to its results' download (`Ha4::queue_grey`), or to its sub-pixel
/// sums (`Ha4::queue_weighted_grey`): the steps queued so far and what the rest of its run
/// needs.
struct QueuedGrey {
    steps: Vec<&'static str>,
    width: u32,
    height: u32,
    invert: bool,
    /// The label image is downloaded too.
    labels: bool,
    /// With its sub-pixel sums (`complete` gives their centroids).
    weighted: bool,
}

/// Where a run's mask comes from.
#[derive(Clone, Copy)]
enum Input<'a> {
    /// Made on the host; with the grey frame and its levels when sub-pixel centroids are wanted.
    Mask(Mask<'a>, Option<&'a GreyWeights<'a>>),
    /// A grey frame, thresholded on the device with one global level.
    Grey(GreyInput<'a>),
}

impl Input<'_> {
    fn size(&self) -> (u32, u32) {
        match self {
            Input::Mask(Mask::Bytes(b), _) => (b.width, b.height),
            Input::Mask(Mask::Packed(p), _) => (p.width, p.height),
            Input::Grey(g) => (g.grey.width, g.grey.height),
        }
    }
}

impl Ha4 {
    /// Rows per strip (1..=32): more rows move merges from the border kernel into the strip
    /// kernel. For tuning; the default is the paper's 4.
    pub fn set_strip_rows(&mut self, rows: u32) -> Result<()> {
        if !(1..=32).contains(&rows) {
            return Err(Error::Invalid(format!(
                "strip rows must be in 1..=32, got {rows}"
            )));
        }
        self.strip_rows = rows;
        Ok(())
    }

    pub fn new(gpu: Arc<Gpu>, variant: Variant) -> Result<Ha4> {
        let kernels = Kernels::load(&gpu, variant)?;
        let pack = PackKernels::load(&gpu, KernelFile::Ha4)?;
        let download = StatsDownload::new(&gpu)?;
        let results = ResultDownload::new(&gpu, KernelFile::Ha4)?;
        let analysis = match variant {
            Variant::Naive => Some(Analysis::new(gpu.clone())?),
            _ => None,
        };
        let grey = GreyStage::new(gpu.clone())?;
        let graphs = FrameGraphs::new(gpu.tuning.cuda_graphs);
        let gpu_frames_in_flight = gpu.tuning.frames_in_flight;
        Ok(Ha4 {
            gpu,
            variant,
            kernels,
            pack,
            buffers: None,
            download,
            results,
            staged: MaskStaging::default(),
            graphs,
            events: StepEvents::default(),
            strip_rows: STRIP_ROWS,
            analysis,
            connectivity: variant.connectivities()[0],
            subpixel: None,
            descriptors: None,
            grey,
            detections_on_device: false,
            detections: None,
            count_ready: None,
            submitted: None,
            frames_in_flight: gpu_frames_in_flight,
            set_starts: None,
            submitted_set: None,
        })
    }

    /// Checks that this variant supports `connectivity` and selects it for the next run.
    fn use_connectivity(&mut self, connectivity: Connectivity) -> Result<()> {
        check_connectivity(self.name(), connectivity, self.variant.connectivities())?;
        self.connectivity = connectivity;
        Ok(())
    }

    /// Registry constructor.
    pub fn create(gpu: &Arc<Gpu>, variant: Variant) -> Result<Box<dyn Labeler>> {
        Ok(Box::new(Ha4::new(gpu.clone(), variant)?))
    }

    /// Makes sure the buffers fit a `width × height` frame; reallocates only on a size change.
    fn ensure_buffers(&mut self, width: u32, height: u32) -> Result<()> {
        let (gpu, variant) = (&self.gpu, self.variant);
        reuse_or_alloc(
            &mut self.buffers,
            |b| b.mask.fits(width, height),
            || Buffers::alloc(gpu, variant, width, height),
        )
    }

    /// Where the strip kernel will find a byte mask of this width: the word-per-lane kernels
    /// pack it themselves when the width allows; the others after `pack_bytes`.
    fn byte_input(&self, width: u32, height: u32) -> MaskInput {
        match self.kernels.take_bytes() {
            true => MaskInput::for_bytes(width, height),
            false => MaskInput::PackFirst,
        }
    }

    /// Launches the labeling/analysis kernels on the mask where `input` says it is, recording
    /// an event after each. Returns the step names (event first_event + i + 1 ends step i; event
    /// first_event is recorded by the caller before the first step).
    fn launch_kernels(
        &mut self,
        want: Want,
        input: MaskInput,
        first_event: usize,
    ) -> Result<Vec<&'static str>> {
        // HA+OTF: features travel with the merges, so the strip and border kernels change and
        // the feature pass goes away (labels alone use the plain kernels).
        let features = want.stats() && self.analysis.is_none();
        let name = self.name();
        let k = &self.kernels;
        let run = k.for_run(name, self.connectivity, input, features)?;
        let otf = run.otf;
        let mut steps = Steps::new(&self.gpu, &mut self.events, first_event, Vec::new());
        let b = self.buffers.as_mut().expect("buffers allocated");
        if input == MaskInput::PackFirst {
            steps.launch(self.pack.of(&mut b.mask))?;
        }
        let (kernel, rows) = (run.strip, self.strip_rows);
        steps.launch(StripLabel {
            kernel,
            buffers: b,
            input,
            otf,
            rows,
        })?;
        let strips = b.mask.height.div_ceil(rows);
        if strips > 1 {
            steps.launch(BorderMerge {
                kernel: run.border,
                buffers: b,
                otf,
                borders: strips - 1,
                strip_rows: rows,
                split: k.border_split,
            })?;
        }
        if want == Want::Labels || self.analysis.is_some() {
            let (kernel, slots) = (&k.relabel_find, false);
            steps.launch(Relabel {
                kernel,
                buffers: b,
                slots,
            })?;
            if let Some(analysis) = self.analysis.as_mut() {
                let out = b.out.as_mut().expect("out allocated for labels");
                let (w, h) = (b.mask.width, b.mask.height);
                analysis.launch(out, w, h, self.connectivity, want, &mut steps)?;
            }
            return Ok(steps.into_names());
        }
        // Flatten, count, scan and slots: one kernel.
        let epoch = b.lookback.next_epoch(steps.gpu())?;
        let kernel = run.number;
        steps.launch(NumberSlots {
            kernel,
            buffers: b,
            otf,
            epoch,
        })?;
        if !otf {
            steps.launch(Accumulate::new(k, b))?;
        }
        if want == Want::Both {
            let (kernel, slots) = (&k.relabel_slot, true);
            steps.launch(Relabel {
                kernel,
                buffers: b,
                slots,
            })?;
        }
        Ok(steps.into_names())
    }

    fn ensure_out(&mut self) -> Result<()> {
        let b = self.buffers.as_mut().expect("buffers allocated");
        ensure_label_image(&self.gpu, &mut b.out, b.mask.pixels())
    }

    /// Downloads the component count, then the statistics (if wanted) and the label image
    /// (if wanted).
    fn download(
        &mut self,
        want: Want,
    ) -> Result<(u32, Option<Vec<ComponentStats>>, Option<LabelImage>)> {
        let (count, stats) = match self.analysis.as_mut() {
            Some(analysis) => analysis.fetch(want.stats())?,
            None => {
                self.queue_results_and_wait()?;
                let b = self.buffers.as_ref().expect("buffers allocated");
                self.results
                    .finish(&self.gpu, &b.total, &b.stats, want.stats())?
            }
        };
        let labels = if want.labels() {
            Some(self.download_label_image()?)
        } else {
            None
        };
        Ok((count, stats, labels))
    }

    /// Queues the frame's result download (`results`) and waits for it.
    fn queue_results_and_wait(&mut self) -> Result<()> {
        let b = self.buffers.as_ref().expect("buffers allocated");
        self.results.queue(&self.gpu.stream, &b.total, &b.stats)?;
        self.gpu
            .stream
            .synchronize()
            .map_err(|e| cuda_err("downloading results", e))
    }

    /// Queues the tracker's detections of the frame whose rows are on the device (after
    /// `bring_rest`) and whose sub-pixel sums were queued (`SubpixelStage::launch`).
    fn queue_device_detections(&mut self, count: u32) -> Result<Arc<DeviceDetections>> {
        if self.detections.is_none() {
            self.detections = Some(DetectionsKernel::load(&self.gpu)?);
        }
        let b = self.buffers.as_ref().expect("buffers allocated");
        let rows = self.results.rows_on_device(&self.gpu, &b.stats)?;
        let s = &self.gpu.stream;
        let sums = (self.subpixel.as_ref())
            .and_then(|stage| stage.sums())
            .map_or(0, |sums| raw_device_ptr(sums, s));
        if rows.n > 0 && sums == 0 {
            return Err(Error::Invalid(
                "the detections on the device need the sub-pixel sums".into(),
            ));
        }
        let kernel = self.detections.as_mut().expect("loaded above");
        // SAFETY: `rows` addresses the frame's n rows in the buffers of this labeler (or the
        // stats buffer), `sums` the 3 × count sums of the sub-pixel stage; neither is written
        // again before the next frame, which this stream runs after the kernel.
        unsafe { kernel.queue(&self.gpu, rows, sums, count) }
    }

    /// Queues the tracker's detections as a step of its own, where they are to stay on the
    /// device (`keep_detections_on_device`).
    fn detections_step(
        &mut self,
        count: u32,
        steps: &mut Vec<&'static str>,
    ) -> Result<Option<Arc<DeviceDetections>>> {
        if !self.detections_on_device {
            return Ok(None);
        }
        let made = self.queue_device_detections(count)?;
        steps.push(DEVICE_DETECTIONS_STEP);
        self.events.record(&self.gpu, steps.len())?;
        Ok(Some(made))
    }

    /// Downloads the numbered label image of the frame the stream has labeled.
    fn download_label_image(&self) -> Result<LabelImage> {
        let b = self.buffers.as_ref().expect("buffers allocated");
        let out = b.out.as_ref().expect("out allocated");
        download_labels(&self.gpu, out, b.mask.width, b.mask.height)
    }

    /// Copies the mask into page-locked memory (a reallocation of that buffer forgets the
    /// frame graphs) and returns where the kernels will find it once uploaded.
    fn stage_mask(&mut self, mask: Mask<'_>) -> Result<MaskInput> {
        if self.staged.fill(&self.gpu, mask)? {
            self.graphs.invalidate();
        }
        Ok(match mask {
            Mask::Bytes(image) => self.byte_input(image.width, image.height),
            Mask::Packed(_) => MaskInput::Packed,
        })
    }

    /// Uploads the mask and returns the names of its steps (event i + 1 is recorded after step
    /// i) and where the mask now is; `launch_kernels` packs bytes (in the strip kernel where it
    /// can).
    fn upload_mask(&mut self, mask: Mask<'_>) -> Result<(Vec<&'static str>, MaskInput)> {
        let input = self.stage_mask(mask)?;
        self.queue_upload(input)?;
        self.events.record(&self.gpu, 1)?;
        let step = match input {
            MaskInput::Packed => "upload (packed)",
            MaskInput::Bytes | MaskInput::PackFirst => "upload",
        };
        Ok((vec![step], input))
    }

    /// Makes the buffers fit a `width × height` frame and returns the statistics rows of its
    /// download (with `want_stats`; filtered on the device with `may_filter`, see
    /// `ResultDownload::prepare`). A reallocation forgets the frame graphs.
    fn prepare(
        &mut self,
        width: u32,
        height: u32,
        want_stats: bool,
        may_filter: bool,
    ) -> Result<usize> {
        crate::frame::image::check_size(width, height)?;
        let size = self.buffers.as_ref().map(|b| (b.mask.width, b.mask.height));
        self.ensure_buffers(width, height)?;
        self.graphs.forget_unless_same(size, (width, height));
        let capacity = self
            .buffers
            .as_ref()
            .expect("buffers allocated")
            .stats
            .len();
        // The analysis stage downloads its own rows, unfiltered.
        let may_filter = may_filter && self.analysis.is_none();
        self.results.prepare(
            &self.gpu,
            capacity,
            want_stats,
            may_filter,
            &mut self.graphs,
        )
    }

    /// Statistics of a host mask as one graph launch (captured on the first frame of its key),
    /// timed as one step.
    fn run_graph(&mut self, mask: Mask<'_>) -> Result<Labeling> {
        let (width, height) = mask.size();
        let rows = self.prepare(width, height, true, true)?;
        let input = self.stage_mask(mask)?;
        let want = Want::Stats;
        let key = GraphKey {
            width,
            height,
            connectivity: self.connectivity,
            want,
            input,
            rows,
            filtered: self.results.queued_filter().is_some(),
            setting: self.strip_rows,
            upload: !self.staged.in_place(),
        };
        self.launch_graph(&key, |me| me.queue_frame(want, input, key.upload))?;
        self.events.wait(1)?;
        self.finished_stats(&[GRAPH_STEP])
    }

    /// The statistics of the frame whose events were waited for, its steps timed by them.
    fn finished_stats(&mut self, steps: &[&'static str]) -> Result<Labeling> {
        let b = self.buffers.as_ref().expect("buffers allocated");
        let (count, stats) = self.results.finish(&self.gpu, &b.total, &b.stats, true)?;
        Ok(Labeling {
            count,
            labels: None,
            stats,
            timings: self.events.step_times(steps)?,
            filtered: self.results.queued_filter(),
            device_detections: None,
        })
    }

    /// The whole frame on this engine's stream: a fresh look-back, the upload (unless queued
    /// before: `upload` false), the kernels and the download.
    fn queue_frame(&mut self, want: Want, input: MaskInput, upload: bool) -> Result<()> {
        let b = self.buffers.as_mut().expect("buffers allocated");
        b.lookback.restart(&self.gpu)?;
        if upload {
            self.queue_upload(input)?;
        }
        self.launch_kernels(want, input, 0)?;
        let b = self.buffers.as_ref().expect("buffers allocated");
        self.results.queue(&self.gpu.stream, &b.total, &b.stats)
    }

    /// Runs the whole pipeline host to host. With `keep`, the grey frame goes up with the mask
    /// (or is the input), the label image is numbered on the device (`Want::Both`) and the
    /// grey-weighted centroids of the rows `keep` accepts are computed there; the label image
    /// is downloaded only if `want` asks. With `shapes`, the shape sums of the rows it accepts
    /// likewise. Returns the level for a grey input.
    fn run(
        &mut self,
        input: Input<'_>,
        want: Want,
        keep: Option<Keep<'_>>,
        shapes: Option<Keep<'_>>,
    ) -> Result<RunOutput> {
        // A grey frame with sub-pixel centroids: queued up to its sums, then finished (the
        // two halves `submit` and `complete` run apart).
        if let (Input::Grey(g), Some(keep), None, None) = (input, keep, shapes, &self.analysis) {
            let queued = self.queue_weighted_grey(g, want)?;
            return self.finish_weighted_grey(queued, keep);
        }
        // Statistics of a grey frame alike (`submit` and `complete`).
        if let (Input::Grey(g), Want::Stats, None, None, None) =
            (input, want, keep, shapes, &self.analysis)
        {
            let queued = self.queue_grey(g)?;
            let labeling = self.finish_grey(queued)?;
            // Waited for: the level's copy precedes the results'.
            return Ok((labeling, None, Some(self.grey.last_level()), None));
        }
        let (width, height) = input.size();
        // The sub-pixel and descriptor stages read the numbered label image and need every
        // statistics row.
        let on_device = keep.is_some() || shapes.is_some();
        if let Input::Mask(mask, _) = input {
            let plain = on_device || self.analysis.is_some() || want != Want::Stats;
            if self.graphs.enabled() && !plain {
                return Ok((self.run_graph(mask)?, None, None, None));
            }
        }
        let (kernel_want, download_want) = match (on_device, want.labels()) {
            (false, _) => (want, want),
            (true, true) => (Want::Both, Want::Both),
            (true, false) => (Want::Both, Want::Stats),
        };
        // The sub-pixel and descriptor rows are found by label: kept rows carry theirs.
        self.prepare(
            width,
            height,
            download_want.stats(),
            !download_want.labels(),
        )?;
        if kernel_want.labels() || self.analysis.is_some() {
            self.ensure_out()?;
        }
        if keep.is_some() && self.subpixel.is_none() {
            self.subpixel = Some(SubpixelStage::new(self.gpu.clone())?);
        }
        self.events.record(&self.gpu, 0)?;
        let (mut steps, mask_input, grey_input) = match input {
            Input::Mask(mask, weights) => {
                let (mut steps, mask_input) = self.upload_mask(mask)?;
                if keep.is_some() {
                    let w = weights.ok_or_else(|| {
                        Error::Invalid("sub-pixel centroids need the grey frame".into())
                    })?;
                    self.grey.upload(w.grey)?;
                    self.subpixel
                        .as_mut()
                        .expect("created above")
                        .set_weights(w)?;
                    steps.push("upload grey");
                    self.events.record(&self.gpu, steps.len())?;
                }
                (steps, mask_input, None)
            }
            Input::Grey(g) => {
                let b = self.buffers.as_mut().expect("buffers allocated");
                let steps =
                    self.grey
                        .threshold_into(&g, &mut b.mask.packed, &mut self.events, 0)?;
                (steps, MaskInput::Packed, Some(g))
            }
        };
        let first = steps.len();
        steps.extend(self.launch_kernels(kernel_want, mask_input, first)?);
        // With sub-pixel centroids (and no analysis stage, which downloads its own rows) the
        // centroid sums are queued as soon as the count is on the host, and the GPU sums them
        // while the host converts the statistics rows (host steps of their own). (A grey frame
        // thresholded here has them queued earlier still: `queue_weighted_grey`.)
        let early = keep.is_some() && self.analysis.is_none();
        let downloaded = if early {
            self.queue_results_and_wait()?;
            let b = self.buffers.as_ref().expect("buffers allocated");
            self.results.bring_rest(&self.gpu, &b.total, &b.stats)?;
            None
        } else {
            Some(self.download(download_want)?)
        };
        // The download has waited for the frame's results, which the level's copy precedes.
        let level = grey_input.map(|_| self.grey.last_level());
        if let (Some(g), Some(level), Some(_)) = (&grey_input, level, keep) {
            // The frame is on the device already (and may never be on the host).
            self.subpixel
                .as_mut()
                .expect("created above")
                .set_global_level(g.grey.width, g.grey.height, level, g.invert);
        }
        steps.push(self.results.step_name());
        self.events.record(&self.gpu, steps.len())?;
        let count = match &downloaded {
            Some((count, _, _)) => *count,
            None => self.results.count()?,
        };
        if let (Some(_), Some(stage)) = (keep, self.subpixel.as_mut()) {
            let b = self.buffers.as_ref().expect("buffers allocated");
            let out = b.out.as_ref().expect("out allocated");
            stage.launch(out, &self.grey.grey, width, height, count)?;
            steps.push("sub-pixel centroids");
            self.events.record(&self.gpu, steps.len())?;
        }
        // The rows and sums are on the device (and the rows past the prefix gathered there):
        // the tracker's detections are made where they are.
        let device_detections = match early {
            true => self.detections_step(count, &mut steps)?,
            false => None,
        };
        let mut host_steps = Vec::new();
        let (count, stats, labels) = match downloaded {
            Some(downloaded) => downloaded,
            None => {
                let t = Instant::now();
                let rows = self.results.rows()?;
                host_steps.push(StepTime::new(
                    STATISTICS_ROWS_STEP,
                    t.elapsed().as_secs_f64() * 1e3,
                ));
                let labels = if download_want.labels() {
                    Some(self.download_label_image()?)
                } else {
                    None
                };
                (count, Some(rows), labels)
            }
        };
        let centroids = match (keep, self.subpixel.as_mut(), &stats) {
            (Some(keep), Some(stage), Some(stats)) => {
                let t = Instant::now();
                let centroids = stage.fetch(stats, keep)?;
                if early {
                    host_steps.push(StepTime::new(
                        SUBPIXEL_ROWS_STEP,
                        t.elapsed().as_secs_f64() * 1e3,
                    ));
                }
                Some(centroids)
            }
            _ => None,
        };
        let shape_sums = match (shapes, &stats) {
            (Some(shapes), Some(stats)) => {
                if self.descriptors.is_none() {
                    self.descriptors = Some(DescriptorStage::new(self.gpu.clone())?);
                }
                let stage = self.descriptors.as_mut().expect("created above");
                let b = self.buffers.as_ref().expect("buffers allocated");
                let out = b.out.as_ref().expect("out allocated");
                stage.launch(out, width, height, count)?;
                steps.push("shape descriptors");
                self.events.record(&self.gpu, steps.len())?;
                Some(stage.fetch(stats, shapes)?)
            }
            _ => None,
        };
        self.events.wait(steps.len())?;
        let mut timings = self.events.step_times(&steps)?;
        timings.extend(host_steps);
        let labeling = Labeling {
            count,
            labels,
            stats,
            timings,
            filtered: self.results.queued_filter(),
            device_detections,
        };
        Ok((labeling, centroids, level, shape_sums))
    }
}

impl Ha4 {
    /// Queues a grey frame with sub-pixel centroids up to its sums: the upload, the threshold,
    /// the kernels, the results' download, and the centroid sums behind it (the kernel reads
    /// the count and the level on the device, into room for the most components so far). The
    /// host has not waited for anything yet.
    fn queue_weighted_grey(&mut self, g: GreyInput<'_>, want: Want) -> Result<QueuedGrey> {
        if self.subpixel.is_none() {
            self.subpixel = Some(SubpixelStage::new(self.gpu.clone())?);
        }
        // The sub-pixel rows are found by label: the kernels number the label image.
        let mut steps = self.queue_grey_results(&g, Want::Both, !want.labels())?;
        if self.count_ready.is_none() {
            self.count_ready =
                Some((self.gpu.ctx.new_event(None)).map_err(|e| cuda_err("creating an event", e))?);
        }
        let count_ready = self.count_ready.as_ref().expect("created above");
        count_ready
            .record(&self.gpu.stream)
            .map_err(|e| cuda_err("recording an event", e))?;
        let (width, height) = (g.grey.width, g.grey.height);
        let b = self.buffers.as_ref().expect("buffers allocated");
        let out = b.out.as_ref().expect("out allocated");
        (self.subpixel.as_mut().expect("created above")).launch_early(
            out,
            &self.grey.grey,
            (width, height),
            FrameStrides::ONE,
            g.invert,
            self.grey.queued_level(),
            &b.total,
        )?;
        steps.push("sub-pixel centroids");
        self.events.record(&self.gpu, steps.len())?;
        Ok(QueuedGrey {
            steps,
            width,
            height,
            invert: g.invert,
            labels: want.labels(),
            weighted: true,
        })
    }

    /// Queues the statistics of a grey frame: the upload, the threshold, the kernels and the
    /// results' download. The host has not waited for anything yet.
    fn queue_grey(&mut self, g: GreyInput<'_>) -> Result<QueuedGrey> {
        let steps = self.queue_grey_results(&g, Want::Stats, true)?;
        Ok(QueuedGrey {
            steps,
            width: g.grey.width,
            height: g.grey.height,
            invert: g.invert,
            labels: false,
            weighted: false,
        })
    }

    /// Queues a grey frame's upload, threshold, kernels (`kernel_want`) and results' download
    /// (the rows filtered on the device when `may_filter`); returns the steps queued.
    fn queue_grey_results(
        &mut self,
        g: &GreyInput<'_>,
        kernel_want: Want,
        may_filter: bool,
    ) -> Result<Vec<&'static str>> {
        self.prepare(g.grey.width, g.grey.height, true, may_filter)?;
        if kernel_want.labels() {
            self.ensure_out()?;
        }
        self.events.record(&self.gpu, 0)?;
        let b = self.buffers.as_mut().expect("buffers allocated");
        let mut steps = (self.grey).threshold_into(g, &mut b.mask.packed, &mut self.events, 0)?;
        let first = steps.len();
        steps.extend(self.launch_kernels(kernel_want, MaskInput::Packed, first)?);
        let b = self.buffers.as_ref().expect("buffers allocated");
        self.results.queue(&self.gpu.stream, &b.total, &b.stats)?;
        steps.push(self.results.step_name());
        self.events.record(&self.gpu, steps.len())?;
        Ok(steps)
    }

    /// The statistics of a frame `queue_grey` queued (waits for them).
    fn finish_grey(&mut self, queued: QueuedGrey) -> Result<Labeling> {
        self.events.wait(queued.steps.len())?;
        self.finished_stats(&queued.steps)
    }

    /// The rest of a frame `queue_weighted_grey` queued: waits for its count (the sums go on
    /// meanwhile), brings the rows past the prefix, sums again a frame past the room, queues
    /// the tracker's detections (when asked), and converts the rows and centroids of the
    /// components `keep` accepts.
    fn finish_weighted_grey(&mut self, queued: QueuedGrey, keep: Keep<'_>) -> Result<RunOutput> {
        let QueuedGrey {
            mut steps,
            width,
            height,
            invert,
            labels,
            ..
        } = queued;
        let count_ready = self.count_ready.as_ref().expect("recorded when queued");
        count_ready
            .synchronize()
            .map_err(|e| cuda_err("downloading results", e))?;
        let b = self.buffers.as_ref().expect("buffers allocated");
        self.results.bring_rest(&self.gpu, &b.total, &b.stats)?;
        // The level's copy precedes the results' download.
        let level = self.grey.last_level();
        let stage = self.subpixel.as_mut().expect("created when queued");
        stage.set_global_level(width, height, level, invert);
        let count = self.results.count()?;
        if !stage.finish_early(count)? {
            // More components than the early sums had room for: summed again (its time goes to
            // the next step).
            let out = b.out.as_ref().expect("out allocated");
            stage.launch(out, &self.grey.grey, width, height, count)?;
        }
        // The rows and sums are on the device (and the rows past the prefix gathered there):
        // the tracker's detections are made where they are.
        let device_detections = self.detections_step(count, &mut steps)?;
        let t = Instant::now();
        let rows = self.results.rows()?;
        let mut host_steps = vec![StepTime::new(
            STATISTICS_ROWS_STEP,
            t.elapsed().as_secs_f64() * 1e3,
        )];
        let labels = if labels {
            Some(self.download_label_image()?)
        } else {
            None
        };
        let t = Instant::now();
        let stage = self.subpixel.as_ref().expect("created when queued");
        let centroids = stage.fetch(&rows, keep)?;
        host_steps.push(StepTime::new(
            SUBPIXEL_ROWS_STEP,
            t.elapsed().as_secs_f64() * 1e3,
        ));
        self.events.wait(steps.len())?;
        let mut timings = self.events.step_times(&steps)?;
        timings.extend(host_steps);
        let labeling = Labeling {
            count,
            labels,
            stats: Some(rows),
            timings,
            filtered: self.results.queued_filter(),
            device_detections,
        };
        Ok((labeling, Some(centroids), Some(level), None))
    }
}

/// What `Ha4::run` returns: the labeling, the sub-pixel centroids, the threshold level of a
/// grey input and the shape sums (each when asked).
type RunOutput = (
    Labeling,
    Option<Vec<SubpixelCentroid>>,
    Option<u8>,
    Option<Vec<ShapeSums>>,
);

impl GraphFrames for Ha4 {
    fn graph_parts(&mut self) -> (&mut Arc<Gpu>, &mut StepEvents, &mut FrameGraphs) {
        (&mut self.gpu, &mut self.events, &mut self.graphs)
    }

    /// Queues the upload of the staged mask (packed for `MaskInput::Packed`, else bytes).
    fn queue_upload(&mut self, input: MaskInput) -> Result<()> {
        let b = self.buffers.as_mut().expect("buffers allocated");
        self.staged.upload(&self.gpu.stream, input, &mut b.mask)
    }
}

impl Labeler for Ha4 {
    fn name(&self) -> &'static str {
        match self.variant {
            Variant::Ha4 => "ha4",
            Variant::Ha4x64 => "ha4_64",
            Variant::Words => "ha4w",
            Variant::Words8 => "ha8",
            Variant::Naive => "naive",
            Variant::Cd => "ha_cd",
            Variant::Otf => "ha_otf",
        }
    }

    fn set_cuda_graphs(&mut self, on: bool) -> Option<bool> {
        let was = self.graphs.enabled();
        self.graphs.set_enabled(on);
        self.analysis.is_none().then_some(was)
    }

    /// Applied in the download step of runs that return no label image (`results`); not by
    /// the variant with its own analysis stage, which downloads every row.
    fn set_row_filter(&mut self, filter: RowFilter) -> bool {
        self.results.set_filter(filter);
        self.analysis.is_none()
    }

    /// Made in runs with sub-pixel centroids (`label_weighted`, `label_grey` with them), not
    /// by the variant with its own analysis stage.
    fn keep_detections_on_device(&mut self, on: bool) -> bool {
        self.detections_on_device = on && self.analysis.is_none();
        self.detections_on_device
    }

    /// A grey frame (one global level), its statistics and, when asked, its sub-pixel
    /// centroids, queued on this instance's stream; masks are labeled by the blocking calls.
    fn submit(&mut self, request: LabelRequest<Submission<'_>>) -> Result<bool> {
        let (input, weighted) = match request.input {
            Submission::Grey(input) => (input, false),
            Submission::WeightedGrey(input) => (input, true),
            Submission::Mask(_) => return Ok(false),
        };
        let adaptive = matches!(input.threshold, ThresholdSpec::Adaptive { .. });
        if adaptive || self.analysis.is_some() || request.want != Want::Stats {
            return Ok(false);
        }
        if self.submitted.is_some() {
            return Err(Error::Invalid(format!(
                "{}: a frame was submitted before the last one was completed",
                self.name()
            )));
        }
        self.use_connectivity(request.connectivity)?;
        self.submitted = Some(match weighted {
            true => self.queue_weighted_grey(input, request.want)?,
            false => self.queue_grey(input)?,
        });
        Ok(true)
    }

    /// Grey frame sets of one global level a frame (`set`), by the variants without their own
    /// analysis stage.
    fn submit_grey_set(&mut self, set: GreySet<'_>) -> Result<bool> {
        if !self.takes_set(&set) {
            return Ok(false);
        }
        self.submitted_set = Some(self.queue_set(set)?);
        Ok(true)
    }

    fn complete_grey_set(&mut self, keeps: &[Keep<'_>]) -> Result<Vec<Completed>> {
        let queued = (self.submitted_set.take()).ok_or_else(|| {
            Error::Invalid(format!("{}: no frame set was submitted", self.name()))
        })?;
        self.finish_set(queued, keeps)
    }

    fn complete(&mut self, keep: Keep<'_>) -> Result<Completed> {
        let queued = (self.submitted.take())
            .ok_or_else(|| Error::Invalid(format!("{}: no frame was submitted", self.name())))?;
        match queued.weighted {
            true => {
                let (labeling, centroids, _, _) = self.finish_weighted_grey(queued, keep)?;
                Ok((labeling, centroids))
            }
            false => Ok((self.finish_grey(queued)?, None)),
        }
    }

    /// The variant with its own analysis stage keeps one frame at a time.
    fn frames_in_flight(&self) -> usize {
        match self.analysis {
            Some(_) => 1,
            None => self.frames_in_flight,
        }
    }

    /// On a stream of its own (`Gpu::with_own_stream`), with this instance's settings.
    fn twin(&self) -> Result<Box<dyn Labeler>> {
        let mut twin = Ha4::new(Arc::new(self.gpu.with_own_stream()?), self.variant)?;
        twin.graphs.set_enabled(self.graphs.enabled());
        twin.results.set_filter(self.results.filter());
        twin.strip_rows = self.strip_rows;
        twin.connectivity = self.connectivity;
        twin.detections_on_device = self.detections_on_device;
        twin.frames_in_flight = self.frames_in_flight;
        Ok(Box::new(twin))
    }

    fn label_mask(&mut self, request: LabelRequest<Mask<'_>>) -> Result<Labeling> {
        self.use_connectivity(request.connectivity)?;
        let input = Input::Mask(request.input, None);
        Ok(self.run(input, request.want, None, None)?.0)
    }

    /// The grey frame goes up with the mask; the centroids come from the device label image
    /// (summed there for every component; the rows `keep` rejects are left out on the host).
    fn label_weighted(
        &mut self,
        request: LabelRequest<Mask<'_>>,
        rows: CentroidRows<'_>,
    ) -> Result<(Labeling, Vec<SubpixelCentroid>)> {
        self.use_connectivity(request.connectivity)?;
        let input = Input::Mask(request.input, Some(rows.weights));
        let (labeling, centroids, _, _) = self.run(input, request.want, Some(rows.keep), None)?;
        let centroids = centroids.ok_or_else(|| {
            Error::Invalid(format!(
                "{}: no sub-pixel centroids were computed",
                self.name()
            ))
        })?;
        Ok((labeling, centroids))
    }

    /// The shape sums come from the device label image, like the centroids (frames with a
    /// side above 65536 take the default path: the label image to the host).
    fn label_shapes(
        &mut self,
        request: LabelRequest<Mask<'_>>,
        rows: ShapeRows<'_>,
    ) -> Result<crate::ccl::ShapeLabeling> {
        let (width, height) = request.input.size();
        if !DescriptorStage::fits(width, height) {
            return crate::ccl::label_shapes_on_host(self, request, rows);
        }
        self.use_connectivity(request.connectivity)?;
        let (weights, keep) = (rows.weights, rows.keep);
        let subpixel = weights.map(|_| keep);
        let input = Input::Mask(request.input, weights);
        let (labeling, centroids, _, sums) = self.run(input, request.want, subpixel, Some(keep))?;
        if weights.is_some() && centroids.is_none() {
            return Err(Error::Invalid(format!(
                "{}: no sub-pixel centroids were computed",
                self.name()
            )));
        }
        let sums = sums.ok_or_else(|| {
            Error::Invalid(format!(
                "{}: no shape descriptors were computed",
                self.name()
            ))
        })?;
        Ok((labeling, centroids, sums))
    }

    /// The grey frame goes up once and is thresholded and packed on the device (one global
    /// level: not adaptive); the sub-pixel centroids read the same copy.
    fn label_grey(
        &mut self,
        request: LabelRequest<&GreyInput<'_>>,
        subpixel: Option<Keep<'_>>,
    ) -> Result<Option<GreyLabeling>> {
        if matches!(request.input.threshold, ThresholdSpec::Adaptive { .. }) {
            return Ok(None);
        }
        self.use_connectivity(request.connectivity)?;
        let input = Input::Grey(*request.input);
        let (labeling, centroids, level, _) = self.run(input, request.want, subpixel, None)?;
        Ok(Some(GreyLabeling {
            labeling,
            level: level.expect("a grey input has a level"),
            centroids,
        }))
    }

    /// Uploads the byte mask once, then times `repeat` runs of pack + kernels with CUDA events
    /// (no transfers), and returns the fastest run.
    fn time_resident(
        &mut self,
        request: LabelRequest<&BinaryImage>,
        repeat: u32,
    ) -> Result<ResidentTiming> {
        let (image, want) = (request.input, request.want);
        self.use_connectivity(request.connectivity)?;
        crate::frame::image::check_size(image.width, image.height)?;
        self.ensure_buffers(image.width, image.height)?;
        if want.labels() || self.analysis.is_some() {
            self.ensure_out()?;
        }
        let b = self.buffers.as_mut().expect("buffers allocated");
        b.mask.upload_bytes(&self.gpu, image)?;
        let input = self.byte_input(image.width, image.height);
        let mut best = ResidentTiming::fastest(repeat, || {
            self.events.record(&self.gpu, 0)?;
            let steps = self.launch_kernels(want, input, 0)?;
            self.events.resident_timing(&steps)
        })?;
        let b = self.buffers.as_ref().expect("buffers allocated");
        best.count = match self.analysis.as_mut() {
            Some(analysis) => analysis.fetch_count()?,
            None => self.download.fetch_count(&self.gpu, &b.total)?,
        };
        Ok(best)
    }
}
