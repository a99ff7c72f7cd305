//! One video file, or a segment of it, read through one decoder (`VideoSource`): opening,
//! seeking, moving to a segment, and handing over from NVDEC to the CPU decoder. The decoding
//! loop itself is in `decode`.

use super::damage::{HandOver, LeftOut};
use super::decoders::{open_cpu_decoder, open_decoder, Scaler};
use super::keyframes;
use super::VideoDecoding;
use crate::error::{Error, Result};
use crate::frame::image::check_size;
use crate::frame::page_lock::PageLocker;
use crate::source::frame_pool::FramePool;
use crate::source::SkipAt;
use ffmpeg_next as ff;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Once};

/// Frame buffers a video source keeps for reuse.
pub(super) const KEEP_BUFFERS: usize = 8;

/// FFmpeg is initialised once per process, with its own log off stderr (`log`): every problem
/// comes back as an error value or a flagged frame and is reported with the file and frame.
pub fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let _ = ff::init();
        super::log::install();
    });
}

/// One video file, or a segment of it (`segments`), decoded by one decoder.
pub struct VideoSource {
    pub(super) path: PathBuf,
    pub(super) input: ff::format::context::Input,
    pub(super) stream_index: usize,
    pub(super) decoder: ff::decoder::Video,
    pub(super) codec_name: String,
    /// Seconds per timestamp tick of the stream.
    pub(super) time_base: f64,
    /// Timestamp of the stream's first frame (ticks).
    pub(super) start_ts: i64,
    pub(super) fps: Option<f64>,
    /// Frames the header announces (a frame table, or an estimate from the duration): for
    /// the progress bar only.
    pub(super) announced: Option<u64>,
    pub(super) looping: bool,
    /// Index of the next decoded frame.
    pub(super) next_index: u64,
    /// After a seek: take the next frame's index from its timestamp, and drop frames
    /// before the target.
    pub(super) rebase: bool,
    pub(super) skip_before: Option<u64>,
    pub(super) eof_sent: bool,
    /// Frames delivered since the last (re)start, to stop a looping empty file.
    pub(super) delivered_this_pass: u64,
    /// A packet the decoder could not take yet (it had frames to give first).
    pub(super) pending: Option<ff::Packet>,
    /// What was left out since the last `take_skipped`.
    pub(super) left_out: Vec<LeftOut>,
    /// Seconds per timestamp tick of every stream (packets of all streams show how far the
    /// file's data goes).
    pub(super) stream_time_bases: Vec<f64>,
    /// Where the header says the file's streams end (seconds), and where the packets read
    /// so far end.
    pub(super) header_end_s: Option<f64>,
    pub(super) data_end_s: f64,
    /// Why the file ended early (a read error, a cut-short file): recorded when the decoder
    /// has given its last frame.
    pub(super) ended_early: Option<String>,
    /// Damaged data was decoded here: the frames after it are flagged (or skipped) until the
    /// next keyframe.
    pub(super) tainted_by: Option<SkipAt>,
    /// Leave out the frames decoded from damaged data instead of flagging them.
    pub(super) skip_damaged: bool,
    /// Error lines the decoder logged since the last frame it gave (damage it concealed
    /// without flagging the frame).
    pub(super) logged_errors: u64,
    pub(super) decoded: ff::frame::Video,
    pub(super) scaler: Option<Scaler>,
    /// The buffers grey frames are copied into.
    pub(super) frames: FramePool,
    /// What the caller should hear once (NVDEC unavailable), and where NVDEC handed over
    /// to the CPU.
    pub(super) notices: Vec<String>,
    pub(super) hand_overs: Vec<HandOver>,
    /// The stream's codec parameters, to open the CPU decoder when NVDEC fails.
    pub(super) parameters: ff::codec::Parameters,
    /// Whether the decoder is NVDEC's.
    pub(super) on_nvdec: bool,
    /// Whether the decoder is the CPU's with frame threads (until damage is seen: `decode`).
    pub(super) frame_threads: bool,
    /// FFmpeg's error lines on any thread when the decoder was last looked at.
    pub(super) errors_seen: u64,
    /// The size of the last frame decoded.
    pub(super) last_size: Option<(u32, u32)>,
    /// The stretch of the file decoded (`segments`); None: all of it. Frame indices count
    /// from its first frame.
    pub(super) segment: Option<Segment>,
    /// Nothing read or decoded yet.
    pub(super) untouched: bool,
    /// NVDEC's frames stay on the GPU (`FrameSource::keep_frames_on_gpu`); shared by the
    /// decoders of one file's segments.
    pub(super) on_gpu: Arc<AtomicBool>,
    /// NVDEC was opened in the engine's CUDA context (`video::open_for_engine`).
    pub(super) in_engine_context: bool,
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

/// What the headers say of the video stream's time.
struct StreamTiming {
    /// Seconds per timestamp tick of the stream.
    time_base: f64,
    /// Timestamp of the stream's first frame (ticks).
    start_ts: i64,
    fps: Option<f64>,
    /// Frames the header announces (a frame table, or an estimate from the duration).
    announced: Option<u64>,
    /// Where the header says the file's streams end (seconds).
    header_end_s: Option<f64>,
}

impl StreamTiming {
    fn of(input: &ff::format::context::Input, stream: &ff::format::stream::Stream) -> Self {
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
        StreamTiming {
            time_base,
            start_ts,
            fps,
            announced,
            header_end_s,
        }
    }
}

impl VideoSource {
    /// Opens `path` for decoding as `decoding` says; `looping`: start again at the end;
    /// `in_engine_context`: NVDEC in the engine's CUDA context (`video::open_for_engine`).
    pub fn open(
        path: &Path,
        looping: bool,
        decoding: VideoDecoding,
        in_engine_context: bool,
    ) -> Result<Self> {
        init();
        let fail = |why: String| Error::image(path, why);
        std::fs::metadata(path).map_err(|e| fail(format!("cannot read: {e}")))?;
        let input =
            ff::format::input(path).map_err(|e| fail(format!("not a readable video file: {e}")))?;
        let stream = input
            .streams()
            .best(ff::media::Type::Video)
            .ok_or_else(|| fail("the file has no video stream".into()))?;
        let stream_index = stream.index();
        let timing = StreamTiming::of(&input, &stream);
        let parameters = stream.parameters();
        let mut notices = Vec::new();
        let opened = open_decoder(path, &parameters, decoding, in_engine_context, &mut notices)?;
        check_size(opened.decoder.width(), opened.decoder.height())
            .map_err(|e| fail(format!("video frames: {e}")))?;
        Ok(Self {
            path: path.to_path_buf(),
            stream_time_bases: time_bases(&input),
            input,
            stream_index,
            decoder: opened.decoder,
            codec_name: opened.codec_name,
            time_base: timing.time_base,
            start_ts: timing.start_ts,
            fps: timing.fps,
            announced: timing.announced,
            looping,
            next_index: 0,
            rebase: false,
            skip_before: None,
            eof_sent: false,
            delivered_this_pass: 0,
            pending: None,
            left_out: Vec::new(),
            tainted_by: None,
            skip_damaged: false,
            logged_errors: 0,
            header_end_s: timing.header_end_s,
            data_end_s: f64::NEG_INFINITY,
            ended_early: None,
            decoded: ff::frame::Video::empty(),
            scaler: None,
            frames: FramePool::new(KEEP_BUFFERS, None),
            notices,
            hand_overs: Vec::new(),
            on_gpu: Arc::default(),
            in_engine_context,
            parameters,
            frame_threads: !opened.on_nvdec,
            errors_seen: super::log::errors_anywhere(),
            on_nvdec: opened.on_nvdec,
            last_size: None,
            segment: None,
            untouched: true,
        })
    }

    /// After an NVDEC error or at a frame size change: goes on with the CPU decoder from
    /// frame `resume_at`, the first not yet delivered, so that no frame is lost to NVDEC.
    /// False when that cannot be done (an error is then treated as the CPU decoder's would
    /// be).
    pub(super) fn leave_nvdec(&mut self, resume_at: u64, why: &dyn std::fmt::Display) -> bool {
        if !self.on_nvdec {
            return false;
        }
        let Some(nvdec_name) = self.decode_again_on_cpu(resume_at, true) else {
            return false;
        };
        self.hand_overs.push(HandOver {
            path: self.path.clone(),
            decoder: nvdec_name,
            frame: resume_at,
            why: why.to_string(),
        });
        true
    }

    /// At the first sign of damage under frame threads: goes on decoding on one thread from
    /// frame `resume_at`, the first not yet delivered. Frame threads conceal damage in ways
    /// and log it at times that vary from run to run; one thread gives the same frames and
    /// flags on every run and machine, and the frames before the damage are the same bits
    /// either way. False with no frame threads, or when that cannot be done.
    pub(super) fn leave_frame_threads(&mut self, resume_at: u64) -> bool {
        self.frame_threads && self.decode_again_on_cpu(resume_at, false).is_some()
    }

    /// Whether damage may have been seen since the last look under frame threads: FFmpeg
    /// logged an error on any thread (of this decoder's, or another's: then decoding on one
    /// thread costs time, not results).
    pub(super) fn errors_logged_anywhere(&mut self) -> bool {
        let now = super::log::errors_anywhere();
        std::mem::replace(&mut self.errors_seen, now) != now
    }

    /// Goes on with a new CPU decoder (`frame_threads` or one thread) from frame `resume_at`:
    /// the file opened again and decoded from its start (or the segment's), the frames before
    /// `resume_at` dropped by count: exact where a seek by time is not (streams joined end
    /// to end repeat their timestamps). The name of the decoder it replaced; None when that
    /// cannot be done.
    fn decode_again_on_cpu(&mut self, resume_at: u64, frame_threads: bool) -> Option<String> {
        let mut input = ff::format::input(&self.path).ok()?;
        let first = match self.segment.and_then(|s| s.start) {
            Some(start) => Some(move_to(&self.path, &mut input, self.stream_index, start).ok()?),
            None => None,
        };
        let (decoder, codec_name) = open_cpu_decoder(&self.parameters, frame_threads).ok()?;
        self.input = input;
        self.decoder = decoder;
        let replaced = std::mem::replace(&mut self.codec_name, codec_name);
        self.on_nvdec = false;
        self.frame_threads = frame_threads;
        self.errors_seen = super::log::errors_anywhere();
        self.ended_early = None;
        self.decode_up_to(resume_at, false, first);
        Some(replaced)
    }

    /// Decodes `segment` next, its frames indexed from 0: the input moved to its first
    /// packet, the decoder emptied. An error when that packet cannot be found again.
    pub(super) fn enter_segment(&mut self, segment: Segment) -> Result<()> {
        let fail = |why: String| Error::image(&self.path, why);
        let first = match segment.start {
            Some(start) => {
                Some(move_to(&self.path, &mut self.input, self.stream_index, start).map_err(fail)?)
            }
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

    /// The decoder has no more frames: loop or end.
    pub(super) fn at_end(&mut self) -> Result<bool> {
        if self.looping && self.delivered_this_pass > 0 {
            self.seek_to(0)?;
            self.delivered_this_pass = 0;
            return Ok(true);
        }
        Ok(false)
    }

    pub(super) fn index_from_timestamp(&self, ts: Option<i64>) -> Option<u64> {
        let (ts, fps) = (ts?, self.fps?);
        let seconds = (ts - self.start_ts) as f64 * self.time_base;
        Some((seconds * fps).round().max(0.0) as u64)
    }

    pub(super) fn seek_to(&mut self, index: u64) -> Result<()> {
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
        self.input
            .seek(target, ..target + 1)
            .map_err(|e| Error::image(&self.path, format!("cannot seek to frame {index}: {e}")))?;
        self.decoder.flush();
        self.decode_up_to(index, index > 0, None);
        Ok(())
    }

    /// After the input was moved back (or opened again) and the decoder emptied: decode on
    /// from `first` (a packet already read, or None) and the input, dropping the frames
    /// before `index`, their indices counted from 0, or taken from the first frame's
    /// timestamp with `rebase` (after a seek by time).
    pub(super) fn decode_up_to(&mut self, index: u64, rebase: bool, first: Option<ff::Packet>) {
        self.eof_sent = false;
        self.pending = first;
        self.tainted_by = None;
        self.logged_errors = 0;
        self.rebase = rebase;
        self.next_index = 0;
        self.skip_before = (index > 0).then_some(index);
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
