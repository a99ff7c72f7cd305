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
//!
//! With a row filter (`Labeler::set_row_filter`) on a statistics-only frame, `filter_count` and
//! `filter_collect` take the place of `collect_results`: the rows the filter keeps, in row
//! order and each with its label, follow a header with their number and the component count,
//! so only kept rows cross PCIe and the prefix follows the kept count. The limits live in
//! device memory, uploaded when they change, so a frame graph reads the current ones.

use super::buffers::GpuStats;
use super::detections::RowsOnDevice;
use super::downloads::{check_count, convert_rows};
use super::frame_graph::FrameGraphs;
use super::subpixel::raw_device_ptr;
use crate::ccl::stats::ComponentStats;
use crate::ccl::RowFilter;
use crate::error::{Error, Result};
use crate::gpu::kernels::KernelFile;
use crate::gpu::staging::PinnedBuffer;
use crate::gpu::{cuda_err, Gpu};
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg};
use std::ops::Range;

/// Statistics rows of the first download of a frame, at least (40 bytes each: 10 KiB).
pub const PREFIX_ROWS_MIN: usize = 256;
/// Threads per block of `collect_results`; its blocks are capped at `COLLECT_BLOCKS_MAX` (each
/// thread copies every n-th row past the first).
const COLLECT_THREADS: u32 = 256;
const COLLECT_BLOCKS_MAX: u32 = 64;
/// The fixed grid of `filter_count` and `filter_collect`: each block takes 1/FILTER_BLOCKS of
/// the rows, FILTER_THREADS at a time (a multiple of 32).
pub const FILTER_BLOCKS: u32 = 128;
pub const FILTER_THREADS: u32 = 256;

/// Bytes of one statistics row on the device (the first copy's rows follow a header row).
const STATS_ROW_BYTES: u64 = std::mem::size_of::<GpuStats>() as u64;

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
    filter_count: CudaFunction,
    filter_collect: CudaFunction,
    /// The filter asked for (`set_filter`), and the one in `limits` on the device.
    filter: RowFilter,
    uploaded: Option<RowFilter>,
    /// `struct RowLimits` (three words) and the kept rows of each block of the filter grid.
    limits: CudaSlice<u64>,
    block_kept: CudaSlice<u32>,
    /// Kept rows past the prefix, collected on the device for the second copy.
    rest_device: Option<CudaSlice<GpuStats>>,
    /// The filter the queued frame applies (None: every row comes back).
    queued_filter: Option<RowFilter>,
    /// Statistics rows the next frame's first copy brings (see `next_prefix`).
    prefix: usize,
    /// 1 + `prefix` rows each: the count in row 0, then the rows.
    device: Option<CudaSlice<GpuStats>>,
    host: Option<PinnedBuffer<GpuStats>>,
    /// Rows past the prefix of a frame with many components (grown on demand), and how many
    /// of them the last `bring_rest` copied.
    rest: Option<PinnedBuffer<GpuStats>>,
    rest_rows: usize,
    /// Rows the queued frame's first copy brings (0: the count alone).
    queued_rows: usize,
}

impl ResultDownload {
    /// `file` is the caller's kernel module (every kernel file includes common.cuh).
    pub fn new(gpu: &Gpu, file: KernelFile) -> Result<ResultDownload> {
        let load = |name: &str| {
            gpu.module(file)
                .load_function(name)
                .map_err(|e| cuda_err(&format!("loading kernel {name}"), e))
        };
        let alloc = |e| cuda_err("allocating the row filter", e);
        Ok(ResultDownload {
            collect: load("collect_results")?,
            filter_count: load("filter_count")?,
            filter_collect: load("filter_collect")?,
            filter: RowFilter::default(),
            uploaded: None,
            limits: gpu.stream.alloc_zeros::<u64>(3).map_err(alloc)?,
            block_kept: gpu
                .stream
                .alloc_zeros::<u32>(FILTER_BLOCKS as usize)
                .map_err(alloc)?,
            rest_device: None,
            queued_filter: None,
            prefix: PREFIX_ROWS_MIN,
            device: None,
            host: None,
            rest: None,
            rest_rows: 0,
            queued_rows: 0,
        })
    }

    /// The row filter of the next frames that allow one (`prepare`); unlimited: none.
    pub fn set_filter(&mut self, filter: RowFilter) {
        self.filter = filter;
    }

    /// The row filter set (`set_filter`).
    pub fn filter(&self) -> RowFilter {
        self.filter
    }

    /// The name of the prepared frame's download step: it says when the rows were filtered
    /// on the device first.
    pub fn step_name(&self) -> &'static str {
        match self.queued_filter {
            Some(_) => "filter rows + download",
            None => "download",
        }
    }

    /// The filter the prepared frame applies on the device (a part of its graph key: the
    /// launches differ), or None.
    pub fn queued_filter(&self) -> Option<RowFilter> {
        self.queued_filter
    }

    /// Sizes the buffers for a frame of at most `capacity` statistics rows and returns the
    /// rows its first copy will bring (0 without statistics); a reallocation forgets `graphs`
    /// (they hold the buffers). `may_filter`: the caller needs no row past the filter (no
    /// label image goes to the host); the frame then applies the filter set, uploading its
    /// limits first when they changed (on the stream, before the frame's work).
    pub fn prepare(
        &mut self,
        gpu: &Gpu,
        capacity: usize,
        want_stats: bool,
        may_filter: bool,
        graphs: &mut FrameGraphs,
    ) -> Result<usize> {
        self.queued_filter =
            (want_stats && may_filter && !self.filter.is_unlimited()).then_some(self.filter);
        if let Some(filter) = self.queued_filter {
            if self.uploaded != Some(filter) {
                // From pageable memory: the call returns once the words are staged.
                gpu.stream
                    .memcpy_htod(&filter.limits().words(), &mut self.limits)
                    .map_err(|e| cuda_err("uploading the row filter", e))?;
                self.uploaded = Some(filter);
            }
        }
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
        let prefix = rows as u32;
        self.rest_rows = 0;
        if self.queued_filter.is_some() {
            self.launch_filter(stream, total, stats, 0, prefix, true)?;
        } else {
            let blocks = (rows as u32)
                .div_ceil(COLLECT_THREADS)
                .clamp(1, COLLECT_BLOCKS_MAX);
            self.launch_collect(stream, total, stats, prefix, blocks)?;
        }
        let (Some(device), Some(host)) = (self.device.as_mut(), self.host.as_mut()) else {
            return Err(Error::Invalid(
                "the result download was queued before it was prepared".into(),
            ));
        };
        let dst = &mut host.as_mut_slice()[..1 + rows];
        let (src, _sync) = device.device_ptr(stream);
        // SAFETY: `dst` is page-locked and is reallocated only by `prepare`, which the caller
        // runs after waiting for this copy; `device` holds at least 1 + rows rows.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src, stream.cu_stream()) }
            .map_err(|e| cuda_err("downloading results", e))
    }

    fn launch_collect(
        &mut self,
        stream: &CudaStream,
        total: &CudaSlice<u32>,
        stats: &CudaSlice<GpuStats>,
        prefix: u32,
        blocks: u32,
    ) -> Result<()> {
        let device = self.device.as_mut().ok_or_else(|| {
            Error::Invalid("the result download was queued before it was prepared".into())
        })?;
        // SAFETY: matches `collect_results(const u32*, const GpuStats*, GpuStats*, u32)`;
        // `device` holds 1 + prefix rows, and the kernel reads at most min(count, prefix) rows
        // of `stats`, whose count never exceeds its length.
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
        Ok(())
    }

    /// Queues the kept rows whose index among the kept ones is in [first, first + len) into
    /// the result buffer after its header (`header`; `filter_count` first), or into
    /// `rest_device` from its start (it must hold `len` rows; `block_kept` is the frame's).
    fn launch_filter(
        &mut self,
        stream: &CudaStream,
        total: &CudaSlice<u32>,
        stats: &CudaSlice<GpuStats>,
        first: u32,
        len: u32,
        header: bool,
    ) -> Result<()> {
        let capacity = u32::try_from(stats.len()).unwrap_or(u32::MAX);
        let config = LaunchConfig {
            grid_dim: (FILTER_BLOCKS, 1, 1),
            block_dim: (FILTER_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let out = if header {
            self.device.as_mut()
        } else {
            self.rest_device.as_mut()
        }
        .ok_or_else(|| Error::Invalid("the filtered rows have no buffer".into()))?;
        let with_header = u32::from(header);
        // SAFETY: match `filter_count(const u32*, const GpuStats*, u32, const RowLimits*, u32*)`
        // and `filter_collect(.., const u32*, GpuStats*, u32, u32, u32)`; `limits` holds the
        // three words of RowLimits, `block_kept` FILTER_BLOCKS counts; the kernels read at most
        // min(count, capacity) rows of `stats` and write `out[header + k - first]` only for
        // k - first < len, which `out` holds (1 + prefix rows, or `len` rows of the rest).
        unsafe {
            if header {
                stream
                    .launch_builder(&self.filter_count)
                    .arg(total)
                    .arg(stats)
                    .arg(&capacity)
                    .arg(&self.limits)
                    .arg(&mut self.block_kept)
                    .launch(config)
                    .map_err(|e| cuda_err("launching filter_count", e))?;
            }
            stream
                .launch_builder(&self.filter_collect)
                .arg(total)
                .arg(stats)
                .arg(&capacity)
                .arg(&self.limits)
                .arg(&self.block_kept)
                .arg(out)
                .arg(&first)
                .arg(&len)
                .arg(&with_header)
                .launch(config)
                .map_err(|e| cuda_err("launching filter_collect", e))?;
        }
        Ok(())
    }

    /// After the stream has passed the queued copy: the component count and, when
    /// `want_stats`, the rows (all of them, labeled 1..=count, or those the queued filter kept,
    /// each with its own label), copying the rows past the prefix first when there are more
    /// (synchronizes then). Grows the prefix for the next frame. `count`, `bring_rest` and
    /// `rows` in turn, for a caller with GPU work to queue before the rows are converted.
    pub fn finish(
        &mut self,
        gpu: &Gpu,
        total: &CudaSlice<u32>,
        stats: &CudaSlice<GpuStats>,
        want_stats: bool,
    ) -> Result<(u32, Option<Vec<ComponentStats>>)> {
        let count = self.count()?;
        if !want_stats {
            return Ok((count, None));
        }
        self.bring_rest(gpu, total, stats)?;
        Ok((count, Some(self.rows()?)))
    }

    /// The component count of the frame whose copy the stream has passed.
    pub fn count(&self) -> Result<u32> {
        Ok(self.downloaded()?.0)
    }

    /// The first copy on the host: the component count, the rows that follow it (every
    /// component's, or the kept ones) and the buffer (the header row, then the prefix's rows).
    fn downloaded(&self) -> Result<(u32, usize, &[GpuStats])> {
        let host = self
            .host
            .as_ref()
            .ok_or_else(|| Error::Invalid("no result download was queued".into()))?
            .as_slice();
        let header = host[0];
        let count = u32::try_from(header.sum_x).unwrap_or(u32::MAX);
        Ok((count, header.area as usize, host))
    }

    /// Copies the rows past the prefix to the host when the frame has more (and waits for
    /// them), after checking the counts; grows the prefix for the next frame.
    pub fn bring_rest(
        &mut self,
        gpu: &Gpu,
        total: &CudaSlice<u32>,
        stats: &CudaSlice<GpuStats>,
    ) -> Result<()> {
        let dl = |e| cuda_err("downloading results", e);
        let (count, n, _) = self.downloaded()?;
        check_count(count as usize, stats.len())?;
        check_count(n, count as usize)?;
        self.prefix = next_prefix(n as u32, stats.len());
        self.rest_rows = 0;
        let Some(range) = rows_after_prefix(n, self.queued_rows) else {
            return Ok(());
        };
        let len = range.len();
        if self.rest.as_ref().is_none_or(|r| r.len() < len) {
            self.rest = None;
            self.rest = Some(PinnedBuffer::alloc(gpu, len.next_power_of_two(), false)?);
        }
        let filtered = self.queued_filter.is_some();
        if filtered {
            // The kept rows past the prefix, gathered again from the frame's counts.
            if self.rest_device.as_ref().is_none_or(|r| r.len() < len) {
                self.rest_device = None;
                // SAFETY: only the `len` rows filter_collect writes are copied.
                self.rest_device = Some(
                    unsafe { gpu.stream.alloc::<GpuStats>(len.next_power_of_two()) }
                        .map_err(|e| cuda_err("allocating the filtered rows", e))?,
                );
            }
            self.launch_filter(
                &gpu.stream,
                total,
                stats,
                range.start as u32,
                len as u32,
                false,
            )?;
        }
        let rest = self.rest.as_mut().expect("allocated above");
        let dst = &mut rest.as_mut_slice()[..len];
        let src = match (filtered, &self.rest_device) {
            (true, Some(device)) => device.slice(0..len),
            _ => stats.slice(range.clone()),
        };
        let (src, _sync) = src.device_ptr(&gpu.stream);
        // SAFETY: `dst` is page-locked and holds `len` rows; the stream is waited for before
        // they are read.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src, gpu.stream.cu_stream()) }
            .map_err(dl)?;
        gpu.stream.synchronize().map_err(dl)?;
        self.rest_rows = len;
        Ok(())
    }

    /// Of the frame's `n` rows, those its first copy holds; the others are the `rest_rows` that
    /// `bring_rest` brought (an error when it did not run).
    fn rows_in_first_copy(&self, n: usize) -> Result<usize> {
        let first = n.min(self.queued_rows);
        if first + self.rest_rows != n {
            return Err(Error::Invalid(
                "the rows past the prefix were not brought to the host".into(),
            ));
        }
        Ok(first)
    }

    /// Where the frame's rows (as `rows` returns them) lie on the device, after `bring_rest`:
    /// every component's in `stats`, or the kept ones in the first copy's buffer (after its
    /// header row) and the rows gathered past the prefix.
    pub fn rows_on_device(&self, gpu: &Gpu, stats: &CudaSlice<GpuStats>) -> Result<RowsOnDevice> {
        let (_, n, _) = self.downloaded()?;
        let s = &gpu.stream;
        if self.queued_filter.is_none() {
            check_count(n, stats.len())?;
            return Ok(RowsOnDevice {
                first: raw_device_ptr(stats, s),
                n_first: n as u32,
                rest: 0,
                n: n as u32,
                filtered: false,
            });
        }
        let first = self
            .device
            .as_ref()
            .ok_or_else(|| Error::Invalid("no result download was queued".into()))?;
        let n_first = self.rows_in_first_copy(n)?;
        let rest = match &self.rest_device {
            Some(rest) if self.rest_rows > 0 => raw_device_ptr(rest, s),
            _ => 0,
        };
        Ok(RowsOnDevice {
            first: raw_device_ptr(first, s) + STATS_ROW_BYTES,
            n_first: n_first as u32,
            rest,
            n: n as u32,
            filtered: true,
        })
    }

    /// The frame's rows as statistics (after `bring_rest`): every component's, labeled
    /// 1..=count, or those the queued filter kept, each with its own label.
    pub fn rows(&self) -> Result<Vec<ComponentStats>> {
        let (count, n, host) = self.downloaded()?;
        let first = &host[1..1 + self.rows_in_first_copy(n)?];
        let rest = match &self.rest {
            Some(rest) => &rest.as_slice()[..self.rest_rows],
            None => &[][..],
        };
        let filtered = self.queued_filter.is_some();
        if filtered {
            check_kept_labels(first, 0, count)?;
            check_kept_labels(rest, first.len(), count)?;
        }
        let mut out = Vec::with_capacity(n);
        let convert = |i: usize, g: &GpuStats| row_stats(filtered, i, g);
        convert_rows(first, 0, &mut out, convert);
        convert_rows(rest, first.len(), &mut out, convert);
        Ok(out)
    }
}

/// Row `i` of a download as statistics: labeled `i + 1`, or with its own label when the rows
/// were filtered (`check_kept_labels` first).
fn row_stats(filtered: bool, i: usize, g: &GpuStats) -> ComponentStats {
    if filtered {
        g.to_stats(g.pad)
    } else {
        g.to_stats(i as u32 + 1)
    }
}

/// The error for a kept row whose label is outside 1..=count (`first`: the index of `rows[0]`
/// among the kept rows).
fn check_kept_labels(rows: &[GpuStats], first: usize, count: u32) -> Result<()> {
    match rows.iter().position(|g| g.pad < 1 || g.pad > count) {
        None => Ok(()),
        Some(k) => Err(Error::Cuda {
            step: "downloading filtered statistics".into(),
            why: format!(
                "kept row {} has label {}, outside 1..={count}",
                first + k,
                rows[k].pad
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::row_filter::RowLimits;

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
            let ptx = crate::gpu::kernels::compile(file, Some("compute_90")).unwrap();
            let text = crate::gpu::ptx_text(&ptx).expect("PTX is text");
            for kernel in ["collect_results", "filter_count", "filter_collect"] {
                assert!(
                    text.contains(&format!(".entry {kernel}(")),
                    "{kernel} in {}",
                    file.file_name()
                );
            }
        }
    }

    /// `row_kept` in kernels/common.cuh.
    fn row_kept(g: &GpuStats, limits: &RowLimits) -> bool {
        limits.accepts(g.area as u64, g.max_x - g.min_x + 1, g.max_y - g.top + 1)
    }

    /// `filter_count` then `filter_collect` on the host, step for step: each block's slice of
    /// the rows, its count, its offset from the blocks before it, and the tiles of `threads`
    /// rows scanned warp by warp. Returns what `out` holds afterwards (None: not written).
    fn filter_model(
        stats: &[GpuStats],
        limits: &RowLimits,
        (blocks, threads): (u32, u32),
        (first, len, header): (u32, u32, bool),
    ) -> Vec<Option<GpuStats>> {
        let n = stats.len() as u32;
        let slice = |b: u32| {
            let chunk = (n as u64).div_ceil(blocks as u64);
            let begin = (b as u64 * chunk).min(n as u64) as u32;
            let end = (b as u64 * chunk + chunk).min(n as u64) as u32;
            begin..end
        };
        let block_kept: Vec<u32> = (0..blocks)
            .map(|b| {
                let rows = slice(b);
                stats[rows.start as usize..rows.end as usize]
                    .iter()
                    .filter(|g| row_kept(g, limits))
                    .count() as u32
            })
            .collect();
        let h = usize::from(header);
        let mut out = vec![None; h + len as usize];
        let all: u32 = block_kept.iter().sum();
        if header {
            out[0] = Some(GpuStats {
                area: all,
                sum_x: n as u64,
                ..GpuStats::default()
            });
        }
        for b in 0..blocks {
            let mut offset: u32 = block_kept[..b as usize].iter().sum();
            if offset >= first + len || offset + block_kept[b as usize] <= first {
                continue;
            }
            let rows = slice(b);
            let mut base = rows.start;
            while base < rows.end {
                let keep: Vec<bool> = (0..threads)
                    .map(|t| base + t < rows.end && row_kept(&stats[(base + t) as usize], limits))
                    .collect();
                let warp_kept: Vec<u32> = keep
                    .chunks(32)
                    .map(|w| w.iter().filter(|&&k| k).count() as u32)
                    .collect();
                for t in 0..threads {
                    if !keep[t as usize] {
                        continue;
                    }
                    let (warp, lane) = (t / 32, t % 32);
                    let before_warp: u32 = warp_kept[..warp as usize].iter().sum();
                    let in_warp = keep[(warp * 32) as usize..t as usize]
                        .iter()
                        .filter(|&&k| k)
                        .count() as u32;
                    assert!(in_warp <= lane);
                    let k = offset + before_warp + in_warp;
                    if k >= first && k - first < len {
                        let i = base + t;
                        let mut row = stats[i as usize];
                        row.pad = i + 1;
                        let at = h + (k - first) as usize;
                        assert!(out[at].is_none(), "kept row {k} written twice");
                        out[at] = Some(row);
                    }
                }
                offset += warp_kept.iter().sum::<u32>();
                base += threads;
            }
        }
        out
    }

    fn random_rows(mt: &mut rand_mt::Mt, n: usize) -> Vec<GpuStats> {
        (0..n)
            .map(|i| {
                let (w, h) = (mt.next_u32() % 40 + 1, mt.next_u32() % 40 + 1);
                let (left, top) = (mt.next_u32() % 1000, i as u32);
                GpuStats {
                    sum_x: mt.next_u64() % 1_000_000,
                    sum_y: mt.next_u64() % 1_000_000,
                    area: mt.next_u32() % (w * h) + 1,
                    min_x: left,
                    max_x: left + w - 1,
                    max_y: top + h - 1,
                    top,
                    pad: 0xdead,
                }
            })
            .collect()
    }

    fn same_row(a: &GpuStats, b: &GpuStats) -> bool {
        (
            a.sum_x, a.sum_y, a.area, a.min_x, a.max_x, a.max_y, a.top, a.pad,
        ) == (
            b.sum_x, b.sum_y, b.area, b.min_x, b.max_x, b.max_y, b.top, b.pad,
        )
    }

    /// The device's flag + scan + compaction, modelled on the host, gives what filtering the
    /// rows and collecting them does: the kept rows in row order, each with its label, split
    /// between the first copy (after the header) and the rest, whatever the grid.
    #[test]
    fn the_compaction_model_keeps_the_filtered_rows_in_order() {
        let mut mt = rand_mt::Mt::new(11);
        let filters = [
            RowFilter {
                min_area: Some(20),
                max_area: Some(900),
                max_aspect: Some(3.0),
            },
            RowFilter {
                min_area: Some(1),
                max_area: None,
                max_aspect: Some(1.0),
            },
            RowFilter {
                min_area: Some(u64::MAX),
                ..RowFilter::default()
            },
            RowFilter {
                max_area: Some(u64::MAX),
                ..RowFilter::default()
            },
        ];
        let grids = [(FILTER_BLOCKS, FILTER_THREADS), (3, 32), (1, 64), (7, 96)];
        for n in [0usize, 1, 5, 31, 33, 127, 128, 129, 300, 1000, 5000] {
            let stats = random_rows(&mut mt, n);
            for filter in &filters {
                let limits = filter.limits();
                let expected: Vec<GpuStats> = stats
                    .iter()
                    .enumerate()
                    .filter(|(_, g)| filter.accepts(&g.to_stats(1)))
                    .map(|(i, g)| GpuStats {
                        pad: i as u32 + 1,
                        ..*g
                    })
                    .collect();
                let kept = expected.len() as u32;
                for grid in grids {
                    for prefix in [0u32, 1, 17, 256] {
                        let head = filter_model(&stats, &limits, grid, (0, prefix, true));
                        let header = head[0].expect("the header is written");
                        assert_eq!((header.area, header.sum_x), (kept, n as u64));
                        let first = kept.min(prefix);
                        let mut got: Vec<Option<GpuStats>> = head[1..1 + first as usize].to_vec();
                        assert!(head[1 + first as usize..].iter().all(Option::is_none));
                        if let Some(rest) = rows_after_prefix(kept as usize, prefix as usize) {
                            let len = rest.len() as u32;
                            got.extend(filter_model(&stats, &limits, grid, (prefix, len, false)));
                        }
                        let got: Vec<GpuStats> = got
                            .into_iter()
                            .map(|r| r.expect("every kept row is written"))
                            .collect();
                        assert_eq!(got.len(), expected.len(), "{n} rows, {filter:?}, {grid:?}");
                        assert!(
                            got.iter().zip(&expected).all(|(a, b)| same_row(a, b)),
                            "{n} rows, {filter:?}, {grid:?}, prefix {prefix}"
                        );
                    }
                }
            }
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
