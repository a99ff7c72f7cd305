//! Frame sources: camera, video file, images, and the built-in synthetic demo.
//!
//! A source yields grey frames in order. The capture thread (`pipeline`) pulls from it,
//! thresholds and sends binary frames on; a source never thresholds itself.
//!
//! The types and signatures here are shared by the pipeline and the GUI: change them only
//! together with every user.

pub mod camera;
pub mod camera_controls;
pub mod devices;
pub mod fiducial_scene;
pub mod frame_pool;
pub mod images;
pub mod live_schedule;
mod noise;
pub mod particle_scene;
pub mod synthetic;
pub mod video;
pub mod view_scene;

use crate::error::{Error, Result};
pub use crate::frame::grey::FrameGrey;
use crate::frame::page_lock::PageLocker;
use camera_controls::{CameraCapabilities, CameraControls};
use fiducial_scene::FiducialOptions;
use live_schedule::{LiveTiming, StartSignal};
use particle_scene::ParticleOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Nominal frame rate of the synthetic scenes: paths move by frame index / this rate, and
/// real-time mode paces at it.
pub const DEFAULT_FPS: f64 = 60.0;
/// Seed of the demo scene.
pub const DEFAULT_SEED: u64 = 1;

/// One decoded grey frame.
#[derive(Clone, Debug)]
pub struct Frame {
    /// 0-based index in the stream (for a file: the frame number; for a folder: the image index).
    pub index: u64,
    /// Presentation time in seconds from the start of the stream (live sources: since opening).
    pub time_s: f64,
    /// On the host, or on the GPU where its decoder left it (`frame::grey`).
    pub grey: FrameGrey,
    /// When the frame left the source (start of the end-to-end latency).
    pub captured_at: Instant,
    /// Time spent getting this frame: camera read, video decode, image decode (ms).
    pub decode_ms: f64,
    /// Where the frame came from, for the export's `file` column (image name; empty otherwise).
    pub name: String,
}

/// Where a skipped part of the input was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipAt {
    /// This frame (or image) was damaged and left out; the next one has the next index.
    Frame(u64),
    /// Data before this frame could not be read or decoded and gave no frame (an undecodable
    /// packet, an unreadable rest of a file); frame indices are not affected.
    Before(u64),
    /// This frame was delivered and analysed, but it is decoded from damaged data (it decodes
    /// only with errors, or it is predicted from damage with no keyframe since): its results
    /// may carry the damage, and the rows are flagged `damaged`.
    Damaged(u64),
}

/// A part of a file that could not be used: the source left it out and went on.
#[derive(Clone, Debug, PartialEq)]
pub struct Skipped {
    pub at: SkipAt,
    /// The image's file name (empty for video frames).
    pub name: String,
    pub reason: String,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.at {
            SkipAt::Frame(i) => write!(f, "frame {i}")?,
            SkipAt::Before(i) => write!(f, "data before frame {i}")?,
            SkipAt::Damaged(i) => write!(f, "frame {i} (analysed, flagged damaged)")?,
        }
        if !self.name.is_empty() {
            write!(f, " ({})", self.name)?;
        }
        write!(f, ": {}", self.reason)
    }
}

/// The frames a source flagged as damaged (`SkipAt::Damaged`) whose results have not come
/// yet: a flag comes before its frame's result, in stream order.
#[derive(Clone, Debug, Default)]
pub struct DamagedFrames(std::collections::BTreeSet<u64>);

impl DamagedFrames {
    /// Notes `skipped` when it flags a frame.
    pub fn note(&mut self, skipped: &Skipped) {
        if let SkipAt::Damaged(i) = skipped.at {
            self.0.insert(i);
        }
    }

    /// Whether frame `index` was flagged; flags of it and of the frames before it are let go.
    pub fn take(&mut self, index: u64) -> bool {
        let flagged = self.0.contains(&index);
        self.0 = self.0.split_off(&(index + 1));
        flagged
    }
}

/// Where a frame's time comes from (the rows' `time_source` column with several sources).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeStamp {
    /// The camera driver's buffer timestamp, taken when the frame was captured.
    Driver,
    /// When the frame reached markerscope (a camera whose driver gives no timestamp).
    Arrival,
    /// The file's presentation time of the frame (an image folder's frames are all at 0).
    File,
    /// The rendered time of a synthetic frame: its index over the frame rate.
    Synthetic,
}

impl TimeStamp {
    /// The name in the rows.
    pub fn name(self) -> &'static str {
        match self {
            TimeStamp::Driver => "driver",
            TimeStamp::Arrival => "arrival",
            TimeStamp::File => "file",
            TimeStamp::Synthetic => "synthetic",
        }
    }
}

/// A stream of grey frames.
pub trait FrameSource: Send {
    /// A short human-readable description ("camera 0: HD Webcam 1280×720 @30", "clip.mp4", ...).
    fn describe(&self) -> String;
    /// Live sources (camera, synthetic in real-time mode) may drop frames; files never do.
    fn is_live(&self) -> bool;
    /// The next frame, `Ok(None)` at the end of the stream. A damaged image, or a video frame
    /// that cannot be decoded at all, is left out and recorded for `take_skipped`, and the next
    /// good one is returned; a video frame decoded from damaged data is returned and flagged
    /// (`SkipAt::Damaged`), or left out after `set_skip_damaged(true)`. An `Err` is a failure
    /// that ends the stream; frames before it have been delivered.
    fn next_frame(&mut self) -> Result<Option<Frame>>;
    /// Leave out the frames decoded from damaged data instead of flagging them (video files;
    /// other sources have none).
    fn set_skip_damaged(&mut self, skip: bool) {
        let _ = skip;
    }
    /// What was left out since the last call, in stream order: everything skipped while
    /// getting the frame that `next_frame` just returned (or before the end).
    fn take_skipped(&mut self) -> Vec<Skipped> {
        Vec::new()
    }
    /// Messages for the user since the last call (a camera control the camera refused).
    fn take_notices(&mut self) -> Vec<String> {
        Vec::new()
    }
    /// What a camera supports of the controls markerscope sets; None for other sources.
    fn camera_capabilities(&self) -> Option<CameraCapabilities> {
        None
    }
    /// Sets exposure and gain on a streaming camera (the mode needs the camera opened again);
    /// what it refuses comes back through `take_notices`. Other sources ignore it.
    fn set_camera_controls(&mut self, controls: &CameraControls) {
        let _ = controls;
    }
    /// Writes the frames from now on into buffers page-locked by `locker`, for the GPU's DMA
    /// (`frame_pool`; the pipeline gives it when a GPU is there). Sources that make each
    /// frame in memory of its own (image files) ignore it.
    fn set_page_locker(&mut self, locker: Arc<dyn PageLocker>) {
        let _ = locker;
    }
    /// Whether frames a hardware decoder made on the GPU stay there (`frame::grey`), for a
    /// GPU labeler that thresholds them where they are; their pixels come to the host only
    /// when read. The pipeline says so when its frames go to such a labeler; sources that
    /// make their frames on the host ignore it.
    fn keep_frames_on_gpu(&mut self, keep: bool) {
        let _ = keep;
    }
    /// Total frames when known (video files, image lists).
    fn frame_count(&self) -> Option<u64> {
        None
    }
    /// Nominal frame rate when known (cameras, video files, synthetic).
    fn fps(&self) -> Option<f64> {
        None
    }
    /// What the frames' `time_s` measures: a file's presentation time by default, the arrival
    /// time for live sources.
    fn time_stamp(&self) -> TimeStamp {
        if self.is_live() {
            TimeStamp::Arrival
        } else {
            TimeStamp::File
        }
    }
    /// The moment a live source's `time_s` counts from (when it was opened), so that the
    /// frames of several live sources can be put on one clock; None for files and rendered
    /// frames, whose times are their own.
    fn clock_origin(&self) -> Option<Instant> {
        None
    }
    /// Moves so that the next frame is `index`. Sources that cannot seek say so.
    fn seek(&mut self, index: u64) -> Result<()> {
        let _ = index;
        Err(crate::error::Error::Invalid(format!(
            "{} cannot seek",
            self.describe()
        )))
    }
}

/// What the user asked for on the command line or in the GUI:
/// `synthetic`, `synthetic:random`, `camera:N`, a video file, an image, a folder, or a glob.
#[derive(Clone, Debug, PartialEq)]
pub enum SourceSpec {
    /// Built-in demo: moving markers on a noisy background (`Markers`), the papers' random
    /// images (`Random`) and the other scenes, rendered, or delivered live.
    Synthetic(SyntheticSpec),
    Camera {
        index: u32,
        /// Requested resolution and frame rate; None = the camera's default.
        width: Option<u32>,
        height: Option<u32>,
        fps: Option<u32>,
    },
    Video {
        path: PathBuf,
        /// Start again at the end (live viewing); file analysis never loops.
        looping: bool,
    },
    /// One image, a folder (sorted by name) or a glob pattern.
    Images(String),
}

/// A synthetic source: its scene, and whether it is delivered live (`SPEC?live…`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SyntheticSpec {
    pub kind: SyntheticKind,
    /// Paced in real time and stamped at arrival, as a camera (`live_schedule`); None: its
    /// frames as fast as they are drawn, at frame / 60 s.
    pub live: Option<LiveTiming>,
}

impl From<SyntheticKind> for SyntheticSpec {
    fn from(kind: SyntheticKind) -> Self {
        Self { kind, live: None }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyntheticKind {
    Markers,
    /// The markers with a bright static reflection, and no markers in the first
    /// `synthetic::REFLECTION_EMPTY_FRAMES` frames (to learn a static mask from).
    Reflection,
    Random,
    /// Square fiducials of a dictionary moving under perspective, blur, noise and uneven
    /// light (`synthetic:markers`, `fiducial_scene`).
    Fiducials(FiducialOptions),
    /// This many Brownian particles of known truth (`synthetic:particles[:N]`,
    /// `particle_scene`).
    Particles(u32),
    /// Camera `camera` of `cameras` side by side over one world scene, neighbours overlapping
    /// (`synthetic:view=K/N`, `view_scene`).
    View {
        camera: u32,
        cameras: u32,
    },
}

/// How `SourceSpec::open_with` opens a source; `SourceSpec::open` uses the defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenOptions {
    /// Synthetic sources: pace frames at their nominal rate and count as live (the GUI demo).
    /// Off for analysis, which takes frames as fast as they can be made.
    pub realtime: bool,
    /// Size of synthetic frames.
    pub synthetic_width: u32,
    pub synthetic_height: u32,
    /// Controls set on a camera once it streams (exposure, gain).
    pub camera: CameraControls,
    /// Where video files are decoded.
    pub video_decoding: video::VideoDecoding,
    /// NVDEC decoders at once on a video file read once through (`Tuning::nvdec_decoders`).
    pub nvdec_decoders: usize,
    /// NVDEC's decoders in the engine's CUDA context, where their frames can stay on the GPU
    /// (`video::open_for_engine`): where the pipeline thresholds on the GPU.
    pub nvdec_in_engine_context: bool,
    /// Live synthetic sources wait for it before their first frame (the sources of one run
    /// start together); None: each starts at its first frame.
    pub start: Option<StartSignal>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self {
            realtime: true,
            synthetic_width: synthetic::DEFAULT_WIDTH,
            synthetic_height: synthetic::DEFAULT_HEIGHT,
            camera: CameraControls::default(),
            video_decoding: video::VideoDecoding::Cpu,
            nvdec_decoders: crate::tuning::NVDEC_DECODERS,
            nvdec_in_engine_context: false,
            start: None,
        }
    }
}

/// File extensions read as video (anything else that is not an image or a folder is tried as
/// video too; these only decide which error a missing file gets).
pub const VIDEO_EXTENSIONS: &[&str] = &[
    "mp4", "m4v", "mkv", "webm", "avi", "mov", "mpg", "mpeg", "ts", "mts", "flv", "wmv", "y4m",
    "nut", "ogv",
];

impl SourceSpec {
    /// Reads `synthetic`, `synthetic:markers[:OPTIONS]` (`FiducialOptions::parse`),
    /// `synthetic:random`, `synthetic:reflection`, `synthetic:particles[:N]`,
    /// `synthetic:view=K/N`, each optionally live (`?live[,delay=S][,fps=N][,stall=FROM-TO]`,
    /// `LiveTiming::parse`), `camera:N`, `camera:N:WxH`, `camera:N:WxH@FPS`, a video file, an
    /// image, a folder or a glob.
    pub fn parse(spec: &str) -> Result<SourceSpec> {
        let trimmed = spec.trim();
        let lower = trimmed.to_ascii_lowercase();
        if let Some(rest) = lower.strip_prefix("synthetic") {
            let (rest, live) = match rest.split_once('?') {
                Some((rest, options)) => (rest, Some(LiveTiming::parse(options, trimmed)?)),
                None => (rest, None),
            };
            let kind = parse_synthetic(rest, trimmed)?;
            return Ok(SourceSpec::Synthetic(SyntheticSpec { kind, live }));
        }
        if let Some(rest) = lower.strip_prefix("camera:") {
            return parse_camera(rest).ok_or_else(|| {
                Error::Invalid(format!(
                    "bad camera source '{trimmed}': use camera:N, camera:N:WxH or camera:N:WxH@FPS (N from `markerscope devices`)"
                ))
            });
        }
        let path = Path::new(trimmed);
        if path.is_dir()
            || images::has_image_extension(path)
            || (images::is_glob(trimmed) && !path.exists())
        {
            return Ok(SourceSpec::Images(trimmed.to_string()));
        }
        let is_video_name = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| VIDEO_EXTENSIONS.iter().any(|v| v.eq_ignore_ascii_case(e)));
        if is_video_name || path.is_file() {
            return Ok(SourceSpec::Video {
                path: path.to_path_buf(),
                looping: false,
            });
        }
        // Neither a known video name nor an existing file: let the image reader name the problem.
        Ok(SourceSpec::Images(trimmed.to_string()))
    }

    /// Opens the source with the defaults (synthetic sources in real time, for the GUI).
    pub fn open(&self) -> Result<Box<dyn FrameSource>> {
        self.open_with(&OpenOptions::default())
    }

    pub fn open_with(&self, options: &OpenOptions) -> Result<Box<dyn FrameSource>> {
        match self {
            SourceSpec::Synthetic(SyntheticSpec { kind, live }) => {
                let source = synthetic::SyntheticSource::new(
                    *kind,
                    options.synthetic_width,
                    options.synthetic_height,
                    options.realtime,
                )?;
                Ok(Box::new(match live {
                    Some(timing) => source.live(*timing, options.start.clone()),
                    None => source,
                }))
            }
            SourceSpec::Camera {
                index,
                width,
                height,
                fps,
            } => camera::open(*index, *width, *height, *fps, &options.camera),
            SourceSpec::Video { path, looping } => video::open_for_engine(
                path,
                *looping,
                options.video_decoding,
                options.nvdec_decoders,
                options.nvdec_in_engine_context,
            ),
            SourceSpec::Images(spec) => Ok(Box::new(images::ImageSource::open(spec)?)),
        }
    }

    /// Sources that never end (synthetic, camera) need a frame limit for analysis.
    pub fn is_endless(&self) -> bool {
        matches!(self, SourceSpec::Synthetic(_) | SourceSpec::Camera { .. })
            || matches!(self, SourceSpec::Video { looping: true, .. })
    }
}

impl std::fmt::Display for SyntheticKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyntheticKind::Markers => f.write_str("synthetic"),
            SyntheticKind::Random => f.write_str("synthetic:random"),
            SyntheticKind::Reflection => f.write_str("synthetic:reflection"),
            SyntheticKind::Fiducials(o) => write!(f, "synthetic:markers:{o}"),
            SyntheticKind::Particles(n) => write!(f, "synthetic:particles:{n}"),
            SyntheticKind::View { camera, cameras } => {
                write!(f, "synthetic:view={camera}/{cameras}")
            }
        }
    }
}

impl std::fmt::Display for SourceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceSpec::Synthetic(SyntheticSpec { kind, live }) => {
                write!(f, "{kind}")?;
                match live {
                    Some(timing) => write!(f, "?{timing}"),
                    None => Ok(()),
                }
            }
            SourceSpec::Camera {
                index,
                width,
                height,
                fps,
            } => {
                write!(f, "camera:{index}")?;
                if let (Some(w), Some(h)) = (width, height) {
                    write!(f, ":{w}x{h}")?;
                    if let Some(fps) = fps {
                        write!(f, "@{fps}")?;
                    }
                }
                Ok(())
            }
            SourceSpec::Video { path, .. } => write!(f, "{}", path.display()),
            SourceSpec::Images(spec) => f.write_str(spec),
        }
    }
}

/// The scene of a synthetic spec: `rest` is what follows `synthetic` (lower case, without
/// the live options), `trimmed` the whole spec, for errors.
fn parse_synthetic(rest: &str, trimmed: &str) -> Result<SyntheticKind> {
    if let Some(options) = rest.strip_prefix(":markers") {
        let options = match options.strip_prefix(':') {
            Some(list) => FiducialOptions::parse(list)?,
            None if options.is_empty() => FiducialOptions::default(),
            None => return Err(unknown_synthetic(trimmed)),
        };
        return Ok(SyntheticKind::Fiducials(options));
    }
    if let Some(view) = rest.strip_prefix(":view=") {
        let numbers = view
            .split_once('/')
            .and_then(|(k, n)| Some((k.trim().parse().ok()?, n.trim().parse().ok()?)));
        return match numbers {
            Some((camera, cameras)) if camera < cameras && cameras >= 2 => {
                Ok(SyntheticKind::View { camera, cameras })
            }
            _ => Err(Error::Invalid(format!(
                "bad synthetic source '{trimmed}': synthetic:view=K/N is camera K of N \
                     views (0 ≤ K < N, N ≥ 2)"
            ))),
        };
    }
    if let Some(count) = rest.strip_prefix(":particles") {
        let count = match count.strip_prefix(':') {
            Some(n) => n
                .trim()
                .replace('_', "")
                .parse::<u32>()
                .ok()
                .filter(|&n| n > 0),
            None if count.is_empty() => Some(ParticleOptions::default().count),
            None => None,
        };
        return match count {
                Some(n) => Ok(SyntheticKind::Particles(n)),
                None => Err(Error::Invalid(format!(
                    "bad synthetic source '{trimmed}': synthetic:particles:N takes a count of 1 or more"
                ))),
            };
    }
    match rest {
        "" => Ok(SyntheticKind::Markers),
        ":random" => Ok(SyntheticKind::Random),
        ":reflection" => Ok(SyntheticKind::Reflection),
        _ => Err(unknown_synthetic(trimmed)),
    }
}

fn unknown_synthetic(spec: &str) -> Error {
    Error::Invalid(format!(
        "unknown synthetic source '{spec}': use synthetic, synthetic:markers[:OPTIONS], \
         synthetic:reflection, synthetic:random, synthetic:particles[:N] or synthetic:view=K/N, \
         each optionally live (?live[,delay=SECONDS][,fps=N][,stall=FROM-TO])"
    ))
}

/// `N`, `N:WxH` or `N:WxH@FPS`.
fn parse_camera(rest: &str) -> Option<SourceSpec> {
    let (index, mode) = match rest.split_once(':') {
        Some((i, m)) => (i, Some(m)),
        None => (rest, None),
    };
    let index: u32 = index.trim().parse().ok()?;
    let (mut width, mut height, mut fps) = (None, None, None);
    if let Some(mode) = mode {
        let (size, rate) = match mode.split_once('@') {
            Some((s, r)) => (s, Some(r)),
            None => (mode, None),
        };
        let (w, h) = size.split_once('x')?;
        width = Some(w.trim().parse().ok().filter(|&w: &u32| w > 0)?);
        height = Some(h.trim().parse().ok().filter(|&h: &u32| h > 0)?);
        if let Some(r) = rate {
            fps = Some(r.trim().parse().ok().filter(|&r: &u32| r > 0)?);
        }
    }
    Some(SourceSpec::Camera {
        index,
        width,
        height,
        fps,
    })
}

/// Milliseconds since `t`.
pub(crate) fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_names_every_kind() {
        assert_eq!(
            SourceSpec::parse("synthetic").unwrap(),
            SourceSpec::Synthetic(SyntheticKind::Markers.into())
        );
        assert_eq!(
            SourceSpec::parse("Synthetic:Random").unwrap(),
            SourceSpec::Synthetic(SyntheticKind::Random.into())
        );
        assert!(SourceSpec::parse("synthetic:nope").is_err());
        assert_eq!(
            SourceSpec::parse("camera:2").unwrap(),
            SourceSpec::Camera {
                index: 2,
                width: None,
                height: None,
                fps: None
            }
        );
        assert_eq!(
            SourceSpec::parse("camera:0:1280x720@30").unwrap(),
            SourceSpec::Camera {
                index: 0,
                width: Some(1280),
                height: Some(720),
                fps: Some(30)
            }
        );
        for bad in [
            "camera:",
            "camera:x",
            "camera:0:1280",
            "camera:0:0x10",
            "camera:0:10x10@",
        ] {
            let err = SourceSpec::parse(bad).unwrap_err().to_string();
            assert!(err.contains(bad) && err.contains("camera:N"), "{err}");
        }
        assert_eq!(
            SourceSpec::parse("clip.MP4").unwrap(),
            SourceSpec::Video {
                path: "clip.MP4".into(),
                looping: false
            }
        );
        assert_eq!(
            SourceSpec::parse("a.png").unwrap(),
            SourceSpec::Images("a.png".into())
        );
        assert_eq!(
            SourceSpec::parse("frames/*.png").unwrap(),
            SourceSpec::Images("frames/*.png".into())
        );
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        assert_eq!(SourceSpec::parse(d).unwrap(), SourceSpec::Images(d.into()));
        // An existing file with an unknown extension is tried as video.
        let odd = dir.path().join("recording.bin");
        std::fs::write(&odd, b"x").unwrap();
        assert!(matches!(
            SourceSpec::parse(odd.to_str().unwrap()).unwrap(),
            SourceSpec::Video { .. }
        ));
        for s in ["synthetic", "synthetic:random", "camera:1:640x480@15"] {
            assert_eq!(SourceSpec::parse(s).unwrap().to_string(), s);
        }
    }

    /// `SPEC?live…`: any synthetic scene delivered live, its options read and written back.
    #[test]
    fn synthetic_sources_parse_live() {
        assert_eq!(
            SourceSpec::parse("synthetic?live").unwrap(),
            SourceSpec::Synthetic(SyntheticSpec {
                kind: SyntheticKind::Markers,
                live: Some(LiveTiming::default()),
            })
        );
        let spec = SourceSpec::parse("Synthetic:Random?live,delay=0.004").unwrap();
        assert_eq!(
            spec,
            SourceSpec::Synthetic(SyntheticSpec {
                kind: SyntheticKind::Random,
                live: Some(LiveTiming {
                    delay_s: 0.004,
                    ..LiveTiming::default()
                }),
            })
        );
        assert!(spec.is_endless());
        for s in [
            "synthetic:random?live,delay=0.004",
            "synthetic:view=1/2?live,fps=30,stall=5-9",
            "synthetic:particles:30?live",
        ] {
            assert_eq!(SourceSpec::parse(s).unwrap().to_string(), s);
        }
        for bad in ["synthetic?live,delay=-1", "synthetic:nope?live"] {
            let err = SourceSpec::parse(bad).unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
        }
        // Opened, it is live: arrival times from its opening, and no seeking.
        let options = OpenOptions {
            realtime: false,
            synthetic_width: 64,
            synthetic_height: 48,
            ..OpenOptions::default()
        };
        let mut source = spec.open_with(&options).unwrap();
        assert!(source.is_live());
        assert_eq!(source.time_stamp(), TimeStamp::Arrival);
        assert!(source.clock_origin().is_some());
        let first = source.next_frame().unwrap().unwrap();
        let second = source.next_frame().unwrap().unwrap();
        assert_eq!((first.index, second.index), (0, 1));
        // Paced: the second frame is not due before a frame period from the opening (it may
        // come late on a loaded machine, and the first later still).
        assert!(
            second.time_s >= 0.99 / DEFAULT_FPS && second.time_s > first.time_s,
            "{} {}",
            first.time_s,
            second.time_s
        );
        assert!(source.seek(0).unwrap_err().to_string().contains("live"));
        // Not live, the same scene is rendered at frame / 60 s.
        let mut rendered = SourceSpec::parse("synthetic:random")
            .unwrap()
            .open_with(&options)
            .unwrap();
        assert!(!rendered.is_live());
        assert_eq!(rendered.time_stamp(), TimeStamp::Synthetic);
        assert_eq!(rendered.next_frame().unwrap().unwrap().time_s, 0.0);
    }

    /// `synthetic:particles[:N]`: the particle scene, frame i the same whether reached in order
    /// or by a seek (back or forward).
    #[test]
    fn synthetic_particles_parse_and_seek() {
        assert_eq!(
            SourceSpec::parse("synthetic:particles").unwrap(),
            SourceSpec::Synthetic(SyntheticKind::Particles(10_000).into())
        );
        let spec = SourceSpec::parse("synthetic:Particles:300").unwrap();
        assert_eq!(spec.to_string(), "synthetic:particles:300");
        for bad in [
            "synthetic:particles:0",
            "synthetic:particles:x",
            "synthetic:particlesx",
        ] {
            let err = SourceSpec::parse(bad).unwrap_err().to_string();
            assert!(err.contains("synthetic:particles:N"), "{err}");
        }
        let options = OpenOptions {
            realtime: false,
            synthetic_width: 120,
            synthetic_height: 90,
            ..OpenOptions::default()
        };
        let mut source = spec.open_with(&options).unwrap();
        let frames: Vec<Vec<u8>> = (0..4)
            .map(|_| source.next_frame().unwrap().unwrap().grey.data.clone())
            .collect();
        assert_ne!(frames[0], frames[1]);
        source.seek(1).unwrap();
        assert_eq!(source.next_frame().unwrap().unwrap().grey.data, frames[1]);
        source.seek(3).unwrap();
        assert_eq!(source.next_frame().unwrap().unwrap().grey.data, frames[3]);
    }
}
