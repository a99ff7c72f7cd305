//! Labeling a mask that is already in device memory (a CuPy array, a PyTorch CUDA tensor),
//! with the results written into the caller's device memory in OpenCV's
//! `connectedComponentsWithStats` layout: the label image, then the statistics and centroids
//! with the background as row 0. Nothing crosses PCIe but the component count.
//!
//! The FLSL family (`flsl`, `flsl_otf`, `flsl_cd`, `flsl_cdb`: the registry entries whose
//! labelers can label device memory, `device_variant`) does the labeling;
//! `kernels/opencv_layout.cu` writes the rows, the background's from the image's totals less
//! the components' and from FLSL's runs (no pass over the mask), and with a grey image in device
//! memory `kernels/subpixel.cu` sums the grey-weighted (sub-pixel) centroids. A labeler runs on
//! the device of the `Gpu` it was made with; every call runs on that engine's stream (the
//! context's legacy default stream, which orders itself with the other blocking streams of the
//! device). `label` returns once the count is known; writing the rows is queued on the stream
//! and `finish` waits for it, or `order_before` orders it before another stream's later work, as
//! CuPy and PyTorch order their own calls (results are ready for the caller's stream without the
//! host waiting).

use super::flsl::{Flsl, Variant};
use super::subpixel::{launch_accumulate, raw_device_ptr, AccumulateArgs, FrameStrides};
use crate::ccl::Connectivity;
use crate::error::{Error, Result};
use crate::gpu::buffers::cleared_sums;
use crate::gpu::kernels::KernelFile;
use crate::gpu::{cuda_err, Gpu};
use cudarc::driver::{sys, CudaEvent, CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};
use std::sync::Arc;

/// A byte mask (0 / non-zero per pixel) in device memory: `height` rows of `width` bytes,
/// `row_pitch` bytes apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceMask {
    pub ptr: u64,
    pub width: u32,
    pub height: u32,
    pub row_pitch: usize,
}

/// Size in u64 words of `struct BackgroundSums` of kernels/opencv_layout.cu (three u64, six
/// u32): opencv_rows' partial sums across blocks, all-zero between launches.
const BACKGROUND_SUMS_WORDS: usize = 6;

/// Threads per block of opencv_rows (its ROWS_THREADS).
const ROWS_THREADS: u32 = 256;

/// The registry names whose labelers can label a mask in device memory, and their variants.
const DEVICE_ALGORITHMS: &[(&str, Variant)] = &[
    ("flsl", Variant::Flsl),
    ("flsl_otf", Variant::Otf),
    ("flsl_cd", Variant::Cd),
    ("flsl_cdb", Variant::CdBlock),
];

/// The algorithm device input gets when none is asked for.
pub const DEFAULT_DEVICE_ALGORITHM: &str = "flsl_cdb";

/// The FLSL variant of registry entry `name` when it can label device memory.
pub fn device_variant(name: &str) -> Option<Variant> {
    DEVICE_ALGORITHMS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
}

/// The registry names that can label device memory.
pub fn device_algorithms() -> impl Iterator<Item = &'static str> {
    DEVICE_ALGORITHMS.iter().map(|(n, _)| *n)
}

/// One labeler for device input; keeps its buffers between calls (one per thread).
pub struct DeviceLabeler {
    gpu: Arc<Gpu>,
    flsl: Flsl,
    variant: Variant,
    opencv_rows: CudaFunction,
    subpixel_rows: CudaFunction,
    sp_accumulate: CudaFunction,
    /// The label image of a call that needs one (sub-pixel centroids) and was given none.
    own_labels: Option<CudaSlice<u32>>,
    /// Σ w, Σ w·x, Σ w·y per component (sub-pixel centroids).
    subpixel_sums: Option<CudaSlice<u64>>,
    /// sp_accumulate's per-pixel levels, unused (one global level): a one-value stand-in.
    no_levels: CudaSlice<i32>,
    /// The label image the last `label` wrote, for the sub-pixel centroids.
    last_labels: Option<u64>,
    /// opencv_rows' `BackgroundSums`: zeroed once, left zeroed by every launch.
    background: CudaSlice<u64>,
    /// A contiguous copy of masks whose rows are padded or not 16-byte aligned.
    staging: Option<CudaSlice<u8>>,
    /// The component count of the last `label` (0 before the first).
    count: u32,
    /// Width and height of the last `label`'s mask.
    last_size: (u32, u32),
    /// Recorded where one stream's work must come before another's (`order_after`,
    /// `order_before`).
    handoff: CudaEvent,
}

impl DeviceLabeler {
    /// A labeler of `variant` (`device_variant`) on `gpu`'s device.
    pub fn new(gpu: Arc<Gpu>, variant: Variant) -> Result<DeviceLabeler> {
        let load_from = |file: KernelFile, name: &str| {
            gpu.module(file)
                .load_function(name)
                .map_err(|e| cuda_err(&format!("loading kernel {name}"), e))
        };
        let load = |name: &str| load_from(KernelFile::OpencvLayout, name);
        let background = gpu
            .stream
            .alloc_zeros::<u64>(BACKGROUND_SUMS_WORDS)
            .map_err(|e| cuda_err("allocating device buffers", e))?;
        let no_levels = gpu
            .stream
            .alloc_zeros::<i32>(1)
            .map_err(|e| cuda_err("allocating device buffers", e))?;
        Ok(DeviceLabeler {
            flsl: Flsl::new(gpu.clone(), variant)?,
            variant,
            opencv_rows: load("opencv_rows")?,
            subpixel_rows: load("subpixel_rows")?,
            sp_accumulate: load_from(KernelFile::Subpixel, "sp_accumulate")?,
            own_labels: None,
            subpixel_sums: None,
            no_levels,
            last_labels: None,
            background,
            staging: None,
            count: 0,
            last_size: (0, 0),
            handoff: gpu
                .ctx
                .new_event(None)
                .map_err(|e| cuda_err("creating an event", e))?,
            gpu,
        })
    }

    /// The device this labeler runs on.
    pub fn ordinal(&self) -> usize {
        self.gpu.ctx.ordinal()
    }

    /// The FLSL variant this labeler runs.
    pub fn variant(&self) -> Variant {
        self.variant
    }

    /// The registry name of its algorithm.
    pub fn name(&self) -> &'static str {
        DEVICE_ALGORITHMS
            .iter()
            .find(|(_, v)| *v == self.variant)
            .map_or(DEFAULT_DEVICE_ALGORITHM, |(n, _)| *n)
    }

    /// Makes this labeler's context (its device's primary context) current on this thread,
    /// as the launches and `order_after` / `order_before` need.
    pub fn bind(&self) -> Result<()> {
        self.gpu
            .ctx
            .bind_to_thread()
            .map_err(|e| cuda_err("binding the context", e))
    }

    /// `label`, keeping a label image numbered 1..=count on the device (in `labels` when
    /// given, else in a buffer of this labeler) for `write_subpixel_rows`.
    ///
    /// # Safety
    /// As `label`.
    pub unsafe fn label_for_subpixel(
        &mut self,
        mask: &DeviceMask,
        connectivity: Connectivity,
        labels: Option<u64>,
    ) -> Result<u32> {
        let labels = match labels {
            Some(ptr) => ptr,
            None => {
                let pixels = mask.width as usize * mask.height as usize;
                if self.own_labels.as_ref().is_none_or(|b| b.len() < pixels) {
                    self.own_labels = None;
                    // SAFETY: the labeling writes every value before any read.
                    self.own_labels = Some(
                        unsafe { self.gpu.stream.alloc::<u32>(pixels) }
                            .map_err(|e| cuda_err("allocating the label image", e))?,
                    );
                }
                let own = self.own_labels.as_ref().expect("allocated above");
                let (ptr, _sync) = cudarc::driver::DevicePtr::device_ptr(own, &self.gpu.stream);
                ptr
            }
        };
        // SAFETY: as the caller promised for `label`; `labels` holds width × height values.
        let count = unsafe { self.label(mask, connectivity, Some(labels))? };
        self.last_labels = Some(labels);
        Ok(count)
    }

    /// Writes rows 0..=count of the grey-weighted (sub-pixel) centroids of the last
    /// `label_for_subpixel` (f64, x y; row 0, the background, NaN) into `out`: weights
    /// grey − level (level + 1 − grey with `invert`), the sums exact as on the CPU. Queued on
    /// the stream (see `write_opencv_rows`).
    ///
    /// # Safety
    /// `grey` must address `width × height` readable bytes (rows back to back) of this device,
    /// the image the last labeling's mask was made from, and `out` count + 1 writable rows.
    pub unsafe fn write_subpixel_rows(
        &mut self,
        grey: u64,
        level: u8,
        invert: bool,
        out: u64,
    ) -> Result<()> {
        let labels = self.last_labels.ok_or_else(|| {
            Error::Invalid(
                "sub-pixel centroids asked for before a labeling that keeps its labels".into(),
            )
        })?;
        check_device_pointer(grey, self.ordinal(), "the grey image")?;
        check_device_pointer(out, self.ordinal(), "the sub-pixel centroids")?;
        let (width, height) = self.last_size;
        let count = self.count;
        let n = 3 * count as usize;
        let sums = cleared_sums(
            &self.gpu,
            &mut self.subpixel_sums,
            n.max(3),
            "centroid sums",
        )?;
        let s = &self.gpu.stream;
        let args = AccumulateArgs {
            labels,
            grey,
            levels: raw_device_ptr(&self.no_levels, s),
            per_pixel: false,
            level: level as i32,
            level_at: 0,
            invert,
            sums: raw_device_ptr(sums, s),
            count,
            count_at: 0,
            width,
            height,
            frames: FrameStrides::ONE,
        };
        // SAFETY: labels and grey hold width × height values (the caller's promise and the last
        // labeling's), sums 3 × count; the stream is waited for below.
        unsafe {
            launch_accumulate(&self.gpu, &self.sp_accumulate, &args)?;
            s.launch_builder(&self.subpixel_rows)
                .arg(&*sums)
                .arg(&count)
                .arg(&out)
                .launch(LaunchConfig {
                    grid_dim: ((count + 1).div_ceil(256), 1, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                })
                .map_err(|e| cuda_err("launching subpixel_rows", e))?;
        }
        Ok(())
    }

    /// Labels `mask`; writes the label image (u32 or i32 values 1..=count in raster order of
    /// first pixel, 0 = background, `width` values a row) into `labels` when given. Returns the
    /// component count (the background not counted) as soon as it is known, while the
    /// statistics and label kernels may still run: the caller allocates the rows meanwhile.
    /// The mask is read by then; the label image is written by the stream's later work.
    ///
    /// # Safety
    /// `mask.ptr` must address `row_pitch × (height − 1) + width` readable bytes of device
    /// memory of this labeler's device, and `labels` `width × height` writable 4-byte values;
    /// the caller keeps them alive until this returns, and the label image unused by other
    /// streams until `finish` or `order_before` has ordered them.
    pub unsafe fn label(
        &mut self,
        mask: &DeviceMask,
        connectivity: Connectivity,
        labels: Option<u64>,
    ) -> Result<u32> {
        crate::frame::image::check_size(mask.width, mask.height)?;
        if mask.row_pitch < mask.width as usize {
            return Err(Error::Invalid(format!(
                "device mask: row pitch {} is less than the width {}",
                mask.row_pitch, mask.width
            )));
        }
        self.bind()?;
        self.last_labels = None;
        check_device_pointer(mask.ptr, self.ordinal(), "the mask")?;
        if let Some(ptr) = labels {
            check_device_pointer(ptr, self.ordinal(), "the label image")?;
        }
        let vector_loads = mask.width % 16 == 0;
        let ptr = if mask.row_pitch != mask.width as usize || (vector_loads && mask.ptr % 16 != 0) {
            self.stage(mask)?
        } else {
            mask.ptr
        };
        self.count =
            self.flsl
                .label_in_place(ptr, mask.width, mask.height, connectivity, labels)?;
        self.last_size = (mask.width, mask.height);
        Ok(self.count)
    }

    /// Writes rows 0..=count of OpenCV's `stats` (i32, 5 a row), `centroids` (f64, 2 a row)
    /// and, when given, `sums` (i64: sum_x, sum_y) for the last `label`, row 0 being the
    /// background. Queued on the labeler's stream: `finish` waits for it, `order_before` makes
    /// another stream's later work wait for it.
    ///
    /// # Safety
    /// Each pointer must address count + 1 writable rows of device memory of this device.
    pub unsafe fn write_opencv_rows(
        &mut self,
        stats: u64,
        centroids: u64,
        sums: Option<u64>,
    ) -> Result<()> {
        let results = self.flsl.device_results().ok_or_else(|| {
            Error::Invalid("device statistics asked for before any labeling".into())
        })?;
        let (width, height) = self.last_size;
        let sums = sums.unwrap_or(0);
        let s = &self.gpu.stream;
        // SAFETY: matches opencv_rows in opencv_layout.cu; the stats table holds `count` rows and
        // the runs `height` rows of the last labeling, `background` BackgroundSums, the outputs
        // count + 1 rows (the caller's promise).
        s.launch_builder(&self.opencv_rows)
            .arg(results.stats)
            .arg(&self.count)
            .arg(results.start)
            .arg(results.end)
            .arg(results.nruns)
            .arg(&results.runs_per_row)
            .arg(&width)
            .arg(&height)
            .arg(&mut self.background)
            .arg(&stats)
            .arg(&centroids)
            .arg(&sums)
            .launch(LaunchConfig {
                grid_dim: (self.count.max(height).div_ceil(ROWS_THREADS), 1, 1),
                block_dim: (ROWS_THREADS, 1, 1),
                shared_mem_bytes: 0,
            })
            .map_err(|e| cuda_err("launching opencv_rows", e))?;
        Ok(())
    }

    /// Makes the work queued next on `stream` (a stream handle of this device's context, or
    /// the default streams 1 and 2) wait on the GPU for everything queued so far on this
    /// labeler's stream: the results are then ready for that stream's later work, and the
    /// host does not wait. The default streams need nothing: this labeler's stream is the
    /// legacy default stream, which orders itself with them and with every blocking stream.
    ///
    /// # Safety
    /// `stream` must be a valid stream handle of this labeler's context (or 1 or 2).
    pub unsafe fn order_before(&self, stream: u64) -> Result<()> {
        if stream <= 2 {
            return Ok(());
        }
        self.bind()?;
        let err = |e| cuda_err("ordering the results before the caller's stream", e);
        self.handoff.record(&self.gpu.stream).map_err(err)?;
        sys::cuStreamWaitEvent(stream as sys::CUstream, self.handoff.cu_event(), 0)
            .result()
            .map_err(err)
    }

    /// Makes this labeler's next work wait on the GPU for everything queued so far on `stream`
    /// (the array's producer's), without the host waiting.
    ///
    /// # Safety
    /// As `order_before`.
    pub unsafe fn order_after(&self, stream: u64) -> Result<()> {
        if stream <= 2 {
            return Ok(());
        }
        self.bind()?;
        let err = |e| cuda_err("waiting for the array's stream", e);
        sys::cuEventRecord(self.handoff.cu_event(), stream as sys::CUstream)
            .result()
            .map_err(err)?;
        sys::cuStreamWaitEvent(self.gpu.stream.cu_stream(), self.handoff.cu_event(), 0)
            .result()
            .map_err(err)
    }

    /// Waits until the GPU has finished this labeler's work (the last `label`'s kernels): for a
    /// caller that does not write the rows after a labeling (an error in between).
    pub fn finish(&self) -> Result<()> {
        self.bind()?;
        self.gpu
            .stream
            .synchronize()
            .map_err(|e| cuda_err("waiting for the labeling", e))
    }

    /// Copies a padded or unaligned mask into a contiguous buffer of our own.
    fn stage(&mut self, mask: &DeviceMask) -> Result<u64> {
        let (w, h) = (mask.width as usize, mask.height as usize);
        if self.staging.as_ref().is_none_or(|b| b.len() < w * h) {
            self.staging = None;
            // SAFETY: the copy below writes all w × h bytes before any kernel reads them.
            self.staging = Some(
                unsafe { self.gpu.stream.alloc::<u8>(w * h) }
                    .map_err(|e| cuda_err("allocating device buffers", e))?,
            );
        }
        let staging = self.staging.as_ref().expect("allocated above");
        let (dst, _sync) = cudarc::driver::DevicePtr::device_ptr(staging, &self.gpu.stream);
        let copy = sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: std::ptr::null(),
            srcDevice: mask.ptr,
            srcArray: std::ptr::null_mut(),
            srcPitch: mask.row_pitch,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstHost: std::ptr::null_mut(),
            dstDevice: dst,
            dstArray: std::ptr::null_mut(),
            dstPitch: w,
            WidthInBytes: w,
            Height: h,
        };
        // SAFETY: both regions are device memory of this context, sized as described above.
        unsafe { sys::cuMemcpy2DAsync_v2(&copy, self.gpu.stream.cu_stream()) }
            .result()
            .map_err(|e| cuda_err("copying the mask into a contiguous buffer", e))?;
        Ok(dst)
    }
}

/// The device whose memory `ptr` addresses (a CUDA array's, from its interface); needs the
/// driver initialised (any `Gpu` opened).
pub fn pointer_device(ptr: u64, what: &str) -> Result<usize> {
    let mut device: i32 = -1;
    // SAFETY: reads one attribute of a pointer into an i32, as the attribute is defined.
    let found = unsafe {
        sys::cuPointerGetAttribute(
            (&mut device as *mut i32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            ptr,
        )
    }
    .result();
    match found {
        Ok(()) if device >= 0 => Ok(device as usize),
        Ok(()) => Err(Error::Invalid(format!(
            "{what}: the CUDA driver names no device for its memory"
        ))),
        Err(e) => Err(Error::Invalid(format!(
            "{what} is not CUDA device memory ({e}); pass a CuPy array or a PyTorch CUDA tensor"
        ))),
    }
}

/// Checks that `ptr` is device (or managed) memory of device `ordinal`.
fn check_device_pointer(ptr: u64, ordinal: usize, what: &str) -> Result<()> {
    match pointer_device(ptr, what)? {
        device if device != ordinal => Err(Error::Invalid(format!(
            "{what} is on CUDA device {device}, the labeling runs on device {ordinal} (the \
             mask's); put every array of a call on one device"
        ))),
        _ => Ok(()),
    }
}

/// The CUDA context current on this thread when made (or none), made current again when
/// dropped: a call on another device leaves the caller's current device (CuPy's, PyTorch's) as
/// it was.
pub struct KeepCurrentContext(Option<sys::CUcontext>);

impl KeepCurrentContext {
    pub fn new() -> KeepCurrentContext {
        let mut current: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: writes the current context handle (or null) into `current`.
        let found = unsafe { sys::cuCtxGetCurrent(&mut current) }.result();
        KeepCurrentContext(found.ok().map(|()| current))
    }
}

impl Default for KeepCurrentContext {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for KeepCurrentContext {
    fn drop(&mut self) {
        if let Some(context) = self.0 {
            // SAFETY: the context that was current on this thread (primary contexts stay alive
            // while the process holds them), or null, which unbinds. A failure leaves the
            // labeler's context current, which its next call binds anyway.
            let _ = unsafe { sys::cuCtxSetCurrent(context) };
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ccl::cpu::oracle::flood_fill;
    use crate::ccl::stats::Moments;
    use crate::ccl::Connectivity;
    use crate::frame::image::BinaryImage;
    use crate::frame::random_image::{generate, RandomImageSpec};

    /// What thread `y` of opencv_rows finds on image row y from its first and last run
    /// (`[start, end)` pairs): (~first column, last column + 1, ~y, y + 1), all zero when the
    /// row is all foreground.
    fn row_part(runs: &[(u32, u32)], width: u32, y: u32) -> [u32; 4] {
        let (mut lo, mut hi, mut any) = (0, width - 1, true);
        if let (Some(&(s0, e0)), Some(&(sl, el))) = (runs.first(), runs.last()) {
            if s0 == 0 {
                lo = e0;
                any = e0 < width;
            }
            if el == width {
                hi = sl.wrapping_sub(1);
            }
        }
        match any {
            true => [!lo, hi + 1, !y, y + 1],
            false => [0; 4],
        }
    }

    /// Row 0 as opencv_rows computes it: the image's totals less the components' sums, the box
    /// from the maxima of the rows' parts; None when every pixel is foreground.
    fn background_from_totals(mask: &BinaryImage, components: &[Moments]) -> Option<Moments> {
        let (w, h) = (u64::from(mask.width), u64::from(mask.height));
        let area = w * h - components.iter().map(|c| c.area).sum::<u64>();
        let sum_x = h * (w * (w - 1) / 2) - components.iter().map(|c| c.sum_x).sum::<u64>();
        let sum_y = w * (h * (h - 1) / 2) - components.iter().map(|c| c.sum_y).sum::<u64>();
        let mut acc = [0u32; 4];
        for y in 0..mask.height {
            let part = row_part(&runs(mask, y), mask.width, y);
            for (a, p) in acc.iter_mut().zip(part) {
                *a = (*a).max(p);
            }
        }
        (area > 0).then(|| Moments {
            area,
            sum_x,
            sum_y,
            min_x: !acc[0],
            max_x: acc[1] - 1,
            min_y: !acc[2],
            max_y: acc[3] - 1,
        })
    }

    /// The foreground runs of row y, [start, end), left to right (FLSL's).
    fn runs(mask: &BinaryImage, y: u32) -> Vec<(u32, u32)> {
        let mut out: Vec<(u32, u32)> = Vec::new();
        for x in 0..mask.width {
            if mask.get(x, y) {
                match out.last_mut() {
                    Some(run) if run.1 == x => run.1 = x + 1,
                    _ => out.push((x, x + 1)),
                }
            }
        }
        out
    }

    /// The background counted pixel by pixel; None when there is none.
    fn background_by_pixels(mask: &BinaryImage) -> Option<Moments> {
        let mut m = Moments::EMPTY;
        for y in 0..mask.height {
            for x in 0..mask.width {
                if !mask.get(x, y) {
                    m.add_pixel(x, y);
                }
            }
        }
        (m.area > 0).then_some(m)
    }

    /// opencv_rows' block size and accumulator are the ones launched and allocated here.
    #[test]
    fn opencv_rows_layout_matches_the_kernel() {
        let source = include_str!("../../../kernels/opencv_layout.cu");
        let define = format!("#define ROWS_THREADS {}", super::ROWS_THREADS);
        assert!(source.lines().any(|l| l.trim() == define), "{define}");
        let start = source
            .find("struct BackgroundSums {")
            .expect("struct BackgroundSums");
        let body = &source[start..start + source[start..].find("};").expect("end")];
        let bytes: usize = body
            .lines()
            .map(|l| match l.split_whitespace().next() {
                Some("u64") => 8,
                Some("u32") => 4,
                _ => 0,
            })
            .sum();
        assert_eq!(bytes, super::BACKGROUND_SUMS_WORDS * 8);
    }

    #[test]
    fn background_row_from_totals_and_runs_equals_the_pixel_count() {
        let mut masks = vec![
            BinaryImage::from_fn(1, 1, |_, _| true).unwrap(),
            BinaryImage::from_fn(1, 1, |_, _| false).unwrap(),
            BinaryImage::from_fn(64, 48, |_, _| true).unwrap(),
            BinaryImage::from_fn(64, 48, |_, _| false).unwrap(),
            // Background only inside a frame of foreground, and only in one column or row.
            BinaryImage::from_fn(9, 8, |x, y| x == 0 || y == 0 || x == 8 || y == 7 || x == 4)
                .unwrap(),
            BinaryImage::from_fn(33, 20, |x, _| x != 17).unwrap(),
            BinaryImage::from_fn(33, 20, |_, y| y != 5).unwrap(),
            BinaryImage::from_fn(33, 20, |x, y| x != 32 || y != 19).unwrap(),
            BinaryImage::from_fn(33, 20, |x, y| x != 0 || y != 0).unwrap(),
            // Full rows at the top and bottom, runs touching both ends of a row.
            BinaryImage::from_fn(40, 12, |x, y| y < 3 || y > 9 || x < 5 || x > 30).unwrap(),
        ];
        let mut seed = 900;
        for (w, h) in [(1, 37), (37, 1), (131, 97), (64, 64), (257, 5)] {
            for density in [0.0, 0.1, 0.5, 0.9, 0.99, 1.0] {
                for granularity in [1, 4] {
                    seed += 1;
                    masks.push(
                        generate(&RandomImageSpec {
                            width: w,
                            height: h,
                            density,
                            granularity,
                            seed,
                        })
                        .unwrap(),
                    );
                }
            }
        }
        for mask in &masks {
            for connectivity in [Connectivity::Four, Connectivity::Eight] {
                let (_, components) = flood_fill(mask, connectivity);
                assert_eq!(
                    background_from_totals(mask, &components),
                    background_by_pixels(mask),
                    "{}x{}, {connectivity}-connectivity",
                    mask.width,
                    mask.height
                );
            }
        }
    }
}
