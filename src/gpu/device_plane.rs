//! A frame's grey plane in GPU memory that a decoder wrote (NVDEC's luma, decoded by FFmpeg in
//! the device's primary context, the context the engine runs in), and the order between the
//! decoder's stream and the streams that read it.
//!
//! The decoder copies each picture into a surface of its pool on its own stream and gives the
//! surface back to the pool when the frame is let go; it may then write the next picture
//! there. So a reader's stream waits for the decoder's copy (`written`), and the decoder's
//! stream, before the surface can be written again, waits for every read queued (`read`).

use crate::frame::grey::DevicePlane;
use cudarc::driver::sys;
use std::sync::Mutex;

/// A `pitch`-byte-a-row plane at `address`, written on `decoder_stream` of `ctx`, with what
/// keeps its memory (a decoder's frame, a buffer and its stream): dropped after the plane's own
/// `drop`, which has the memory's stream wait for the reads before it is reused.
pub struct CudaPlane {
    address: sys::CUdeviceptr,
    pitch: usize,
    ctx: sys::CUcontext,
    decoder_stream: sys::CUstream,
    /// Recorded on the decoder's stream behind its copy of the picture.
    written: sys::CUevent,
    /// Recorded on the stream of the last read queued (each read waits for the one before);
    /// false until one is.
    read: Mutex<(sys::CUevent, bool)>,
    _keep: Box<dyn Send + Sync>,
}

// SAFETY: the handles are the driver's, usable from any thread with the context pushed; the
// read event is recorded under its lock.
unsafe impl Send for CudaPlane {}
unsafe impl Sync for CudaPlane {}

/// Where a 2-D copy reads or writes: rows in device or host memory, so many bytes apart.
#[derive(Clone, Copy)]
pub enum Rows {
    Device(sys::CUdeviceptr, usize),
    Host(*mut std::ffi::c_void, usize),
}

/// The driver's description of a copy of `width × height` bytes from `src` to `dst`.
pub fn copy_rows(src: Rows, dst: Rows, width: usize, height: usize) -> sys::CUDA_MEMCPY2D {
    use sys::CUmemorytype::{CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST};
    let mut params = sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: 0,
        srcArray: std::ptr::null_mut(),
        srcPitch: 0,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: 0,
        dstArray: std::ptr::null_mut(),
        dstPitch: 0,
        WidthInBytes: width,
        Height: height,
    };
    match src {
        Rows::Device(at, pitch) => (params.srcDevice, params.srcPitch) = (at, pitch),
        Rows::Host(at, pitch) => {
            params.srcMemoryType = CU_MEMORYTYPE_HOST;
            (params.srcHost, params.srcPitch) = (at.cast_const(), pitch);
        }
    }
    match dst {
        Rows::Device(at, pitch) => (params.dstDevice, params.dstPitch) = (at, pitch),
        Rows::Host(at, pitch) => {
            params.dstMemoryType = CU_MEMORYTYPE_HOST;
            (params.dstHost, params.dstPitch) = (at, pitch);
        }
    }
    params
}

/// `CUresult` as a `Result` with `what` said.
fn check(result: sys::CUresult, what: &str) -> Result<(), String> {
    result.result().map_err(|e| format!("{what}: {e}"))
}

/// Runs `f` with `ctx` current on this thread.
fn in_context<T>(ctx: sys::CUcontext, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    // SAFETY: `ctx` is a live context (its holder keeps it); it is popped again below.
    unsafe {
        check(
            sys::cuCtxPushCurrent_v2(ctx),
            "cannot use the decoder's CUDA context",
        )?
    };
    let out = f();
    let mut popped = std::ptr::null_mut();
    // SAFETY: pops the context pushed above.
    unsafe {
        let _ = sys::cuCtxPopCurrent_v2(&mut popped);
    }
    out
}

impl CudaPlane {
    /// The plane a decoder has just queued the copy of on `decoder_stream` (null: the
    /// context's legacy default stream): its `written` event is recorded behind that copy.
    ///
    /// # Safety
    /// `address` holds `pitch`-byte rows of the frame in memory of `ctx`, which `keep` keeps
    /// there; `decoder_stream` is the stream of `ctx` that wrote them.
    pub unsafe fn after_decoder_copy(
        ctx: sys::CUcontext,
        decoder_stream: sys::CUstream,
        address: sys::CUdeviceptr,
        pitch: usize,
        keep: Box<dyn Send + Sync>,
    ) -> Result<CudaPlane, String> {
        in_context(ctx, || {
            let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
            let mut written = std::ptr::null_mut();
            let mut read = std::ptr::null_mut();
            // SAFETY: the context is current; the events are destroyed with the plane.
            unsafe {
                check(sys::cuEventCreate(&mut written, flags), "creating an event")?;
                if let Err(e) = check(sys::cuEventCreate(&mut read, flags), "creating an event") {
                    let _ = sys::cuEventDestroy_v2(written);
                    return Err(e);
                }
                let plane = CudaPlane {
                    address,
                    pitch,
                    ctx,
                    decoder_stream,
                    written,
                    read: Mutex::new((read, false)),
                    _keep: keep,
                };
                check(
                    sys::cuEventRecord(written, decoder_stream),
                    "recording the decoder's copy",
                )?;
                Ok(plane)
            }
        })
    }
}

impl DevicePlane for CudaPlane {
    /// Behind the decoder's copy and any read queued before.
    unsafe fn queue_copy_to(
        &self,
        dst: u64,
        width: u32,
        height: u32,
        stream: *mut std::ffi::c_void,
    ) -> Result<(), String> {
        let stream: sys::CUstream = stream.cast();
        let mut read = self.read.lock().unwrap_or_else(|p| p.into_inner());
        let params = copy_rows(
            Rows::Device(self.address, self.pitch),
            Rows::Device(dst, width as usize),
            width as usize,
            height as usize,
        );
        // SAFETY: the events and `stream` belong to the current context; the sizes are the
        // caller's promise.
        unsafe {
            check(
                sys::cuStreamWaitEvent(stream, self.written, 0),
                "waiting for the decoder",
            )?;
            if read.1 {
                check(
                    sys::cuStreamWaitEvent(stream, read.0, 0),
                    "waiting for the frame's read before",
                )?;
            }
            check(
                sys::cuMemcpy2DAsync_v2(&params, stream),
                "copying the decoded frame",
            )?;
            check(sys::cuEventRecord(read.0, stream), "recording the read")?;
        }
        read.1 = true;
        Ok(())
    }

    /// Once the decoder's copy is done.
    fn download(&self, out: &mut [u8], width: u32, height: u32) -> Result<(), String> {
        let (w, h) = (width as usize, height as usize);
        if out.len() < w * h {
            return Err("the host buffer is smaller than the frame".into());
        }
        in_context(self.ctx, || {
            let params = copy_rows(
                Rows::Device(self.address, self.pitch),
                Rows::Host(out.as_mut_ptr().cast(), w),
                w,
                h,
            );
            // SAFETY: `out` holds w × h bytes; the plane's memory is live while it is.
            unsafe {
                check(
                    sys::cuEventSynchronize(self.written),
                    "waiting for the decoder",
                )?;
                check(
                    sys::cuMemcpy2D_v2(&params),
                    "cannot copy the frame from the GPU",
                )
            }
        })
    }
}

impl Drop for CudaPlane {
    /// The decoder's stream waits for the reads before it writes the surface again.
    fn drop(&mut self) {
        let (read, was_read) = *self.read.get_mut().unwrap_or_else(|p| p.into_inner());
        let _ = in_context(self.ctx, || {
            // SAFETY: the handles are this plane's; an event destroyed while a stream still
            // waits for it is released once that wait is done.
            unsafe {
                if was_read {
                    let _ = sys::cuStreamWaitEvent(self.decoder_stream, read, 0);
                }
                let _ = sys::cuEventDestroy_v2(read);
                let _ = sys::cuEventDestroy_v2(self.written);
            }
            Ok(())
        });
    }
}
