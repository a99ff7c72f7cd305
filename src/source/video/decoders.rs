//! The stream's decoders, on the CPU (FFmpeg's, frame threads) or on the GPU's NVDEC engine,
//! and the grey plane of the frames they give.

use super::VideoDecoding;
use crate::error::{Error, Result};
use crate::frame::grey::FrameGrey;
use crate::frame::image::check_size;
use crate::source::frame_pool::FramePool;
use ff::format::Pixel;
use ffmpeg_next as ff;
use std::path::Path;

/// A decoder opened for a stream: the decoder, its codec's name, and whether it is NVDEC's.
pub(super) struct Opened {
    pub decoder: ff::decoder::Video,
    pub codec_name: String,
    pub on_nvdec: bool,
}

/// The decoder `decoding` asks for: NVDEC where it is asked for (or chosen by `Auto`) and can
/// decode the codec, else the CPU's. Why NVDEC could not be used, where it was asked for, goes
/// to `notices`.
pub(super) fn open_decoder(
    path: &Path,
    parameters: &ff::codec::Parameters,
    decoding: VideoDecoding,
    in_engine_context: bool,
    notices: &mut Vec<String>,
) -> Result<Opened> {
    let fail = |why: String| Error::image(path, why);
    let nvdec = match decoding {
        VideoDecoding::Cpu => None,
        VideoDecoding::Auto | VideoDecoding::Nvdec => {
            let context = ff::codec::context::Context::from_parameters(parameters.clone())
                .map_err(|e| fail(format!("cannot read the codec parameters: {e}")))?;
            match open_nvdec(context, in_engine_context) {
                Ok(Some(opened)) => Some(opened),
                // Auto: NVDEC where it decodes the codec, quietly the CPU elsewhere.
                Ok(None) if decoding == VideoDecoding::Auto => None,
                Ok(None) => {
                    notices.push(format!(
                        "{}: NVDEC does not decode {:?} (or this FFmpeg has no decoder for it there); decoding on the CPU",
                        path.display(),
                        parameters.id()
                    ));
                    None
                }
                Err(why) => {
                    notices.push(format!("{}: {why}; decoding on the CPU", path.display()));
                    None
                }
            }
        }
    };
    let on_nvdec = nvdec.is_some();
    let (decoder, codec_name) = match nvdec {
        Some(opened) => opened,
        None => open_cpu_decoder(parameters, true).map_err(fail)?,
    };
    Ok(Opened {
        decoder,
        codec_name,
        on_nvdec,
    })
}

/// The stream's decoder on the CPU, with frame threads (throughput for analysis) or on the
/// calling thread alone (damaged data: see `decode`), and its codec's name.
pub(super) fn open_cpu_decoder(
    parameters: &ff::codec::Parameters,
    frame_threads: bool,
) -> std::result::Result<(ff::decoder::Video, String), String> {
    let mut context = ff::codec::context::Context::from_parameters(parameters.clone())
        .map_err(|e| format!("cannot read the codec parameters: {e}"))?;
    context.set_threading(ff::codec::threading::Config {
        kind: ff::codec::threading::Type::Frame,
        // 0: as many as the machine has cores.
        count: if frame_threads { 0 } else { 1 },
        ..Default::default()
    });
    let codec_name = context
        .codec()
        .map_or_else(|| format!("{:?}", context.id()), |c| c.name().to_string());
    let decoder = context.decoder().video().map_err(|e| {
        format!(
            "cannot decode its video (codec {codec_name}): {e}; this FFmpeg build may not support it"
        )
    })?;
    Ok((decoder, codec_name))
}

/// FFmpeg's NVDEC (CUVID) decoder for `id`, by name.
fn nvdec_decoder_name(id: ff::codec::Id) -> Option<&'static str> {
    use ff::codec::Id;
    Some(match id {
        Id::H264 => "h264_cuvid",
        Id::HEVC => "hevc_cuvid",
        Id::AV1 => "av1_cuvid",
        Id::VP9 => "vp9_cuvid",
        Id::VP8 => "vp8_cuvid",
        Id::MPEG2VIDEO => "mpeg2_cuvid",
        Id::MPEG4 => "mpeg4_cuvid",
        Id::VC1 => "vc1_cuvid",
        Id::MJPEG => "mjpeg_cuvid",
        _ => return None,
    })
}

/// The stream's decoder on the GPU's NVDEC engine (FFmpeg's CUVID decoder: the frames come
/// back in host memory, NV12, its luma plane the same bytes as the CPU decoder's: H.264 and
/// HEVC decoding is exact). Ok(None) when FFmpeg has no such decoder for the codec; Err
/// with the reason when it has one that cannot be opened (no NVIDIA driver, no NVDEC).
fn open_nvdec(
    mut context: ff::codec::context::Context,
    in_engine_context: bool,
) -> std::result::Result<Option<(ff::decoder::Video, String)>, String> {
    let Some(name) = nvdec_decoder_name(context.id()) else {
        return Ok(None);
    };
    let Some(codec) = ff::decoder::find_by_name(name) else {
        return Ok(None);
    };
    #[cfg(feature = "cuda")]
    // SAFETY: the callback is set before the decoder opens and reads only its arguments; the
    // device reference is the context's own (freed with it).
    unsafe {
        let raw = context.as_mut_ptr();
        (*raw).get_format = Some(luma_from_gpu::frames_in_gpu_memory);
        if in_engine_context {
            (*raw).hw_device_ctx = luma_from_gpu::primary_context_device();
        }
    }
    #[cfg(not(feature = "cuda"))]
    let _ = in_engine_context;
    context
        .decoder()
        .open_as(codec)
        .and_then(|opened| opened.video())
        .map(|decoder| Some((decoder, name.to_string())))
        .map_err(|e| format!("NVDEC decoding ({name}) is not available: {e}"))
}

/// NVDEC's frames stay in GPU memory and only their luma plane comes to the host, by one
/// copy into the frame buffer in the decoder's CUDA context (a DMA where the buffer is
/// page-locked). FFmpeg's own transfer copies all of NV12 into pageable memory, and such
/// copies go through the driver's staging buffers one at a time for every decoder of the
/// process: two decoders in one process made 660–785 frames/s of a 1080p clip where two in
/// separate processes made 1,160.
///
/// The decoder runs in the device's primary context, the one the engine runs in, so that its
/// frames can also stay on the GPU (`on_gpu`): a GPU labeler then copies the luma plane where
/// the decoder left it, and nothing crosses to the host.
#[cfg(feature = "cuda")]
mod luma_from_gpu {
    use super::ff;
    use crate::frame::grey::DevicePlane;
    use crate::gpu::device_plane::{copy_rows, CudaPlane, Rows};
    use cudarc::driver::sys;

    /// `AVCUDADeviceContext` (libavutil/hwcontext_cuda.h), whose header the bindings may lack.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct CudaDevice {
        cuda_ctx: sys::CUcontext,
        stream: sys::CUstream,
        internal: *mut std::ffi::c_void,
    }

    /// Device 0's primary context, retained for the process (`primary_context_device`).
    static PRIMARY: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();

    /// A CUDA device of FFmpeg in device 0's primary context, the engine's, for a decoder to
    /// hold; null when there is none (the decoder then makes a device of its own, or fails).
    /// The context is given to FFmpeg rather than asked of it: FFmpeg would refuse a primary
    /// context already active with other scheduling flags than its own, and would change them
    /// where it is not yet. The context is retained once for the process.
    pub fn primary_context_device() -> *mut ff::ffi::AVBufferRef {
        // SAFETY: the driver library is present (checked first: cudarc's calls panic without
        // it); FFmpeg's device takes the retained context, and the buffer is freed on failure.
        unsafe {
            if !sys::is_culib_present() {
                return std::ptr::null_mut();
            }
            let retained = PRIMARY.get_or_init(|| {
                let mut device = 0;
                let mut context = std::ptr::null_mut();
                let ok = sys::cuInit(0) == sys::CUresult::CUDA_SUCCESS
                    && sys::cuDeviceGet(&mut device, 0) == sys::CUresult::CUDA_SUCCESS
                    && sys::cuDevicePrimaryCtxRetain(&mut context, device)
                        == sys::CUresult::CUDA_SUCCESS;
                ok.then_some(context as usize)
            });
            let Some(context) = *retained else {
                return std::ptr::null_mut();
            };
            let mut device =
                ff::ffi::av_hwdevice_ctx_alloc(ff::ffi::AVHWDeviceType::AV_HWDEVICE_TYPE_CUDA);
            if device.is_null() {
                return device;
            }
            let hw = (*device).data as *mut ff::ffi::AVHWDeviceContext;
            let cuda = (*hw).hwctx as *mut CudaDevice;
            (*cuda).cuda_ctx = context as sys::CUcontext;
            // The legacy default stream: FFmpeg's CUVID decoder gives a picture back right
            // after queuing its copy, which only that stream orders behind the copy.
            (*cuda).stream = std::ptr::null_mut();
            if ff::ffi::av_hwdevice_ctx_init(device) < 0 {
                ff::ffi::av_buffer_unref(&mut device);
                return std::ptr::null_mut();
            }
            device
        }
    }

    /// The CUDA device of a decoded CUDA frame (its frames context's).
    fn device_of(frame: &ff::frame::Video) -> Result<CudaDevice, String> {
        // SAFETY: a CUDA frame's frames context names its device, whose hardware context is an
        // AVCUDADeviceContext.
        unsafe {
            let frames_ref = (*frame.as_ptr()).hw_frames_ctx;
            if frames_ref.is_null() {
                return Err("a GPU frame without its frames context".into());
            }
            let frames = (*frames_ref).data as *const ff::ffi::AVHWFramesContext;
            Ok(*((*(*frames).device_ctx).hwctx as *const CudaDevice))
        }
    }

    /// A reference to a decoded frame, which keeps its surface from the decoder's pool.
    struct FrameRef {
        _frame: ff::frame::Video,
    }
    // SAFETY: the reference is only held, and dropped once (`av_frame_free` is thread-safe).
    unsafe impl Sync for FrameRef {}

    /// The luma plane of a CUDA frame, kept where it is: a new reference to the frame, and its
    /// plane ordered behind the decoder's copy. None when the decoder is not in the engine's
    /// context (it made a device of its own): the frame is then copied to the host.
    pub fn keep_on_gpu(frame: &ff::frame::Video) -> Result<Option<Box<dyn DevicePlane>>, String> {
        // SAFETY: a CUDA frame's data[0] is its luma plane in GPU memory, linesize[0] bytes a
        // row, in the context of its frames context's device; the new reference keeps it.
        unsafe {
            let raw = frame.as_ptr();
            let device = device_of(frame)?;
            let primary = PRIMARY.get().copied().flatten();
            if primary != Some(device.cuda_ctx as usize) {
                return Ok(None);
            }
            let mut held = ff::frame::Video::empty();
            if ff::ffi::av_frame_ref(held.as_mut_ptr(), raw) < 0 {
                return Err("cannot hold the decoded frame".into());
            }
            let plane = CudaPlane::after_decoder_copy(
                device.cuda_ctx,
                device.stream,
                (*raw).data[0] as sys::CUdeviceptr,
                (*raw).linesize[0] as usize,
                Box::new(FrameRef { _frame: held }),
            )?;
            Ok(Some(Box::new(plane)))
        }
    }

    /// The decoder's output format: CUDA frames where it offers them, else its first.
    pub unsafe extern "C" fn frames_in_gpu_memory(
        _context: *mut ff::ffi::AVCodecContext,
        formats: *const ff::ffi::AVPixelFormat,
    ) -> ff::ffi::AVPixelFormat {
        use ff::ffi::AVPixelFormat as F;
        let mut at = formats;
        // SAFETY: FFmpeg's list ends with AV_PIX_FMT_NONE.
        unsafe {
            while *at != F::AV_PIX_FMT_NONE {
                if *at == F::AV_PIX_FMT_CUDA {
                    return F::AV_PIX_FMT_CUDA;
                }
                at = at.add(1);
            }
            *formats
        }
    }

    /// Copies the luma plane of a CUDA frame (`width × height`) into `out`, rows packed.
    pub fn copy(
        frame: &ff::frame::Video,
        out: &mut [u8],
        width: u32,
        height: u32,
    ) -> Result<(), String> {
        let (w, h) = (width as usize, height as usize);
        if out.len() < w * h {
            return Err("the frame buffer is smaller than the frame".into());
        }
        // SAFETY: a CUDA frame's data[0] is its luma plane in GPU memory, linesize[0]
        // bytes a row; its frames context names the device, whose CUDA device context
        // starts with the CUcontext (AVCUDADeviceContext). `out` holds w × h bytes.
        unsafe {
            let raw = frame.as_ptr();
            let cuda = device_of(frame)?.cuda_ctx;
            sys::cuCtxPushCurrent_v2(cuda)
                .result()
                .map_err(|e| format!("cannot use the decoder's CUDA context: {e}"))?;
            let params = copy_rows(
                Rows::Device(
                    (*raw).data[0] as sys::CUdeviceptr,
                    (*raw).linesize[0] as usize,
                ),
                Rows::Host(out.as_mut_ptr().cast(), w),
                w,
                h,
            );
            let copied = sys::cuMemcpy2D_v2(&params).result();
            let mut popped = std::ptr::null_mut();
            let _ = sys::cuCtxPopCurrent_v2(&mut popped);
            copied.map_err(|e| format!("cannot copy the frame from the GPU: {e}"))
        }
    }
}

pub(super) struct Scaler {
    format: Pixel,
    width: u32,
    height: u32,
    context: ff::software::scaling::Context,
    out: ff::frame::Video,
}

// The FFmpeg contexts are only used from the thread that owns the source.
unsafe impl Send for Scaler {}

/// The grey image of `frame`: NVDEC's luma plane left on the GPU (`on_gpu`), or in a buffer of
/// `frames` its luma plane copied (from GPU memory for NVDEC's frames), or converted through
/// swscale (the scaler `kept` for the next frame) when it has none. Errors name `path`.
pub(super) fn grey_frame(
    frame: &ff::frame::Video,
    kept: &mut Option<Scaler>,
    frames: &mut FramePool,
    path: &Path,
    on_gpu: bool,
) -> Result<FrameGrey> {
    let (w, h) = (frame.width(), frame.height());
    check_size(w, h).map_err(|e| Error::image(path, e.to_string()))?;
    #[cfg(feature = "cuda")]
    if frame.format() == Pixel::CUDA {
        if on_gpu {
            let kept = luma_from_gpu::keep_on_gpu(frame).map_err(|e| Error::image(path, e))?;
            if let Some(plane) = kept {
                return Ok(FrameGrey::on_gpu(w, h, plane));
            }
        }
        return frames
            .frame(w, h, |grey| {
                luma_from_gpu::copy(frame, &mut grey.data, w, h).map_err(|e| Error::image(path, e))
            })
            .map(FrameGrey::from);
    }
    let _ = on_gpu;
    let plane = if has_luma_plane(frame.format()) {
        frame
    } else {
        let scaler = match kept.take() {
            Some(s) if s.format == frame.format() && s.width == w && s.height == h => s,
            _ => Scaler {
                format: frame.format(),
                width: w,
                height: h,
                context: ff::software::scaling::Context::get(
                    frame.format(),
                    w,
                    h,
                    Pixel::GRAY8,
                    w,
                    h,
                    ff::software::scaling::Flags::BILINEAR,
                )
                .map_err(|e| {
                    Error::image(
                        path,
                        format!("cannot convert {:?} frames to grey: {e}", frame.format()),
                    )
                })?,
                out: ff::frame::Video::empty(),
            },
        };
        let scaler = kept.insert(scaler);
        scaler
            .context
            .run(frame, &mut scaler.out)
            .map_err(|e| Error::image(path, format!("grey conversion failed: {e}")))?;
        &scaler.out
    };
    let stride = plane.stride(0);
    let bytes = plane.data(0);
    let row = w as usize;
    frames
        .frame(w, h, |grey| {
            for (y, out) in grey.data.chunks_exact_mut(row).enumerate() {
                out.copy_from_slice(&bytes[y * stride..y * stride + row]);
            }
            Ok(())
        })
        .map(FrameGrey::from)
}

/// Formats whose first plane is 8-bit luma, one byte per pixel.
fn has_luma_plane(format: Pixel) -> bool {
    matches!(
        format,
        Pixel::GRAY8
            | Pixel::YUV420P
            | Pixel::YUV422P
            | Pixel::YUV444P
            | Pixel::YUV410P
            | Pixel::YUV411P
            | Pixel::YUV440P
            | Pixel::YUVJ420P
            | Pixel::YUVJ422P
            | Pixel::YUVJ444P
            | Pixel::YUVJ440P
            | Pixel::YUVA420P
            | Pixel::NV12
            | Pixel::NV21
            | Pixel::NV16
    )
}
