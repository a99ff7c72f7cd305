//! Page-locked host staging for uploads: the frame is copied into a page-locked buffer that is
//! kept from frame to frame, and the DMA reads it from there. Downloads of a prefix of a
//! device buffer land in page-locked memory that grows as needed (`download_prefix`).
//!
//! From pageable memory the driver copies through a small buffer of its own at a fraction of
//! the bus's rate (H100, PCIe 5: a 1920×1080 byte frame in 0.26 ms, a 1080p packed mask in about
//! 50 µs), while a copy into page-locked memory and a DMA from there take a fraction of that.
//! The copy is queued with the plain driver call, so a stream capture records it into a CUDA
//! graph as a copy node that reads this buffer at each launch.

use super::{cuda_err, Gpu};
use crate::error::{Error, Result};
use crate::frame::image::GrayImage;
use crate::frame::page_lock::PageLocker;
use cudarc::driver::{
    CudaSlice, CudaStream, DevicePtrMut, DeviceRepr, PinnedHostSlice, ValidAsZeroBits,
};
use rayon::prelude::*;
use std::sync::{Arc, Mutex};

/// Frames of at least this many bytes are copied into the staging buffer on all cores.
const PARALLEL_COPY_MIN_BYTES: usize = 1 << 20;
/// Bytes per rayon job of that copy.
const PARALLEL_COPY_CHUNK_BYTES: usize = 256 << 10;

/// Page-locked host memory read and written through a pointer kept from its allocation, without
/// the driver call (`cuEventSynchronize`) that each `PinnedHostSlice` accessor makes: no such
/// call may come while a stream is captured. The owner orders its accesses with the copies
/// itself: it waits for the stream before it touches memory a queued copy uses.
pub struct PinnedBuffer<T> {
    memory: PinnedHostSlice<T>,
    ptr: *mut T,
}

// SAFETY: `ptr` points into the allocation that `memory` owns, and PinnedHostSlice is Send and
// Sync; access goes through `&self` / `&mut self` like a Vec's.
unsafe impl<T: Send> Send for PinnedBuffer<T> {}
unsafe impl<T: Sync> Sync for PinnedBuffer<T> {}

impl<T: DeviceRepr + ValidAsZeroBits> PinnedBuffer<T> {
    /// `len` (at least 1) zeroed elements; `write_combined` for memory the host only writes
    /// and the device only reads (uploads): fast to fill, slow to read back.
    pub fn alloc(gpu: &Gpu, len: usize, write_combined: bool) -> Result<PinnedBuffer<T>> {
        let len = len.max(1);
        let flags = if write_combined {
            cudarc::driver::sys::CU_MEMHOSTALLOC_WRITECOMBINED
        } else {
            0
        };
        let err = |e| cuda_err("allocating page-locked memory", e);
        // SAFETY: zeroed below before any read.
        let mut memory =
            unsafe { gpu.ctx.alloc_pinned_with_flags::<T>(len, flags) }.map_err(err)?;
        let ptr = memory.as_mut_ptr().map_err(err)?;
        // SAFETY: the allocation holds `len` elements; all-zero bits are a valid T.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        Ok(PinnedBuffer { memory, ptr })
    }

    pub fn len(&self) -> usize {
        self.memory.len()
    }

    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `len` initialised elements owned by `memory`; see the type's comment for the
        // ordering with the device's copies.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len()) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `as_slice`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len()) }
    }
}

/// Queues a copy of the first `n` elements of `src` into the page-locked buffer in `host`,
/// made anew (of at least `at_least` elements) when it holds fewer than `n`; nothing when `n`
/// is 0. The caller waits for the stream before it reads them. `step` names the download in
/// errors.
pub fn download_prefix<T: DeviceRepr + ValidAsZeroBits>(
    gpu: &Gpu,
    host: &mut Option<PinnedHostSlice<T>>,
    src: &CudaSlice<T>,
    n: usize,
    at_least: usize,
    step: &str,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    if host.as_ref().is_none_or(|h| h.len() < n) {
        *host = None;
        // SAFETY: only elements written by a copy from the device are read.
        *host = Some(
            unsafe { gpu.ctx.alloc_pinned_with_flags::<T>(n.max(at_least), 0) }
                .map_err(|e| cuda_err("allocating pinned memory", e))?,
        );
    }
    let Some(host) = host.as_mut() else {
        return Ok(());
    };
    let dst = host.as_mut_slice().map_err(|e| cuda_err(step, e))?;
    gpu.stream
        .memcpy_dtoh(&src.slice(0..n), &mut dst[..n])
        .map_err(|e| cuda_err(step, e))
}

/// A page-locked host buffer for the upload of one frame of `T`.
pub struct HostStaging<T> {
    host: Option<PinnedBuffer<T>>,
    /// Elements of the staged frame.
    len: usize,
}

impl<T> Default for HostStaging<T> {
    fn default() -> Self {
        HostStaging { host: None, len: 0 }
    }
}

impl<T: DeviceRepr + ValidAsZeroBits + Copy + Send + Sync> HostStaging<T> {
    /// Copies `data` into the page-locked buffer, which is reallocated only when the length
    /// changes (a new frame size); returns whether it was (which invalidates a graph that
    /// reads it). The caller has waited for the previous upload from it.
    pub fn fill(&mut self, gpu: &Gpu, data: &[T]) -> Result<bool> {
        let reallocate = self
            .host
            .as_ref()
            .is_none_or(|h| h.len() != data.len().max(1));
        if reallocate {
            self.host = None;
            self.host = Some(PinnedBuffer::alloc(gpu, data.len(), true)?);
        }
        let host = &mut self.host.as_mut().expect("allocated above").as_mut_slice()[..data.len()];
        self.len = data.len();
        copy_frame(host, data);
        Ok(reallocate)
    }

    /// Queues the copy of the staged elements into the start of `dst` on `stream`.
    pub fn upload(&mut self, stream: &CudaStream, dst: &mut impl DevicePtrMut<T>) -> Result<()> {
        let n = self.len;
        let Some(host) = self.host.as_ref().filter(|_| n > 0) else {
            return Ok(());
        };
        // SAFETY: the buffer stays allocated until the next size change, which the caller only
        // makes after waiting for this copy.
        unsafe { upload_pinned(stream, &host.as_slice()[..n], dst) }
    }
}

/// Queues the DMA of `src`, page-locked memory, into the start of `dst` (at least as long).
///
/// # Safety
/// `src` must stay allocated and unwritten until the stream has passed the copy.
pub unsafe fn upload_pinned<T: DeviceRepr>(
    stream: &CudaStream,
    src: &[T],
    dst: &mut impl DevicePtrMut<T>,
) -> Result<()> {
    if src.len() > dst.len() {
        return Err(Error::Invalid(format!(
            "upload of {} elements into a device buffer of {}",
            src.len(),
            dst.len()
        )));
    }
    let (dst, _sync) = dst.device_ptr_mut(stream);
    // SAFETY: `src` is page-locked and outlives the copy (the caller's promise); `dst` holds
    // at least `src.len()` elements.
    unsafe { cudarc::driver::result::memcpy_htod_async(dst, src, stream.cu_stream()) }
        .map_err(|e| cuda_err("uploading the frame", e))
}

/// Most free buffers `GreyStagingPool` keeps (frames queued and in flight, and a spare).
const GREY_POOL_MAX: usize = 8;

type FreeGreyBuffers = Arc<Mutex<Vec<PinnedBuffer<u8>>>>;

/// Page-locked buffers for grey frames, reused from frame to frame: the capture thread copies
/// a frame into one (`stage`), the labeler's DMA reads it from there, so the worker neither
/// copies the frame nor waits for the driver's staging of pageable memory (H100 host, 1920×1080:
/// about 50 µs for the DMA alone against 180–220 µs for either of those; `upload_cost`), and
/// the buffer comes back here when the frame is done with.
#[derive(Clone)]
pub struct GreyStagingPool {
    gpu: Arc<Gpu>,
    free: FreeGreyBuffers,
}

impl GreyStagingPool {
    pub fn new(gpu: Arc<Gpu>) -> GreyStagingPool {
        GreyStagingPool {
            gpu,
            free: Arc::default(),
        }
    }

    /// A page-locked copy of `grey` (on all cores for large frames).
    pub fn stage(&self, grey: &GrayImage) -> Result<StagedGrey> {
        let n = grey.data.len();
        if n != grey.width as usize * grey.height as usize {
            return Err(Error::Invalid(format!(
                "a {}x{} grey frame with {n} bytes",
                grey.width, grey.height
            )));
        }
        let reused = {
            let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
            // Buffers of another frame size are freed: the size changed.
            free.retain(|b| b.len() == n.max(1));
            free.pop()
        };
        // Write-combined: only the DMA reads it, and the copy into it is the faster one.
        let mut buffer = match reused {
            Some(b) => b,
            None => PinnedBuffer::alloc(&self.gpu, n, true)?,
        };
        copy_frame(&mut buffer.as_mut_slice()[..n], &grey.data);
        Ok(StagedGrey {
            buffer: Some(buffer),
            width: grey.width,
            height: grey.height,
            free: self.free.clone(),
        })
    }
}

/// A grey frame in page-locked memory of `GreyStagingPool` (its buffer goes back there when
/// dropped). A copy queued from it must be waited for before it is dropped.
pub struct StagedGrey {
    buffer: Option<PinnedBuffer<u8>>,
    pub width: u32,
    pub height: u32,
    free: FreeGreyBuffers,
}

impl StagedGrey {
    /// The frame's pixels, rows back to back.
    pub fn as_slice(&self) -> &[u8] {
        let n = self.width as usize * self.height as usize;
        &self.buffer.as_ref().expect("held until dropped").as_slice()[..n]
    }

    /// Is this the staged copy of a `width × height` frame?
    pub fn fits(&self, width: u32, height: u32) -> bool {
        (self.width, self.height) == (width, height)
    }
}

impl Drop for StagedGrey {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
            if free.len() < GREY_POOL_MAX {
                free.push(buffer);
            }
        }
    }
}

impl std::fmt::Debug for StagedGrey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StagedGrey({}x{})", self.width, self.height)
    }
}

/// Copies a frame, on all cores when it is large.
fn copy_frame<T: Copy + Send + Sync>(to: &mut [T], from: &[T]) {
    let element = std::mem::size_of::<T>().max(1);
    if std::mem::size_of_val(from) >= PARALLEL_COPY_MIN_BYTES {
        let chunk = (PARALLEL_COPY_CHUNK_BYTES / element).max(1);
        to.par_chunks_mut(chunk)
            .zip(from.par_chunks(chunk))
            .for_each(|(t, f)| t.copy_from_slice(f));
    } else {
        to.copy_from_slice(from);
    }
}

/// Registers frame buffers with the driver (`cuMemHostRegister`), so that the DMA reads them
/// where their source wrote them (`crate::frame::page_lock`).
pub struct HostRegistrar {
    ctx: Arc<cudarc::driver::CudaContext>,
}

impl HostRegistrar {
    pub fn new(gpu: &Gpu) -> HostRegistrar {
        HostRegistrar {
            ctx: gpu.ctx.clone(),
        }
    }
}

/// One registered range; unregistered when dropped.
struct HostRegistration {
    ctx: Arc<cudarc::driver::CudaContext>,
    ptr: usize,
}

impl PageLocker for HostRegistrar {
    unsafe fn register(&self, ptr: *const u8, len: usize) -> Option<Box<dyn Send + Sync>> {
        self.ctx.bind_to_thread().ok()?;
        // SAFETY: the caller keeps the memory allocated until the registration is dropped.
        // Portable: page-locked for every CUDA context of the process (NVDEC's decoders copy
        // frames into it in contexts of their own).
        let registered = unsafe {
            cudarc::driver::sys::cuMemHostRegister_v2(
                ptr.cast_mut().cast(),
                len,
                cudarc::driver::sys::CU_MEMHOSTREGISTER_PORTABLE,
            )
            .result()
        };
        registered.ok()?;
        Some(Box::new(HostRegistration {
            ctx: self.ctx.clone(),
            ptr: ptr as usize,
        }))
    }
}

impl Drop for HostRegistration {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: registered by `HostRegistrar::register` and not unregistered since. A
            // copy queued from it was waited for by its frame's holder, which dropped the frame
            // (and this) after.
            let _ =
                unsafe { cudarc::driver::sys::cuMemHostUnregister(self.ptr as *mut _).result() };
        }
    }
}
