//! Video files through FFmpeg (ffmpeg-next, feature `video`): any container and codec the
//! system's libavformat/libavcodec read (mp4, mkv, avi, mov; H.264, MJPEG, FFV1, ...).
//!
//! Frames are decoded to grey without colour conversion where the codec gives a luma plane
//! (every YUV and grey format: the Y plane is copied as it is); other formats (RGB, palette)
//! go through swscale to GRAY8. Frame i is the i-th decoded frame; `time_s` is its presentation
//! time from the start of the stream.
//!
//! Damaged input is left out and decoding goes on, as FFmpeg's own command line does: a frame
//! the decoder marks as damaged (decoded with errors, concealed) is skipped and keeps its
//! index, a packet the decoder cannot use gives no frame, and a read error ends the file there
//! (the decoder is drained first). The frames after damaged data up to the next keyframe are
//! skipped too: they are predicted from it, and FFmpeg does not mark the errors they inherit.
//! A file whose packets (of any stream) end well before the duration its header gives is cut
//! short: that is recorded at its end. Each is recorded for `take_skipped`. So the frames
//! delivered plus the frames skipped are the frames `ffmpeg -i FILE -f null -` decodes, in the
//! same order, and a frame size that changes mid-stream (joined streams) is followed. The
//! container's frame count is only an estimate (edit lists, audio longer than the video,
//! variable frame rate) and is never checked against the frames that come.

use super::FrameSource;
use crate::error::{Error, Result};
use std::path::Path;

pub mod keyframes;
#[cfg(feature = "video")]
mod segments;

/// Opens a video file as a frame source. `looping`: start again at the end (live viewing).
pub fn open(path: &Path, looping: bool) -> Result<Box<dyn FrameSource>> {
    imp::open(
        path,
        looping,
        VideoDecoding::Cpu,
        crate::tuning::NVDEC_DECODERS,
    )
}

/// Opens a video file, decoding it as `decoding` says. On NVDEC, an H.264 or HEVC file read
/// once through (not `looping`) is decoded by `tuning::NVDEC_DECODERS` decoders at once, each
/// from its own IDR keyframes (`open_in_segments`).
pub fn open_with(
    path: &Path,
    looping: bool,
    decoding: VideoDecoding,
) -> Result<Box<dyn FrameSource>> {
    open_with_decoders(path, looping, decoding, crate::tuning::NVDEC_DECODERS)
}

/// `open_with`, with `nvdec_decoders` decoders at once on NVDEC (`Tuning::nvdec_decoders`).
pub fn open_with_decoders(
    path: &Path,
    looping: bool,
    decoding: VideoDecoding,
    nvdec_decoders: usize,
) -> Result<Box<dyn FrameSource>> {
    imp::open(path, looping, decoding, nvdec_decoders)
}

/// Segments shorter than this many frames are joined to the one before: a decoder's start and
/// drain cost about as much as a few frames.
pub const MIN_SEGMENT_FRAMES: u64 = 60;

/// How many segments `open_in_segments` cuts a file into, given `min_segment_frames` (1 for
/// codecs other than H.264 and HEVC).
pub fn segment_count(path: &Path, min_segment_frames: u64) -> Result<usize> {
    imp::segment_count(path, min_segment_frames)
}

/// Opens a video file read once through by `decoders` decoders at once (`decoding` as in
/// `open_with`), each taking the next stretch of the file that starts at an IDR keyframe and
/// holds `min_segment_frames` frames or more: the frames, their indices and times, the
/// skipped frames and the notices are those one decoder gives from the start of the file
/// (`video::segments`). Codecs other than H.264 and HEVC, and `decoders` ≤ 1, get one decoder.
pub fn open_in_segments(
    path: &Path,
    decoding: VideoDecoding,
    decoders: usize,
    min_segment_frames: u64,
) -> Result<Box<dyn FrameSource>> {
    imp::open_in_segments(path, decoding, decoders, min_segment_frames)
}

/// Hosts with this many hardware threads or more decode on the CPU under `VideoDecoding::Auto`:
/// FFmpeg's frame threads outrun one NVDEC engine there (H100 hosts, 16 threads, a 1080p H.264
/// clip through `analyze`: CPU 551–1,099 frames/s, NVDEC 449–623, the CPU ahead on every machine;
/// a 2-core host decodes the same clip at 110–150 on the CPU).
pub const NVDEC_BELOW_THREADS: usize = 12;

/// Whether `VideoDecoding::Auto` tries NVDEC on this host (`NVDEC_BELOW_THREADS`).
pub fn nvdec_by_default() -> bool {
    std::thread::available_parallelism().map_or(1, |n| n.get()) < NVDEC_BELOW_THREADS
}

/// Where video frames are decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VideoDecoding {
    /// On the CPU (FFmpeg's decoders, frame threads).
    #[default]
    Cpu,
    /// On the GPU's NVDEC engine where it decodes the codec (H.264, HEVC, AV1, VP9, ...), an
    /// NVIDIA driver is there and the host has fewer than `NVDEC_BELOW_THREADS` hardware
    /// threads; elsewhere on the CPU (with a notice when NVDEC was there to try and failed).
    Auto,
    /// On NVDEC; on the CPU with a notice when it cannot.
    Nvdec,
}

impl std::str::FromStr for VideoDecoding {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "cpu" => Ok(VideoDecoding::Cpu),
            "auto" => Ok(VideoDecoding::Auto),
            "nvdec" | "gpu" => Ok(VideoDecoding::Nvdec),
            _ => Err(format!("unknown decoder '{s}' (auto, cpu, nvdec)")),
        }
    }
}

/// Initialises FFmpeg once per process (its own logging off), for every user of it.
#[cfg(feature = "video")]
pub use imp::init;

#[cfg(not(feature = "video"))]
mod imp {
    use super::*;

    pub fn open(
        path: &Path,
        _looping: bool,
        _decoding: VideoDecoding,
        _decoders: usize,
    ) -> Result<Box<dyn FrameSource>> {
        Err(Error::image(
            path,
            "this build has no video support (built without the `video` feature); \
             rebuild with `--features video` or extract the frames as images",
        ))
    }

    pub fn open_in_segments(
        path: &Path,
        decoding: VideoDecoding,
        _decoders: usize,
        _min_segment_frames: u64,
    ) -> Result<Box<dyn FrameSource>> {
        open(path, false, decoding, 1)
    }

    pub fn segment_count(path: &Path, _min_segment_frames: u64) -> Result<usize> {
        open(path, false, VideoDecoding::Cpu, 1).map(|_| 1)
    }
}

#[cfg(feature = "video")]
mod imp {
    use super::*;
    use crate::frame::image::{check_size, GrayImage};
    use crate::frame::page_lock::PageLocker;
    use crate::source::frame_pool::FramePool;
    use crate::source::{ms_since, Frame, SkipAt, Skipped};
    use ff::format::Pixel;
    use ffmpeg_next as ff;
    use std::path::PathBuf;
    use std::sync::{Arc, Once};
    use std::time::Instant;

    pub fn open(
        path: &Path,
        looping: bool,
        decoding: VideoDecoding,
        decoders: usize,
    ) -> Result<Box<dyn FrameSource>> {
        let source = VideoSource::open(path, looping, decoding)?;
        if looping || !source.on_nvdec {
            return Ok(Box::new(source));
        }
        Ok(segments::SegmentedVideo::open(
            source,
            decoding,
            decoders,
            MIN_SEGMENT_FRAMES,
        ))
    }

    pub fn open_in_segments(
        path: &Path,
        decoding: VideoDecoding,
        decoders: usize,
        min_segment_frames: u64,
    ) -> Result<Box<dyn FrameSource>> {
        let source = VideoSource::open(path, false, decoding)?;
        Ok(segments::SegmentedVideo::open(
            source,
            decoding,
            decoders,
            min_segment_frames,
        ))
    }

    pub fn segment_count(path: &Path, min_segment_frames: u64) -> Result<usize> {
        let source = VideoSource::open(path, false, VideoDecoding::Cpu)?;
        let Some((codec, framing)) = source.idr_codec() else {
            return Ok(1);
        };
        let mut planner = segments::Planner::new(
            path,
            source.stream_index,
            codec,
            framing,
            min_segment_frames,
        );
        Ok(std::iter::from_fn(|| planner.next_segment()).count())
    }

    /// Frame buffers a video source keeps for reuse.
    const KEEP_BUFFERS: usize = 8;

    /// FFmpeg is initialised once per process, with its own logging off: every problem comes
    /// back as an error value and is reported with the file and frame.
    pub fn init() {
        static INIT: Once = Once::new();
        INIT.call_once(|| {
            let _ = ff::init();
            ff::util::log::set_level(ff::util::log::Level::Quiet);
        });
    }

    pub struct VideoSource {
        path: PathBuf,
        input: ff::format::context::Input,
        stream_index: usize,
        decoder: ff::decoder::Video,
        codec_name: String,
        /// Seconds per timestamp tick of the stream.
        time_base: f64,
        /// Timestamp of the stream's first frame (ticks).
        start_ts: i64,
        fps: Option<f64>,
        /// Frames the header announces (a frame table, or an estimate from the duration): for
        /// the progress bar only.
        announced: Option<u64>,
        looping: bool,
        /// Index of the next decoded frame.
        next_index: u64,
        /// After a seek: take the next frame's index from its timestamp, and drop frames
        /// before the target.
        rebase: bool,
        skip_before: Option<u64>,
        eof_sent: bool,
        /// Frames delivered since the last (re)start, to stop a looping empty file.
        delivered_this_pass: u64,
        /// A packet the decoder could not take yet (it had frames to give first).
        pending: Option<ff::Packet>,
        /// What was left out since the last `take_skipped`.
        left_out: Vec<LeftOut>,
        /// Seconds per timestamp tick of every stream (packets of all streams show how far the
        /// file's data goes).
        stream_time_bases: Vec<f64>,
        /// Where the header says the file's streams end (seconds), and where the packets read
        /// so far end.
        header_end_s: Option<f64>,
        data_end_s: f64,
        /// Why the file ended early (a read error, a cut-short file): recorded when the decoder
        /// has given its last frame.
        ended_early: Option<String>,
        /// Damaged data was decoded here: the frames after it are skipped until the next
        /// keyframe.
        tainted_by: Option<SkipAt>,
        decoded: ff::frame::Video,
        scaler: Option<Scaler>,
        /// The buffers grey frames are copied into.
        frames: FramePool,
        /// What the caller should hear once (NVDEC unavailable), and where NVDEC handed over
        /// to the CPU.
        notices: Vec<String>,
        hand_overs: Vec<HandOver>,
        /// The stream's codec parameters, to open the CPU decoder when NVDEC fails.
        parameters: ff::codec::Parameters,
        /// Whether the decoder is NVDEC's.
        on_nvdec: bool,
        /// The size of the last frame decoded.
        last_size: Option<(u32, u32)>,
        /// The stretch of the file decoded (`segments`); None: all of it. Frame indices count
        /// from its first frame.
        segment: Option<Segment>,
        /// Nothing read or decoded yet.
        untouched: bool,
    }

    /// Seconds per timestamp tick of each stream of a file.
    pub(super) fn time_bases(input: &ff::format::context::Input) -> Vec<f64> {
        input
            .streams()
            .map(|s| {
                let tb = s.time_base();
                if tb.denominator() != 0 {
                    tb.numerator() as f64 / tb.denominator() as f64
                } else {
                    0.0
                }
            })
            .collect()
    }

    /// Where a packet's data ends (seconds; any stream), when it has a timestamp.
    pub(super) fn packet_end_s(packet: &ff::Packet, time_bases: &[f64]) -> Option<f64> {
        let tb = time_bases.get(packet.stream()).copied().unwrap_or(0.0);
        let ts = packet.pts().or(packet.dts())?;
        Some((ts + packet.duration().max(0)) as f64 * tb)
    }

    /// A stretch of the file that decodes on its own: from the IDR keyframe packet at `start`
    /// (None: the file's start) up to the video packet at byte `end` (None: the file's end).
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub(super) struct Segment {
        pub start: Option<SegmentStart>,
        pub end: Option<i64>,
    }

    /// A segment's first packet: its byte position in the file (unique to it), its decoding
    /// timestamp (stream ticks, to seek near it), and where the data of the packets before it
    /// ends (seconds, any stream: the last segment tells a file cut short from streams joined
    /// with timestamps that start again, as one decoder reading every packet would).
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub(super) struct SegmentStart {
        pub pos: i64,
        pub dts: i64,
        pub data_end_before_s: f64,
    }

    /// A frame or data left out, its frame numbers counted from the decoding's first frame.
    #[derive(Clone, Debug)]
    pub(super) struct LeftOut {
        pub at: SkipAt,
        pub why: Why,
    }

    #[derive(Clone, Debug)]
    pub(super) enum Why {
        Said(String),
        /// A frame predicted from damaged data (no keyframe since).
        PredictedFrom(SkipAt),
    }

    /// `at` with `base` frames before it.
    pub(super) fn shifted(at: SkipAt, base: u64) -> SkipAt {
        match at {
            SkipAt::Frame(i) => SkipAt::Frame(base + i),
            SkipAt::Before(i) => SkipAt::Before(base + i),
        }
    }

    impl LeftOut {
        /// As the caller sees it, with `base` frames before the decoding's first.
        pub(super) fn skipped(&self, base: u64) -> Skipped {
            let reason = match &self.why {
                Why::Said(reason) => reason.clone(),
                Why::PredictedFrom(cause) => {
                    let cause = match shifted(*cause, base) {
                        SkipAt::Frame(i) => format!("the damaged frame {i}"),
                        SkipAt::Before(i) => format!("the damaged data before frame {i}"),
                    };
                    format!(
                        "it is predicted from {cause} (no keyframe since), so it may carry the damage"
                    )
                }
            };
            Skipped {
                at: shifted(self.at, base),
                name: String::new(),
                reason,
            }
        }
    }

    /// The CPU decoder took over from NVDEC at `frame` (counted as `LeftOut`'s).
    #[derive(Clone, Debug)]
    pub(super) struct HandOver {
        pub path: PathBuf,
        pub decoder: String,
        pub frame: u64,
        pub why: String,
    }

    impl HandOver {
        pub(super) fn notice(&self, base: u64) -> String {
            format!(
                "{}: NVDEC ({}) stopped at frame {} ({}); decoding on the CPU from there",
                self.path.display(),
                self.decoder,
                base + self.frame,
                self.why
            )
        }
    }

    /// The stream's decoder on the CPU, with frame threads (throughput for analysis), and its
    /// codec's name.
    fn open_cpu_decoder(
        parameters: &ff::codec::Parameters,
    ) -> std::result::Result<(ff::decoder::Video, String), String> {
        let mut context = ff::codec::context::Context::from_parameters(parameters.clone())
            .map_err(|e| format!("cannot read the codec parameters: {e}"))?;
        context.set_threading(ff::codec::threading::Config {
            kind: ff::codec::threading::Type::Frame,
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
    ) -> std::result::Result<Option<(ff::decoder::Video, String)>, String> {
        let Some(name) = nvdec_decoder_name(context.id()) else {
            return Ok(None);
        };
        let Some(codec) = ff::decoder::find_by_name(name) else {
            return Ok(None);
        };
        #[cfg(feature = "cuda")]
        // SAFETY: the callback is set before the decoder opens and reads only its arguments.
        unsafe {
            (*context.as_mut_ptr()).get_format = Some(luma_from_gpu::frames_in_gpu_memory);
        }
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
    #[cfg(feature = "cuda")]
    mod luma_from_gpu {
        use super::ff;
        use cudarc::driver::sys;

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
                let frames_ref = (*raw).hw_frames_ctx;
                if frames_ref.is_null() {
                    return Err("a GPU frame without its frames context".into());
                }
                let frames = (*frames_ref).data as *const ff::ffi::AVHWFramesContext;
                let device = (*frames).device_ctx;
                let cuda = *((*device).hwctx as *const sys::CUcontext);
                sys::cuCtxPushCurrent_v2(cuda)
                    .result()
                    .map_err(|e| format!("cannot use the decoder's CUDA context: {e}"))?;
                let params = sys::CUDA_MEMCPY2D {
                    srcXInBytes: 0,
                    srcY: 0,
                    srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                    srcHost: std::ptr::null(),
                    srcDevice: (*raw).data[0] as sys::CUdeviceptr,
                    srcArray: std::ptr::null_mut(),
                    srcPitch: (*raw).linesize[0] as usize,
                    dstXInBytes: 0,
                    dstY: 0,
                    dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_HOST,
                    dstHost: out.as_mut_ptr().cast(),
                    dstDevice: 0,
                    dstArray: std::ptr::null_mut(),
                    dstPitch: w,
                    WidthInBytes: w,
                    Height: h,
                };
                let copied = sys::cuMemcpy2D_v2(&params).result();
                let mut popped = std::ptr::null_mut();
                let _ = sys::cuCtxPopCurrent_v2(&mut popped);
                copied.map_err(|e| format!("cannot copy the frame from the GPU: {e}"))
            }
        }
    }

    struct Scaler {
        format: Pixel,
        width: u32,
        height: u32,
        context: ff::software::scaling::Context,
        out: ff::frame::Video,
    }

    // The FFmpeg contexts are only used from the thread that owns the source.
    unsafe impl Send for Scaler {}

    impl VideoSource {
        pub fn open(path: &Path, looping: bool, decoding: VideoDecoding) -> Result<Self> {
            init();
            let fail = |why: String| Error::image(path, why);
            std::fs::metadata(path).map_err(|e| fail(format!("cannot read: {e}")))?;
            let input = ff::format::input(path)
                .map_err(|e| fail(format!("not a readable video file: {e}")))?;
            let stream = input
                .streams()
                .best(ff::media::Type::Video)
                .ok_or_else(|| fail("the file has no video stream".into()))?;
            let stream_index = stream.index();
            let tb = stream.time_base();
            let time_base = if tb.denominator() != 0 {
                tb.numerator() as f64 / tb.denominator() as f64
            } else {
                0.0
            };
            let start_ts = match stream.start_time() {
                t if t == ff::ffi::AV_NOPTS_VALUE => 0,
                t => t,
            };
            let rate = |r: ff::Rational| {
                (r.numerator() > 0 && r.denominator() > 0)
                    .then(|| r.numerator() as f64 / r.denominator() as f64)
            };
            let fps = rate(stream.avg_frame_rate()).or_else(|| rate(stream.rate()));
            let announced = if stream.frames() > 0 {
                Some(stream.frames() as u64)
            } else {
                let seconds = if stream.duration() > 0 && time_base > 0.0 {
                    stream.duration() as f64 * time_base
                } else if input.duration() > 0 {
                    input.duration() as f64 / ff::ffi::AV_TIME_BASE as f64
                } else {
                    0.0
                };
                fps.filter(|_| seconds > 0.0)
                    .map(|f| (seconds * f).round() as u64)
            };
            let stream_time_bases = time_bases(&input);
            // SAFETY: a field of the open format context.
            let format_start = unsafe { (*input.as_ptr()).start_time };
            let header_end_s = (input.duration() > 0).then(|| {
                let start = if format_start == ff::ffi::AV_NOPTS_VALUE {
                    0
                } else {
                    format_start
                };
                (start + input.duration()) as f64 / ff::ffi::AV_TIME_BASE as f64
            });
            let parameters = stream.parameters();
            let context = || {
                ff::codec::context::Context::from_parameters(parameters.clone())
                    .map_err(|e| fail(format!("cannot read the codec parameters: {e}")))
            };
            let mut notices = Vec::new();
            let decoding = match decoding {
                VideoDecoding::Auto if !super::nvdec_by_default() => VideoDecoding::Cpu,
                other => other,
            };
            let nvdec = match decoding {
                VideoDecoding::Cpu => None,
                VideoDecoding::Auto | VideoDecoding::Nvdec => match open_nvdec(context()?) {
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
                },
            };
            let on_nvdec = nvdec.is_some();
            let (decoder, codec_name) = match nvdec {
                Some(opened) => opened,
                None => open_cpu_decoder(&parameters).map_err(fail)?,
            };
            check_size(decoder.width(), decoder.height())
                .map_err(|e| fail(format!("video frames: {e}")))?;
            Ok(Self {
                path: path.to_path_buf(),
                input,
                stream_index,
                decoder,
                codec_name,
                time_base,
                start_ts,
                fps,
                announced,
                looping,
                next_index: 0,
                rebase: false,
                skip_before: None,
                eof_sent: false,
                delivered_this_pass: 0,
                pending: None,
                left_out: Vec::new(),
                tainted_by: None,
                stream_time_bases,
                header_end_s,
                data_end_s: f64::NEG_INFINITY,
                ended_early: None,
                decoded: ff::frame::Video::empty(),
                scaler: None,
                frames: FramePool::new(KEEP_BUFFERS, None),
                notices,
                hand_overs: Vec::new(),
                parameters,
                on_nvdec,
                last_size: None,
                segment: None,
                untouched: true,
            })
        }

        /// After an NVDEC error or at a frame size change: goes on with the CPU decoder from
        /// frame `resume_at`, the first not yet delivered, so that no frame is lost to NVDEC.
        /// False when that cannot be done (an error is then treated as the CPU decoder's would
        /// be).
        fn leave_nvdec(&mut self, resume_at: u64, why: &dyn std::fmt::Display) -> bool {
            if !self.on_nvdec {
                return false;
            }
            // The file opened again and decoded from its start (or the segment's), the frames
            // before `resume_at` dropped by count: exact where a seek by time is not (streams
            // joined end to end repeat their timestamps).
            let Ok(mut input) = ff::format::input(&self.path) else {
                return false;
            };
            let first = match self.segment.and_then(|s| s.start) {
                Some(start) => match move_to(&self.path, &mut input, self.stream_index, start) {
                    Ok(first) => Some(first),
                    Err(_) => return false,
                },
                None => None,
            };
            let Ok((decoder, codec_name)) = open_cpu_decoder(&self.parameters) else {
                return false;
            };
            self.input = input;
            self.decoder = decoder;
            let nvdec_name = std::mem::replace(&mut self.codec_name, codec_name);
            self.on_nvdec = false;
            self.ended_early = None;
            self.decode_up_to(resume_at, false, first);
            self.hand_overs.push(HandOver {
                path: self.path.clone(),
                decoder: nvdec_name,
                frame: resume_at,
                why: why.to_string(),
            });
            true
        }

        /// Decodes `segment` next, its frames indexed from 0: the input moved to its first
        /// packet, the decoder emptied. An error when that packet cannot be found again.
        pub(super) fn enter_segment(&mut self, segment: Segment) -> Result<()> {
            let fail = |why: String| Error::image(&self.path, why);
            let first = match segment.start {
                Some(start) => Some(
                    move_to(&self.path, &mut self.input, self.stream_index, start).map_err(fail)?,
                ),
                None if self.untouched => None,
                None => {
                    self.input = ff::format::input(&self.path)
                        .map_err(|e| fail(format!("cannot open the file again: {e}")))?;
                    None
                }
            };
            if !std::mem::replace(&mut self.untouched, false) {
                self.decoder.flush();
            }
            self.segment = Some(segment);
            self.data_end_s = segment
                .start
                .map_or(f64::NEG_INFINITY, |s| s.data_end_before_s);
            self.ended_early = None;
            self.last_size = None;
            self.decode_up_to(0, false, first);
            Ok(())
        }

        /// Whether the decoder is NVDEC's.
        pub(super) fn on_nvdec(&self) -> bool {
            self.on_nvdec
        }

        /// The codec, when its IDR keyframes can be found (`keyframes`), with how its packets
        /// are framed.
        pub(super) fn idr_codec(&self) -> Option<(keyframes::Codec, keyframes::Framing)> {
            let codec = match self.parameters.id() {
                ff::codec::Id::H264 => keyframes::Codec::H264,
                ff::codec::Id::HEVC => keyframes::Codec::Hevc,
                _ => return None,
            };
            // SAFETY: the parameters own their extradata buffer of `extradata_size` bytes.
            let extradata = unsafe {
                let p = self.parameters.as_ptr();
                match ((*p).extradata, (*p).extradata_size) {
                    (data, size) if !data.is_null() && size > 0 => {
                        std::slice::from_raw_parts(data, size as usize)
                    }
                    _ => &[],
                }
            };
            Some((codec, keyframes::Framing::of_stream(codec, extradata)))
        }

        pub(super) fn path(&self) -> &Path {
            &self.path
        }

        /// The frame size the stream's header gives.
        pub(super) fn width(&self) -> u32 {
            self.decoder.width()
        }

        pub(super) fn height(&self) -> u32 {
            self.decoder.height()
        }

        pub(super) fn stream_index(&self) -> usize {
            self.stream_index
        }

        /// Frames indexed so far (those given and those left out): the next frame's index.
        pub(super) fn frames_indexed(&self) -> u64 {
            self.next_index
        }

        /// Frame buffers kept for reuse from now on (the frames a segment holds back).
        pub(super) fn keep_buffers(&mut self, keep: usize, locker: Option<Arc<dyn PageLocker>>) {
            self.frames = FramePool::new(keep, locker);
        }

        /// What was left out and where NVDEC handed over, its frame numbers counted from the
        /// decoding's first frame.
        pub(super) fn take_events(&mut self) -> (Vec<LeftOut>, Vec<HandOver>, Vec<String>) {
            (
                std::mem::take(&mut self.left_out),
                std::mem::take(&mut self.hand_overs),
                std::mem::take(&mut self.notices),
            )
        }

        /// Records a left-out frame (`SkipAt::Frame`) or left-out data (`SkipAt::Before`).
        /// Nothing is recorded while decoding up to a seek target.
        fn skip(&mut self, at: SkipAt, why: Why) {
            if self.tainted_by.is_none() {
                self.tainted_by = Some(at);
            }
            if self.skip_before.is_none() {
                self.left_out.push(LeftOut { at, why });
            }
        }

        /// Notes how far the file's data goes (any stream).
        fn note_data_end(&mut self, packet: &ff::Packet) {
            if let Some(end) = packet_end_s(packet, &self.stream_time_bases) {
                self.data_end_s = self.data_end_s.max(end);
            }
        }

        /// At the end of the packets: is the file shorter than its header says? The margin
        /// (three frames and 1 %) covers containers that round their duration.
        fn cut_short(&self) -> Option<String> {
            let header_end = self.header_end_s?;
            if !self.data_end_s.is_finite() || self.rebase || self.skip_before.is_some() {
                return None;
            }
            let margin = 3.0 / self.fps.unwrap_or(2.0) + 0.01 * header_end.abs();
            (self.data_end_s + margin < header_end).then(|| {
                format!(
                    "the file is cut short: its data ends at {:.2} s, but its header says it lasts until {:.2} s",
                    self.data_end_s, header_end
                )
            })
        }

        /// The decoder has no more frames: loop or end.
        fn at_end(&mut self) -> Result<bool> {
            if self.looping && self.delivered_this_pass > 0 {
                self.seek_to(0)?;
                self.delivered_this_pass = 0;
                return Ok(true);
            }
            Ok(false)
        }

        fn index_from_timestamp(&self, ts: Option<i64>) -> Option<u64> {
            let (ts, fps) = (ts?, self.fps?);
            let seconds = (ts - self.start_ts) as f64 * self.time_base;
            Some((seconds * fps).round().max(0.0) as u64)
        }

        fn seek_to(&mut self, index: u64) -> Result<()> {
            let seconds = match self.fps {
                Some(fps) => index as f64 / fps,
                None if index == 0 => 0.0,
                None => {
                    return Err(Error::image(
                        &self.path,
                        "cannot seek: the stream has no frame rate",
                    ))
                }
            };
            let start_s = self.start_ts as f64 * self.time_base;
            let target = ((start_s + seconds) * ff::ffi::AV_TIME_BASE as f64) as i64;
            // Land on the keyframe at or before the target, then decode up to it.
            self.input.seek(target, ..target + 1).map_err(|e| {
                Error::image(&self.path, format!("cannot seek to frame {index}: {e}"))
            })?;
            self.decoder.flush();
            self.decode_up_to(index, index > 0, None);
            Ok(())
        }

        /// After the input was moved back (or opened again) and the decoder emptied: decode on
        /// from `first` (a packet already read, or None) and the input, dropping the frames
        /// before `index`, their indices counted from 0, or taken from the first frame's
        /// timestamp with `rebase` (after a seek by time).
        fn decode_up_to(&mut self, index: u64, rebase: bool, first: Option<ff::Packet>) {
            self.eof_sent = false;
            self.pending = first;
            self.tainted_by = None;
            self.rebase = rebase;
            self.next_index = 0;
            self.skip_before = (index > 0).then_some(index);
        }

        /// Copies the luma plane, or converts through swscale when there is none.
        fn grey_frame(&mut self) -> Result<Arc<GrayImage>> {
            let frame = &self.decoded;
            let (w, h) = (frame.width(), frame.height());
            check_size(w, h).map_err(|e| Error::image(&self.path, e.to_string()))?;
            #[cfg(feature = "cuda")]
            if frame.format() == Pixel::CUDA {
                let path = &self.path;
                return self.frames.frame(w, h, |grey| {
                    luma_from_gpu::copy(frame, &mut grey.data, w, h)
                        .map_err(|e| Error::image(path, e))
                });
            }
            let plane = if has_luma_plane(frame.format()) {
                frame
            } else {
                let scaler = match self.scaler.take() {
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
                                &self.path,
                                format!("cannot convert {:?} frames to grey: {e}", frame.format()),
                            )
                        })?,
                        out: ff::frame::Video::empty(),
                    },
                };
                let scaler = self.scaler.insert(scaler);
                scaler.context.run(frame, &mut scaler.out).map_err(|e| {
                    Error::image(&self.path, format!("grey conversion failed: {e}"))
                })?;
                &scaler.out
            };
            let stride = plane.stride(0);
            let bytes = plane.data(0);
            let row = w as usize;
            self.frames.frame(w, h, |grey| {
                for (y, out) in grey.data.chunks_exact_mut(row).enumerate() {
                    out.copy_from_slice(&bytes[y * stride..y * stride + row]);
                }
                Ok(())
            })
        }
    }

    /// Moves `input` to `start`, the packet of stream `stream_index` at byte `start.pos`, and
    /// returns that packet: a seek by its timestamp on its stream (to it or a keyframe before
    /// it), then reading on; where that misses it, the file read again from its start.
    fn move_to(
        path: &Path,
        input: &mut ff::format::context::Input,
        stream_index: usize,
        start: SegmentStart,
    ) -> std::result::Result<ff::Packet, String> {
        // SAFETY: an open format context; the range asks for a keyframe at or before `dts`.
        let sought = unsafe {
            ff::ffi::avformat_seek_file(
                input.as_mut_ptr(),
                stream_index as i32,
                i64::MIN,
                start.dts,
                start.dts,
                0,
            )
        } >= 0;
        if sought {
            if let Some(packet) = read_to(input, stream_index, start.pos, true) {
                return Ok(packet);
            }
        }
        *input = ff::format::input(path).map_err(|e| format!("cannot open the file again: {e}"))?;
        read_to(input, stream_index, start.pos, false)
            .ok_or_else(|| format!("cannot find the keyframe at byte {} again", start.pos))
    }

    /// Reads up to the packet of stream `stream_index` at byte `pos`; None at the end of the
    /// file, or past `pos` with `stop_past`.
    fn read_to(
        input: &mut ff::format::context::Input,
        stream_index: usize,
        pos: i64,
        stop_past: bool,
    ) -> Option<ff::Packet> {
        loop {
            let mut packet = ff::Packet::empty();
            match packet.read(input) {
                Ok(()) => {}
                Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => continue,
                Err(_) => return None,
            }
            if packet.stream() != stream_index || packet.size() == 0 {
                continue;
            }
            let at = packet.position() as i64;
            if at == pos {
                return Some(packet);
            }
            if stop_past && at > pos {
                return None;
            }
        }
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

    impl FrameSource for VideoSource {
        fn describe(&self) -> String {
            let mut s = format!(
                "{} ({} {}×{}",
                self.path.display(),
                self.codec_name,
                self.decoder.width(),
                self.decoder.height()
            );
            if let Some(fps) = self.fps {
                s += &format!(" @{fps:.3}");
            }
            if let Some(n) = self.announced {
                s += &format!(", {n} frames");
            }
            s + ")"
        }

        fn is_live(&self) -> bool {
            false
        }

        fn next_frame(&mut self) -> Result<Option<Frame>> {
            let started = Instant::now();
            self.untouched = false;
            // Decoder errors in a row while draining: a decoder that only fails is given up on.
            let mut drain_errors = 0u32;
            loop {
                match self.decoder.receive_frame(&mut self.decoded) {
                    Ok(()) => {
                        drain_errors = 0;
                        let ts = self.decoded.timestamp();
                        let index = if std::mem::take(&mut self.rebase) {
                            self.index_from_timestamp(ts).unwrap_or(self.next_index)
                        } else {
                            self.next_index
                        };
                        self.next_index = index + 1;
                        if self.skip_before.is_some_and(|target| index < target) {
                            continue;
                        }
                        self.skip_before = None;
                        // FFmpeg's CUVID decoder drops the frames it holds when the frame size
                        // changes: the CPU decoder takes over at the first frame of the new size.
                        let size = (self.decoded.width(), self.decoded.height());
                        let changed = self.last_size.is_some_and(|last| last != size);
                        if changed && self.leave_nvdec(index, &"the frame size changed") {
                            continue;
                        }
                        self.last_size = Some(size);
                        if self.decoded.is_corrupt() || self.decoded.has_decode_errors() {
                            self.skip(
                                SkipAt::Frame(index),
                                Why::Said(
                                    "the frame's data is damaged (it decodes only with errors)"
                                        .into(),
                                ),
                            );
                            continue;
                        }
                        if self.decoded.is_key() {
                            self.tainted_by = None;
                        } else if let Some(cause) = self.tainted_by {
                            self.skip(SkipAt::Frame(index), Why::PredictedFrom(cause));
                            continue;
                        }
                        let grey = match self.grey_frame() {
                            Ok(grey) => grey,
                            // The frame is decoded again on the CPU, not lost.
                            Err(e) if self.leave_nvdec(index, &e) => continue,
                            Err(e) => {
                                self.skip(SkipAt::Frame(index), Why::Said(e.to_string()));
                                continue;
                            }
                        };
                        let time_s = match (ts, self.time_base > 0.0) {
                            (Some(ts), true) => (ts - self.start_ts) as f64 * self.time_base,
                            _ => index as f64 / self.fps.unwrap_or(1.0),
                        };
                        self.delivered_this_pass += 1;
                        return Ok(Some(Frame {
                            index,
                            time_s,
                            grey,
                            captured_at: Instant::now(),
                            decode_ms: ms_since(started),
                            name: String::new(),
                        }));
                    }
                    Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => {}
                    Err(ff::Error::Eof) => {
                        if let Some(why) = self.ended_early.take() {
                            self.skip(SkipAt::Before(self.next_index), Why::Said(why));
                        }
                        if self.at_end()? {
                            continue;
                        }
                        return Ok(None);
                    }
                    Err(e) if self.leave_nvdec(self.next_index, &e) => continue,
                    Err(e) => {
                        // A packet the decoder could not use (frame threads report it late).
                        self.skip(
                            SkipAt::Before(self.next_index),
                            Why::Said(format!("undecodable data: {e}")),
                        );
                        if self.eof_sent {
                            drain_errors += 1;
                            if drain_errors > 64 {
                                return Ok(None);
                            }
                            continue;
                        }
                    }
                }
                // The decoder wants input: the packet it could not take, the next packet of
                // our stream, or end of file.
                if self.eof_sent {
                    // Draining, and the decoder wants more: nothing more comes.
                    if self.at_end()? {
                        continue;
                    }
                    return Ok(None);
                }
                let packet = match self.pending.take() {
                    Some(packet) => packet,
                    None => {
                        let mut packet = ff::Packet::empty();
                        match packet.read(&mut self.input) {
                            // Another stream, or an empty packet (an AVI placeholder for a
                            // dropped frame: sent, it would end the decoding).
                            Ok(())
                                if packet.stream() != self.stream_index || packet.size() == 0 =>
                            {
                                self.note_data_end(&packet);
                                continue;
                            }
                            // The next segment's first packet: this segment's data ends here.
                            Ok(())
                                if self.segment.and_then(|s| s.end)
                                    == Some(packet.position() as i64) =>
                            {
                                self.eof_sent = true;
                                let _ = self.decoder.send_eof();
                                continue;
                            }
                            // A packet the demuxer flags as corrupt (a joined or damaged
                            // stream) is decoded all the same: its frames say whether they are
                            // damaged.
                            Ok(()) => {
                                self.note_data_end(&packet);
                                packet
                            }
                            Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => {
                                continue
                            }
                            Err(e) => {
                                self.ended_early = if e != ff::Error::Eof {
                                    Some(format!("cannot read the rest of the file: {e}"))
                                } else {
                                    self.cut_short()
                                };
                                // Drain the frames the decoder holds.
                                self.eof_sent = true;
                                let _ = self.decoder.send_eof();
                                continue;
                            }
                        }
                    }
                };
                match self.decoder.send_packet(&packet) {
                    Ok(()) => {}
                    Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => {
                        self.pending = Some(packet);
                    }
                    Err(e) if self.leave_nvdec(self.next_index, &e) => {}
                    Err(e) => self.skip(
                        SkipAt::Before(self.next_index),
                        Why::Said(format!("undecodable data: {e}")),
                    ),
                }
            }
        }

        fn take_notices(&mut self) -> Vec<String> {
            let mut notices = std::mem::take(&mut self.notices);
            notices.extend(self.hand_overs.drain(..).map(|h| h.notice(0)));
            notices
        }

        fn take_skipped(&mut self) -> Vec<Skipped> {
            self.left_out.drain(..).map(|l| l.skipped(0)).collect()
        }

        fn frame_count(&self) -> Option<u64> {
            self.announced
        }

        fn fps(&self) -> Option<f64> {
            self.fps
        }

        fn seek(&mut self, index: u64) -> Result<()> {
            self.seek_to(index)
        }

        fn set_page_locker(&mut self, locker: Arc<dyn PageLocker>) {
            self.frames = FramePool::new(KEEP_BUFFERS, Some(locker));
        }
    }
}
