//! Device buffers the CUDA labelers share: the statistics row layout, the OTF variants'
//! features, the look-back numbering state and the label image.

use super::launches::warp_rows_launch;
use crate::ccl::stats::ComponentStats;
use crate::ccl::Connectivity;
use crate::error::Result;
use crate::gpu::{cuda_err, Gpu};
use cudarc::driver::{CudaSlice, DeviceRepr, LaunchArgs, PushKernelArg};

/// Mirror of `struct GpuStats` in kernels/common.cuh.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GpuStats {
    pub sum_x: u64,
    pub sum_y: u64,
    pub area: u32,
    pub min_x: u32,
    pub max_x: u32,
    pub max_y: u32,
    pub top: u32,
    pub pad: u32,
}

// SAFETY: plain old data with the same layout as the CUDA struct.
unsafe impl DeviceRepr for GpuStats {}
// SAFETY: all-zero bits are a valid value (integers only).
unsafe impl cudarc::driver::ValidAsZeroBits for GpuStats {}

impl GpuStats {
    pub fn to_stats(self, label: u32) -> ComponentStats {
        ComponentStats {
            label,
            left: self.min_x,
            top: self.top,
            width: self.max_x - self.min_x + 1,
            height: self.max_y - self.top + 1,
            area: self.area as u64,
            sum_x: self.sum_x,
            sum_y: self.sum_y,
            centroid_x: self.sum_x as f64 / self.area as f64,
            centroid_y: self.sum_y as f64 / self.area as f64,
        }
    }
}

/// Per-element features of the OTF variants (HA+OTF: per segment head; FLSL+OTF: per run), one
/// array per field: `Feat` in common.cuh.
pub struct OtfFeatures {
    area: CudaSlice<u32>,
    min_x: CudaSlice<u32>,
    max_x: CudaSlice<u32>,
    max_y: CudaSlice<u32>,
    sum_x: CudaSlice<u64>,
    sum_y: CudaSlice<u64>,
}

impl OtfFeatures {
    /// Device bytes per element.
    pub const BYTES_PER_ELEMENT: usize = 4 * 4 + 2 * 8;

    /// Arrays of `n` elements, uninitialised: the strip kernels write an element's features
    /// before any kernel reads them.
    pub fn alloc(gpu: &Gpu, n: usize) -> Result<OtfFeatures> {
        let s = &gpu.stream;
        let e = |e| cuda_err("allocating device buffers", e);
        // SAFETY: see above; every element read was written by a strip kernel first.
        unsafe {
            Ok(OtfFeatures {
                area: s.alloc::<u32>(n).map_err(e)?,
                min_x: s.alloc::<u32>(n).map_err(e)?,
                max_x: s.alloc::<u32>(n).map_err(e)?,
                max_y: s.alloc::<u32>(n).map_err(e)?,
                sum_x: s.alloc::<u64>(n).map_err(e)?,
                sum_y: s.alloc::<u64>(n).map_err(e)?,
            })
        }
    }

    /// Pushes the six arrays in the order of the OTF kernels' trailing parameters
    /// `(area, min_x, max_x, max_y, sum_x, sum_y)`.
    pub fn push_args<'a>(&'a self, launch: &mut LaunchArgs<'a>) {
        launch
            .arg(&self.area)
            .arg(&self.min_x)
            .arg(&self.max_x)
            .arg(&self.max_y)
            .arg(&self.sum_x)
            .arg(&self.sum_y);
    }
}

/// The most components a `width × height` image can have: a checkerboard for 4-connectivity
/// (every other pixel), isolated pixels on every other row and column for 8-connectivity.
/// Statistics buffers are sized with it.
pub fn max_components(width: u32, height: u32, connectivity: Connectivity) -> usize {
    let (w, h) = (width as usize, height as usize);
    match connectivity {
        Connectivity::Four => (w * h).div_ceil(2),
        Connectivity::Eight => w.div_ceil(2) * h.div_ceil(2),
    }
}

/// Rows per block of the numbering kernels (`NUMBER_ROWS` in common.cuh).
pub const NUMBER_ROWS: u32 = 16;

/// State of the one-pass root numbering (`number_rows_offset` in common.cuh): a look-back status
/// word per block of NUMBER_ROWS rows, and the epoch of the next launch. Every launch gets a new
/// epoch, so the words of earlier frames read as unpublished and need no clearing.
pub struct Lookback {
    pub status: CudaSlice<u64>,
    epoch: u32,
}

impl Lookback {
    /// Epochs are 1 .. 2^31 - 1 (31 bits of the status word; 0 is the cleared array's).
    const LAST_EPOCH: u32 = (1 << 31) - 1;

    pub fn new(gpu: &Gpu, height: u32) -> Result<Lookback> {
        let blocks = height.div_ceil(NUMBER_ROWS).max(1) as usize;
        let status = gpu
            .stream
            .alloc_zeros::<u64>(blocks)
            .map_err(|e| cuda_err("allocating device buffers", e))?;
        Ok(Lookback { status, epoch: 0 })
    }

    /// The epoch for the next launch; after the last one the array is cleared and epochs start
    /// again (stream order puts the clearing after every earlier launch).
    pub fn next_epoch(&mut self, gpu: &Gpu) -> Result<u32> {
        if self.epoch == Self::LAST_EPOCH {
            gpu.stream
                .memset_zeros(&mut self.status)
                .map_err(|e| cuda_err("clearing the look-back status", e))?;
            self.epoch = 0;
        }
        self.epoch += 1;
        Ok(self.epoch)
    }

    /// Queues the clearing of the status array and starts the epochs again at 1 for the next
    /// launch. A frame graph begins with it, so that its launches, all with epoch 1, find no
    /// word of an earlier launch published; the plain launches after it go on from epoch 2.
    pub fn restart(&mut self, gpu: &Gpu) -> Result<()> {
        gpu.stream
            .memset_zeros(&mut self.status)
            .map_err(|e| cuda_err("clearing the look-back status", e))?;
        self.epoch = 0;
        Ok(())
    }

    /// Launch geometry of a numbering kernel: blockDim = (32, NUMBER_ROWS), one warp per row.
    pub fn launch(height: u32) -> cudarc::driver::LaunchConfig {
        warp_rows_launch(height, NUMBER_ROWS)
    }
}

/// A device label image of `pixels` values, allocated once and kept (CCA alone never needs it).
pub fn ensure_label_image(
    gpu: &Gpu,
    out: &mut Option<CudaSlice<u32>>,
    pixels: usize,
) -> Result<()> {
    if out.is_none() {
        // SAFETY: the relabel kernels write every pixel of the label image before it is read.
        *out = Some(
            unsafe { gpu.stream.alloc::<u32>(pixels) }
                .map_err(|e| cuda_err("allocating the label image", e))?,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::launches::define;
    use super::*;

    /// The look-back's blocks are the ones `number_rows_offset` sizes its row table for.
    #[test]
    fn lookback_blocks_match_the_kernels() {
        let common = include_str!("../../../kernels/common.cuh");
        assert_eq!(define(common, "NUMBER_ROWS"), NUMBER_ROWS);
        assert_eq!(Lookback::launch(100).block_dim, (32, NUMBER_ROWS, 1));
        assert_eq!(Lookback::launch(100).grid_dim.0, 7);
    }
}
