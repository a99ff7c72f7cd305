//! A frame's detections left in device memory for the GPU tracker (`track::gpu`): made by
//! `sp_detections` (kernels/subpixel.cu) from the statistics rows and the sub-pixel sums where
//! they already are, so the tracker reads them there instead of the host packing and uploading
//! them. The rows equal what the host makes of the downloaded ones (`track::Detection::from_rows`)
//! bit for bit; selftest's track group compares the two.

use super::subpixel::raw_device_ptr;
use crate::error::Result;
use crate::gpu::kernels::KernelFile;
use crate::gpu::launch::{launch_err, linear_launch, load};
use crate::gpu::{cuda_err, Gpu};
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, PushKernelArg};
use std::sync::Arc;

/// Doubles a detection takes on the device: x, y, area, left, top, right, bottom (the order of
/// `track::Detection`'s fields, the bounding box inclusive).
pub const DETECTION_DOUBLES: usize = 7;

/// Threads per block of `sp_detections`.
const THREADS: u32 = 256;

/// One frame's detections on the device, one per statistics row of its labeling, in order.
pub struct DeviceDetections {
    /// At least `DETECTION_DOUBLES × len` doubles (a buffer used again may hold more).
    rows: CudaSlice<f64>,
    len: usize,
}

impl std::fmt::Debug for DeviceDetections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceDetections({} rows)", self.len)
    }
}

impl DeviceDetections {
    /// Detections (statistics rows).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The rows, `DETECTION_DOUBLES` doubles each. The labeler has waited for its stream past
    /// the kernel that wrote them before handing them over: any stream of the context may read
    /// them.
    pub fn rows(&self) -> &CudaSlice<f64> {
        &self.rows
    }

    /// The context the rows live in (a tracker on another one cannot read them).
    pub fn context(&self) -> &Arc<CudaContext> {
        self.rows.context()
    }

    /// The rows on the host (for checks): `DETECTION_DOUBLES × len` doubles.
    pub fn download(&self, gpu: &Gpu) -> Result<Vec<f64>> {
        let n = DETECTION_DOUBLES * self.len;
        let mut out = vec![0.0; n];
        if n > 0 {
            (gpu.stream)
                .memcpy_dtoh(&self.rows.slice(0..n), &mut out)
                .map_err(|e| cuda_err("downloading the detections", e))?;
            (gpu.stream)
                .synchronize()
                .map_err(|e| cuda_err("downloading the detections", e))?;
        }
        Ok(out)
    }
}

/// Where a frame's statistics rows lie on the device, in the order the host receives them:
/// `n_first` rows at `first`, the rest at `rest`; `filtered`: each row carries its label in
/// `pad` (else row i is label i + 1). Device addresses of `gpu`'s context.
#[derive(Clone, Copy, Debug)]
pub struct RowsOnDevice {
    pub first: u64,
    pub n_first: u32,
    pub rest: u64,
    pub n: u32,
    pub filtered: bool,
}

/// Buffers a labeler keeps for the detections it hands out: the frames between the worker and
/// the tracker (the tracking stage queues up to 16) and one being made.
const KEPT_BUFFERS: usize = 20;

/// The kernel that makes the detections, and the buffers it made them in. A buffer the tracker
/// has let go of is used again rather than a fresh allocation each frame.
pub struct DetectionsKernel {
    kernel: CudaFunction,
    given: Vec<Arc<DeviceDetections>>,
}

impl DetectionsKernel {
    pub fn load(gpu: &Gpu) -> Result<DetectionsKernel> {
        Ok(DetectionsKernel {
            kernel: load(gpu, KernelFile::Subpixel, "sp_detections")?,
            given: Vec::new(),
        })
    }

    /// A buffer of at least `doubles` elements: one handed out before that nobody holds any
    /// more, else a new one (kept for later while there is room).
    fn buffer(&mut self, gpu: &Gpu, doubles: usize) -> Result<CudaSlice<f64>> {
        let free =
            (self.given.iter()).position(|d| Arc::strong_count(d) == 1 && d.rows.len() >= doubles);
        if let Some(k) = free {
            if let Ok(d) = Arc::try_unwrap(self.given.swap_remove(k)) {
                return Ok(d.rows);
            }
        }
        // Too small to be used again: let them go before allocating.
        self.given.retain(|d| Arc::strong_count(d) > 1);
        // SAFETY: every element the kernel reads back is written by it first.
        unsafe { gpu.stream.alloc::<f64>(doubles.next_power_of_two()) }
            .map_err(|e| cuda_err("allocating the detections", e))
    }

    /// Queues the detections of `rows` on `gpu`'s stream, their centroids from `sums` (the
    /// sub-pixel sums of labels 1..=count, `SubpixelStage::sums`). The caller waits for the
    /// stream before it hands them over.
    ///
    /// # Safety
    /// `rows` must address `n` statistics rows (`n_first` at `first`, the rest at `rest`) and
    /// `sums` 3 × `count` sums, in `gpu`'s context, unchanged until the stream has run the
    /// kernel.
    pub unsafe fn queue(
        &mut self,
        gpu: &Gpu,
        rows: RowsOnDevice,
        sums: u64,
        count: u32,
    ) -> Result<Arc<DeviceDetections>> {
        let len = rows.n as usize;
        let s = &gpu.stream;
        let out = self.buffer(gpu, (DETECTION_DOUBLES * len).max(1))?;
        if len > 0 {
            let (first, rest, n_first, n) = (rows.first, rows.rest, rows.n_first, rows.n);
            let filtered = rows.filtered as i32;
            let dst = raw_device_ptr(&out, s);
            // SAFETY: matches sp_detections(const GpuStats*, u32, const GpuStats*, u32, int,
            // const u64*, u32, double*); the sizes as the caller promised, `out` holds
            // DETECTION_DOUBLES × n.
            unsafe {
                s.launch_builder(&self.kernel)
                    .arg(&first)
                    .arg(&n_first)
                    .arg(&rest)
                    .arg(&n)
                    .arg(&filtered)
                    .arg(&sums)
                    .arg(&count)
                    .arg(&dst)
                    .launch(linear_launch(n as u64, THREADS))
                    .map_err(|e| launch_err("sp_detections", e))?;
            }
        }
        let made = Arc::new(DeviceDetections { rows: out, len });
        if self.given.len() < KEPT_BUFFERS {
            self.given.push(made.clone());
        }
        Ok(made)
    }
}
