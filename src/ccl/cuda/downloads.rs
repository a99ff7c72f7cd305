//! The downloads of a labeling's results: the component count and the statistics rows through
//! pinned memory, and the label image.

use super::buffers::GpuStats;
use crate::ccl::stats::ComponentStats;
use crate::error::{Error, Result};
use crate::frame::image::LabelImage;
use crate::gpu::staging::download_prefix;
use crate::gpu::{cuda_err, Gpu};
use cudarc::driver::{CudaSlice, PinnedHostSlice};
use rayon::prelude::*;

/// Statistics rows downloaded together with the component count (see `StatsDownload::fetch`).
pub const EAGER_ROWS: usize = 1024;

/// Downloaded rows converted on the download pool from this many on; below, the hand-over to
/// the pool and back costs more than it saves, and its wake-ups made the frame's tail. H200
/// hosts of 16 cores, the particle scene on the GPU (8,661 rows a frame): its rows' two steps
/// 0.145–0.149 ms a frame on the worker alone, 0.160–0.171 on the pool, and the slowest 1 % of
/// frames 0.173–0.193 against 0.219–0.578 ms; the 50,000-particle scene (26,477 rows)
/// 0.401–0.425 alone, 0.251–0.288 on the pool.
pub const PARALLEL_ROWS: usize = 16_384;

/// The pool that converts large downloads (`PARALLEL_ROWS`), made at the first: a quarter of
/// the host's threads, 2 to 4. A pool of its own: in rayon's global pool the conversion queued
/// behind other work of the process (the benchmark's score made the particle scenes slower).
/// Small, as the tracking stage's pool takes most of the cores beside it: on a 16-core host
/// four threads gave the particle scene 1,485-1,526 frames/s against 1,341-1,398 with eight.
/// None on a host of one thread.
pub fn download_pool(rows: usize) -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    if rows < PARALLEL_ROWS {
        return None;
    }
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        if threads < 2 {
            return None;
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads((threads / 4).clamp(2, 4))
            .thread_name(|k| format!("markerscope-download-{k}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Appends `f(first + i, row)` for each of `rows` to `out`, in order; on the download pool
/// when there are many (`download_pool`).
pub fn convert_rows<T: Sync, U: Send>(
    rows: &[T],
    first: usize,
    out: &mut Vec<U>,
    f: impl Fn(usize, &T) -> U + Sync + Send,
) {
    out.reserve(rows.len());
    match download_pool(rows.len()) {
        Some(pool) => pool
            .install(|| out.par_extend(rows.par_iter().enumerate().map(|(i, r)| f(first + i, r)))),
        None => out.extend(rows.iter().enumerate().map(|(i, r)| f(first + i, r))),
    }
}

/// The error for a component count above the `rows` a statistics buffer holds (a kernel fault).
pub fn check_count(count: usize, rows: usize) -> Result<()> {
    if count > rows {
        return Err(Error::Cuda {
            step: "downloading statistics".into(),
            why: format!("component count {count} exceeds the buffer ({rows})"),
        });
    }
    Ok(())
}

/// Pinned host buffers for the component count and the statistics rows.
pub struct StatsDownload {
    host_total: PinnedHostSlice<u32>,
    /// Grows on demand to the largest component count seen.
    host_stats: Option<PinnedHostSlice<GpuStats>>,
}

impl StatsDownload {
    pub fn new(gpu: &Gpu) -> Result<Self> {
        // SAFETY: read only after a copy from the device has written it.
        let host_total = unsafe { gpu.ctx.alloc_pinned_with_flags::<u32>(1, 0) }
            .map_err(|e| cuda_err("allocating pinned memory", e))?;
        Ok(Self {
            host_total,
            host_stats: None,
        })
    }

    /// Downloads the component count and, when `want_stats`, the first `count` rows of `stats`
    /// as rows labeled 1..=count. The count and the first EAGER_ROWS rows come back together,
    /// before the count is known: a frame with few components (the marker case) needs a single
    /// stream sync. Synchronizes the stream.
    pub fn fetch(
        &mut self,
        gpu: &Gpu,
        total: &CudaSlice<u32>,
        stats: &CudaSlice<GpuStats>,
        want_stats: bool,
    ) -> Result<(u32, Option<Vec<ComponentStats>>)> {
        let s = &gpu.stream;
        let dl = |e| cuda_err("downloading results", e);
        s.memcpy_dtoh(total, &mut self.host_total).map_err(dl)?;
        let eager = if want_stats {
            EAGER_ROWS.min(stats.len())
        } else {
            0
        };
        self.copy_rows(gpu, stats, eager)?;
        // Copies into pinned memory are asynchronous, and with event tracking off the pinned
        // slices do not wait for them by themselves: wait for the stream before reading.
        s.synchronize().map_err(dl)?;
        let count = self.host_total.as_slice().map_err(dl)?[0];
        if !want_stats {
            return Ok((count, None));
        }
        let n = count as usize;
        check_count(n, stats.len())?;
        if n > eager {
            self.copy_rows(gpu, stats, n)?;
            s.synchronize().map_err(dl)?;
        }
        let rows = match self.host_stats.as_ref() {
            Some(h) => &h.as_slice().map_err(dl)?[..n],
            None => &[][..],
        };
        let mut out = Vec::new();
        convert_rows(rows, 0, &mut out, |i, g| g.to_stats(i as u32 + 1));
        Ok((count, Some(out)))
    }

    /// Downloads the count alone (benchmarks).
    pub fn fetch_count(&mut self, gpu: &Gpu, total: &CudaSlice<u32>) -> Result<u32> {
        let dl = |e| cuda_err("downloading the count", e);
        gpu.stream
            .memcpy_dtoh(total, &mut self.host_total)
            .map_err(dl)?;
        gpu.stream.synchronize().map_err(dl)?;
        Ok(self.host_total.as_slice().map_err(dl)?[0])
    }

    /// Queues a copy of the first `rows` rows into the pinned buffer, growing it when needed.
    fn copy_rows(&mut self, gpu: &Gpu, stats: &CudaSlice<GpuStats>, rows: usize) -> Result<()> {
        let step = "downloading results";
        download_prefix(gpu, &mut self.host_stats, stats, rows, EAGER_ROWS, step)
    }
}

/// Downloads a device label image into a `LabelImage`.
pub fn download_labels(
    gpu: &Gpu,
    labels: &CudaSlice<u32>,
    width: u32,
    height: u32,
) -> Result<LabelImage> {
    let mut data = vec![0u32; width as usize * height as usize];
    gpu.stream
        .memcpy_dtoh(labels, &mut data)
        .map_err(|e| cuda_err("downloading the label image", e))?;
    Ok(LabelImage {
        width,
        height,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_converted_on_the_pool_come_in_order_after_those_before() {
        for n in [
            0,
            5,
            PARALLEL_ROWS - 1,
            PARALLEL_ROWS,
            3 * PARALLEL_ROWS + 5,
        ] {
            let rows: Vec<u64> = (0..n as u64).map(|k| k * 7 + 3).collect();
            let mut out = vec![(0, 0)];
            convert_rows(&rows, 11, &mut out, |i, r| (i, *r));
            let expected: Vec<(usize, u64)> = std::iter::once((0, 0))
                .chain(rows.iter().enumerate().map(|(i, r)| (11 + i, *r)))
                .collect();
            assert_eq!(out, expected, "{n} rows");
        }
    }
}
