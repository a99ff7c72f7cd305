//! Rust wrapper of `kernels/flsl.cu`: FLSL (full runs, one thread per run), FLSL+OTF (features
//! merged on the fly while labels merge) and FLSL+CD (conflict detection in the feature
//! updates), for 4- and 8-connectivity.
//!
//! Buffers are sized for the current frame and kept between frames; every step is bracketed by
//! CUDA events (as in `ha4`).
//!
//! Shape descriptors (`label_shapes`, all but OTF): the accumulation pass sums them with the
//! features, from the runs and the mask (`flsl_accumulate*_shapes`), with no label image.

mod in_place;
mod kernels;
mod launches;

pub use in_place::DeviceResults;

use super::buffers::{ensure_label_image, max_components, GpuStats, Lookback, OtfFeatures};
use super::descriptors::{shape_rows, DescriptorStage, SUMS};
use super::downloads::{download_labels, StatsDownload};
use super::frame_graph::{FrameGraphs, GraphFrames, GraphKey, GRAPH_STEP};
use super::launches::PackKernels;
use super::mask_input::MaskInput;
use super::mask_input::{DeviceMask, MaskStaging};
use super::results::ResultDownload;
use super::timing::{StepTimings, Steps};
use crate::ccl::{
    Completed, Connectivity, GreyLabeling, Keep, LabelRequest, Labeler, Labeling, Mask,
    ResidentTiming, RowFilter, ShapeLabeling, ShapeRows, Submission, Want,
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
use cudarc::driver::{CudaEvent, CudaSlice, PinnedHostSlice};
use kernels::Kernels;
use launches::{Accumulate, BorderMerge, NumberRoots, Relabel, StripRuns};
use std::sync::Arc;

/// Rows per strip of `flsl_strip*` (one warp per row).
const STRIP_ROWS: u32 = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Features once per run with plain atomics, after labeling.
    Flsl,
    /// Features merged on the fly while labels merge (Algorithm 2); no accumulation pass.
    Otf,
    /// Features once per run, one atomic per component per warp (Algorithm 3).
    Cd,
    /// As `Cd`, with the warps' updates summed per block in shared memory first (ours).
    CdBlock,
}

struct Buffers {
    mask: DeviceMask,
    /// Most runs a row can hold (ceil(width / 2)): the row stride of the run arrays.
    runs_per_row: u32,
    start: CudaSlice<u32>,
    end: CudaSlice<u32>,
    nruns: CudaSlice<u32>,
    wrank: CudaSlice<u32>,
    eq: CudaSlice<u32>,
    slot: CudaSlice<u32>,
    lookback: Lookback,
    row_offset: CudaSlice<u32>,
    total: CudaSlice<u32>,
    stats: CudaSlice<GpuStats>,
    features: Option<OtfFeatures>,
    out: Option<CudaSlice<u32>>,
    /// Shape sums, SUMS u64 per statistics row, allocated by the first `label_shapes`.
    shapes: Option<CudaSlice<u64>>,
}

impl Buffers {
    /// The buffers of a `width × height` frame.
    fn alloc(gpu: &Gpu, variant: Variant, width: u32, height: u32) -> Result<Buffers> {
        let pixels = width as usize * height as usize;
        let h = height as usize;
        let words_per_row = PackedBinary::words_per_row_for(width);
        let runs_per_row = width.div_ceil(2);
        let runs = runs_per_row as usize * h;
        // Either connectivity: size for 4 (more components).
        let capacity = max_components(width, height, Connectivity::Four).max(1);
        let otf = variant == Variant::Otf;
        let feature_bytes = if otf {
            OtfFeatures::BYTES_PER_ELEMENT
        } else {
            0
        };
        let needed = pixels
            + words_per_row * 8 * h
            + runs * (16 + feature_bytes)
            + capacity * std::mem::size_of::<GpuStats>();
        check_free_memory(gpu, needed, width, height)?;
        let s = &gpu.stream;
        // SAFETY (all `alloc`s): every element is written before it is read: run arrays, ranks
        // and labels by flsl_strip (only the first nruns[y] runs of a row are read), features at runs by flsl_strip_otf, slot at roots and stats
        // below the count by flsl_number, row offsets by flsl_number.
        let buffers = unsafe {
            Buffers {
                mask: DeviceMask::alloc(s, width, height)?,
                runs_per_row,
                start: s.alloc::<u32>(runs).map_err(alloc_err)?,
                end: s.alloc::<u32>(runs).map_err(alloc_err)?,
                nruns: s.alloc::<u32>(h).map_err(alloc_err)?,
                wrank: s.alloc::<u32>(words_per_row * h).map_err(alloc_err)?,
                eq: s.alloc::<u32>(runs).map_err(alloc_err)?,
                slot: s.alloc::<u32>(runs).map_err(alloc_err)?,
                lookback: Lookback::new(gpu, height)?,
                row_offset: s.alloc::<u32>(h).map_err(alloc_err)?,
                total: s.alloc_zeros::<u32>(1).map_err(alloc_err)?,
                stats: s.alloc::<GpuStats>(capacity).map_err(alloc_err)?,
                features: if otf {
                    Some(OtfFeatures::alloc(gpu, runs)?)
                } else {
                    None
                },
                out: None,
                shapes: None,
            }
        };
        Ok(buffers)
    }
}

/// A run queued on the stream, not yet waited for (`Flsl::start_run`, `start_graph`).
struct QueuedRun {
    /// Step i ends at event i + 1.
    steps: Vec<&'static str>,
    /// The event recorded after the download.
    last: usize,
    /// The statistics rows were downloaded, not the count alone.
    stats: bool,
    /// The label image, when wanted: downloaded while the run was queued (waiting for the
    /// kernels).
    labels: Option<LabelImage>,
}

pub struct Flsl {
    gpu: Arc<Gpu>,
    variant: Variant,
    kernels: Kernels,
    pack: PackKernels,
    buffers: Option<Buffers>,
    /// The count alone (benchmarks, `label_in_place`).
    download: StatsDownload,
    /// The count and the statistics rows of a frame, in one copy.
    results: ResultDownload,
    /// Page-locked copies of the mask for its upload.
    staged: MaskStaging,
    /// One CUDA graph per frame shape and settings (statistics without a label image).
    graphs: FrameGraphs,
    events: StepEvents,
    /// The grey frame on the device, for `label_grey`.
    grey: GreyStage,
    /// The shape sum rows of the last run with shapes, SUMS per component.
    host_shapes: Vec<u64>,
    /// `label_in_place`'s count, copied here right after flsl_number (when `count_early` is
    /// set) so that it is read while the statistics and label kernels still run, and the event
    /// recorded after that copy (cudarc's own event tracking is off: `Gpu::open`).
    early_count: Option<(PinnedHostSlice<u32>, CudaEvent)>,
    count_early: bool,
    /// The frame `submit` queued, which `complete` waits for.
    submitted: Option<QueuedRun>,
    /// Frames the pipeline keeps in flight with this algorithm (one instance each).
    frames_in_flight: usize,
}

impl Flsl {
    pub fn new(gpu: Arc<Gpu>, variant: Variant) -> Result<Flsl> {
        let kernels = Kernels::load(&gpu, variant)?;
        let pack = PackKernels::load(&gpu, KernelFile::Flsl)?;
        let download = StatsDownload::new(&gpu)?;
        let results = ResultDownload::new(&gpu, KernelFile::Flsl)?;
        let grey = GreyStage::new(gpu.clone())?;
        let (graphs, frames_in_flight) = (
            FrameGraphs::new(gpu.tuning.cuda_graphs),
            gpu.tuning.frames_in_flight,
        );
        Ok(Flsl {
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
            grey,
            host_shapes: Vec::new(),
            early_count: None,
            count_early: false,
            submitted: None,
            frames_in_flight,
        })
    }

    /// Registry constructor.
    pub fn create(gpu: &Arc<Gpu>, variant: Variant) -> Result<Box<dyn Labeler>> {
        Ok(Box::new(Flsl::new(gpu.clone(), variant)?))
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

    /// The shape sum rows, one per statistics row (written by the numbering and accumulation
    /// kernels: `flsl_number_shapes`, `flsl_number_blocks`).
    fn ensure_shapes(&mut self) -> Result<()> {
        let b = self.buffers.as_mut().expect("buffers allocated");
        if b.shapes.is_some() {
            return Ok(());
        }
        let n = SUMS * b.stats.len();
        check_free_memory(&self.gpu, n * 8, b.mask.width, b.mask.height)?;
        // SAFETY: a row is cleared by the numbering before it is added to, or stored whole by
        // flsl_accumulate_cdb_shapes (flsl_number_blocks), and only rows below the component
        // count are read.
        b.shapes = Some(
            unsafe { self.gpu.stream.alloc::<u64>(n) }
                .map_err(|e| cuda_err("allocating the shape sums", e))?,
        );
        Ok(())
    }

    fn ensure_out(&mut self) -> Result<()> {
        let b = self.buffers.as_mut().expect("buffers allocated");
        ensure_label_image(&self.gpu, &mut b.out, b.mask.pixels())
    }

    /// Launches the kernels on the mask where `input` says it is; event `first + i + 1` ends
    /// step i of the returned list. `shapes`: the shape sums too (`ensure_shapes` done; the
    /// statistics are computed whatever `want` says).
    fn launch_kernels(
        &mut self,
        connectivity: Connectivity,
        want: Want,
        input: MaskInput,
        first: usize,
        shapes: bool,
    ) -> Result<Vec<&'static str>> {
        let k = &self.kernels;
        if shapes && k.shapes.is_none() {
            return Err(Error::Invalid(format!(
                "{}: shape descriptors are not summed on the GPU",
                self.name()
            )));
        }
        let mut steps = Steps::new(&self.gpu, &mut self.events, first, Vec::new());
        let b = self.buffers.as_mut().expect("buffers allocated");
        if input == MaskInput::PackFirst {
            steps.launch(self.pack.of(&mut b.mask))?;
        }
        let c8 = usize::from(connectivity == Connectivity::Eight);
        let bytes = input == MaskInput::Bytes;
        let kernel = k.strip(shapes, bytes, c8);
        steps.launch(StripRuns {
            kernel,
            buffers: b,
            bytes,
        })?;
        let borders = b.mask.height.div_ceil(STRIP_ROWS) - 1;
        if borders > 0 {
            let kernel = &k.border[c8];
            steps.launch(BorderMerge {
                kernel,
                buffers: b,
                borders,
            })?;
        }
        // Flatten, count, scan and (for statistics) slots: one kernel.
        let epoch = b.lookback.next_epoch(steps.gpu())?;
        let stats = want.stats() || shapes;
        steps.launch(NumberRoots {
            kernel: k.number(shapes),
            buffers: b,
            epoch,
            stats,
            shapes,
        })?;
        if let (true, Some((host, copied))) = (self.count_early, self.early_count.as_mut()) {
            let s = &steps.gpu().stream;
            let dl = |e| cuda_err("downloading the count", e);
            s.memcpy_dtoh(&b.total, host).map_err(dl)?;
            copied.record(s).map_err(dl)?;
        }
        if let Some(accumulate) = Accumulate::new(k, b, shapes, c8).filter(|_| stats) {
            steps.launch(accumulate)?;
        }
        if want.labels() {
            let (kernel, use_slot) = (&k.relabel, want.stats());
            steps.launch(Relabel {
                kernel,
                buffers: b,
                use_slot,
            })?;
        }
        Ok(steps.into_names())
    }

    /// Makes the buffers fit a `width × height` frame that computes `want`, and returns the
    /// statistics rows of its download. A reallocation forgets the frame graphs.
    fn prepare(&mut self, width: u32, height: u32, want: Want) -> Result<usize> {
        crate::frame::image::check_size(width, height)?;
        let size = self.buffers.as_ref().map(|b| (b.mask.width, b.mask.height));
        self.ensure_buffers(width, height)?;
        self.graphs.forget_unless_same(size, (width, height));
        if want.labels() {
            self.ensure_out()?;
        }
        let b = self.buffers.as_ref().expect("buffers allocated");
        let rows = b.stats.len();
        // Rows are filtered on the device only where no label image goes with them.
        self.results.prepare(
            &self.gpu,
            rows,
            want.stats(),
            !want.labels(),
            &mut self.graphs,
        )
    }

    /// Queues a run up to the download of its results, which `end_run` waits for: `upload`
    /// puts the mask on the device and returns its step names (recording event i + 1 after its
    /// step i) and where the mask now is. `shapes`: the shape sums too, left in `host_shapes`
    /// (the download step includes them). A label image, when wanted, is downloaded here
    /// (waiting for the kernels).
    fn start_run(
        &mut self,
        width: u32,
        height: u32,
        connectivity: Connectivity,
        want: Want,
        shapes: bool,
        upload: impl FnOnce(&mut Self) -> Result<(Vec<&'static str>, MaskInput)>,
    ) -> Result<QueuedRun> {
        // The shape rows are made from the statistics rows: download those too.
        let download = match (shapes, want) {
            (true, Want::Labels) => Want::Both,
            _ => want,
        };
        self.prepare(width, height, download)?;
        if shapes {
            self.ensure_shapes()?;
        }
        self.events.record(&self.gpu, 0)?;
        let (mut steps, input) = upload(self)?;
        let first = steps.len();
        steps.extend(self.launch_kernels(connectivity, want, input, first, shapes)?);
        self.queue_download()?;
        let b = self.buffers.as_ref().expect("buffers allocated");
        let labels = match (&b.out, want.labels()) {
            (Some(out), true) => Some(download_labels(
                &self.gpu,
                out,
                b.mask.width,
                b.mask.height,
            )?),
            _ => None,
        };
        let last = steps.len() + 1;
        self.events.record(&self.gpu, last)?;
        steps.push(self.results.step_name());
        Ok(QueuedRun {
            steps,
            last,
            stats: download.stats(),
            labels,
        })
    }

    /// Waits for the run `start_run` or `start_graph` queued, and reads its results.
    fn end_run(&mut self, queued: QueuedRun, shapes: bool) -> Result<Labeling> {
        self.events.wait(queued.last)?;
        let b = self.buffers.as_ref().expect("buffers allocated");
        let (count, stats) = self
            .results
            .finish(&self.gpu, &b.total, &b.stats, queued.stats)?;
        if shapes {
            self.download_shape_rows(count)?;
        }
        Ok(Labeling {
            count,
            labels: queued.labels,
            stats,
            timings: self.events.step_times(&queued.steps)?,
            filtered: self.results.queued_filter(),
            device_detections: None,
        })
    }

    /// Copies the shape sum rows of the last run's `count` components into `host_shapes`.
    fn download_shape_rows(&mut self, count: u32) -> Result<()> {
        let b = self.buffers.as_ref().expect("buffers allocated");
        let n = SUMS * count as usize;
        let rows = b
            .shapes
            .as_ref()
            .expect("ensure_shapes before a run with shapes");
        if n > rows.len() {
            return Err(Error::Cuda {
                step: "downloading the shape sums".into(),
                why: format!("component count {count} exceeds the buffer"),
            });
        }
        self.host_shapes.resize(n, 0);
        let dl = |e| cuda_err("downloading the shape sums", e);
        self.gpu
            .stream
            .memcpy_dtoh(&rows.slice(0..n), &mut self.host_shapes[..])
            .map_err(dl)?;
        self.gpu.stream.synchronize().map_err(dl)
    }

    /// Queues the labeling of the mask staged in page-locked memory (packed or bytes) up to the
    /// download of the results (`end_run` waits for it): one graph launch when
    /// graphs are on and only statistics are wanted, otherwise the plain launches with an
    /// event after each step.
    fn start_staged(
        &mut self,
        width: u32,
        height: u32,
        connectivity: Connectivity,
        want: Want,
        shapes: bool,
        packed: bool,
    ) -> Result<QueuedRun> {
        let input = if packed {
            MaskInput::Packed
        } else {
            MaskInput::for_bytes(width, height)
        };
        if self.graphs.enabled() && want == Want::Stats && !shapes {
            return self.start_graph(width, height, connectivity, want, input);
        }
        self.start_run(width, height, connectivity, want, shapes, |me| {
            me.queue_upload(input)?;
            me.events.record(&me.gpu, 1)?;
            let step = if packed { "upload (packed)" } else { "upload" };
            Ok((vec![step], input))
        })
    }

    /// Queues one frame as one graph launch (captured on the first frame of its key), timed as
    /// one step; `end_run` waits for it.
    fn start_graph(
        &mut self,
        width: u32,
        height: u32,
        connectivity: Connectivity,
        want: Want,
        input: MaskInput,
    ) -> Result<QueuedRun> {
        let rows = self.prepare(width, height, want)?;
        let key = GraphKey {
            width,
            height,
            connectivity,
            want,
            input,
            rows,
            filtered: self.results.queued_filter().is_some(),
            setting: 0,
            upload: !self.staged.in_place(),
        };
        self.launch_graph(&key, |me| {
            let b = me.buffers.as_mut().expect("buffers allocated");
            b.lookback.restart(&me.gpu)?;
            if key.upload {
                me.queue_upload(input)?;
            }
            me.launch_kernels(connectivity, want, input, 0, false)?;
            me.queue_download()
        })?;
        Ok(QueuedRun {
            steps: vec![GRAPH_STEP],
            last: 1,
            stats: want.stats(),
            labels: None,
        })
    }

    /// Queues the labeling of a grey frame thresholded and packed on the device (one global
    /// level) up to the download of the results (`end_run` waits for it).
    fn start_grey(&mut self, request: LabelRequest<&GreyInput<'_>>) -> Result<QueuedRun> {
        let input = request.input;
        let (width, height) = (input.grey.width, input.grey.height);
        let (connectivity, want) = (request.connectivity, request.want);
        self.start_run(width, height, connectivity, want, false, |me| {
            let b = me.buffers.as_mut().expect("buffers allocated");
            let steps = me
                .grey
                .threshold_into(input, &mut b.mask.packed, &mut me.events, 0)?;
            Ok((steps, MaskInput::Packed))
        })
    }

    /// Stages the mask in page-locked memory and labels it (`start_mask`, `end_run`).
    fn label_staged(&mut self, request: LabelRequest<Mask<'_>>, shapes: bool) -> Result<Labeling> {
        let queued = self.start_mask(request, shapes)?;
        self.end_run(queued, shapes)
    }

    /// Stages the mask in page-locked memory and queues its labeling (`start_staged`).
    fn start_mask(&mut self, request: LabelRequest<Mask<'_>>, shapes: bool) -> Result<QueuedRun> {
        let mask = request.input;
        if self.staged.fill(&self.gpu, mask)? {
            self.graphs.invalidate();
        }
        let (width, height) = mask.size();
        let packed = matches!(mask, Mask::Packed(_));
        let (connectivity, want) = (request.connectivity, request.want);
        self.start_staged(width, height, connectivity, want, shapes, packed)
    }

    /// Queues the collection and the copy of the count and the statistics rows.
    fn queue_download(&mut self) -> Result<()> {
        let b = self.buffers.as_ref().expect("buffers allocated");
        self.results.queue(&self.gpu.stream, &b.total, &b.stats)
    }
}

impl GraphFrames for Flsl {
    fn graph_parts(&mut self) -> (&mut Arc<Gpu>, &mut StepEvents, &mut FrameGraphs) {
        (&mut self.gpu, &mut self.events, &mut self.graphs)
    }

    /// Queues the upload of the staged mask into the device buffer its form goes to.
    fn queue_upload(&mut self, input: MaskInput) -> Result<()> {
        let b = self.buffers.as_mut().expect("buffers allocated");
        self.staged.upload(&self.gpu.stream, input, &mut b.mask)
    }
}

impl Labeler for Flsl {
    fn name(&self) -> &'static str {
        match self.variant {
            Variant::Flsl => "flsl",
            Variant::Otf => "flsl_otf",
            Variant::Cd => "flsl_cd",
            Variant::CdBlock => "flsl_cdb",
        }
    }

    fn set_cuda_graphs(&mut self, on: bool) -> Option<bool> {
        let was = self.graphs.enabled();
        self.graphs.set_enabled(on);
        Some(was)
    }

    /// Applied in the download step of statistics-only runs (`results`).
    fn set_row_filter(&mut self, filter: RowFilter) -> bool {
        self.results.set_filter(filter);
        true
    }

    fn label_mask(&mut self, request: LabelRequest<Mask<'_>>) -> Result<Labeling> {
        self.label_staged(request, false)
    }

    /// Statistics without a label image, of a mask (staged, then one graph launch or the plain
    /// launches) or of a grey frame with one global level (thresholded on the
    /// device, as `label_grey`).
    fn submit(&mut self, request: LabelRequest<Submission<'_>>) -> Result<bool> {
        let want = request.want;
        if want.labels() {
            return Ok(false);
        }
        if self.submitted.is_some() {
            return Err(Error::Invalid(format!(
                "{}: a frame was submitted before the last one was completed",
                self.name()
            )));
        }
        let queued = match request.input {
            // Its sub-pixel centroids are the host's (`label_grey` declines them).
            Submission::WeightedGrey(_) => return Ok(false),
            Submission::Mask(mask) => self.start_mask(request.on(mask), false)?,
            Submission::Grey(input) => {
                if matches!(input.threshold, ThresholdSpec::Adaptive { .. }) {
                    return Ok(false);
                }
                self.start_grey(request.on(&input))?
            }
        };
        self.submitted = Some(queued);
        Ok(true)
    }

    fn complete(&mut self, _keep: Keep<'_>) -> Result<Completed> {
        let queued = self
            .submitted
            .take()
            .ok_or_else(|| Error::Invalid(format!("{}: no frame was submitted", self.name())))?;
        Ok((self.end_run(queued, false)?, None))
    }

    fn frames_in_flight(&self) -> usize {
        self.frames_in_flight
    }

    /// On a stream of its own (`Gpu::with_own_stream`), so that its upload and kernels overlap
    /// the other instances' work.
    fn twin(&self) -> Result<Box<dyn Labeler>> {
        let mut twin = Flsl::new(Arc::new(self.gpu.with_own_stream()?), self.variant)?;
        twin.graphs.set_enabled(self.graphs.enabled());
        twin.results.set_filter(self.results.filter());
        twin.frames_in_flight = self.frames_in_flight;
        Ok(Box::new(twin))
    }

    /// The shape sums come from the accumulation pass (fused: no label image, no second pass)
    /// for every variant but OTF. OTF, sub-pixel weights (computed on the host by this family)
    /// and frames with a side above 65536 (where the u64 sums could overflow) take the default
    /// path: the label image to the host.
    fn label_shapes(
        &mut self,
        request: LabelRequest<Mask<'_>>,
        rows: ShapeRows<'_>,
    ) -> Result<ShapeLabeling> {
        let (width, height) = request.input.size();
        if self.kernels.shapes.is_none()
            || rows.weights.is_some()
            || !DescriptorStage::fits(width, height)
        {
            return crate::ccl::label_shapes_on_host(self, request, rows);
        }
        let mut labeling = self.label_staged(request, true)?;
        let stats = labeling.stats.as_ref().ok_or_else(|| {
            Error::Invalid(format!("{}: no statistics were computed", self.name()))
        })?;
        let sums = shape_rows(&self.host_shapes, stats, rows.keep)?;
        if !request.want.stats() {
            labeling.stats = None;
        }
        Ok((labeling, None, sums))
    }

    /// The grey frame goes up and is thresholded and packed on the device (one global level:
    /// not adaptive). No sub-pixel centroids here: with `subpixel`, `None`.
    fn label_grey(
        &mut self,
        request: LabelRequest<&GreyInput<'_>>,
        subpixel: Option<Keep<'_>>,
    ) -> Result<Option<GreyLabeling>> {
        if subpixel.is_some() || matches!(request.input.threshold, ThresholdSpec::Adaptive { .. }) {
            return Ok(None);
        }
        let queued = self.start_grey(request)?;
        let labeling = self.end_run(queued, false)?;
        Ok(Some(GreyLabeling {
            labeling,
            // The run has waited for its results, which the level's copy precedes.
            level: self.grey.last_level(),
            centroids: None,
        }))
    }

    /// Uploads the byte mask once, then times `repeat` runs of pack + kernels with CUDA events
    /// (the packing is inside the strip kernel when the width allows, as in `label`).
    fn time_resident(
        &mut self,
        request: LabelRequest<&BinaryImage>,
        repeat: u32,
    ) -> Result<ResidentTiming> {
        let (image, want) = (request.input, request.want);
        crate::frame::image::check_size(image.width, image.height)?;
        self.ensure_buffers(image.width, image.height)?;
        if want.labels() {
            self.ensure_out()?;
        }
        let b = self.buffers.as_mut().expect("buffers allocated");
        b.mask.upload_bytes(&self.gpu, image)?;
        let input = MaskInput::for_bytes(image.width, image.height);
        let mut best = ResidentTiming::fastest(repeat, || {
            self.events.record(&self.gpu, 0)?;
            let steps = self.launch_kernels(request.connectivity, want, input, 0, false)?;
            self.events.resident_timing(&steps)
        })?;
        let b = self.buffers.as_ref().expect("buffers allocated");
        best.count = self.download.fetch_count(&self.gpu, &b.total)?;
        Ok(best)
    }
}
