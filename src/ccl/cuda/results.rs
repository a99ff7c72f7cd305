//! The frame's results in one download: `collect_results` (kernels/common.cuh) puts the
//! component count and the first `prefix` statistics rows side by side in one device buffer,
//! and one copy brings them into page-locked host memory. Only a frame with more components
//! than the prefix needs a second copy (of the rows past it), after the first has arrived.
//!
//! The prefix is the previous frame's count rounded up to a power of two (at least
//! `PREFIX_ROWS_MIN` rows): consecutive video frames have similar counts, so the second copy is
//! rare, and a frame of few components after one of many copies few rows. Rounding keeps the
//! number of distinct prefixes, and so of frame graphs (`frame_graph`), small; the buffers grow
//! to the largest prefix and are never shrunk.

use super::common::{check_count, GpuStats};
use super::frame_graph::FrameGraphs;
use super::staging::PinnedBuffer;
use super::{cuda_err, Gpu, KernelFile};
use crate::ccl::stats::ComponentStats;
use crate::error::{Error, Result};
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg};
use std::ops::Range;

/// Statistics rows of the first download of a frame, at least (40 bytes each: 10 KiB).
pub const PREFIX_ROWS_MIN: usize = 256;
/// Threads per block of `collect_results`; its blocks are capped at `COLLECT_BLOCKS_MAX` (each
/// thread copies every n-th row past the first).
const COLLECT_THREADS: u32 = 256;
const COLLECT_BLOCKS_MAX: u32 = 64;

/// The prefix of the frame after one of `count` components: the count rounded up to a power of
/// two, at least `PREFIX_ROWS_MIN`, at most `capacity` (the rows a frame can have).
pub fn next_prefix(count: u32, capacity: usize) -> usize {
    (count as usize)
        .next_power_of_two()
        .max(PREFIX_ROWS_MIN)
        .min(capacity)
}

/// The rows a second copy brings: those past the prefix, when there are any.
pub fn rows_after_prefix(count: usize, prefix: usize) -> Option<Range<usize>> {
    (count > prefix).then_some(prefix..count)
}

/// The device and page-locked host buffers of the one-copy download, and its kernel.
pub struct ResultDownload {
    collect: CudaFunction,
    /// Statistics rows the next frame's first copy brings (see `next_prefix`).
    prefix: usize,
    /// 1 + `prefix` rows each: the count in row 0, then the rows.
    device: Option<CudaSlice<GpuStats>>,
    host: Option<PinnedBuffer<GpuStats>>,
    /// Rows past the prefix of a frame with many components (grown on demand).
    rest: Option<PinnedBuffer<GpuStats>>,
    /// Rows the queued frame's first copy brings (0: the count alone).
    queued_rows: usize,
}

impl ResultDownload {
    /// `file` is the caller's kernel module (every kernel file includes common.cuh).
    pub fn new(gpu: &Gpu, file: KernelFile) -> Result<ResultDownload> {
        let collect = gpu
            .module(file)
            .load_function("collect_results")
            .map_err(|e| cuda_err("loading kernel collect_results", e))?;
        Ok(ResultDownload {
            collect,
            prefix: PREFIX_ROWS_MIN,
            device: None,
            host: None,
            rest: None,
            queued_rows: 0,
        })
    }

    /// Sizes the buffers for a frame of at most `capacity` statistics rows and returns the
    /// rows its first copy will bring (0 without statistics); a reallocation forgets `graphs`
    /// (they hold the buffers).
    pub fn prepare(
        &mut self,
        gpu: &Gpu,
        capacity: usize,
        want_stats: bool,
        graphs: &mut FrameGraphs,
    ) -> Result<usize> {
        let rows = if want_stats {
            self.prefix.min(capacity)
        } else {
            0
        };
        let fits = |len: usize| len > rows;
        let reallocated = !self.device.as_ref().is_some_and(|d| fits(d.len()))
            || !self.host.as_ref().is_some_and(|h| fits(h.len()));
        if reallocated {
            let len = 1 + rows.max(PREFIX_ROWS_MIN);
            self.device = None;
            self.host = None;
            self.device = Some(
                gpu.stream
                    .alloc_zeros::<GpuStats>(len)
                    .map_err(|e| cuda_err("allocating the result buffer", e))?,
            );
            self.host = Some(PinnedBuffer::alloc(gpu, len, false)?);
            graphs.invalidate();
        }
        self.queued_rows = rows;
        Ok(rows)
    }

    /// Queues the collection of the count and the prepared rows, and their copy to the host,
    /// on `stream` (plain driver calls: a stream capture records both).
    pub fn queue(
        &mut self,
        stream: &CudaStream,
        total: &CudaSlice<u32>,
        stats: &CudaSlice<GpuStats>,
    ) -> Result<()> {
        let rows = self.queued_rows;
        let (Some(device), Some(host)) = (self.device.as_mut(), self.host.as_mut()) else {
            return Err(Error::Invalid(
                "the result download was queued before it was prepared".into(),
            ));
        };
        let prefix = rows as u32;
        let blocks = (rows as u32)
            .div_ceil(COLLECT_THREADS)
            .clamp(1, COLLECT_BLOCKS_MAX);
        // SAFETY: matches `collect_results(const u32*, const GpuStats*, GpuStats*, u32)`;
        // `device` holds 1 + rows rows, and the kernel reads at most min(count, rows) rows of
        // `stats`, whose count never exceeds its length.
        unsafe {
            stream
                .launch_builder(&self.collect)
                .arg(total)
                .arg(stats)
                .arg(&mut *device)
                .arg(&prefix)
                .launch(LaunchConfig {
                    grid_dim: (blocks, 1, 1),
                    block_dim: (COLLECT_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                })
                .map_err(|e| cuda_err("launching collect_results", e))?;
        }
        let dst = &mut host.as_mut_slice()[..1 + rows];
        let (src, _sync) = device.device_ptr(stream);
        // SAFETY: `dst` is page-locked and is reallocated only by `prepare`, which the caller
        // runs after waiting for this copy; `device` holds at least 1 + rows rows.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src, stream.cu_stream()) }
            .map_err(|e| cuda_err("downloading results", e))
    }

    /// After the stream has passed the queued copy: the count and, when `want_stats`, the
    /// rows labeled 1..=count, copying the rows past the prefix from `stats` first when the
    /// count exceeds it (synchronizes then). Grows the prefix for the next frame.
    pub fn finish(
        &mut self,
        gpu: &Gpu,
        stats: &CudaSlice<GpuStats>,
        want_stats: bool,
    ) -> Result<(u32, Option<Vec<ComponentStats>>)> {
        let dl = |e| cuda_err("downloading results", e);
        let rows = self.queued_rows;
        let host = self
            .host
            .as_ref()
            .ok_or_else(|| Error::Invalid("no result download was queued".into()))?
            .as_slice();
        let count = host[0].area;
        if !want_stats {
            return Ok((count, None));
        }
        let n = count as usize;
        check_count(n, stats.len())?;
        self.prefix = next_prefix(count, stats.len());
        let to_stats = |(i, g): (usize, &GpuStats)| g.to_stats(i as u32 + 1);
        let mut out: Vec<ComponentStats> = host[1..1 + n.min(rows)]
            .iter()
            .enumerate()
            .map(to_stats)
            .collect();
        if let Some(range) = rows_after_prefix(n, rows) {
            let len = range.len();
            if self.rest.as_ref().is_none_or(|r| r.len() < len) {
                self.rest = None;
                self.rest = Some(PinnedBuffer::alloc(gpu, len.next_power_of_two(), false)?);
            }
            let rest = self.rest.as_mut().expect("allocated above");
            let dst = &mut rest.as_mut_slice()[..len];
            let src = stats.slice(range.clone());
            let (src, _sync) = src.device_ptr(&gpu.stream);
            // SAFETY: `dst` is page-locked and holds `len` rows; the stream is waited for
            // before they are read.
            unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src, gpu.stream.cu_stream()) }
                .map_err(dl)?;
            gpu.stream.synchronize().map_err(dl)?;
            out.extend(
                rest.as_slice()[..len]
                    .iter()
                    .enumerate()
                    .map(|(i, g)| g.to_stats((range.start + i) as u32 + 1)),
            );
        }
        Ok((count, Some(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_follows_the_last_count_in_powers_of_two() {
        let capacity = 1 << 20;
        assert_eq!(next_prefix(0, capacity), PREFIX_ROWS_MIN);
        assert_eq!(next_prefix(16, capacity), PREFIX_ROWS_MIN);
        assert_eq!(
            next_prefix(PREFIX_ROWS_MIN as u32, capacity),
            PREFIX_ROWS_MIN
        );
        assert_eq!(next_prefix(257, capacity), 512);
        assert_eq!(next_prefix(5000, capacity), 8192);
        // Back down after a frame of few components.
        assert_eq!(next_prefix(3, capacity), PREFIX_ROWS_MIN);
    }

    #[test]
    fn the_prefix_stays_within_the_frame_capacity() {
        assert_eq!(next_prefix(0, 10), 10);
        assert_eq!(next_prefix(1000, 600), 600);
        assert_eq!(next_prefix(600, 600), 600);
    }

    /// What a frame copies: the count and min(count, prefix) rows at once, and the rest only
    /// when the count exceeded the prefix; the next frame's prefix covers this count.
    #[test]
    fn a_frame_copies_once_unless_its_count_outgrew_the_last_one() {
        let capacity = 1 << 20;
        let mut prefix = PREFIX_ROWS_MIN;
        let mut second_copies = 0;
        for count in [16u32, 20, 300, 310, 290, 40, 5000] {
            if rows_after_prefix(count as usize, prefix).is_some() {
                second_copies += 1;
            }
            prefix = next_prefix(count, capacity);
            assert!(prefix >= count as usize);
        }
        // 300 after 20, and 5000 after 40.
        assert_eq!(second_copies, 2);
    }

    /// The labelers that download through `ResultDownload` load `collect_results` from their
    /// own kernel file.
    #[test]
    fn the_collect_kernel_is_in_every_module_that_loads_it() {
        for file in [KernelFile::Flsl, KernelFile::Ha4] {
            let ptx = super::super::kernels::compile(file, Some("compute_90")).unwrap();
            let text = super::super::ptx_text(&ptx).expect("PTX is text");
            assert!(
                text.contains(".entry collect_results("),
                "{}",
                file.file_name()
            );
        }
    }

    #[test]
    fn a_second_copy_brings_only_the_rows_past_the_prefix() {
        assert_eq!(rows_after_prefix(0, 256), None);
        assert_eq!(rows_after_prefix(256, 256), None);
        assert_eq!(rows_after_prefix(257, 256), Some(256..257));
        assert_eq!(rows_after_prefix(1000, 0), Some(0..1000));
    }
}
