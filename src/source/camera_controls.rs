//! Camera controls asked for on the command line or in the settings (`--exposure`, `--gain`):
//! parsed and turned into control requests here, without a device; `camera.rs` sends them to
//! the camera through nokhwa once it streams.
//!
//! On Linux (V4L2, what nokhwa drives there) exposure is two controls: the exposure mode
//! (`exposure_auto`: manual, or aperture priority, the automatic mode UVC cameras offer) and
//! the exposure time (`exposure_time_absolute`, in units of 100 µs). Gain is `gain`, in the
//! camera's own units. A camera that lacks a control or refuses a value keeps its own setting,
//! and the capture says so as a notice; nothing fails.

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// V4L2's control IDs and exposure modes (linux/v4l2-controls.h).
pub const V4L2_CID_EXPOSURE_AUTO: u32 = 0x009a_0901;
pub const V4L2_CID_EXPOSURE_ABSOLUTE: u32 = 0x009a_0902;
pub const V4L2_CID_GAIN: u32 = 0x0098_0913;
pub const V4L2_EXPOSURE_AUTO: i64 = 0;
pub const V4L2_EXPOSURE_MANUAL: i64 = 1;
pub const V4L2_EXPOSURE_APERTURE_PRIORITY: i64 = 3;
/// The longest exposure accepted, in 100 µs units (10 s).
pub const MAX_EXPOSURE: u32 = 100_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposure {
    /// The camera chooses (aperture priority).
    Auto,
    /// Fixed, in units of 100 µs (V4L2's `exposure_time_absolute`).
    Manual(u32),
}

impl FromStr for Exposure {
    type Err = Error;

    fn from_str(s: &str) -> Result<Exposure> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("auto") {
            return Ok(Exposure::Auto);
        }
        s.parse::<u32>()
            .ok()
            .filter(|v| (1..=MAX_EXPOSURE).contains(v))
            .map(Exposure::Manual)
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "exposure '{s}': expected auto, or a time in 100 µs units from 1 to \
                     {MAX_EXPOSURE} (e.g. 50 = 5 ms)"
                ))
            })
    }
}

impl fmt::Display for Exposure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exposure::Auto => f.write_str("auto"),
            Exposure::Manual(v) => write!(f, "{v}"),
        }
    }
}

/// Gain, in the camera's own units: a whole number >= 0.
pub fn parse_gain(s: &str) -> Result<u32> {
    s.trim().parse::<u32>().map_err(|_| {
        Error::Invalid(format!(
            "gain '{}': expected a whole number >= 0 (the camera's own units; `markerscope \
             devices` and the window list the range)",
            s.trim()
        ))
    })
}

/// Controls to set when a camera is opened; `None` leaves the camera's own setting.
/// Exposure and gain also apply to a camera that is streaming; the mode (resolution, frame
/// rate, pixel format) only when it is opened, and the source spec's own mode
/// (`camera:0:1280x720@120`) comes first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CameraControls {
    pub exposure: Option<Exposure>,
    pub gain: Option<u32>,
    /// Width × height to stream.
    pub resolution: Option<(u32, u32)>,
    pub fps: Option<u32>,
    pub format: Option<PixelFormat>,
}

/// The camera pixel formats markerscope reads (nokhwa's `FrameFormat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PixelFormat {
    Gray,
    Yuyv,
    Nv12,
    Rgb,
    Bgr,
    Mjpeg,
}

impl PixelFormat {
    pub const ALL: [PixelFormat; 6] = [
        PixelFormat::Gray,
        PixelFormat::Yuyv,
        PixelFormat::Nv12,
        PixelFormat::Rgb,
        PixelFormat::Bgr,
        PixelFormat::Mjpeg,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PixelFormat::Gray => "gray",
            PixelFormat::Yuyv => "yuyv",
            PixelFormat::Nv12 => "nv12",
            PixelFormat::Rgb => "rgb",
            PixelFormat::Bgr => "bgr",
            PixelFormat::Mjpeg => "mjpeg",
        }
    }

    #[cfg(feature = "camera")]
    pub fn from_nokhwa(f: nokhwa::utils::FrameFormat) -> PixelFormat {
        use nokhwa::utils::FrameFormat;
        match f {
            FrameFormat::GRAY => PixelFormat::Gray,
            FrameFormat::YUYV => PixelFormat::Yuyv,
            FrameFormat::NV12 => PixelFormat::Nv12,
            FrameFormat::RAWRGB => PixelFormat::Rgb,
            FrameFormat::RAWBGR => PixelFormat::Bgr,
            FrameFormat::MJPEG => PixelFormat::Mjpeg,
        }
    }

    #[cfg(feature = "camera")]
    pub fn nokhwa(self) -> nokhwa::utils::FrameFormat {
        use nokhwa::utils::FrameFormat;
        match self {
            PixelFormat::Gray => FrameFormat::GRAY,
            PixelFormat::Yuyv => FrameFormat::YUYV,
            PixelFormat::Nv12 => FrameFormat::NV12,
            PixelFormat::Rgb => FrameFormat::RAWRGB,
            PixelFormat::Bgr => FrameFormat::RAWBGR,
            PixelFormat::Mjpeg => FrameFormat::MJPEG,
        }
    }
}

impl FromStr for PixelFormat {
    type Err = Error;

    fn from_str(s: &str) -> Result<PixelFormat> {
        let t = s.trim();
        PixelFormat::ALL
            .into_iter()
            .find(|f| {
                f.name().eq_ignore_ascii_case(t)
                    || (t.eq_ignore_ascii_case("grey") && *f == PixelFormat::Gray)
            })
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "pixel format '{t}': expected one of gray, yuyv, nv12, rgb, bgr, mjpeg"
                ))
            })
    }
}

impl fmt::Display for PixelFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `WxH`, e.g. `1280x720`.
pub fn parse_resolution(s: &str) -> Result<(u32, u32)> {
    let t = s.trim();
    t.split_once(['x', 'X'])
        .and_then(|(w, h)| Some((w.trim().parse().ok()?, h.trim().parse().ok()?)))
        .filter(|&(w, h): &(u32, u32)| w > 0 && h > 0)
        .ok_or_else(|| {
            Error::Invalid(format!(
                "resolution '{t}': expected WIDTHxHEIGHT, e.g. 1280x720"
            ))
        })
}

/// One mode a camera streams in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CameraMode {
    pub width: u32,
    pub height: u32,
    pub fps: u32,
    pub format: PixelFormat,
}

impl fmt::Display for CameraMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}x{} @{} {}",
            self.width, self.height, self.fps, self.format
        )
    }
}

/// The values an integer control takes, as the camera reports them (V4L2: inclusive bounds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlRange {
    pub min: i64,
    pub max: i64,
    /// 0 or 1: any value in range.
    pub step: i64,
    pub default: i64,
    /// The value when the camera was opened.
    pub value: i64,
}

impl ControlRange {
    /// `v` moved into the range and onto its steps (counted from `min`).
    pub fn fit(&self, v: i64) -> i64 {
        let v = v.clamp(self.min, self.max.max(self.min));
        if self.step > 1 {
            let snapped = self.min + (v - self.min + self.step / 2) / self.step * self.step;
            if snapped > self.max {
                snapped - self.step
            } else {
                snapped
            }
        } else {
            v
        }
    }

    pub fn contains(&self, v: i64) -> bool {
        self.fit(v) == v
    }
}

/// What an open camera supports of the controls markerscope sets, converted from what the
/// camera reports (nokhwa's `camera_controls` and `compatible_camera_formats`), so that the
/// window and the checks work without a camera.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CameraCapabilities {
    /// The exposure modes the camera offers.
    pub exposure_auto: bool,
    pub exposure_manual: bool,
    /// The exposure time (100 µs units), when settable.
    pub exposure_time: Option<ControlRange>,
    pub gain: Option<ControlRange>,
    /// Every mode offered, sorted.
    pub modes: Vec<CameraMode>,
    /// The mode it streams in.
    pub current: Option<CameraMode>,
}

impl CameraCapabilities {
    /// Resolutions offered, largest first.
    pub fn resolutions(&self) -> Vec<(u32, u32)> {
        let mut out: Vec<(u32, u32)> = self.modes.iter().map(|m| (m.width, m.height)).collect();
        out.sort_by_key(|&(w, h)| std::cmp::Reverse((w as u64 * h as u64, w)));
        out.dedup();
        out
    }

    /// Frame rates offered at `size` (any format), highest first.
    pub fn frame_rates(&self, size: (u32, u32)) -> Vec<u32> {
        let mut out = self.offered_at(size, |m| m.fps);
        out.reverse();
        out
    }

    /// Pixel formats offered at `size`.
    pub fn formats(&self, size: (u32, u32)) -> Vec<PixelFormat> {
        self.offered_at(size, |m| m.format)
    }

    /// `what` of the modes of `size`, sorted, each once.
    fn offered_at<T: Ord>(&self, size: (u32, u32), what: impl Fn(&CameraMode) -> T) -> Vec<T> {
        let mut out: Vec<T> = self
            .modes
            .iter()
            .filter(|m| (m.width, m.height) == size)
            .map(what)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// `asked` made fit this camera: values moved into the camera's ranges, controls it lacks
    /// dropped; one message per change, saying what the camera does instead.
    pub fn fit(&self, asked: &CameraControls) -> (CameraControls, Vec<String>) {
        let mut out = *asked;
        let mut problems = Vec::new();
        match asked.exposure {
            Some(Exposure::Auto) if !self.exposure_auto => {
                out.exposure = None;
                problems.push(
                    "exposure auto: this camera has no automatic exposure; it keeps its own \
                     setting"
                        .to_string(),
                );
            }
            Some(Exposure::Manual(t)) => match self.exposure_time {
                Some(range) if self.exposure_manual => {
                    let fitted = fit_value("exposure", t, 1, &range, &mut problems);
                    out.exposure = Some(Exposure::Manual(fitted));
                }
                _ => {
                    out.exposure = None;
                    problems.push(format!(
                        "exposure {t}: this camera has no manual exposure time; it keeps its \
                         own setting"
                    ));
                }
            },
            _ => {}
        }
        if let Some(g) = asked.gain {
            match self.gain {
                Some(range) => out.gain = Some(fit_value("gain", g, 0, &range, &mut problems)),
                None => {
                    out.gain = None;
                    problems.push(format!(
                        "gain {g}: this camera has no gain control; it keeps its own setting"
                    ));
                }
            }
        }
        (out, problems)
    }
}

/// `asked` moved into `range` (and to at least `least`), with a message when it moved.
fn fit_value(
    name: &str,
    asked: u32,
    least: i64,
    range: &ControlRange,
    problems: &mut Vec<String>,
) -> u32 {
    let fitted = range.fit(asked as i64).clamp(least, u32::MAX as i64) as u32;
    if fitted != asked {
        problems.push(format!(
            "{name} {asked}: outside what this camera takes ({}..={}, step {}); {fitted} is used",
            range.min,
            range.max,
            range.step.max(1)
        ));
    }
    fitted
}

/// Which control a request sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlId {
    ExposureMode,
    ExposureTime,
    Gain,
}

impl ControlId {
    pub fn name(self) -> &'static str {
        match self {
            ControlId::ExposureMode => "exposure mode",
            ControlId::ExposureTime => "exposure time",
            ControlId::Gain => "gain",
        }
    }

    /// nokhwa's name for the control.
    #[cfg(feature = "camera")]
    pub fn nokhwa(self) -> nokhwa::utils::KnownCameraControl {
        use nokhwa::utils::KnownCameraControl;
        match self {
            ControlId::ExposureMode => KnownCameraControl::Other(V4L2_CID_EXPOSURE_AUTO as u128),
            ControlId::ExposureTime => {
                KnownCameraControl::Other(V4L2_CID_EXPOSURE_ABSOLUTE as u128)
            }
            ControlId::Gain => KnownCameraControl::Gain,
        }
    }
}

/// One control to set, with what it means for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlRequest {
    pub id: ControlId,
    pub value: i64,
    /// What was asked, as the user said it ("exposure 120", "exposure auto", "gain 4").
    pub asked: String,
}

impl CameraControls {
    pub fn is_empty(&self) -> bool {
        *self == CameraControls::default()
    }

    /// Whether the mode (resolution, frame rate, pixel format) differs: the camera must be
    /// opened again for it.
    pub fn same_mode(&self, other: &CameraControls) -> bool {
        (self.resolution, self.fps, self.format) == (other.resolution, other.fps, other.format)
    }

    /// The controls to set, in order (the exposure mode before the exposure time).
    pub fn requests(&self) -> Vec<ControlRequest> {
        let mut out = Vec::new();
        match self.exposure {
            Some(Exposure::Auto) => out.push(ControlRequest {
                id: ControlId::ExposureMode,
                value: V4L2_EXPOSURE_APERTURE_PRIORITY,
                asked: "exposure auto".into(),
            }),
            Some(Exposure::Manual(t)) => {
                let asked = format!("exposure {t}");
                out.push(ControlRequest {
                    id: ControlId::ExposureMode,
                    value: V4L2_EXPOSURE_MANUAL,
                    asked: asked.clone(),
                });
                out.push(ControlRequest {
                    id: ControlId::ExposureTime,
                    value: t as i64,
                    asked,
                });
            }
            None => {}
        }
        if let Some(g) = self.gain {
            out.push(ControlRequest {
                id: ControlId::Gain,
                value: g as i64,
                asked: format!("gain {g}"),
            });
        }
        out
    }
}

/// What the camera reports, converted: `controls` from `Camera::camera_controls`, `formats`
/// from `Camera::compatible_camera_formats`, `current` from `Camera::camera_format`.
///
/// nokhwa's V4L2 backend names every control by its V4L2 ID (`KnownCameraControl::Other`);
/// other backends use `KnownCameraControl::Gain`: both are read. A control that is read-only,
/// or disabled while active, cannot be set; one that is only inactive (the exposure time while
/// the exposure is automatic) can, once its mode allows it.
#[cfg(feature = "camera")]
pub fn capabilities_from_nokhwa(
    controls: &[nokhwa::utils::CameraControl],
    formats: &[nokhwa::utils::CameraFormat],
    current: Option<nokhwa::utils::CameraFormat>,
) -> CameraCapabilities {
    use nokhwa::utils::{ControlValueDescription, KnownCameraControl, KnownCameraControlFlag};
    let range = |c: &nokhwa::utils::CameraControl| -> Option<ControlRange> {
        let flags = c.flag();
        if flags.contains(&KnownCameraControlFlag::ReadOnly)
            || (flags.contains(&KnownCameraControlFlag::Disabled) && c.active())
        {
            return None;
        }
        match *c.description() {
            ControlValueDescription::IntegerRange {
                min,
                max,
                value,
                step,
                default,
            } if min <= max => Some(ControlRange {
                min,
                max,
                step,
                default,
                value,
            }),
            ControlValueDescription::Integer {
                value,
                default,
                step,
            } => Some(ControlRange {
                min: i64::from(i32::MIN),
                max: i64::from(i32::MAX),
                step,
                default,
                value,
            }),
            _ => None,
        }
    };
    let mut caps = CameraCapabilities::default();
    for c in controls {
        let id = match c.control() {
            KnownCameraControl::Gain => V4L2_CID_GAIN,
            KnownCameraControl::Other(id) => u32::try_from(id).unwrap_or(0),
            _ => continue,
        };
        match id {
            V4L2_CID_GAIN => caps.gain = range(c),
            V4L2_CID_EXPOSURE_ABSOLUTE => caps.exposure_time = range(c),
            V4L2_CID_EXPOSURE_AUTO => {
                if let Some(r) = range(c) {
                    let offers = |v: i64| (r.min..=r.max).contains(&v);
                    caps.exposure_manual = offers(V4L2_EXPOSURE_MANUAL);
                    caps.exposure_auto =
                        offers(V4L2_EXPOSURE_APERTURE_PRIORITY) || offers(V4L2_EXPOSURE_AUTO);
                }
            }
            _ => {}
        }
    }
    let mode = |f: &nokhwa::utils::CameraFormat| CameraMode {
        width: f.width(),
        height: f.height(),
        fps: f.frame_rate(),
        format: PixelFormat::from_nokhwa(f.format()),
    };
    caps.modes = formats.iter().map(mode).collect();
    caps.modes.sort_unstable();
    caps.modes.dedup();
    caps.current = current.as_ref().map(mode);
    caps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposure_and_gain_parse_and_bad_values_say_what_is_expected() {
        assert_eq!("auto".parse::<Exposure>().unwrap(), Exposure::Auto);
        assert_eq!(" AUTO ".parse::<Exposure>().unwrap(), Exposure::Auto);
        assert_eq!("120".parse::<Exposure>().unwrap(), Exposure::Manual(120));
        for bad in ["0", "-3", "1.5", "fast", "100001"] {
            let err = bad.parse::<Exposure>().unwrap_err().to_string();
            assert!(err.contains(bad) && err.contains("100 µs"), "{err}");
        }
        assert_eq!(parse_gain("7").unwrap(), 7);
        let err = parse_gain("-1").unwrap_err().to_string();
        assert!(
            err.contains("'-1'") && err.contains("whole number"),
            "{err}"
        );
    }

    #[test]
    fn requests_set_the_exposure_mode_before_the_time() {
        let none = CameraControls::default();
        assert!(none.is_empty() && none.requests().is_empty());
        let manual = CameraControls {
            exposure: Some(Exposure::Manual(120)),
            gain: Some(4),
            ..CameraControls::default()
        };
        let ids: Vec<(ControlId, i64)> =
            manual.requests().iter().map(|r| (r.id, r.value)).collect();
        assert_eq!(
            ids,
            [
                (ControlId::ExposureMode, V4L2_EXPOSURE_MANUAL),
                (ControlId::ExposureTime, 120),
                (ControlId::Gain, 4)
            ]
        );
        let auto = CameraControls {
            exposure: Some(Exposure::Auto),
            ..CameraControls::default()
        };
        assert_eq!(
            auto.requests(),
            [ControlRequest {
                id: ControlId::ExposureMode,
                value: V4L2_EXPOSURE_APERTURE_PRIORITY,
                asked: "exposure auto".into()
            }]
        );
    }

    /// The requests name the V4L2 controls nokhwa's Linux backend sets by ID.
    #[cfg(feature = "camera")]
    #[test]
    fn requests_map_to_nokhwa_controls() {
        use nokhwa::utils::KnownCameraControl;
        assert_eq!(
            ControlId::ExposureMode.nokhwa(),
            KnownCameraControl::Other(0x009a_0901)
        );
        assert_eq!(
            ControlId::ExposureTime.nokhwa(),
            KnownCameraControl::Other(0x009a_0902)
        );
        assert_eq!(ControlId::Gain.nokhwa(), KnownCameraControl::Gain);
    }

    #[test]
    fn ranges_clamp_and_snap_to_their_steps() {
        let r = ControlRange {
            min: 3,
            max: 2047,
            step: 4,
            default: 250,
            value: 250,
        };
        assert_eq!(r.fit(0), 3);
        assert_eq!(r.fit(5000), 2047);
        assert_eq!(r.fit(8), 7);
        assert_eq!(r.fit(9), 11);
        assert!(r.contains(251) && !r.contains(252));
        let any = ControlRange { step: 0, ..r };
        assert_eq!(any.fit(252), 252);
    }

    fn webcam() -> CameraCapabilities {
        CameraCapabilities {
            exposure_auto: true,
            exposure_manual: true,
            exposure_time: Some(ControlRange {
                min: 3,
                max: 2047,
                step: 1,
                default: 250,
                value: 250,
            }),
            gain: None,
            modes: Vec::new(),
            current: None,
        }
    }

    #[test]
    fn controls_are_fitted_to_the_camera_with_a_message_per_change() {
        let asked = CameraControls {
            exposure: Some(Exposure::Manual(5000)),
            gain: Some(4),
            ..CameraControls::default()
        };
        let (fitted, problems) = webcam().fit(&asked);
        assert_eq!(fitted.exposure, Some(Exposure::Manual(2047)));
        assert_eq!(fitted.gain, None);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("exposure 5000") && problems[0].contains("3..=2047"));
        assert!(problems[1].contains("gain 4: this camera has no gain control"));
        let fine = CameraControls {
            exposure: Some(Exposure::Auto),
            ..CameraControls::default()
        };
        assert_eq!(webcam().fit(&fine), (fine, Vec::new()));
        let fixed = CameraCapabilities {
            exposure_auto: false,
            ..webcam()
        };
        let (fitted, problems) = fixed.fit(&fine);
        assert_eq!(fitted.exposure, None);
        assert!(
            problems[0].contains("no automatic exposure"),
            "{problems:?}"
        );
    }

    #[test]
    fn pixel_formats_and_resolutions_parse() {
        for f in PixelFormat::ALL {
            assert_eq!(f.name().parse::<PixelFormat>().unwrap(), f);
        }
        assert_eq!("GREY".parse::<PixelFormat>().unwrap(), PixelFormat::Gray);
        let err = "h264".parse::<PixelFormat>().unwrap_err().to_string();
        assert!(err.contains("'h264'") && err.contains("yuyv"), "{err}");
        assert_eq!(parse_resolution(" 1280x720 ").unwrap(), (1280, 720));
        for bad in ["1280", "0x720", "ax b", "1280x"] {
            let err = parse_resolution(bad).unwrap_err().to_string();
            assert!(err.contains("WIDTHxHEIGHT"), "{bad}: {err}");
        }
    }

    /// What nokhwa's V4L2 backend reports for a UVC webcam: every control by V4L2 ID, the
    /// exposure time inactive while the exposure is automatic, gain read-only.
    #[cfg(feature = "camera")]
    #[test]
    fn capabilities_are_read_from_what_nokhwa_reports() {
        use nokhwa::utils::{
            CameraControl, CameraFormat, ControlValueDescription, FrameFormat, KnownCameraControl,
            KnownCameraControlFlag,
        };
        let int = |min, max, step, value| ControlValueDescription::IntegerRange {
            min,
            max,
            value,
            step,
            default: value,
        };
        let control = |id: u32, d, flags: Vec<KnownCameraControlFlag>, active| {
            CameraControl::new(
                KnownCameraControl::Other(id as u128),
                format!("{id:x}"),
                d,
                flags,
                active,
            )
        };
        let controls = [
            control(V4L2_CID_EXPOSURE_AUTO, int(0, 3, 1, 3), vec![], true),
            control(
                V4L2_CID_EXPOSURE_ABSOLUTE,
                int(3, 2047, 1, 250),
                vec![KnownCameraControlFlag::Disabled],
                false,
            ),
            control(
                V4L2_CID_GAIN,
                int(0, 255, 1, 0),
                vec![KnownCameraControlFlag::ReadOnly],
                true,
            ),
            control(0x0098_0900, int(-64, 64, 1, 0), vec![], true),
        ];
        let f = |w, h, fmt, r| CameraFormat::new_from(w, h, fmt, r);
        let formats = [
            f(1280, 720, FrameFormat::MJPEG, 30),
            f(1280, 720, FrameFormat::YUYV, 10),
            f(640, 480, FrameFormat::YUYV, 30),
            f(640, 480, FrameFormat::YUYV, 15),
        ];
        let caps = capabilities_from_nokhwa(&controls, &formats, Some(formats[2]));
        assert!(caps.exposure_auto && caps.exposure_manual);
        assert_eq!(caps.exposure_time.map(|r| (r.min, r.max)), Some((3, 2047)));
        assert_eq!(caps.gain, None, "read-only: cannot be set");
        assert_eq!(caps.resolutions(), [(1280, 720), (640, 480)]);
        assert_eq!(caps.frame_rates((640, 480)), [30, 15]);
        assert_eq!(
            caps.formats((1280, 720)),
            [PixelFormat::Yuyv, PixelFormat::Mjpeg]
        );
        assert_eq!(
            caps.current.map(|m| m.to_string()).as_deref(),
            Some("640x480 @30 yuyv")
        );
        // Other backends name gain as a known control; a writable one is a range.
        let gain = CameraControl::new(
            KnownCameraControl::Gain,
            "Gain".into(),
            int(1, 16, 1, 1),
            vec![],
            true,
        );
        let caps = capabilities_from_nokhwa(&[gain], &[], None);
        assert_eq!(caps.gain.map(|r| r.max), Some(16));
        assert!(!caps.exposure_auto && !caps.exposure_manual);
    }
}
