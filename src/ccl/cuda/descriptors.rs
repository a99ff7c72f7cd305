//! Rust wrapper of `kernels/descriptors.cu`: shape descriptor sums on the GPU, over a device
//! label image numbered 1..=count in raster order (what a labeler leaves on the device for
//! `Want::Both`). The sums are exact integers, the same as the CPU's
//! `descriptors::shape_sums_of`, so selftest compares the two bit for bit.

use super::launches::rows_launch;
use crate::ccl::descriptors::ShapeSums;
use crate::ccl::stats::ComponentStats;
use crate::ccl::Keep;
use crate::error::{Error, Result};
use crate::gpu::buffers::cleared_sums;
use crate::gpu::kernels::KernelFile;
use crate::gpu::{cuda_err, Gpu};
use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};
use rayon::prelude::*;
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

/// Components from which `shape_rows` builds its rows on all cores: a frame of many fills tens
/// of megabytes of fresh rows (page faults included), where a live frame's few hundred take
/// less than handing them to the thread pool would.
const PARALLEL_ROWS: usize = 16384;

/// The shape sums of the `stats` rows (labeled 1..=count) that `keep` accepts, from rows of
/// `SUMS` u64 per component (label l at row l − 1: Σx², Σy², Σxy, then the 4-adjacent and the
/// diagonal pixel pairs), as descriptors.cu and FLSL's fused accumulation leave them.
pub fn shape_rows(
    host_sums: &[u64],
    stats: &[ComponentStats],
    keep: Keep<'_>,
) -> Result<Vec<ShapeSums>> {
    let row = |st: &ComponentStats| {
        let at = st.label.checked_sub(1).map(|k| SUMS * k as usize);
        match at.and_then(|i| host_sums.get(i..i + SUMS)) {
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
    };
    if stats.len() < PARALLEL_ROWS {
        stats.iter().filter(|st| keep(st)).map(row).collect()
    } else {
        stats.par_iter().filter(|st| keep(st)).map(row).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats_row(label: u32) -> ComponentStats {
        ComponentStats {
            label,
            left: 0,
            top: 0,
            width: 1,
            height: 1,
            area: 1,
            sum_x: 0,
            sum_y: 0,
            centroid_x: 0.0,
            centroid_y: 0.0,
        }
    }

    /// Few components or many (built on all cores), the rows come in the order of the kept
    /// statistics rows, each from its label's sums; a label past the sums is an error.
    #[test]
    fn rows_follow_the_kept_statistics_rows() {
        for n in [10u32, PARALLEL_ROWS as u32 + 1000] {
            let stats: Vec<ComponentStats> = (1..=n).map(stats_row).collect();
            let sums: Vec<u64> = (0..SUMS as u64 * n as u64).collect();
            let odd = |st: &ComponentStats| st.label % 2 == 1;
            let rows = shape_rows(&sums, &stats, &odd).unwrap();
            assert_eq!(rows.len(), n.div_ceil(2) as usize);
            for (i, r) in rows.iter().enumerate() {
                let (label, first) = (2 * i as u32 + 1, SUMS as u64 * 2 * i as u64);
                assert_eq!(r.label, label);
                assert_eq!((r.sum_xx, r.sum_xy), (first as u128, first as u128 + 2));
                assert_eq!(r.pairs_diagonal, first + 4);
            }
            let short = &sums[..SUMS * (n as usize - 1)];
            let err = shape_rows(short, &stats, &crate::ccl::keep_all).unwrap_err();
            assert!(err.to_string().contains(&format!("component {n}")), "{err}");
        }
    }

    /// The shape sum rows the host reads are the ones the kernels write.
    #[test]
    fn the_row_width_is_the_kernels() {
        let common = include_str!("../../../kernels/common.cuh");
        assert_eq!(
            crate::ccl::cuda::launches::define(common, "SHAPE_SUMS") as usize,
            super::SUMS
        );
    }
}
