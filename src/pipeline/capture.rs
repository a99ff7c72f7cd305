//! The capture thread: pulls frames from the source, paces files played in real time, and
//! thresholds (and packs, for GPU algorithms) each frame before the worker sees it.

use super::queue::{Captured, Item};
use super::{
    ms, resolve_algorithm, Control, Delivery, PipelineEvent, PipelineSettings, Shared,
    SourceCommand, STOP_POLL,
};
use crate::ccl::subpixel::ThresholdLevels;
use crate::ccl::{Backend, StepTime};
use crate::error::Error;
use crate::source::{Frame, FrameSource};
use crossbeam_channel::{Receiver, TryRecvError};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Playback state of the capture thread.
pub(super) struct Playback {
    pub(super) playing: bool,
    /// Deliver one frame while paused.
    pub(super) step: bool,
    /// 1.0 = a file's real frame rate, 0 = as fast as possible (live sources pace themselves).
    pub(super) speed: f64,
    /// The source has ended or failed; wait for a seek or a new source.
    pub(super) ended: bool,
    /// Wall clock and media time of the first frame since the pacing (re)started.
    pub(super) pace: Option<(Instant, f64)>,
    pub(super) last_size: Option<(u32, u32)>,
    /// Frames captured from the current source.
    pub(super) frames: u64,
}

pub(super) fn capture_loop(
    shared: &Shared,
    control: &Receiver<Control>,
    source: Box<dyn FrameSource>,
) {
    let mut source = Some(source);
    let mut play = Playback {
        playing: true,
        step: false,
        speed: match shared.delivery {
            Delivery::Live => 1.0,
            Delivery::Lossless => 0.0,
        },
        ended: false,
        pace: None,
        last_size: None,
        frames: 0,
    };
    // Whether the current settings label on the GPU (pack the mask), cached per settings value.
    let mut pack_for: Option<(Arc<PipelineSettings>, bool)> = None;
    let mut last_threshold_error: Option<String> = None;
    while !shared.stopping() {
        let idle = source.is_none() || play.ended || (!play.playing && !play.step);
        let message = if idle {
            match control.recv() {
                Ok(m) => Some(m),
                Err(_) => break,
            }
        } else {
            match control.try_recv() {
                Ok(m) => Some(m),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => break,
            }
        };
        if let Some(message) = message {
            match message {
                Control::Stop => break,
                Control::Source(new) => {
                    source = Some(new);
                    play.ended = false;
                    play.pace = None;
                    play.last_size = None;
                    play.frames = 0;
                }
                Control::Command(command) => {
                    if !apply_command(shared, &mut play, &mut source, command) {
                        break;
                    }
                }
            }
            continue;
        }
        let Some(src) = source.as_mut() else {
            continue;
        };
        let pulled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| src.next_frame()))
            .unwrap_or_else(|_| {
                Err(Error::Invalid(format!(
                    "{}: the source crashed while reading a frame",
                    src.describe()
                )))
            });
        // What the source left out on the way comes first, in stream order.
        let skipped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| src.take_skipped()))
            .unwrap_or_default();
        if !skipped
            .into_iter()
            .all(|s| shared.push(Item::Event(PipelineEvent::Skipped(s))))
        {
            break;
        }
        let mut frame = match pulled {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                play.ended = true;
                if !shared.push(Item::Event(PipelineEvent::EndOfStream {
                    frames: play.frames,
                })) {
                    break;
                }
                continue;
            }
            Err(e) => {
                play.ended = true;
                if !shared.push(Item::Event(PipelineEvent::SourceError(e.to_string()))) {
                    break;
                }
                continue;
            }
        };
        play.step = false;
        if !src.is_live() && play.speed > 0.0 {
            wait_until_due(shared, &mut play, frame.time_s);
            // Latency counts from when the frame is due, not from when it was decoded ahead.
            frame.captured_at = Instant::now();
        }
        let size = (frame.grey.width, frame.grey.height);
        if let Some(prev) = play.last_size.filter(|&p| p != size) {
            let notice = format!(
                "frame size changed from {}x{} to {}x{} at frame {}",
                prev.0, prev.1, size.0, size.1, frame.index
            );
            if !shared.push(Item::Event(PipelineEvent::Notice(notice))) {
                break;
            }
        }
        play.last_size = Some(size);
        play.frames += 1;
        shared.captured.fetch_add(1, Ordering::Relaxed);

        let settings = shared.settings();
        let pack = match &pack_for {
            Some((s, pack)) if Arc::ptr_eq(s, &settings) => *pack,
            _ => {
                let pack = resolve_algorithm(&settings, &shared.backends)
                    .is_ok_and(|r| r.backend == Backend::Cuda);
                pack_for = Some((settings.clone(), pack));
                pack
            }
        };
        let item = match threshold_frame(frame, settings, pack) {
            Ok(captured) => {
                last_threshold_error = None;
                Item::Frame(Box::new(captured))
            }
            Err(why) if last_threshold_error.as_deref() == Some(&why) => continue,
            Err(why) => {
                last_threshold_error = Some(why.clone());
                Item::Event(PipelineEvent::EngineError(why))
            }
        };
        if !shared.push(item) {
            break;
        }
    }
}

/// Applies a playback command; false when the pipeline is stopping.
pub(super) fn apply_command(
    shared: &Shared,
    play: &mut Playback,
    source: &mut Option<Box<dyn FrameSource>>,
    command: SourceCommand,
) -> bool {
    match command {
        SourceCommand::Play => {
            play.playing = true;
            play.pace = None;
        }
        SourceCommand::Pause => play.playing = false,
        SourceCommand::Step => play.step = true,
        SourceCommand::Speed(speed) => {
            play.speed = if speed.is_finite() {
                speed.max(0.0)
            } else {
                0.0
            };
            play.pace = None;
        }
        SourceCommand::Seek(index) => {
            let Some(src) = source.as_mut() else {
                return true;
            };
            match src.seek(index) {
                Ok(()) => {
                    play.ended = false;
                    play.pace = None;
                    // Paused: show the frame sought to.
                    play.step = !play.playing;
                }
                Err(e) => return shared.push(Item::Event(PipelineEvent::Notice(e.to_string()))),
            }
        }
    }
    true
}

/// Sleeps until a file's frame at media time `time_s` is due at the current speed. A frame
/// more than half a second late (after a pause, a slow worker, a loop) restarts the clock.
pub(super) fn wait_until_due(shared: &Shared, play: &mut Playback, time_s: f64) {
    let now = Instant::now();
    let (wall0, media0) = *play.pace.get_or_insert((now, time_s));
    let offset = (time_s - media0) / play.speed;
    if !(0.0..1e6).contains(&offset) {
        play.pace = Some((now, time_s));
        return;
    }
    let due = wall0 + Duration::from_secs_f64(offset);
    if now > due + Duration::from_millis(500) {
        play.pace = Some((now, time_s));
        return;
    }
    while !shared.stopping() {
        let left = due.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(STOP_POLL));
    }
}

/// Threshold (and pack for GPU algorithms) on the capture thread.
pub(super) fn threshold_frame(
    frame: Frame,
    settings: Arc<PipelineSettings>,
    pack: bool,
) -> std::result::Result<Captured, String> {
    let mut steps = vec![StepTime::new("capture", frame.decode_ms)];
    let t = Instant::now();
    let threshold_err = |e: Error| format!("threshold {}: {e}", settings.threshold);
    // Sub-pixel centroids weigh pixels by how far above their level they are: keep the levels,
    // and make the mask from them so that the two cannot disagree.
    let (binary, levels) = if settings.subpixel {
        let levels =
            ThresholdLevels::compute(&frame.grey, &settings.threshold).map_err(threshold_err)?;
        let binary = levels
            .mask(&frame.grey, settings.invert)
            .map_err(threshold_err)?;
        (binary, Some(levels))
    } else {
        let binary =
            crate::frame::threshold::apply(&frame.grey, &settings.threshold, settings.invert)
                .map_err(threshold_err)?;
        (binary, None)
    };
    steps.push(StepTime::new("threshold", ms(t)));
    let (binary, packed) = if pack {
        let t = Instant::now();
        let packed = binary.pack();
        steps.push(StepTime::new("pack", ms(t)));
        (settings.want_binary.then_some(binary), Some(packed))
    } else {
        (Some(binary), None)
    };
    Ok(Captured {
        frame,
        settings,
        binary,
        packed,
        levels,
        steps,
    })
}
