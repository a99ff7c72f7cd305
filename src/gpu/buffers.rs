//! Device buffers every stage on the GPU allocates the same way.

use super::{cuda_err, Gpu};
use crate::error::{Error, Result};
use cudarc::driver::{CudaSlice, DeviceRepr, DriverError};

/// Makes `slot` hold buffers that `fit`; only when it holds none, or ones that do not fit, are
/// new ones made with `alloc`, after the old ones are freed (so that both never take memory at
/// once).
pub fn reuse_or_alloc<B>(
    slot: &mut Option<B>,
    fit: impl FnOnce(&B) -> bool,
    alloc: impl FnOnce() -> Result<B>,
) -> Result<()> {
    if slot.as_ref().is_some_and(fit) {
        return Ok(());
    }
    *slot = None;
    *slot = Some(alloc()?);
    Ok(())
}

/// The error of a failed allocation of a stage's device buffers.
pub fn alloc_err(e: DriverError) -> Error {
    cuda_err("allocating device buffers", e)
}

/// Fails with a clear message when a frame needs more GPU memory than is free.
pub fn check_free_memory(gpu: &Gpu, needed: usize, width: u32, height: u32) -> Result<()> {
    let (free, _) = gpu
        .ctx
        .mem_get_info()
        .map_err(|e| cuda_err("querying memory", e))?;
    if needed > free {
        return Err(Error::Cuda {
            step: "allocating buffers".into(),
            why: format!(
                "a {width}x{height} frame needs about {} MiB of GPU memory, {} MiB are free",
                needed >> 20,
                free >> 20
            ),
        });
    }
    Ok(())
}

/// `n` zeroed u64 per-component sums on the GPU's stream, in `slot` (grown to a power of two
/// when too small, reused otherwise); `what` names them in errors.
pub fn cleared_sums<'a>(
    gpu: &Gpu,
    slot: &'a mut Option<CudaSlice<u64>>,
    n: usize,
    what: &str,
) -> Result<&'a mut CudaSlice<u64>> {
    let s = &gpu.stream;
    if slot.as_ref().is_none_or(|b| b.len() < n) {
        *slot = None;
        *slot = Some(
            s.alloc_zeros::<u64>(n.next_power_of_two())
                .map_err(|e| cuda_err(&format!("allocating the {what}"), e))?,
        );
    }
    let sums = slot.as_mut().expect("allocated above");
    s.memset_zeros(&mut sums.slice_mut(0..n))
        .map_err(|e| cuda_err(&format!("clearing the {what}"), e))?;
    Ok(sums)
}

/// A device buffer of at least `n` elements in `slot` (reallocated only when too small).
pub fn at_least<'a, T: DeviceRepr>(
    gpu: &Gpu,
    slot: &'a mut Option<CudaSlice<T>>,
    n: usize,
) -> Result<&'a mut CudaSlice<T>> {
    reuse_or_alloc(
        slot,
        |b| b.len() >= n,
        // SAFETY: every user writes the elements it reads first (kernels, uploads, or the
        // labeler's rows), and reads none past what was written.
        || unsafe { gpu.stream.alloc::<T>(n.max(1)) }.map_err(alloc_err),
    )?;
    Ok(slot.as_mut().expect("allocated above"))
}
