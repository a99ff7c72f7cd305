//! Frame sources: camera, video file, images, and the built-in synthetic demo.
//!
//! A source yields grey frames in order. The capture thread (`pipeline`) pulls from it,
//! thresholds and sends binary frames on; a source never thresholds itself.
//!
//! CONTRACT (issue 7): the types and signatures here are shared by the pipeline and the GUI.
//! Change them only together with every user.

use crate::error::Result;
use crate::image::GrayImage;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// One decoded grey frame.
#[derive(Clone, Debug)]
pub struct Frame {
    /// 0-based index in the stream (for a file: the frame number; for a folder: the image index).
    pub index: u64,
    /// Presentation time in seconds from the start of the stream (live sources: since opening).
    pub time_s: f64,
    pub grey: Arc<GrayImage>,
    /// When the frame left the source (start of the end-to-end latency).
    pub captured_at: Instant,
    /// Time spent getting this frame: camera read, video decode, image decode (ms).
    pub decode_ms: f64,
    /// Where the frame came from, for the export's `file` column (image name; empty otherwise).
    pub name: String,
}

/// A stream of grey frames.
pub trait FrameSource: Send {
    /// A short human-readable description ("camera 0: HD Webcam 1280×720 @30", "clip.mp4", ...).
    fn describe(&self) -> String;
    /// Live sources (camera, synthetic in real-time mode) may drop frames; files never do.
    fn is_live(&self) -> bool;
    /// The next frame, `Ok(None)` at the end of the stream. An `Err` on a file names the frame
    /// index where decoding failed; frames before it have been delivered.
    fn next_frame(&mut self) -> Result<Option<Frame>>;
    /// Total frames when known (video files, image lists).
    fn frame_count(&self) -> Option<u64> {
        None
    }
    /// Nominal frame rate when known (cameras, video files, synthetic).
    fn fps(&self) -> Option<f64> {
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
    /// Built-in demo: moving markers on a noisy background (`Markers`) or the papers' random
    /// images (`Random`).
    Synthetic(SyntheticKind),
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyntheticKind {
    Markers,
    Random,
}
