//! Rust wrapper of `kernels/analysis.cu`: the generic analysis stage for any device label image
//! (0 = background, one distinct value in 1..=pixels per component). It finds each component's
//! first pixel, numbers the components 1..N in raster order, computes their statistics with one
//! set of atomics per foreground pixel (the papers' naive CCA) and, for `Want::Both`, renumbers
//! the label image in place.
//!
//! Use from a labeler wrapper: record event 0, launch the labeling steps (`Steps`), then
//! `Analysis::launch` with the same `Steps`, then `fetch`. `cuda::ha4` (algorithm `naive`) is an example.

use super::buffers::{max_components, GpuStats};
use super::downloads::StatsDownload;
use super::launches::{rows_launch, scan_launch};
use super::timing::Steps;
use crate::ccl::stats::ComponentStats;
use crate::ccl::{Connectivity, Want};
use crate::error::{Error, Result};
use crate::gpu::buffers::{check_free_memory, reuse_or_alloc};
use crate::gpu::kernels::KernelFile;
use crate::gpu::launch::launch;
use crate::gpu::{cuda_err, Gpu};
use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};
use std::sync::Arc;

struct Kernels {
    first: CudaFunction,
    count: CudaFunction,
    scan: CudaFunction,
    assign: CudaFunction,
    accumulate: CudaFunction,
    renumber: CudaFunction,
}

/// Device buffers for one frame size and connectivity.
struct Buffers {
    width: u32,
    height: u32,
    connectivity: Connectivity,
    /// Per label l: complement of the index of its first pixel at l - 1 (0 = none yet).
    first_inv: CudaSlice<u32>,
    /// Per label l: its component index (0-based, raster order) at l - 1.
    slot: CudaSlice<u32>,
    row_count: CudaSlice<u32>,
    row_offset: CudaSlice<u32>,
    total: CudaSlice<u32>,
    stats: CudaSlice<GpuStats>,
}

impl Buffers {
    /// The buffers of a `width × height` label image.
    fn alloc(gpu: &Gpu, width: u32, height: u32, connectivity: Connectivity) -> Result<Buffers> {
        let pixels = width as usize * height as usize;
        let capacity = max_components(width, height, connectivity);
        let needed = pixels * 8 + height as usize * 8 + capacity * std::mem::size_of::<GpuStats>();
        check_free_memory(gpu, needed, width, height)?;
        let s = &gpu.stream;
        let alloc_err = |e| cuda_err("allocating analysis buffers", e);
        // SAFETY (all `alloc`s): first_inv is zeroed by every launch before use; slot, stats and
        // the row arrays are written by a kernel before any read (slot only at labels that
        // occur, stats only below the count).
        let buffers = unsafe {
            Buffers {
                width,
                height,
                connectivity,
                first_inv: s.alloc::<u32>(pixels).map_err(alloc_err)?,
                slot: s.alloc::<u32>(pixels).map_err(alloc_err)?,
                row_count: s.alloc::<u32>(height as usize).map_err(alloc_err)?,
                row_offset: s.alloc::<u32>(height as usize).map_err(alloc_err)?,
                total: s.alloc_zeros::<u32>(1).map_err(alloc_err)?,
                stats: s.alloc::<GpuStats>(capacity.max(1)).map_err(alloc_err)?,
            }
        };
        Ok(buffers)
    }
}

pub struct Analysis {
    gpu: Arc<Gpu>,
    kernels: Kernels,
    buffers: Option<Buffers>,
    download: StatsDownload,
}

impl Analysis {
    pub fn new(gpu: Arc<Gpu>) -> Result<Analysis> {
        let module = gpu.module(KernelFile::Analysis).clone();
        let load = |name: &str| {
            module
                .load_function(name)
                .map_err(|e| cuda_err(&format!("loading kernel {name}"), e))
        };
        let kernels = Kernels {
            first: load("an_first")?,
            count: load("an_count")?,
            scan: load("scan_rows")?,
            assign: load("an_assign")?,
            accumulate: load("an_accumulate")?,
            renumber: load("an_renumber")?,
        };
        let download = StatsDownload::new(&gpu)?;
        Ok(Analysis {
            gpu,
            kernels,
            buffers: None,
            download,
        })
    }

    fn ensure_buffers(
        &mut self,
        width: u32,
        height: u32,
        connectivity: Connectivity,
    ) -> Result<()> {
        let gpu = &self.gpu;
        reuse_or_alloc(
            &mut self.buffers,
            |b| b.width == width && b.height == height && b.connectivity == connectivity,
            || Buffers::alloc(gpu, width, height, connectivity),
        )
    }

    /// Queues the stage on the GPU's stream for the `width × height` label image `labels`,
    /// each launch a step of `steps`.
    /// - `Want::Labels`: only the component count.
    /// - `Want::Stats`: the count and the statistics rows.
    /// - `Want::Both`: also rewrites `labels` in place to 1..=count in raster order.
    pub fn launch<N>(
        &mut self,
        labels: &mut CudaSlice<u32>,
        width: u32,
        height: u32,
        connectivity: Connectivity,
        want: Want,
        steps: &mut Steps<'_, N>,
    ) -> Result<()>
    where
        &'static str: Into<N>,
    {
        crate::frame::image::check_size(width, height)?;
        if labels.len() < width as usize * height as usize {
            return Err(Error::Invalid(format!(
                "analysis: the label image buffer holds {} pixels, a {width}x{height} image needs more",
                labels.len()
            )));
        }
        self.ensure_buffers(width, height, connectivity)?;
        let b = self.buffers.as_mut().expect("buffers allocated");
        let k = &self.kernels;
        let s = &self.gpu.stream;
        let rows = rows_launch(height);
        let capacity = b.stats.len() as u32;
        let size = [width, height];
        let [w, h] = &size;

        s.memset_zeros(&mut b.first_inv)
            .map_err(|e| cuda_err("clearing the first-pixel table", e))?;
        // SAFETY (all launches): argument types and order match the kernels in analysis.cu;
        // buffers hold width × height pixels (checked above), height rows, `capacity` stats.
        let mut args = s.launch_builder(&k.first);
        args.arg(&*labels).arg(&mut b.first_inv).arg(w).arg(h);
        unsafe { launch(&mut args, rows, "an_first")? };
        steps.mark("find first pixels")?;

        let mut args = s.launch_builder(&k.count);
        let counts = &mut b.row_count;
        args.arg(&*labels)
            .arg(&b.first_inv)
            .arg(counts)
            .arg(w)
            .arg(h);
        unsafe { launch(&mut args, rows, "an_count")? };
        steps.mark("count first pixels")?;

        let rows_i32 = height as i32;
        let mut args = s.launch_builder(&k.scan);
        args.arg(&b.row_count).arg(&mut b.row_offset);
        args.arg(&mut b.total).arg(&rows_i32);
        unsafe { launch(&mut args, scan_launch(), "scan_rows")? };
        steps.mark("scan row counts")?;
        if !want.stats() {
            return Ok(());
        }

        let mut args = s.launch_builder(&k.assign);
        args.arg(&*labels).arg(&b.first_inv).arg(&b.row_offset);
        args.arg(&mut b.slot)
            .arg(&mut b.stats)
            .arg(&capacity)
            .arg(w)
            .arg(h);
        unsafe { launch(&mut args, rows, "an_assign")? };
        steps.mark("assign slots")?;

        let mut args = s.launch_builder(&k.accumulate);
        let stats = &mut b.stats;
        args.arg(&*labels).arg(&b.slot).arg(stats).arg(&capacity);
        args.arg(w).arg(h);
        unsafe { launch(&mut args, rows, "an_accumulate")? };
        steps.mark("accumulate features (per pixel)")?;

        if want.labels() {
            let mut args = s.launch_builder(&k.renumber);
            args.arg(&mut *labels).arg(&b.slot).arg(w).arg(h);
            unsafe { launch(&mut args, rows, "an_renumber")? };
            steps.mark("renumber labels")?;
        }
        Ok(())
    }

    /// Downloads the component count and, when `want_stats`, the statistics rows labeled
    /// 1..=count. Synchronizes the stream.
    pub fn fetch(&mut self, want_stats: bool) -> Result<(u32, Option<Vec<ComponentStats>>)> {
        let b = self.buffers.as_ref().ok_or_else(not_launched)?;
        self.download
            .fetch(&self.gpu, &b.total, &b.stats, want_stats)
    }

    /// Downloads the component count alone (benchmarks).
    pub fn fetch_count(&mut self) -> Result<u32> {
        let b = self.buffers.as_ref().ok_or_else(not_launched)?;
        self.download.fetch_count(&self.gpu, &b.total)
    }
}

fn not_launched() -> Error {
    Error::Invalid("analysis: fetch called before any launch".into())
}
