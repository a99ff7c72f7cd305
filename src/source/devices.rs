//! Camera enumeration for `markerscope devices` (through nokhwa, feature `camera`).
//!
//! nokhwa and the platform layers below it can fail or panic on machines without video devices
//! (containers, CI), so every call into it runs under `catch_unwind` and becomes an error string.

/// One camera as the platform reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CameraEntry {
    pub index: String,
    pub name: String,
    pub description: String,
    /// Pixel formats (FourCC) the camera offers, or why they could not be read.
    pub formats: std::result::Result<Vec<String>, String>,
}

/// Lists the cameras. `Err` says why enumeration itself failed (or that this build has none).
pub fn cameras() -> std::result::Result<Vec<CameraEntry>, String> {
    imp::cameras()
}

/// Lines for `markerscope devices`, e.g. `camera 0: HD Webcam (Video4Linux Device @ /dev/video0); formats: MJPEG, YUYV`.
pub fn camera_report() -> Vec<String> {
    match cameras() {
        Err(why) => vec![format!("cameras: {why}")],
        Ok(list) if list.is_empty() => vec!["cameras: no cameras found".to_string()],
        Ok(list) => list
            .iter()
            .map(|c| {
                let formats = match &c.formats {
                    Ok(f) if f.is_empty() => "formats: none reported".to_string(),
                    Ok(f) => format!("formats: {}", f.join(", ")),
                    Err(why) => format!("formats: unavailable ({why})"),
                };
                let desc = if c.description.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", c.description)
                };
                format!("camera {}: {}{desc}; {formats}", c.index, c.name)
            })
            .collect(),
    }
}

/// Runs `f`, turning a panic into an error and keeping its message off stderr.
#[cfg_attr(not(feature = "camera"), allow(dead_code))]
pub(crate) fn guarded<T>(
    what: &str,
    f: impl FnOnce() -> std::result::Result<T, String>,
) -> std::result::Result<T, String> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    match result {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(format!("{what} failed: {msg}"))
        }
    }
}

#[cfg(feature = "camera")]
mod imp {
    use super::{guarded, CameraEntry};
    use nokhwa::pixel_format::RgbFormat;
    use nokhwa::utils::{ApiBackend, CameraIndex, RequestedFormat, RequestedFormatType};

    pub fn cameras() -> std::result::Result<Vec<CameraEntry>, String> {
        let infos = guarded("camera enumeration", || {
            nokhwa::query(ApiBackend::Auto).map_err(|e| format!("camera enumeration failed: {e}"))
        })?;
        Ok(infos
            .into_iter()
            .map(|info| CameraEntry {
                index: info.index().to_string(),
                name: info.human_name(),
                description: info.description().to_string(),
                formats: formats(info.index()),
            })
            .collect())
    }

    /// Opens the camera just long enough to ask for its FourCC list (no stream is started).
    fn formats(index: &CameraIndex) -> std::result::Result<Vec<String>, String> {
        guarded("reading formats", || {
            let request = RequestedFormat::new::<RgbFormat>(RequestedFormatType::None);
            let mut camera =
                nokhwa::Camera::new(index.clone(), request).map_err(|e| e.to_string())?;
            let mut fourcc: Vec<String> = camera
                .compatible_fourcc()
                .map_err(|e| e.to_string())?
                .iter()
                .map(|f| f.to_string())
                .collect();
            fourcc.sort();
            fourcc.dedup();
            Ok(fourcc)
        })
    }
}

#[cfg(not(feature = "camera"))]
mod imp {
    use super::CameraEntry;

    pub fn cameras() -> std::result::Result<Vec<CameraEntry>, String> {
        Err("this build has no camera support (built without the `camera` feature)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_never_panics_and_always_says_something() {
        let lines = camera_report();
        assert!(!lines.is_empty());
        #[cfg(not(feature = "camera"))]
        assert!(lines[0].contains("no camera support"), "{lines:?}");
    }

    #[test]
    fn guarded_turns_panics_into_errors() {
        let r: std::result::Result<(), String> = guarded("probe", || panic!("boom"));
        assert_eq!(r.unwrap_err(), "probe failed: boom");
        assert_eq!(guarded("probe", || Ok(3)), Ok(3));
    }
}
