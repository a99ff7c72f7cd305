//! The vocabulary of a benchmark run: modes, sizes, backends, latency frames, pipeline scenes,
//! the image seed rule in words and the averaging rule. Every other part of `bench` builds on these.

use crate::ccl::{Backend, Want};
use crate::error::{Error, Result};
use crate::source::fiducial_scene::FiducialOptions;
use crate::source::particle_scene::ParticleOptions;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// An error in the flag `--flag`.
pub(super) fn invalid(flag: &str, msg: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("--{flag}: {msg}"))
}

/// The rule above, in words, for the JSON output.
pub const SEED_RULE: &str =
    "image seed = (seed*1000003 + g*1009 + floor(d*1e6 + 0.5)) mod 2^32; image = random_image::generate(w, h, d, g, image seed)";

/// How the summary numbers are averaged, in words, for the JSON output and the table header.
pub const AVERAGING: &str = "per image: best of --repeat runs; Gpx/s = arithmetic mean over densities of \
     per-density throughput (pixels / best time); ms = arithmetic mean over densities of the best times; \
     steps = arithmetic mean over densities (missing step = 0 ms)";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Labels only (`Want::Labels`).
    Ccl,
    /// Statistics only (`Want::Stats`).
    Cca,
}

impl Mode {
    pub fn want(self) -> Want {
        match self {
            Mode::Ccl => Want::Labels,
            Mode::Cca => Want::Stats,
        }
    }

    /// The least traffic per pixel: CCL reads 1 byte and writes a 4-byte label; CCA reads 1 byte.
    pub fn bytes_per_px(self) -> f64 {
        match self {
            Mode::Ccl => 5.0,
            Mode::Cca => 1.0,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Ccl => "ccl",
            Mode::Cca => "cca",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    Cpu,
    Cuda,
    All,
}

impl BackendChoice {
    pub fn includes(self, b: Backend) -> bool {
        match self {
            BackendChoice::All => true,
            BackendChoice::Cpu => b == Backend::Cpu,
            BackendChoice::Cuda => b == Backend::Cuda,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BackendChoice::Cpu => "cpu",
            BackendChoice::Cuda => "cuda",
            BackendChoice::All => "all",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Size {
    pub width: u32,
    pub height: u32,
}

impl Size {
    pub fn pixels(self) -> u64 {
        self.width as u64 * self.height as u64
    }
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlotFormat {
    Svg,
    Png,
}

/// The frames a latency run cycles over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LatencyFrames {
    /// The papers' random images of every density and granularity: 10⁴–10⁵ components in a
    /// 1080p frame, a stress case.
    Random,
    /// The first DEMO_FRAMES frames of the synthetic demo scene (16 moving markers of radius 3 to
    /// 40 px at 1280×720, scaled with the frame, with noise), thresholded as the window does
    /// (the default threshold): a video frame of the tracking use case.
    Demo,
}

impl LatencyFrames {
    /// Distinct frames of the demo scene a latency run cycles over.
    pub const DEMO_FRAMES: u32 = 60;

    pub(super) fn parse(s: &str) -> Result<LatencyFrames> {
        match s.trim().to_ascii_lowercase().as_str() {
            "random" => Ok(LatencyFrames::Random),
            "demo" => Ok(LatencyFrames::Demo),
            other => Err(invalid(
                "latency-frames",
                format!("'{other}': expected random or demo"),
            )),
        }
    }

    /// Distinct frames per size.
    pub fn distinct(self, densities: usize, granularities: usize) -> u64 {
        match self {
            LatencyFrames::Random => (densities * granularities) as u64,
            LatencyFrames::Demo => Self::DEMO_FRAMES as u64,
        }
    }

    /// What the frames are, for the report's heading.
    pub fn describe(self) -> String {
        match self {
            LatencyFrames::Random => {
                "frames cycle over the random images, densities × granularities".into()
            }
            LatencyFrames::Demo => format!(
                "frames cycle over the first {} frames of the demo scene: {} moving markers, threshold {}",
                Self::DEMO_FRAMES,
                crate::source::synthetic::MARKERS,
                crate::threshold::spec::ThresholdSpec::default()
            ),
        }
    }
}

/// A scene of `bench --pipeline`: what the frames fed through the whole pipeline show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scene {
    /// The synthetic demo scene (`MarkerScene`): 16 moving markers of radius 3 to 40 px on a
    /// noisy background, the window's demo.
    Demo,
    /// The papers' random images as grey frames (`synthetic:random`): every density and
    /// granularity in turn, 10⁴–10⁵ components in a 1080p frame.
    Clutter,
    /// Square fiducials moving with known corners (`synthetic:markers`): `markers` is 16 of
    /// DICT_4X4_50, `markers:N` N of them (DICT_4X4_250 above 50); the pipeline finds them
    /// (`--markers`) and OpenCV's `ArucoDetector` is the peer.
    Markers(u32),
    /// Brownian particles of known truth (`particles`: 10,000, `particles:N`), drawn as small
    /// Gaussian spots; the tracks are scored against the truth (MOTA, ID switches) and
    /// trackpy (locate + link) is the peer.
    Particles(u32),
    /// A video file, decoded up front.
    Video(PathBuf),
}

impl Scene {
    /// The scenes run when `--scenes` is not given (a `--video` is added to them).
    pub const DEFAULT: &'static [Scene] = &[Scene::Demo, Scene::Clutter];

    /// Markers in the `markers` scene without a count.
    pub const MARKERS: u32 = 16;
    /// The most markers `markers:N` shows (DICT_4X4_250's size).
    pub const MOST_MARKERS: u32 = 250;
    /// Particles in the `particles` scene without a count, and the most `particles:N` shows.
    pub const PARTICLES: u32 = 10_000;
    pub const MOST_PARTICLES: u32 = 1_000_000;

    /// `demo`, `clutter`, `markers[:N]` or `video:PATH`; a bare `video` takes the path of
    /// `--video`.
    pub(super) fn parse(item: &str, video: Option<&Path>) -> Result<Scene> {
        let lower = item.to_ascii_lowercase();
        if let Some(count) = lower.strip_prefix("markers:") {
            return match count.trim().parse::<u32>() {
                Ok(n) if (1..=Self::MOST_MARKERS).contains(&n) => Ok(Scene::Markers(n)),
                _ => Err(invalid(
                    "scenes",
                    format!(
                        "'{item}': markers:N takes 1 to {} markers",
                        Self::MOST_MARKERS
                    ),
                )),
            };
        }
        if let Some(count) = lower.strip_prefix("particles:") {
            return match count.trim().replace('_', "").parse::<u32>() {
                Ok(n) if (1..=Self::MOST_PARTICLES).contains(&n) => Ok(Scene::Particles(n)),
                _ => Err(invalid(
                    "scenes",
                    format!(
                        "'{item}': particles:N takes 1 to {} particles",
                        Self::MOST_PARTICLES
                    ),
                )),
            };
        }
        match lower.as_str() {
            "demo" => return Ok(Scene::Demo),
            "particles" => return Ok(Scene::Particles(Self::PARTICLES)),
            "clutter" => return Ok(Scene::Clutter),
            "markers" => return Ok(Scene::Markers(Self::MARKERS)),
            "video" => {
                return video.map(|p| Scene::Video(p.to_path_buf())).ok_or_else(|| {
                    invalid(
                        "scenes",
                        "'video' needs a file: video:PATH, or --video PATH",
                    )
                })
            }
            _ => {}
        }
        match lower.strip_prefix("video:") {
            // The path as given (the lower-case copy only found the prefix).
            Some(_) if item.len() > "video:".len() => {
                Ok(Scene::Video(PathBuf::from(&item["video:".len()..])))
            }
            Some(_) => Err(invalid("scenes", "'video:' needs a file: video:PATH")),
            None => Err(invalid(
                "scenes",
                format!(
                    "unknown scene '{item}': expected demo, clutter, markers, markers:N, particles, particles:N or video:PATH"
                ),
            )),
        }
    }

    /// The name in tables and JSON: `demo`, `clutter` or `video:PATH`.
    pub fn name(&self) -> String {
        match self {
            Scene::Demo => "demo".into(),
            Scene::Clutter => "clutter".into(),
            Scene::Markers(Self::MARKERS) => "markers".into(),
            Scene::Markers(n) => format!("markers:{n}"),
            Scene::Particles(Self::PARTICLES) => "particles".into(),
            Scene::Particles(n) => format!("particles:{n}"),
            Scene::Video(p) => format!("video:{}", p.display()),
        }
    }

    /// The moving markers of a `markers` scene (None for the others).
    pub fn fiducials(&self) -> Option<FiducialOptions> {
        let &Scene::Markers(count) = self else {
            return None;
        };
        Some(FiducialOptions {
            dictionary: if count <= 50 {
                "DICT_4X4_50"
            } else {
                "DICT_4X4_250"
            },
            count,
            ..FiducialOptions::default()
        })
    }

    /// The Brownian particles of a `particles` scene (None for the others).
    pub fn particles(&self) -> Option<ParticleOptions> {
        let &Scene::Particles(count) = self else {
            return None;
        };
        Some(ParticleOptions {
            count,
            ..ParticleOptions::default()
        })
    }

    /// The frame sizes a synthetic scene is run at without `--sizes` (a video has its own).
    pub fn default_sizes(&self) -> Vec<Size> {
        let size = |width, height| Size { width, height };
        match self {
            Scene::Demo => vec![size(1280, 720), size(1920, 1080), size(3840, 2160)],
            Scene::Clutter => vec![size(1920, 1080)],
            Scene::Markers(_) => vec![size(1920, 1080), size(3840, 2160)],
            Scene::Particles(_) => vec![size(1920, 1080)],
            Scene::Video(_) => Vec::new(),
        }
    }
}

pub(crate) fn join(it: impl Iterator<Item = String>, sep: &str) -> String {
    it.collect::<Vec<_>>().join(sep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenes_parse() {
        assert_eq!(Scene::parse("Demo", None).unwrap(), Scene::Demo);
        assert_eq!(Scene::parse("clutter", None).unwrap(), Scene::Clutter);
        assert_eq!(
            Scene::parse("video:Clips/A.mp4", None).unwrap(),
            Scene::Video("Clips/A.mp4".into())
        );
        assert_eq!(
            Scene::parse("video", Some(Path::new("b.mkv"))).unwrap(),
            Scene::Video("b.mkv".into())
        );
        for (bad, want) in [
            ("video", "--video PATH"),
            ("video:", "video:PATH"),
            ("demos", "unknown scene 'demos'"),
        ] {
            let err = Scene::parse(bad, None).unwrap_err().to_string();
            assert!(err.starts_with("--scenes: ") && err.contains(want), "{err}");
        }
        assert_eq!(Scene::Video("x.mp4".into()).name(), "video:x.mp4");
        assert_eq!(Scene::parse("Markers", None).unwrap(), Scene::Markers(16));
        assert_eq!(
            Scene::parse("markers:100", None).unwrap().name(),
            "markers:100"
        );
        let m = Scene::Markers(100).fiducials().unwrap();
        assert_eq!((m.dictionary, m.count), ("DICT_4X4_250", 100));
        for bad in ["markers:0", "markers:251", "markers:x"] {
            let err = Scene::parse(bad, None).unwrap_err().to_string();
            assert!(err.contains("1 to 250 markers"), "{err}");
        }
        assert_eq!(Scene::Demo.default_sizes().len(), 3);
        assert_eq!(
            Scene::parse("particles", None).unwrap(),
            Scene::Particles(10_000)
        );
        let p = Scene::parse("Particles:50000", None).unwrap();
        assert_eq!(
            (p.name(), p.particles().unwrap().count),
            ("particles:50000".into(), 50_000)
        );
        assert_eq!(Scene::Particles(10_000).name(), "particles");
        for bad in ["particles:0", "particles:x", "particles:2000000"] {
            let err = Scene::parse(bad, None).unwrap_err().to_string();
            assert!(err.contains("1 to 1000000 particles"), "{err}");
        }
    }
}
