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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CameraControls {
    pub exposure: Option<Exposure>,
    pub gain: Option<u32>,
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
        self.exposure.is_none() && self.gain.is_none()
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
            gain: None,
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
}
