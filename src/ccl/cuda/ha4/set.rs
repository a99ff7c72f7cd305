//! A frame set labeled as one image (`crate::ccl::frame_set`): the frames go up (or are copied
//! where a decoder left them) side by side, each is thresholded with its own level by the same
//! launches (one block row of frames: `blockIdx.z`), the gap rows are cleared, and the stacked
//! mask is labeled, analysed and downloaded once (the rows the row filter keeps, where one is
//! set, with the labels before each frame: `set_frame_starts`); the sub-pixel sums are taken
//! frame by frame in one launch, each frame's rows counted from its own first row. One wait
//! for the whole set.

use super::super::buffers::GpuStats;
use super::super::mask_input::MaskInput;
use super::super::subpixel::{FrameStrides, SubpixelStage};
use super::super::timing::StepTimings;
use super::Ha4;
use crate::ccl::frame_set::{GreySet, SetLayout};
use crate::ccl::subpixel::SubpixelCentroid;
use crate::ccl::{
    Completed, Labeler, Labeling, StepTime, Want, STATISTICS_ROWS_STEP, SUBPIXEL_ROWS_STEP,
};
use crate::error::{Error, Result};
use crate::frame::image::PackedBinary;
use crate::gpu::kernels::KernelFile;
use crate::gpu::launch::{launch_err, linear_launch, load};
use crate::gpu::staging::PinnedBuffer;
use crate::gpu::{cuda_err, Gpu};
use crate::threshold::gpu::set_stride;
use crate::threshold::spec::ThresholdSpec;
use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, DevicePtrMut, PushKernelArg};
use std::time::Instant;

/// The labels before each frame of a set and its count (`set_frame_starts`), on the device
/// and their copy on the host.
pub(super) struct SetStarts {
    kernel: CudaFunction,
    device: CudaSlice<u32>,
    host: PinnedBuffer<u32>,
}

impl SetStarts {
    fn new(gpu: &Gpu) -> Result<SetStarts> {
        Ok(SetStarts {
            kernel: load(gpu, KernelFile::Ha4, "set_frame_starts")?,
            device: gpu
                .stream
                .alloc_zeros::<u32>(2)
                .map_err(|e| cuda_err("allocating the frame starts", e))?,
            host: PinnedBuffer::alloc(gpu, 2, false)?,
        })
    }

    /// Queues the starts of `frames` frames `pitch` rows apart from the numbered `stats`
    /// (`total` of them), and their copy to the host.
    fn queue(
        &mut self,
        gpu: &Gpu,
        (total, stats): (&CudaSlice<u32>, &CudaSlice<GpuStats>),
        frames: u32,
        pitch: u32,
    ) -> Result<()> {
        let n = frames as usize + 1;
        let s = &gpu.stream;
        if self.device.len() < n {
            self.device = s
                .alloc_zeros::<u32>(n)
                .map_err(|e| cuda_err("allocating the frame starts", e))?;
            // The copy into the old buffer was waited for with its set.
            self.host = PinnedBuffer::alloc(gpu, n, false)?;
        }
        let capacity = stats.len() as u32;
        // SAFETY: matches set_frame_starts(const u32*, const GpuStats*, u32, u32, u32, u32*);
        // `stats` holds `capacity` rows, `device` frames + 1 values.
        unsafe {
            s.launch_builder(&self.kernel)
                .arg(total)
                .arg(stats)
                .arg(&capacity)
                .arg(&frames)
                .arg(&pitch)
                .arg(&mut self.device)
                .launch(linear_launch(n as u64, 64))
                .map_err(|e| launch_err("set_frame_starts", e))?;
        }
        let (src, _sync) = self.device.device_ptr(s);
        let dst = &mut self.host.as_mut_slice()[..n];
        // SAFETY: `host` is page-locked and holds n values; read after the set is waited for.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src, s.cu_stream()) }
            .map_err(|e| cuda_err("downloading the frame starts", e))
    }

    /// The starts the last `queue` copied (once the stream has passed it).
    fn read(&self, frames: u32) -> Vec<u32> {
        self.host.as_slice()[..frames as usize + 1].to_vec()
    }
}

/// A set `Ha4::queue_set` queued, until `finish_set` takes it.
pub(super) struct QueuedSet {
    steps: Vec<&'static str>,
    layout: SetLayout,
    strides: FrameStrides,
    invert: bool,
    weighted: bool,
}

impl Ha4 {
    /// Whether `queue_set` takes `set`: a variant without its own analysis stage, nothing
    /// submitted, a threshold with one level a frame.
    pub(super) fn takes_set(&self, set: &GreySet<'_>) -> bool {
        self.analysis.is_none()
            && self.submitted.is_none()
            && self.submitted_set.is_none()
            && !set.frames.is_empty()
            && set
                .frames
                .iter()
                .all(|f| !matches!(f.threshold, ThresholdSpec::Adaptive { .. }))
    }

    /// Queues the set's whole run (see the module comment); the host waits for nothing.
    pub(super) fn queue_set(&mut self, set: GreySet<'_>) -> Result<QueuedSet> {
        let layout = set.layout();
        let stacked = layout.stacked_height()?;
        let width = layout.width;
        let first = set.frames[0];
        self.use_connectivity(set.connectivity)?;
        let weighted = set.subpixel;
        if weighted && self.subpixel.is_none() {
            self.subpixel = Some(SubpixelStage::new(self.gpu.clone())?);
        }
        if self.set_starts.is_none() {
            self.set_starts = Some(SetStarts::new(&self.gpu)?);
        }
        // The rows the row filter keeps come down, each with its label (each frame's count
        // and first label come from the starts).
        self.prepare(width, stacked, true, true)?;
        if weighted {
            self.ensure_out()?;
        }
        self.events.record(&self.gpu, 0)?;
        let words_per_row = PackedBinary::words_per_row_for(width);
        let mask_stride = words_per_row * layout.pitch_rows() as usize;
        let b = self.buffers.as_mut().expect("buffers allocated");
        let mut steps = self.grey.threshold_set_into(
            set.frames,
            &mut b.mask.packed,
            mask_stride,
            (&mut self.events, 0),
        )?;
        clear_gaps(&self.gpu, &mut b.mask.packed, layout, words_per_row)?;
        let first_kernel = steps.len();
        let want = if weighted { Want::Both } else { Want::Stats };
        steps.extend(self.launch_kernels(want, MaskInput::Packed, first_kernel)?);
        let b = self.buffers.as_ref().expect("buffers allocated");
        self.results.queue(&self.gpu.stream, &b.total, &b.stats)?;
        let starts = self.set_starts.as_mut().expect("made above");
        starts.queue(
            &self.gpu,
            (&b.total, &b.stats),
            layout.frames,
            layout.pitch_rows(),
        )?;
        steps.push(self.results.step_name());
        self.events.record(&self.gpu, steps.len())?;
        let strides = FrameStrides {
            frames: layout.frames,
            label_stride: u64::from(width) * u64::from(layout.pitch_rows()),
            grey_stride: set_stride(width, layout.height) as u64,
        };
        if weighted {
            let out = b.out.as_ref().expect("out allocated");
            let stage = self.subpixel.as_mut().expect("created above");
            let level = self.grey.queued_level();
            let size = (width, layout.height);
            stage.launch_early(
                out,
                &self.grey.grey,
                size,
                strides,
                first.invert,
                level,
                &b.total,
            )?;
            steps.push("sub-pixel centroids");
            self.events.record(&self.gpu, steps.len())?;
        }
        Ok(QueuedSet {
            steps,
            layout,
            strides,
            invert: first.invert,
            weighted,
        })
    }

    /// Waits for the set `queue_set` queued (the one wait of the set) and gives each frame its
    /// own labeling: its rows, count and, when asked, the centroids of the rows its keep
    /// accepts.
    pub(super) fn finish_set(
        &mut self,
        queued: QueuedSet,
        keeps: &[crate::ccl::Keep<'_>],
    ) -> Result<Vec<Completed>> {
        let QueuedSet {
            steps,
            layout,
            strides,
            invert,
            weighted,
        } = queued;
        if weighted && keeps.len() != layout.frames as usize {
            return Err(Error::Invalid(
                "a frame set's keeps do not match its frames".into(),
            ));
        }
        self.events.wait(steps.len())?;
        let b = self.buffers.as_ref().expect("buffers allocated");
        let count = self.results.count()?;
        self.results.bring_rest(&self.gpu, &b.total, &b.stats)?;
        let t = Instant::now();
        let rows = self.results.rows()?;
        let mut host_steps = vec![StepTime::new(STATISTICS_ROWS_STEP, ms(t))];
        let centroids = match weighted {
            false => None,
            true => {
                let stage = self.subpixel.as_mut().expect("created when queued");
                if !stage.finish_early(count)? {
                    // More components than the early sums had room for: summed again.
                    let out = b.out.as_ref().expect("out allocated");
                    let level = self.grey.queued_level();
                    let size = (layout.width, layout.height);
                    stage.launch_set(out, &self.grey.grey, size, strides, invert, level, count)?;
                }
                let t = Instant::now();
                let all = stage.fetch(&rows, &|_| true)?;
                host_steps.push(StepTime::new(SUBPIXEL_ROWS_STEP, ms(t)));
                Some(all)
            }
        };
        let filtered = self.results.queued_filter();
        let starts = self
            .set_starts
            .as_ref()
            .expect("made when queued")
            .read(layout.frames);
        if (filtered.is_none() && rows.len() != count as usize) || starts.last() != Some(&count) {
            return Err(Error::Invalid(format!(
                "{}: {} rows and {:?} starts for a frame set of {count} components",
                self.name(),
                rows.len(),
                starts.last()
            )));
        }
        let mut timings = self.events.step_times(&steps)?;
        timings.extend(host_steps);
        // Each frame's share of the set's steps.
        let share = 1.0 / f64::from(layout.frames);
        for step in &mut timings {
            step.ms *= share;
        }
        let parts = layout.split(rows, centroids, &starts)?;
        Ok(parts
            .into_iter()
            .enumerate()
            .map(|(k, ((stats, centroids), count))| {
                let keep = keeps.get(k).copied();
                let centroids = centroids.map(|all| kept_centroids(&stats, all, keep));
                let labeling = Labeling {
                    count,
                    labels: None,
                    stats: Some(stats),
                    timings: timings.clone(),
                    filtered,
                    device_detections: None,
                };
                (labeling, centroids)
            })
            .collect())
    }
}

/// The centroids of the rows `keep` accepts, in order (every row's are given).
fn kept_centroids(
    rows: &[crate::ccl::stats::ComponentStats],
    all: Vec<SubpixelCentroid>,
    keep: Option<crate::ccl::Keep<'_>>,
) -> Vec<SubpixelCentroid> {
    match keep {
        None => all,
        Some(keep) => rows
            .iter()
            .zip(all)
            .filter(|(row, _)| keep(row))
            .map(|(_, c)| c)
            .collect(),
    }
}

/// Clears the gap rows after each frame but the last of the stacked packed mask: one 2-D
/// memset (the threshold writes the frames' rows only).
fn clear_gaps(
    gpu: &Gpu,
    mask: &mut CudaSlice<u32>,
    layout: SetLayout,
    words_per_row: usize,
) -> Result<()> {
    let gaps = layout.frames.saturating_sub(1) as usize;
    let gap_words = words_per_row * crate::ccl::frame_set::GAP_ROWS as usize;
    if gaps == 0 || gap_words == 0 {
        return Ok(());
    }
    let pitch_words = words_per_row * layout.pitch_rows() as usize;
    let first_gap = words_per_row * layout.height as usize;
    if mask.len() < pitch_words * gaps + first_gap {
        return Err(Error::Invalid(
            "the stacked mask is too small for its gaps".into(),
        ));
    }
    let (base, _sync) = mask.device_ptr_mut(&gpu.stream);
    let dst = base + (first_gap * 4) as u64;
    // SAFETY: rows of `gap_words` words, `pitch_words` apart, `gaps` of them, starting after
    // the first frame's rows: within `mask` (checked above), on the stream that labels it.
    unsafe {
        cudarc::driver::sys::cuMemsetD2D32Async(
            dst,
            pitch_words * 4,
            0,
            gap_words,
            gaps,
            gpu.stream.cu_stream(),
        )
    }
    .result()
    .map_err(|e| cuda_err("clearing the gaps of a frame set", e))
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
