//! Rust wrapper of `kernels/descriptors.cu`: shape descriptor sums on the GPU, over a device
//! label image numbered 1..=count in raster order (what a labeler leaves on the device for
//! `Want::Both`). The sums are exact integers, the same as the CPU's
//! `descriptors::shape_sums_of`, so selftest compares the two bit for bit.

use super::common::{cleared_sums, rows_launch};
use super::{cuda_err, Gpu, KernelFile};
use crate::ccl::descriptors::ShapeSums;
use crate::ccl::stats::ComponentStats;
use crate::ccl::Keep;
use crate::error::{Error, Result};
use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};
use std::sync::Arc;

/// Five u64 sums per component (see descriptors.cu).
pub const SUMS: usize = 5;

/// The largest side the u64 sums are exact for (x² < 2^32, at most 2^32 pixels).
pub const MAX_SIDE: u32 = 65536;

/// Reusable device buffers; the sums grow to the largest component count seen.
pub struct DescriptorStage {
    gpu: Arc<Gpu>,
    accumulate: CudaFunction,
    sums: Option<CudaSlice<u64>>,
    host_sums: Vec<u64>,
}

impl DescriptorStage {
    pub fn new(gpu: Arc<Gpu>) -> Result<DescriptorStage> {
        let accumulate = gpu
            .module(KernelFile::Descriptors)
            .load_function("sd_accumulate")
            .map_err(|e| cuda_err("loading kernel sd_accumulate", e))?;
        Ok(DescriptorStage {
            gpu,
            accumulate,
            sums: None,
            host_sums: Vec::new(),
        })
    }

    /// Can the GPU compute exact sums for a `width × height` frame?
    pub fn fits(width: u32, height: u32) -> bool {
        width <= MAX_SIDE && height <= MAX_SIDE
    }

    /// Queues the accumulation over `labels` (`width × height`, numbered 1..=count; other
    /// values are ignored) and the download of the sums.
    pub fn launch(
        &mut self,
        labels: &CudaSlice<u32>,
        width: u32,
        height: u32,
        count: u32,
    ) -> Result<()> {
        if !Self::fits(width, height) {
            return Err(Error::Invalid(format!(
                "shape descriptors on the GPU: {width}x{height} has a side above {MAX_SIDE}"
            )));
        }
        if labels.len() < width as usize * height as usize {
            return Err(Error::Invalid(format!(
                "shape descriptors: the label buffer holds {} pixels, {width}x{height} needs more",
                labels.len()
            )));
        }
        let n = SUMS * count as usize;
        self.host_sums.resize(n, 0);
        if n == 0 {
            return Ok(());
        }
        let sums = cleared_sums(&self.gpu, &mut self.sums, n, "descriptor sums")?;
        let s = &self.gpu.stream;
        // SAFETY: matches `sd_accumulate` in descriptors.cu; labels hold width × height values,
        // sums SUMS × count (labels above count skipped).
        unsafe {
            s.launch_builder(&self.accumulate)
                .arg(labels)
                .arg(&mut *sums)
                .arg(&count)
                .arg(&width)
                .arg(&height)
                .launch(rows_launch(height))
                .map_err(|e| cuda_err("launching sd_accumulate", e))?;
        }
        s.memcpy_dtoh(&sums.slice(0..n), &mut self.host_sums[..])
            .map_err(|e| cuda_err("downloading the descriptor sums", e))
    }

    /// The sums of the `stats` rows (labeled 1..=count) that `keep` accepts, from what `launch`
    /// queued. Synchronizes the stream.
    pub fn fetch(&self, stats: &[ComponentStats], keep: Keep<'_>) -> Result<Vec<ShapeSums>> {
        self.gpu
            .stream
            .synchronize()
            .map_err(|e| cuda_err("waiting for the descriptor sums", e))?;
        shape_rows(&self.host_sums, stats, keep)
    }
}

/// The shape sums of the `stats` rows (labeled 1..=count) that `keep` accepts, from rows of
/// `SUMS` u64 per component (label l at row l − 1: Σx², Σy², Σxy, then the 4-adjacent and the
/// diagonal pixel pairs), as descriptors.cu and FLSL's fused accumulation leave them.
pub fn shape_rows(
    host_sums: &[u64],
    stats: &[ComponentStats],
    keep: Keep<'_>,
) -> Result<Vec<ShapeSums>> {
    stats
        .iter()
        .filter(|st| keep(st))
        .map(|st| {
            let row = st.label.checked_sub(1).map(|k| SUMS * k as usize);
            match row.and_then(|i| host_sums.get(i..i + SUMS)) {
                Some(&[xx, yy, xy, pairs_4, pairs_diagonal]) => Ok(ShapeSums {
                    label: st.label,
                    sum_xx: xx as u128,
                    sum_yy: yy as u128,
                    sum_xy: xy as u128,
                    pairs_4,
                    pairs_diagonal,
                }),
                _ => Err(Error::Invalid(format!(
                    "shape descriptors: component {} has no sums on the GPU",
                    st.label
                ))),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    /// The shape sum rows the host reads are the ones the kernels write.
    #[test]
    fn the_row_width_is_the_kernels() {
        let common = include_str!("../../../kernels/common.cuh");
        assert_eq!(
            super::super::common::define(common, "SHAPE_SUMS") as usize,
            super::SUMS
        );
    }
}
