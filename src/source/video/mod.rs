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
use crate::error::Result;
use std::path::Path;

#[cfg(feature = "video")]
mod damage;
#[cfg(feature = "video")]
mod decode;
#[cfg(feature = "video")]
mod decoders;
#[cfg(feature = "video")]
mod file;
pub mod keyframes;
#[cfg(feature = "video")]
mod log;
#[cfg(feature = "video")]
mod segments;

/// Opens a video file as a frame source. `looping`: start again at the end (live viewing).
pub fn open(path: &Path, looping: bool) -> Result<Box<dyn FrameSource>> {
    imp::open(
        path,
        looping,
        VideoDecoding::Cpu,
        crate::tuning::NVDEC_DECODERS,
        false,
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
    imp::open(path, looping, decoding, nvdec_decoders, false)
}

/// `open_with_decoders`, its NVDEC decoders in the engine's CUDA context (the device's primary
/// context), where their frames can stay on the GPU (`FrameSource::keep_frames_on_gpu`), when
/// `in_engine_context`; elsewhere each makes a context of its own, where its copies to the
/// host wait for nothing of the engine's.
pub fn open_for_engine(
    path: &Path,
    looping: bool,
    decoding: VideoDecoding,
    nvdec_decoders: usize,
    in_engine_context: bool,
) -> Result<Box<dyn FrameSource>> {
    imp::open(path, looping, decoding, nvdec_decoders, in_engine_context)
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

/// Several files read together decode on NVDEC under `VideoDecoding::Auto` where the host has
/// fewer than this many hardware threads a file: their CPU decoders share the cores, while
/// each file keeps an NVDEC engine busy (an H200 host, 16 threads, 1080p H.264 clips through
/// `analyze`, frames/s in all: two files CPU 1,036–1,186, NVDEC 959–974; three 1,068–1,203
/// against 1,354–1,364; four 1,156–1,298 against 1,833–1,855; eight 1,231 against 2,608–2,708).
pub const NVDEC_BELOW_THREADS_A_FILE: usize = 6;

/// Whether NVDEC is worth trying on this host for `files` files read together
/// (`NVDEC_BELOW_THREADS` for one, `NVDEC_BELOW_THREADS_A_FILE` a file for several): where
/// `--decoder auto` asks for `VideoDecoding::Auto` rather than the CPU.
pub fn nvdec_by_default_for(files: usize) -> bool {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    nvdec_below(threads, files)
}

/// `nvdec_by_default_for` on a host of `threads` hardware threads.
fn nvdec_below(threads: usize, files: usize) -> bool {
    match files {
        0 | 1 => threads < NVDEC_BELOW_THREADS,
        _ => threads < NVDEC_BELOW_THREADS.max(NVDEC_BELOW_THREADS_A_FILE * files),
    }
}

/// Where video frames are decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VideoDecoding {
    /// On the CPU (FFmpeg's decoders, frame threads).
    #[default]
    Cpu,
    /// On the GPU's NVDEC engine where it decodes the codec (H.264, HEVC, AV1, VP9, ...) and
    /// an NVIDIA driver is there; elsewhere on the CPU (with a notice when NVDEC was there to
    /// try and failed). Whether the host is better off trying is the caller's choice
    /// (`nvdec_by_default_for`).
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

/// Initialises FFmpeg once per process (its own log off stderr), for every user of it.
#[cfg(feature = "video")]
pub use file::init;

/// Whether FFmpeg's own log lines (warnings and errors) go to stderr (`--verbose`).
#[cfg(feature = "video")]
pub use log::set_verbose;

/// Whether FFmpeg's own log lines go to stderr: without FFmpeg there are none.
#[cfg(not(feature = "video"))]
pub fn set_verbose(_verbose: bool) {}

#[cfg(not(feature = "video"))]
mod imp {
    use super::*;

    pub fn open(
        path: &Path,
        _looping: bool,
        _decoding: VideoDecoding,
        _decoders: usize,
        _in_engine_context: bool,
    ) -> Result<Box<dyn FrameSource>> {
        Err(crate::error::Error::image(
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
        open(path, false, decoding, 1, false)
    }

    pub fn segment_count(path: &Path, _min_segment_frames: u64) -> Result<usize> {
        open(path, false, VideoDecoding::Cpu, 1, false).map(|_| 1)
    }
}

#[cfg(feature = "video")]
mod imp {
    //! With FFmpeg: a `file::VideoSource`, alone or split into segments decoded at once.
    use super::file::VideoSource;
    use super::*;

    pub fn open(
        path: &Path,
        looping: bool,
        decoding: VideoDecoding,
        decoders: usize,
        in_engine_context: bool,
    ) -> Result<Box<dyn FrameSource>> {
        let source = VideoSource::open(path, looping, decoding, in_engine_context)?;
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
        let source = VideoSource::open(path, false, decoding, false)?;
        Ok(segments::SegmentedVideo::open(
            source,
            decoding,
            decoders,
            min_segment_frames,
        ))
    }

    pub fn segment_count(path: &Path, min_segment_frames: u64) -> Result<usize> {
        let source = VideoSource::open(path, false, VideoDecoding::Cpu, false)?;
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
}

#[cfg(test)]
mod tests {
    use super::nvdec_below;

    /// One file: NVDEC below 12 threads. Several: below 6 threads a file (and never less
    /// often than one file): on 16 threads from three files on.
    #[test]
    fn auto_takes_nvdec_where_the_files_share_few_threads() {
        let on_16: Vec<bool> = (1..=8).map(|files| nvdec_below(16, files)).collect();
        assert_eq!(on_16, [false, false, true, true, true, true, true, true]);
        assert!(nvdec_below(8, 1) && nvdec_below(8, 2));
        assert!(!nvdec_below(64, 8) && nvdec_below(64, 11));
    }
}
