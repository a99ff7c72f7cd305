//! Labeling a mask that is already in device memory (`Flsl::label_in_place`), and where its
//! results are for the kernels that read them next.

use super::Flsl;
use crate::ccl::cuda::buffers::GpuStats;
use crate::ccl::cuda::mask_input::MaskInput;
use crate::ccl::{Connectivity, Want};
use crate::error::Result;
use crate::gpu::cuda_err;
use cudarc::driver::CudaSlice;

/// Where the results of `Flsl::label_in_place` are on the device, for kernels that read them
/// next (`super::device`).
pub struct DeviceResults<'a> {
    /// The statistics rows, label i at index i - 1.
    pub stats: &'a CudaSlice<GpuStats>,
    /// The runs of row y: from `start[y R + j]` to `end[y R + j]` (exclusive) for j < `nruns[y]`,
    /// R = `runs_per_row`.
    pub start: &'a CudaSlice<u32>,
    pub end: &'a CudaSlice<u32>,
    pub nruns: &'a CudaSlice<u32>,
    pub runs_per_row: u32,
}

impl Flsl {
    /// Labels a byte mask (0 / non-zero) that is already in device memory, `width` bytes a row
    /// with no padding, and writes the label image (u32, 1..=count in raster order of first
    /// pixel, 0 = background) into `labels` when given. Statistics are always computed. Runs on
    /// this engine's stream and returns the component count as soon as the numbering kernel
    /// has it: the statistics and label kernels may still run, and the work the caller queues
    /// next on the stream runs after them.
    ///
    /// # Safety
    /// `mask` must point to `width × height` readable device bytes of this context, and
    /// `labels`, when given, to `width × height` writable u32 of device memory; the caller keeps
    /// both alive and unused by other work until the stream has finished this labeling (a
    /// synchronisation of the stream, or work queued after it on the stream).
    pub unsafe fn label_in_place(
        &mut self,
        mask: u64,
        width: u32,
        height: u32,
        connectivity: Connectivity,
        labels: Option<u64>,
    ) -> Result<u32> {
        crate::frame::image::check_size(width, height)?;
        self.ensure_buffers(width, height)?;
        let pixels = width as usize * height as usize;
        let want = if labels.is_some() {
            Want::Both
        } else {
            Want::Stats
        };
        // The caller's memory stands in for the engine's own input and output buffers during
        // this run. The borrowed slices are never dropped (that would free the caller's memory):
        // they are swapped back and forgotten below, on success and on error alike.
        let stream = self.gpu.stream.clone();
        let b = self.buffers.as_mut().expect("buffers allocated");
        let mut borrowed_input = stream.upgrade_device_ptr::<u8>(mask, pixels);
        std::mem::swap(&mut b.mask.bytes, &mut borrowed_input);
        let own_out = match labels {
            Some(ptr) => Some(std::mem::replace(
                &mut b.out,
                Some(stream.upgrade_device_ptr::<u32>(ptr, pixels)),
            )),
            None => None,
        };
        let result = self.run_resident(width, height, connectivity, want);
        let b = self.buffers.as_mut().expect("buffers allocated");
        std::mem::swap(&mut b.mask.bytes, &mut borrowed_input);
        std::mem::forget(borrowed_input);
        if let Some(own) = own_out {
            std::mem::forget(std::mem::replace(&mut b.out, own));
        }
        result
    }

    /// The kernels on the byte mask in `buffers.mask.bytes`, untimed; the count is read when the
    /// numbering kernel has it, without waiting for the kernels after it.
    fn run_resident(
        &mut self,
        width: u32,
        height: u32,
        connectivity: Connectivity,
        want: Want,
    ) -> Result<u32> {
        if self.early_count.is_none() {
            // SAFETY: read only after the copy from the device has written it.
            let host = unsafe { self.gpu.ctx.alloc_pinned_with_flags::<u32>(1, 0) }
                .map_err(|e| cuda_err("allocating pinned memory", e))?;
            let copied = self
                .gpu
                .ctx
                .new_event(None)
                .map_err(|e| cuda_err("creating an event", e))?;
            self.early_count = Some((host, copied));
        }
        // Nobody reads this run's step times: no timing events between its launches.
        self.events.set_off(true);
        self.count_early = true;
        let launched = self.launch_kernels(
            connectivity,
            want,
            MaskInput::for_bytes(width, height),
            0,
            false,
        );
        self.count_early = false;
        self.events.set_off(false);
        launched?;
        let (host, copied) = self.early_count.as_ref().expect("allocated above");
        // Waits for the copy (the event recorded after it), not for the stream.
        let dl = |e| cuda_err("downloading the count", e);
        copied.synchronize().map_err(dl)?;
        Ok(host.as_slice().map_err(dl)?[0])
    }

    /// The device buffers of the last `label_in_place`; None before the first run.
    pub fn device_results(&self) -> Option<DeviceResults<'_>> {
        self.buffers.as_ref().map(|b| DeviceResults {
            stats: &b.stats,
            start: &b.start,
            end: &b.end,
            nruns: &b.nruns,
            runs_per_row: b.runs_per_row,
        })
    }
}
