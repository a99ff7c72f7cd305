//! Cameras through nokhwa (feature `camera`; V4L2 on Linux).
//!
//! The pixel format is the one asked for (`CameraControls::format`), else the one for grey
//! output without colour conversion: GRAY, then YUYV and NV12 (the Y plane is taken as it is),
//! then raw RGB/BGR (BT.601 luma), and MJPEG (decoded) only when the camera offers nothing
//! else at the chosen resolution. The resolution and frame rate are the source spec's, else
//! the controls', else the camera's current mode. Once streaming, the camera's controls and
//! modes are read (`CameraCapabilities`) for the window and to fit the values set to them.
//!
//! nokhwa and the layers below it can panic on odd devices; every call runs under
//! `devices::guarded`, so a camera that misbehaves or disappears becomes an error.

use super::camera_controls::CameraControls;
use super::FrameSource;
use crate::error::Result;

/// Opens camera `index`; `None` for the controls' (else the camera's current) resolution /
/// frame rate. `controls` are set once it streams; those it refuses are reported by
/// `take_notices`.
pub use imp::open;

#[cfg(not(feature = "camera"))]
mod imp {
    use super::*;
    use crate::error::Error;

    pub fn open(
        index: u32,
        _width: Option<u32>,
        _height: Option<u32>,
        _fps: Option<u32>,
        _controls: &CameraControls,
    ) -> Result<Box<dyn FrameSource>> {
        Err(Error::Invalid(format!(
            "camera {index}: this build has no camera support (built without the `camera` feature); use synthetic or a video file"
        )))
    }
}

#[cfg(feature = "camera")]
mod imp {
    use super::*;
    use crate::error::Error;
    use crate::frame::image::{bt601_luma, check_size, GrayImage};
    use crate::frame::page_lock::PageLocker;
    use crate::source::camera_controls::{capabilities_from_nokhwa, CameraCapabilities};
    use crate::source::devices::guarded;
    use crate::source::frame_pool::FramePool;
    use crate::source::{ms_since, Frame};
    use nokhwa::utils::{
        frame_formats, CameraFormat, CameraIndex, FrameFormat, RequestedFormat, RequestedFormatType,
    };
    use std::sync::Arc;
    use std::time::Instant;

    pub fn open(
        index: u32,
        width: Option<u32>,
        height: Option<u32>,
        fps: Option<u32>,
        controls: &CameraControls,
    ) -> Result<Box<dyn FrameSource>> {
        let (width, height) = match (width, height, controls.resolution) {
            (None, None, Some((w, h))) => (Some(w), Some(h)),
            _ => (width, height),
        };
        let fps = fps.or(controls.fps);
        let format = controls.format.map(|f| f.nokhwa());
        let mut source = CameraSource::open_format(index, width, height, fps, format)?;
        source.set_controls(controls);
        Ok(Box::new(source))
    }

    pub struct CameraSource {
        index: u32,
        name: String,
        camera: nokhwa::Camera,
        format: CameraFormat,
        opened: Instant,
        next: u64,
        /// Controls the camera refused, for `take_notices`.
        notices: Vec<String>,
        /// What it supports, read once it streams.
        capabilities: CameraCapabilities,
        /// The buffers grey frames are converted into (page-locked for the GPU when reused).
        frames: FramePool,
    }

    /// Camera frame buffers kept for reuse (frames queued, in flight and on screen).
    const KEEP_BUFFERS: usize = 8;

    fn camera_error(index: u32, why: impl std::fmt::Display) -> Error {
        Error::Invalid(format!("camera {index}: {why}"))
    }

    /// Lower is better: grey and YUV need no colour conversion; MJPEG needs a JPEG decode.
    fn format_rank(f: FrameFormat) -> u32 {
        match f {
            FrameFormat::GRAY => 0,
            FrameFormat::YUYV => 1,
            FrameFormat::NV12 => 2,
            FrameFormat::RAWRGB | FrameFormat::RAWBGR => 3,
            FrameFormat::MJPEG => 4,
        }
    }

    /// The mode to stream: the requested size (or the current one), then the requested pixel
    /// format (or the best), then the frame rate nearest the requested one (or the highest).
    fn choose(
        current: CameraFormat,
        offered: &[CameraFormat],
        width: Option<u32>,
        height: Option<u32>,
        fps: Option<u32>,
        format: Option<FrameFormat>,
    ) -> Option<CameraFormat> {
        let want = (
            width.unwrap_or(current.width()),
            height.unwrap_or(current.height()),
        );
        offered
            .iter()
            .filter(|f| (f.width(), f.height()) == want)
            .filter(|f| format.is_none_or(|want| f.format() == want))
            .min_by_key(|f| {
                let rate = match fps {
                    Some(r) => f.frame_rate().abs_diff(r),
                    None => u32::MAX - f.frame_rate(),
                };
                (format_rank(f.format()), rate)
            })
            .copied()
    }

    impl CameraSource {
        /// Opens the camera in `format` (None: the best for grey output).
        pub fn open_format(
            index: u32,
            width: Option<u32>,
            height: Option<u32>,
            fps: Option<u32>,
            format: Option<FrameFormat>,
        ) -> Result<Self> {
            let opened = guarded("opening the camera", || {
                let any = RequestedFormat::with_formats(RequestedFormatType::None, frame_formats());
                let mut camera = nokhwa::Camera::new(CameraIndex::Index(index), any)
                    .map_err(|e| e.to_string())?;
                let offered = camera
                    .compatible_camera_formats()
                    .map_err(|e| format!("cannot list its formats: {e}"))?;
                let current = camera.camera_format();
                let Some(chosen) = choose(current, &offered, width, height, fps, format) else {
                    let size = (
                        width.unwrap_or(current.width()),
                        height.unwrap_or(current.height()),
                    );
                    let mut modes: Vec<String> = offered
                        .iter()
                        .filter(|f| format.is_none() || (f.width(), f.height()) != size)
                        .map(|f| format!("{}x{}", f.width(), f.height()))
                        .collect();
                    let mut at_size: Vec<String> = offered
                        .iter()
                        .filter(|f| (f.width(), f.height()) == size)
                        .map(|f| f.format().to_string())
                        .collect();
                    modes.sort();
                    modes.dedup();
                    at_size.sort();
                    at_size.dedup();
                    return Err(match (format, at_size.is_empty()) {
                        (Some(want), false) => format!(
                            "it offers no {want} at {}x{} (it offers {} there)",
                            size.0,
                            size.1,
                            at_size.join(", ")
                        ),
                        _ => format!(
                            "it offers no {}x{} mode (it offers {})",
                            size.0,
                            size.1,
                            modes.join(", ")
                        ),
                    });
                };
                let exact = RequestedFormat::with_formats(
                    RequestedFormatType::Exact(chosen),
                    frame_formats(),
                );
                camera
                    .set_camera_requset(exact)
                    .map_err(|e| format!("cannot select {chosen}: {e}"))?;
                camera
                    .open_stream()
                    .map_err(|e| format!("cannot start streaming: {e}"))?;
                let name = camera.info().human_name();
                let format = camera.camera_format();
                // A camera that cannot list its controls still streams: it offers none.
                let controls = camera.camera_controls().unwrap_or_default();
                let capabilities = capabilities_from_nokhwa(&controls, &offered, Some(format));
                Ok((camera, name, format, capabilities))
            });
            let (camera, name, format, capabilities) = opened.map_err(|why| {
                camera_error(
                    index,
                    format!("{why}; see `markerscope devices` for the cameras found, or use the synthetic source"),
                )
            })?;
            check_size(format.width(), format.height()).map_err(|e| camera_error(index, e))?;
            Ok(Self {
                index,
                name,
                camera,
                format,
                opened: Instant::now(),
                next: 0,
                notices: Vec::new(),
                capabilities,
                frames: FramePool::new(KEEP_BUFFERS, None),
            })
        }

        /// Sets each requested control; one the camera lacks or refuses becomes a notice and
        /// the camera keeps its own setting. Automatic exposure falls back from aperture
        /// priority to fully automatic, which some cameras offer instead.
        fn set_controls(&mut self, controls: &CameraControls) {
            use crate::source::camera_controls::ControlId;
            use nokhwa::utils::ControlValueSetter;
            // Values outside what the camera reports are moved into its ranges, or left out.
            let (controls, problems) = self.capabilities.fit(controls);
            for p in problems {
                self.notices.push(format!("camera {}: {p}", self.index));
            }
            let mut mode_refused = false;
            for request in controls.requests() {
                // Without manual mode the exposure time would not take either: said once.
                if request.id == ControlId::ExposureTime && mode_refused {
                    continue;
                }
                let camera = &mut self.camera;
                let mut set = |value: i64| {
                    guarded("setting a camera control", || {
                        camera
                            .set_camera_control(
                                request.id.nokhwa(),
                                ControlValueSetter::Integer(value),
                            )
                            .map_err(|e| e.to_string())
                    })
                };
                let mut outcome = set(request.value);
                if outcome.is_err() && request.asked == "exposure auto" {
                    // V4L2_EXPOSURE_AUTO.
                    outcome = set(0);
                }
                if let Err(why) = outcome {
                    self.notices.push(format!(
                        "camera {}: it did not take {} ({}: {why}); it keeps its own setting",
                        self.index,
                        request.asked,
                        request.id.name()
                    ));
                    mode_refused |= request.id == ControlId::ExposureMode;
                }
            }
        }
    }

    /// The grey pixels of one captured `fmt` buffer of `w × h` into `out` (`w × h` bytes).
    fn grey_into(
        index: u32,
        fmt: FrameFormat,
        w: u32,
        h: u32,
        buf: &[u8],
        out: &mut [u8],
    ) -> Result<()> {
        let n = w as usize * h as usize;
        let short = |need: usize| {
            camera_error(
                index,
                format!(
                    "a {fmt} frame of {w}x{h} has {} bytes, expected {need}",
                    buf.len()
                ),
            )
        };
        let out = &mut out[..n];
        match fmt {
            FrameFormat::GRAY | FrameFormat::NV12 => {
                out.copy_from_slice(buf.get(..n).ok_or_else(|| short(n))?);
            }
            FrameFormat::YUYV => {
                let yuyv = buf.get(..2 * n).ok_or_else(|| short(2 * n))?;
                for (o, p) in out.iter_mut().zip(yuyv.chunks_exact(2)) {
                    *o = p[0];
                }
            }
            FrameFormat::RAWRGB | FrameFormat::RAWBGR => {
                let rgb = buf.get(..3 * n).ok_or_else(|| short(3 * n))?;
                for (o, p) in out.iter_mut().zip(rgb.chunks_exact(3)) {
                    *o = match fmt {
                        FrameFormat::RAWRGB => bt601_luma(p[0], p[1], p[2]),
                        _ => bt601_luma(p[2], p[1], p[0]),
                    };
                }
            }
            FrameFormat::MJPEG => {
                let decoded = image::load_from_memory_with_format(buf, image::ImageFormat::Jpeg)
                    .map_err(|e| camera_error(index, format!("bad MJPEG frame: {e}")))?;
                let grey = GrayImage::from_dynamic(&decoded)?;
                if (grey.width, grey.height) != (w, h) {
                    return Err(camera_error(
                        index,
                        format!(
                            "an MJPEG frame of {}x{} in a {w}x{h} stream",
                            grey.width, grey.height
                        ),
                    ));
                }
                out.copy_from_slice(&grey.data);
            }
        }
        Ok(())
    }

    impl FrameSource for CameraSource {
        fn describe(&self) -> String {
            format!(
                "camera {}: {} {}x{} @{} {}",
                self.index,
                self.name,
                self.format.width(),
                self.format.height(),
                self.format.frame_rate(),
                self.format.format()
            )
        }

        fn is_live(&self) -> bool {
            true
        }

        fn take_notices(&mut self) -> Vec<String> {
            std::mem::take(&mut self.notices)
        }

        fn camera_capabilities(&self) -> Option<CameraCapabilities> {
            Some(self.capabilities.clone())
        }

        fn set_camera_controls(&mut self, controls: &CameraControls) {
            self.set_controls(controls);
        }

        fn next_frame(&mut self) -> Result<Option<Frame>> {
            let started = Instant::now();
            let camera = &mut self.camera;
            let captured = guarded("reading a frame", || {
                let buffer = camera.frame().map_err(|e| e.to_string())?;
                let res = buffer.resolution();
                Ok((
                    buffer.source_frame_format(),
                    res.width(),
                    res.height(),
                    buffer.buffer().to_vec(),
                    buffer.capture_timestamp(),
                ))
            });
            let (fmt, w, h, bytes, stamp) = captured.map_err(|why| {
                camera_error(
                    self.index,
                    format!("{why} (disconnected?); choose another source"),
                )
            })?;
            check_size(w, h).map_err(|e| camera_error(self.index, e))?;
            let camera_index = self.index;
            let grey = self.frames.frame(w, h, |grey| {
                grey_into(camera_index, fmt, w, h, &bytes, &mut grey.data)
            })?;
            let index = self.next;
            self.next += 1;
            Ok(Some(Frame {
                index,
                time_s: captured_at(stamp)
                    .saturating_duration_since(self.opened)
                    .as_secs_f64(),
                grey: grey.into(),
                captured_at: Instant::now(),
                decode_ms: ms_since(started),
                name: String::new(),
            }))
        }

        fn fps(&self) -> Option<f64> {
            Some(self.format.frame_rate() as f64).filter(|&f| f > 0.0)
        }

        /// V4L2 stamps every buffer when the driver captured it; other platforms' backends
        /// give no stamp, and the frames carry their arrival time.
        fn time_stamp(&self) -> crate::source::TimeStamp {
            if cfg!(target_os = "linux") {
                crate::source::TimeStamp::Driver
            } else {
                crate::source::TimeStamp::Arrival
            }
        }

        fn clock_origin(&self) -> Option<Instant> {
            Some(self.opened)
        }

        fn set_page_locker(&mut self, locker: Arc<dyn PageLocker>) {
            self.frames = FramePool::new(KEEP_BUFFERS, Some(locker));
        }
    }

    impl Drop for CameraSource {
        fn drop(&mut self) {
            let camera = &mut self.camera;
            let _ = guarded("stopping the camera", || {
                camera.stop_stream().map_err(|e| e.to_string())
            });
        }
    }

    /// When a frame was captured: the driver's buffer timestamp (nokhwa gives it as wall-clock
    /// time) carried onto the monotonic clock, or now when there is none.
    fn captured_at(stamp: Option<std::time::Duration>) -> Instant {
        captured_at_given(stamp, std::time::SystemTime::now(), Instant::now())
    }

    /// `captured_at` at a known moment (`wall_now` and `now` taken together): a stamp from the
    /// future (the wall clock stepped back) is now.
    fn captured_at_given(
        stamp: Option<std::time::Duration>,
        wall_now: std::time::SystemTime,
        now: Instant,
    ) -> Instant {
        let age = stamp.and_then(|s| wall_now.duration_since(std::time::UNIX_EPOCH + s).ok());
        age.and_then(|age| now.checked_sub(age)).unwrap_or(now)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_driver_stamp_becomes_its_moment_on_the_monotonic_clock() {
            use std::time::{Duration, UNIX_EPOCH};
            let now = Instant::now();
            let wall = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
            let stamp = Duration::from_secs(1_800_000_000) - Duration::from_millis(12);
            assert_eq!(
                captured_at_given(Some(stamp), wall, now),
                now - Duration::from_millis(12)
            );
            assert_eq!(captured_at_given(None, wall, now), now);
            let future = Duration::from_secs(1_800_000_001);
            assert_eq!(captured_at_given(Some(future), wall, now), now);
        }

        #[test]
        fn prefers_grey_and_yuyv_over_mjpeg() {
            let f = |w, h, fmt, r| CameraFormat::new_from(w, h, fmt, r);
            let offered = [
                f(1280, 720, FrameFormat::MJPEG, 30),
                f(1280, 720, FrameFormat::YUYV, 10),
                f(640, 480, FrameFormat::YUYV, 30),
                f(640, 480, FrameFormat::GRAY, 15),
            ];
            let current = f(1280, 720, FrameFormat::MJPEG, 30);
            let c = choose(current, &offered, None, None, None, None).unwrap();
            assert_eq!(c.format(), FrameFormat::YUYV);
            let c = choose(current, &offered, Some(640), Some(480), Some(30), None).unwrap();
            assert_eq!(c.format(), FrameFormat::GRAY);
            assert!(choose(current, &offered, Some(800), Some(600), None, None).is_none());
            // A format asked for is taken where offered, and nothing else.
            let mjpeg = Some(FrameFormat::MJPEG);
            let c = choose(current, &offered, None, None, None, mjpeg).unwrap();
            assert_eq!((c.format(), c.frame_rate()), (FrameFormat::MJPEG, 30));
            assert!(choose(current, &offered, Some(640), Some(480), None, mjpeg).is_none());
        }

        #[test]
        fn captured_buffers_become_grey_pixels_or_a_clear_error() {
            let mut out = [0u8; 4];
            grey_into(
                0,
                FrameFormat::YUYV,
                2,
                2,
                &[1, 9, 2, 9, 3, 9, 4, 9],
                &mut out,
            )
            .unwrap();
            assert_eq!(out, [1, 2, 3, 4]);
            grey_into(0, FrameFormat::NV12, 2, 2, &[5, 6, 7, 8, 0, 0], &mut out).unwrap();
            assert_eq!(out, [5, 6, 7, 8]);
            let rgb = [255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255];
            grey_into(0, FrameFormat::RAWRGB, 2, 2, &rgb, &mut out).unwrap();
            assert_eq!(
                out,
                [
                    bt601_luma(255, 0, 0),
                    bt601_luma(0, 255, 0),
                    bt601_luma(0, 0, 255),
                    255
                ]
            );
            grey_into(0, FrameFormat::RAWBGR, 2, 2, &rgb, &mut out).unwrap();
            assert_eq!(out[0], bt601_luma(0, 0, 255));
            let err = grey_into(3, FrameFormat::YUYV, 2, 2, &[1, 2, 3], &mut out).unwrap_err();
            assert!(
                err.to_string()
                    .contains("camera 3: a YUYV frame of 2x2 has 3 bytes, expected 8"),
                "{err}"
            );
            let err = grey_into(3, FrameFormat::MJPEG, 2, 2, &[0xff, 0xd8], &mut out).unwrap_err();
            assert!(err.to_string().contains("bad MJPEG frame"), "{err}");
        }

        #[test]
        fn opening_a_missing_camera_is_an_error_not_a_panic() {
            // No camera 250 anywhere: a clear error (the machine may have no V4L2 at all).
            let err = CameraSource::open_format(250, None, None, None, None)
                .err()
                .unwrap();
            assert!(err.to_string().starts_with("camera 250: "), "{err}");
        }
    }
}
