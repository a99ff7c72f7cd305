//! Rust wrapper of `kernels/flsl.cu`: FLSL (full runs, one thread per run), FLSL+OTF (features
//! merged on the fly while labels merge) and FLSL+CD (conflict detection in the feature
//! updates), for 4- and 8-connectivity.
//!
//! Buffers are sized for the current frame and kept between frames; every step is bracketed by
//! CUDA events (as in `ha4.rs`).
//!
//! Shape descriptors (`label_shapes`, all but OTF): the accumulation pass sums them with the
//! features, from the runs and the mask (`flsl_accumulate*_shapes`), with no label image.

use super::common::{
    border_launch, check_free_memory, download_labels, ensure_label_image, launch_pack_bytes,
    max_components, rows_launch, table_fits, table_launch, GpuStats, Lookback, MaskInput,
    OtfFeatures, StatsDownload, StepEvents,
};
use super::descriptors::{shape_rows, DescriptorStage, SUMS};
use super::frame_graph::{FrameGraphs, GraphKey, GRAPH_STEP};
use super::results::ResultDownload;
use super::staging::MaskStaging;
use super::threshold::GreyStage;
use super::{cuda_err, Gpu, KernelFile};
use crate::ccl::subpixel::GreyWeights;
use crate::ccl::{
    Connectivity, GreyInput, GreyLabeling, Keep, Labeler, Labeling, Mask, ResidentTiming,
    RowFilter, ShapeLabeling, Submission, Want,
};
use crate::error::{Error, Result};
use crate::frame::image::{BinaryImage, LabelImage, PackedBinary};
use crate::frame::threshold::ThresholdSpec;
use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{
    CudaEvent, CudaFunction, CudaSlice, LaunchConfig, PinnedHostSlice, PushKernelArg,
};
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

struct Kernels {
    pack: CudaFunction,
    pack16: CudaFunction,
    strip: [CudaFunction; 2],
    /// The strip kernels that pack the byte mask themselves (`flsl_strip*_bytes`).
    strip_bytes: [CudaFunction; 2],
    border: [CudaFunction; 2],
    /// Flatten, count, scan and slots in one kernel (`flsl_number[_otf]`).
    number: CudaFunction,
    accumulate: Option<CudaFunction>,
    /// `flsl_accumulate_cd` beside `flsl_accumulate_cdb`, for frames too wide for the block
    /// table (`table_fits`).
    accumulate_wide: Option<CudaFunction>,
    /// With the shape sums (not OTF): numbering that clears their rows (with the block table:
    /// only those the accumulation adds to), and the accumulation that sums the moments and pixel
    /// pairs too, per connectivity (`flsl_number_shapes` or `flsl_number_blocks`,
    /// `flsl_accumulate[_cd[b]]_shapes{4,8}`).
    shapes: Option<ShapeKernels>,
    relabel: CudaFunction,
}

/// Dynamic shared memory of `flsl_accumulate_cdb_shapes{4,8}` (its block table and shape
/// columns; `SHAPE_TABLE_BYTES` in flsl.cu).
const SHAPE_TABLE_BYTES: u32 = 57344;

struct ShapeKernels {
    /// The strip kernels that also write the foreground ranks the pair counts read, in the
    /// high half of the edge ranks (`flsl_strip_ranks{4,8}[_bytes]`).
    strip: [CudaFunction; 2],
    strip_bytes: [CudaFunction; 2],
    number: CudaFunction,
    /// 4- and 8-connectivity.
    accumulate: [CudaFunction; 2],
}

struct Buffers {
    width: u32,
    height: u32,
    words_per_row: usize,
    /// Most runs a row can hold (ceil(width / 2)): the row stride of the run arrays.
    runs_per_row: u32,
    bytes: CudaSlice<u8>,
    mask: CudaSlice<u32>,
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

/// A run queued on the stream, not yet waited for (`Flsl::start_run`, `start_graph`).
struct QueuedRun {
    /// Step i ends at event i + 1.
    steps: Vec<&'static str>,
    /// The event recorded after the download.
    last: usize,
    /// The statistics rows were downloaded, not the count alone.
    stats: bool,
}

pub struct Flsl {
    gpu: Arc<Gpu>,
    variant: Variant,
    kernels: Kernels,
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
        let module = gpu.module(KernelFile::Flsl).clone();
        let load = |name: &str| {
            module
                .load_function(name)
                .map_err(|e| cuda_err(&format!("loading kernel {name}"), e))
        };
        let otf = variant == Variant::Otf;
        let (strip, border) = if otf {
            ("flsl_strip_otf", "flsl_border_otf")
        } else {
            ("flsl_strip", "flsl_border")
        };
        let kernels = Kernels {
            pack: load("pack_bytes")?,
            pack16: load("pack_bytes16")?,
            strip: [load(&format!("{strip}4"))?, load(&format!("{strip}8"))?],
            strip_bytes: [
                load(&format!("{strip}4_bytes"))?,
                load(&format!("{strip}8_bytes"))?,
            ],
            border: [load(&format!("{border}4"))?, load(&format!("{border}8"))?],
            number: load(if otf {
                "flsl_number_otf"
            } else {
                "flsl_number"
            })?,
            accumulate: match variant {
                Variant::Flsl => Some(load("flsl_accumulate")?),
                Variant::Cd => Some(load("flsl_accumulate_cd")?),
                Variant::CdBlock => Some(load("flsl_accumulate_cdb")?),
                Variant::Otf => None,
            },
            accumulate_wide: match variant {
                Variant::CdBlock => Some(load("flsl_accumulate_cd")?),
                _ => None,
            },
            shapes: match variant {
                Variant::Otf => None,
                Variant::Flsl | Variant::Cd | Variant::CdBlock => {
                    let accumulate = match variant {
                        Variant::Cd => "flsl_accumulate_cd_shapes",
                        Variant::CdBlock => "flsl_accumulate_cdb_shapes",
                        _ => "flsl_accumulate_shapes",
                    };
                    // The block table's shape kernels take SHAPE_TABLE_BYTES of dynamic shared
                    // memory, more than a kernel may without asking.
                    let load_accumulate_shapes = |name: &str| -> Result<CudaFunction> {
                        let f = load(name)?;
                        if variant == Variant::CdBlock {
                            f.set_attribute(
                                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                SHAPE_TABLE_BYTES as i32,
                            )
                            .map_err(|e| cuda_err(&format!("giving {name} its shared memory"), e))?;
                        }
                        Ok(f)
                    };
                    Some(ShapeKernels {
                        strip: [load("flsl_strip_ranks4")?, load("flsl_strip_ranks8")?],
                        strip_bytes: [
                            load("flsl_strip_ranks4_bytes")?,
                            load("flsl_strip_ranks8_bytes")?,
                        ],
                        number: load(if variant == Variant::CdBlock {
                            "flsl_number_blocks"
                        } else {
                            "flsl_number_shapes"
                        })?,
                        accumulate: [
                            load_accumulate_shapes(&format!("{accumulate}4"))?,
                            load_accumulate_shapes(&format!("{accumulate}8"))?,
                        ],
                    })
                }
            },
            relabel: load("flsl_relabel")?,
        };
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

    fn ensure_buffers(&mut self, width: u32, height: u32) -> Result<()> {
        if self
            .buffers
            .as_ref()
            .is_some_and(|b| b.width == width && b.height == height)
        {
            return Ok(());
        }
        self.buffers = None; // free the old ones first
        let pixels = width as usize * height as usize;
        let h = height as usize;
        let words_per_row = PackedBinary::words_per_row_for(width);
        let runs_per_row = width.div_ceil(2);
        let runs = runs_per_row as usize * h;
        // Either connectivity: size for 4 (more components).
        let capacity = max_components(width, height, Connectivity::Four).max(1);
        let otf = self.variant == Variant::Otf;
        let feature_bytes = if otf {
            OtfFeatures::BYTES_PER_ELEMENT
        } else {
            0
        };
        let needed = pixels
            + words_per_row * 8 * h
            + runs * (16 + feature_bytes)
            + capacity * std::mem::size_of::<GpuStats>();
        super::common::check_free_memory(&self.gpu, needed, width, height)?;
        let s = &self.gpu.stream;
        let e = |e| cuda_err("allocating device buffers", e);
        // SAFETY (all `alloc`s): every element is written before it is read: bytes/mask by the
        // upload or pack, run arrays, ranks and labels by flsl_strip (only the first nruns[y]
        // runs of a row are read), features at runs by flsl_strip_otf, slot at roots and stats
        // below the count by flsl_number, row offsets by flsl_number.
        let buffers = unsafe {
            Buffers {
                width,
                height,
                words_per_row,
                runs_per_row,
                bytes: s.alloc::<u8>(pixels).map_err(e)?,
                mask: s.alloc::<u32>(words_per_row * h).map_err(e)?,
                start: s.alloc::<u32>(runs).map_err(e)?,
                end: s.alloc::<u32>(runs).map_err(e)?,
                nruns: s.alloc::<u32>(h).map_err(e)?,
                wrank: s.alloc::<u32>(words_per_row * h).map_err(e)?,
                eq: s.alloc::<u32>(runs).map_err(e)?,
                slot: s.alloc::<u32>(runs).map_err(e)?,
                lookback: Lookback::new(&self.gpu, height)?,
                row_offset: s.alloc::<u32>(h).map_err(e)?,
                total: s.alloc_zeros::<u32>(1).map_err(e)?,
                stats: s.alloc::<GpuStats>(capacity).map_err(e)?,
                features: if otf {
                    Some(OtfFeatures::alloc(&self.gpu, runs)?)
                } else {
                    None
                },
                out: None,
                shapes: None,
            }
        };
        self.buffers = Some(buffers);
        Ok(())
    }

    /// The shape sum rows, one per statistics row (written by the numbering and accumulation
    /// kernels: `flsl_number_shapes`, `flsl_number_blocks`).
    fn ensure_shapes(&mut self) -> Result<()> {
        let b = self.buffers.as_mut().expect("buffers allocated");
        if b.shapes.is_some() {
            return Ok(());
        }
        let n = SUMS * b.stats.len();
        check_free_memory(&self.gpu, n * 8, b.width, b.height)?;
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
        let pixels = b.width as usize * b.height as usize;
        ensure_label_image(&self.gpu, &mut b.out, pixels)
    }

    fn launch_pack(&mut self) -> Result<()> {
        let b = self.buffers.as_mut().expect("buffers allocated");
        launch_pack_bytes(
            &self.gpu,
            &self.kernels.pack,
            &self.kernels.pack16,
            &b.bytes,
            &mut b.mask,
            b.width,
            b.height,
            b.words_per_row,
        )
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
        if shapes && self.kernels.shapes.is_none() {
            return Err(Error::Invalid(format!(
                "{}: shape descriptors are not summed on the GPU",
                self.name()
            )));
        }
        let mut steps = Vec::new();
        if input == MaskInput::PackFirst {
            self.launch_pack()?;
            steps.push("pack bits");
            self.events.record(&self.gpu, first + steps.len())?;
        }
        let gpu = self.gpu.clone();
        let events = &mut self.events;
        let mut mark = |name: &'static str| {
            steps.push(name);
            events.record(&gpu, first + steps.len())
        };
        let b = self.buffers.as_mut().expect("buffers allocated");
        let k = &self.kernels;
        let shape_kernels = if shapes { k.shapes.as_ref() } else { None };
        let s = &gpu.stream;
        let (w, h, rpr) = (b.width, b.height, b.runs_per_row);
        let wpr = b.words_per_row as u32;
        let c8 = usize::from(connectivity == Connectivity::Eight);
        let rows = rows_launch(h);
        let capacity = b.stats.len() as u32;
        let err = |name: &str, e| cuda_err(&format!("launching {name}"), e);

        // SAFETY (all launches): argument types and order match the kernels in flsl.cu; every
        // buffer is sized for this frame by ensure_buffers.
        unsafe {
            let mut l;
            let (strip, strip_bytes) = match shape_kernels {
                Some(sk) => (&sk.strip, &sk.strip_bytes),
                None => (&k.strip, &k.strip_bytes),
            };
            if input == MaskInput::Bytes {
                l = s.launch_builder(&strip_bytes[c8]);
                l.arg(&b.bytes).arg(&mut b.mask);
            } else {
                l = s.launch_builder(&strip[c8]);
                l.arg(&b.mask);
            }
            l.arg(&wpr)
                .arg(&w)
                .arg(&h)
                .arg(&rpr)
                .arg(&mut b.start)
                .arg(&mut b.end)
                .arg(&mut b.nruns)
                .arg(&mut b.wrank)
                .arg(&mut b.eq);
            if let Some(f) = b.features.as_ref() {
                f.push_args(&mut l);
            }
            l.launch(LaunchConfig {
                grid_dim: (h.div_ceil(STRIP_ROWS), 1, 1),
                block_dim: (32, STRIP_ROWS, 1),
                shared_mem_bytes: 0,
            })
            .map_err(|e| err("flsl_strip", e))?;
        }
        mark(if input == MaskInput::Bytes {
            "pack + runs + strip label"
        } else {
            "runs + strip label"
        })?;

        let borders = h.div_ceil(STRIP_ROWS) - 1;
        if borders > 0 {
            unsafe {
                let mut l = s.launch_builder(&k.border[c8]);
                l.arg(&b.mask)
                    .arg(&wpr)
                    .arg(&w)
                    .arg(&h)
                    .arg(&rpr)
                    .arg(&b.start)
                    .arg(&b.end)
                    .arg(&b.nruns)
                    .arg(&b.wrank)
                    .arg(&mut b.eq)
                    .arg(&STRIP_ROWS);
                if let Some(f) = b.features.as_ref() {
                    f.push_args(&mut l);
                }
                l.launch(border_launch(borders, w))
                    .map_err(|e| err("flsl_border", e))?;
            }
            mark("border merge")?;
        }

        // Flatten, count, scan and (for statistics) slots: one kernel.
        let epoch = b.lookback.next_epoch(&gpu)?;
        let with_stats = want.stats() || shape_kernels.is_some();
        let assign = u32::from(with_stats);
        unsafe {
            let mut l = s.launch_builder(match shape_kernels {
                Some(sk) => &sk.number,
                None => &k.number,
            });
            l.arg(&mut b.eq)
                .arg(&b.nruns)
                .arg(&mut b.row_offset)
                .arg(&mut b.slot)
                .arg(&mut b.stats)
                .arg(&capacity)
                .arg(&rpr)
                .arg(&h)
                .arg(&mut b.lookback.status)
                .arg(&epoch)
                .arg(&mut b.total)
                .arg(&assign);
            if let Some(f) = b.features.as_ref() {
                f.push_args(&mut l);
            }
            if shape_kernels.is_some() {
                let sums = b
                    .shapes
                    .as_mut()
                    .expect("ensure_shapes before a run with shapes");
                l.arg(sums);
            }
            l.launch(Lookback::launch(h))
                .map_err(|e| err("flsl_number", e))?;
        }
        mark(match (with_stats, b.features.is_some()) {
            (false, _) => "flatten + count roots",
            (true, false) => "flatten + number roots",
            (true, true) => "flatten + number roots + copy features",
        })?;
        if let (true, Some((host, copied))) = (self.count_early, self.early_count.as_mut()) {
            let dl = |e| cuda_err("downloading the count", e);
            s.memcpy_dtoh(&b.total, host).map_err(dl)?;
            copied.record(s).map_err(dl)?;
        }

        if with_stats {
            if let Some(acc) = &k.accumulate {
                // Shape sums take frames at most 65536 wide, which the table always fits.
                let wide = shape_kernels.is_none() && !table_fits(w);
                let block_table = self.variant == Variant::CdBlock && !wide;
                let acc = match (shape_kernels, &k.accumulate_wide) {
                    (Some(sk), _) => &sk.accumulate[c8],
                    (None, Some(cd)) if wide => cd,
                    _ => acc,
                };
                unsafe {
                    let mut l = s.launch_builder(acc);
                    l.arg(&b.eq)
                        .arg(&b.slot)
                        .arg(&b.start)
                        .arg(&b.end)
                        .arg(&b.nruns)
                        .arg(&mut b.stats)
                        .arg(&capacity)
                        .arg(&rpr)
                        .arg(&h);
                    if block_table {
                        l.arg(&b.row_offset);
                    }
                    if shape_kernels.is_some() {
                        let sums = b
                            .shapes
                            .as_mut()
                            .expect("ensure_shapes before a run with shapes");
                        l.arg(&b.mask).arg(&b.wrank).arg(&wpr).arg(&w).arg(sums);
                    }
                    let mut config = if block_table { table_launch(h) } else { rows };
                    if block_table && shape_kernels.is_some() {
                        config.shared_mem_bytes = SHAPE_TABLE_BYTES;
                    }
                    l.launch(config).map_err(|e| err("flsl_accumulate", e))?;
                }
                mark(if shape_kernels.is_some() {
                    "accumulate features + shape sums"
                } else {
                    "accumulate features"
                })?;
            }
        }

        if want.labels() {
            let out = b.out.as_mut().expect("out allocated for labels");
            let use_slot = u32::from(want.stats());
            unsafe {
                s.launch_builder(&k.relabel)
                    .arg(out)
                    .arg(&b.eq)
                    .arg(&b.slot)
                    .arg(&use_slot)
                    .arg(&b.mask)
                    .arg(&b.wrank)
                    .arg(&wpr)
                    .arg(&w)
                    .arg(&h)
                    .arg(&rpr)
                    .launch(rows)
                    .map_err(|e| err("flsl_relabel", e))?;
            }
            mark("relabel")?;
        }
        Ok(steps)
    }

    /// Makes the buffers fit a `width × height` frame that computes `want`, and returns the
    /// statistics rows of its download. A reallocation forgets the frame graphs.
    fn prepare(&mut self, width: u32, height: u32, want: Want) -> Result<usize> {
        crate::frame::image::check_size(width, height)?;
        let size = self.buffers.as_ref().map(|b| (b.width, b.height));
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

    /// Runs the whole pipeline host to host; `upload` puts the mask on the device and returns
    /// its step names (recording event i + 1 after its step i) and where the mask now is.
    /// `shapes`: the shape sums too, left in `host_shapes` (the download step includes them).
    fn run(
        &mut self,
        width: u32,
        height: u32,
        connectivity: Connectivity,
        want: Want,
        shapes: bool,
        upload: impl FnOnce(&mut Self) -> Result<(Vec<&'static str>, MaskInput)>,
    ) -> Result<Labeling> {
        let (queued, labels) = self.start_run(width, height, connectivity, want, shapes, upload)?;
        let mut labeling = self.end_run(queued, shapes)?;
        labeling.labels = labels;
        Ok(labeling)
    }

    /// `run` up to the queued download of the results, which `end_run` waits for. A label
    /// image, when wanted, is downloaded here (waiting for the kernels).
    fn start_run(
        &mut self,
        width: u32,
        height: u32,
        connectivity: Connectivity,
        want: Want,
        shapes: bool,
        upload: impl FnOnce(&mut Self) -> Result<(Vec<&'static str>, MaskInput)>,
    ) -> Result<(QueuedRun, Option<LabelImage>)> {
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
            (Some(out), true) => Some(download_labels(&self.gpu, out, b.width, b.height)?),
            _ => None,
        };
        let last = steps.len() + 1;
        self.events.record(&self.gpu, last)?;
        steps.push(self.results.step_name());
        let queued = QueuedRun {
            steps,
            last,
            stats: download.stats(),
        };
        Ok((queued, labels))
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
            labels: None,
            stats,
            timings: self.events.step_times(&queued.steps)?,
            filtered: self.results.queued_filter(),
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
    ) -> Result<(QueuedRun, Option<LabelImage>)> {
        let input = if packed {
            MaskInput::Packed
        } else {
            MaskInput::for_bytes(width, height)
        };
        if self.graphs.enabled() && want == Want::Stats && !shapes {
            let queued = self.start_graph(width, height, connectivity, want, input)?;
            return Ok((queued, None));
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
        let mut graphs = std::mem::take(&mut self.graphs);
        let gpu = self.gpu.clone();
        self.events.record(&gpu, 0)?;
        if !key.upload {
            self.queue_upload(input)?;
        }
        let launched = graphs.launch(&gpu, &key, |twin| {
            self.on_capture_stream(twin, |me| {
                let b = me.buffers.as_mut().expect("buffers allocated");
                b.lookback.restart(&me.gpu)?;
                if key.upload {
                    me.queue_upload(input)?;
                }
                me.launch_kernels(connectivity, want, input, 0, false)?;
                me.queue_download()
            })
        });
        self.graphs = graphs;
        launched?;
        self.events.record(&gpu, 1)?;
        Ok(QueuedRun {
            steps: vec![GRAPH_STEP],
            last: 1,
            stats: want.stats(),
        })
    }

    /// Runs `queue` with `twin` (whose stream is being captured) in place of this engine's
    /// device and with the step events off.
    fn on_capture_stream(
        &mut self,
        twin: &Arc<Gpu>,
        queue: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let plain = std::mem::replace(&mut self.gpu, twin.clone());
        self.events.set_off(true);
        let queued = queue(self);
        self.events.set_off(false);
        self.gpu = plain;
        queued
    }

    /// Queues the upload of the staged mask into the device buffer its form goes to.
    fn queue_upload(&mut self, input: MaskInput) -> Result<()> {
        let b = self.buffers.as_mut().expect("buffers allocated");
        self.staged
            .upload(&self.gpu.stream, input, &mut b.bytes, &mut b.mask)
    }

    /// Stages `mask` in page-locked memory and labels it (`start_mask`, `end_run`).
    fn label_mask(
        &mut self,
        mask: Mask<'_>,
        connectivity: Connectivity,
        want: Want,
        shapes: bool,
    ) -> Result<Labeling> {
        let (queued, labels) = self.start_mask(mask, connectivity, want, shapes)?;
        let mut labeling = self.end_run(queued, shapes)?;
        labeling.labels = labels;
        Ok(labeling)
    }

    /// Stages `mask` in page-locked memory and queues its labeling (`start_staged`).
    fn start_mask(
        &mut self,
        mask: Mask<'_>,
        connectivity: Connectivity,
        want: Want,
        shapes: bool,
    ) -> Result<(QueuedRun, Option<LabelImage>)> {
        if self.staged.fill(&self.gpu, mask)? {
            self.graphs.invalidate();
        }
        let (width, height) = mask.size();
        let packed = matches!(mask, Mask::Packed(_));
        self.start_staged(width, height, connectivity, want, shapes, packed)
    }

    /// Queues the collection and the copy of the count and the statistics rows.
    fn queue_download(&mut self) -> Result<()> {
        let b = self.buffers.as_ref().expect("buffers allocated");
        self.results.queue(&self.gpu.stream, &b.total, &b.stats)
    }
}

/// Where the results of `Flsl::label_in_place` are on the device, for kernels that read them
/// next (`super::device`).
pub struct DeviceResults<'a> {
    /// The statistics rows, label i at index i - 1.
    pub stats: &'a CudaSlice<GpuStats>,
    /// The runs of row y: from `start[y R + j]` to `end[y R + j]` (exclusive) for j < `nruns[y]`,
    /// R = `runs_per_row`.
    pub start: &'a CudaSlice<u32>,
    pub end: &'a CudaSlice<u32>,
    pub nruns: &'a CudaSlice<u32>,
    pub runs_per_row: u32,
}

impl Flsl {
    /// Labels a byte mask (0 / non-zero) that is already in device memory, `width` bytes a row
    /// with no padding, and writes the label image (u32, 1..=count in raster order of first
    /// pixel, 0 = background) into `labels` when given. Statistics are always computed. Runs on
    /// this engine's stream and returns the component count as soon as the numbering kernel
    /// has it: the statistics and label kernels may still run, and the work the caller queues
    /// next on the stream runs after them.
    ///
    /// # Safety
    /// `mask` must point to `width × height` readable device bytes of this context, and
    /// `labels`, when given, to `width × height` writable u32 of device memory; the caller keeps
    /// both alive and unused by other work until the stream has finished this labeling (a
    /// synchronisation of the stream, or work queued after it on the stream).
    pub unsafe fn label_in_place(
        &mut self,
        mask: u64,
        width: u32,
        height: u32,
        connectivity: Connectivity,
        labels: Option<u64>,
    ) -> Result<u32> {
        crate::frame::image::check_size(width, height)?;
        self.ensure_buffers(width, height)?;
        let pixels = width as usize * height as usize;
        let want = if labels.is_some() {
            Want::Both
        } else {
            Want::Stats
        };
        // The caller's memory stands in for the engine's own input and output buffers during
        // this run. The borrowed slices are never dropped (that would free the caller's memory):
        // they are swapped back and forgotten below, on success and on error alike.
        let stream = self.gpu.stream.clone();
        let b = self.buffers.as_mut().expect("buffers allocated");
        let mut borrowed_input = stream.upgrade_device_ptr::<u8>(mask, pixels);
        std::mem::swap(&mut b.bytes, &mut borrowed_input);
        let own_out = match labels {
            Some(ptr) => Some(std::mem::replace(
                &mut b.out,
                Some(stream.upgrade_device_ptr::<u32>(ptr, pixels)),
            )),
            None => None,
        };
        let result = self.run_resident(width, height, connectivity, want);
        let b = self.buffers.as_mut().expect("buffers allocated");
        std::mem::swap(&mut b.bytes, &mut borrowed_input);
        std::mem::forget(borrowed_input);
        if let Some(own) = own_out {
            std::mem::forget(std::mem::replace(&mut b.out, own));
        }
        result
    }

    /// The kernels on the byte mask in `buffers.bytes`, untimed; the count is read when the
    /// numbering kernel has it, without waiting for the kernels after it.
    fn run_resident(
        &mut self,
        width: u32,
        height: u32,
        connectivity: Connectivity,
        want: Want,
    ) -> Result<u32> {
        if self.early_count.is_none() {
            // SAFETY: read only after the copy from the device has written it.
            let host = unsafe { self.gpu.ctx.alloc_pinned_with_flags::<u32>(1, 0) }
                .map_err(|e| cuda_err("allocating pinned memory", e))?;
            let copied = self
                .gpu
                .ctx
                .new_event(None)
                .map_err(|e| cuda_err("creating an event", e))?;
            self.early_count = Some((host, copied));
        }
        // Nobody reads this run's step times: no timing events between its launches.
        self.events.set_off(true);
        self.count_early = true;
        let launched = self.launch_kernels(
            connectivity,
            want,
            MaskInput::for_bytes(width, height),
            0,
            false,
        );
        self.count_early = false;
        self.events.set_off(false);
        launched?;
        let (host, copied) = self.early_count.as_ref().expect("allocated above");
        // Waits for the copy (the event recorded after it), not for the stream.
        let dl = |e| cuda_err("downloading the count", e);
        copied.synchronize().map_err(dl)?;
        Ok(host.as_slice().map_err(dl)?[0])
    }

    /// The device buffers of the last `label_in_place`; None before the first run.
    pub fn device_results(&self) -> Option<DeviceResults<'_>> {
        self.buffers.as_ref().map(|b| DeviceResults {
            stats: &b.stats,
            start: &b.start,
            end: &b.end,
            nruns: &b.nruns,
            runs_per_row: b.runs_per_row,
        })
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

    fn label(
        &mut self,
        image: &BinaryImage,
        connectivity: Connectivity,
        want: Want,
    ) -> Result<Labeling> {
        self.label_mask(Mask::Bytes(image), connectivity, want, false)
    }

    /// Statistics without a label image, of a mask (staged, then one graph launch or the plain
    /// launches) or of a grey frame with one global level (thresholded on the
    /// device, as `label_grey`).
    fn submit(
        &mut self,
        frame: Submission<'_>,
        connectivity: Connectivity,
        want: Want,
    ) -> Result<bool> {
        if want.labels() {
            return Ok(false);
        }
        if self.submitted.is_some() {
            return Err(Error::Invalid(format!(
                "{}: a frame was submitted before the last one was completed",
                self.name()
            )));
        }
        let queued = match frame {
            Submission::Mask(mask) => self.start_mask(mask, connectivity, want, false)?.0,
            Submission::Grey(input) => {
                if matches!(input.threshold, ThresholdSpec::Adaptive { .. }) {
                    return Ok(false);
                }
                let (width, height) = (input.grey.width, input.grey.height);
                self.start_run(width, height, connectivity, want, false, |me| {
                    let b = me.buffers.as_mut().expect("buffers allocated");
                    let steps = me
                        .grey
                        .threshold_into(&input, &mut b.mask, &mut me.events, 0)?;
                    Ok((steps, MaskInput::Packed))
                })?
                .0
            }
        };
        self.submitted = Some(queued);
        Ok(true)
    }

    fn complete(&mut self) -> Result<Labeling> {
        let queued = self
            .submitted
            .take()
            .ok_or_else(|| Error::Invalid(format!("{}: no frame was submitted", self.name())))?;
        self.end_run(queued, false)
    }

    fn frames_in_flight(&self) -> usize {
        self.frames_in_flight
    }

    /// On a stream of its own (`Gpu::capture_twin`), so that its upload and kernels overlap
    /// the other instances' work.
    fn twin(&self) -> Result<Box<dyn Labeler>> {
        let mut twin = Flsl::new(Arc::new(self.gpu.capture_twin()?), self.variant)?;
        twin.graphs.set_enabled(self.graphs.enabled());
        twin.results.set_filter(self.results.filter());
        twin.frames_in_flight = self.frames_in_flight;
        Ok(Box::new(twin))
    }

    fn label_packed(
        &mut self,
        packed: &PackedBinary,
        connectivity: Connectivity,
        want: Want,
    ) -> Result<Labeling> {
        self.label_mask(Mask::Packed(packed), connectivity, want, false)
    }

    /// The shape sums come from the accumulation pass (fused: no label image, no second pass)
    /// for every variant but OTF. OTF, sub-pixel weights (computed on the host by this family)
    /// and frames with a side above 65536 (where the u64 sums could overflow) take the default
    /// path: the label image to the host.
    fn label_shapes(
        &mut self,
        mask: Mask<'_>,
        connectivity: Connectivity,
        want: Want,
        weights: Option<&GreyWeights<'_>>,
        keep: Keep<'_>,
    ) -> Result<ShapeLabeling> {
        let (width, height) = mask.size();
        if self.kernels.shapes.is_none()
            || weights.is_some()
            || !DescriptorStage::fits(width, height)
        {
            return crate::ccl::label_shapes_on_host(self, mask, connectivity, want, weights, keep);
        }
        let mut labeling = self.label_mask(mask, connectivity, want, true)?;
        let stats = labeling.stats.as_ref().ok_or_else(|| {
            Error::Invalid(format!("{}: no statistics were computed", self.name()))
        })?;
        let sums = shape_rows(&self.host_shapes, stats, keep)?;
        if !want.stats() {
            labeling.stats = None;
        }
        Ok((labeling, None, sums))
    }

    /// The grey frame goes up and is thresholded and packed on the device (one global level:
    /// not adaptive). No sub-pixel centroids here: with `subpixel`, `None`.
    fn label_grey(
        &mut self,
        input: &GreyInput<'_>,
        connectivity: Connectivity,
        want: Want,
        subpixel: Option<Keep<'_>>,
    ) -> Result<Option<GreyLabeling>> {
        if subpixel.is_some() || matches!(input.threshold, ThresholdSpec::Adaptive { .. }) {
            return Ok(None);
        }
        let (width, height) = (input.grey.width, input.grey.height);
        let labeling = self.run(width, height, connectivity, want, false, |me| {
            let b = me.buffers.as_mut().expect("buffers allocated");
            let steps = me
                .grey
                .threshold_into(input, &mut b.mask, &mut me.events, 0)?;
            Ok((steps, MaskInput::Packed))
        })?;
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
        image: &BinaryImage,
        connectivity: Connectivity,
        want: Want,
        repeat: u32,
    ) -> Result<ResidentTiming> {
        crate::frame::image::check_size(image.width, image.height)?;
        self.ensure_buffers(image.width, image.height)?;
        if want.labels() {
            self.ensure_out()?;
        }
        {
            let b = self.buffers.as_mut().expect("buffers allocated");
            self.gpu
                .stream
                .memcpy_htod(&image.data, &mut b.bytes)
                .map_err(|e| cuda_err("uploading the mask", e))?;
        }
        let input = MaskInput::for_bytes(image.width, image.height);
        let mut best = ResidentTiming::fastest(repeat, || {
            self.events.record(&self.gpu, 0)?;
            let steps = self.launch_kernels(connectivity, want, input, 0, false)?;
            self.events.resident_timing(&steps)
        })?;
        let b = self.buffers.as_ref().expect("buffers allocated");
        best.count = self.download.fetch_count(&self.gpu, &b.total)?;
        Ok(best)
    }
}

#[cfg(test)]
mod tests {
    /// The block table's shape kernels are launched with the dynamic shared memory they lay
    /// their table out in.
    #[test]
    fn shape_table_bytes_match_the_kernels() {
        let flsl = include_str!("../../../kernels/flsl.cu");
        assert_eq!(
            super::super::common::define(flsl, "SHAPE_TABLE_BYTES"),
            super::SHAPE_TABLE_BYTES
        );
    }
}
