//! Live synthetic sources (`synthetic?live`, `synthetic:random?live,delay=0.004`): rendered
//! frames delivered as a camera delivers them, so that several live sources can be tested on
//! one clock with known offsets.
//!
//! Frame i is captured at start + delay + i / fps: `start` is the moment the run starts its
//! sources together (`StartTrigger`: every source of `analyze A B C …` is opened and started
//! first, then their capture begins at once, as cameras on a common trigger), or the source's
//! first frame request when it is alone. A frame is stamped when it reaches markerscope (its
//! `arrival`, like a camera whose driver gives no timestamp), so what it reports carries the
//! same wake-up and scheduling delays a camera's arrival times do.
//!
//! A source asked for a frame late keeps to its schedule: the frames of the last
//! `BUFFERED_FRAMES` periods are still delivered (late, at once), older ones are lost, as a
//! camera driver's ring of buffers drops its oldest. `stall=FROM-TO` leaves frames FROM to TO − 1
//! out (the source says nothing meanwhile, as a camera that stalls) and goes on with frame TO
//! at its time.

use crate::error::{Error, Result};
use crossbeam_channel::{Receiver, Sender};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Frames a late source still delivers (a camera driver's buffers); older ones are lost.
pub const BUFFERED_FRAMES: u32 = 4;
/// The longest start delay (seconds).
pub const MAX_DELAY_S: f64 = 10.0;
/// The highest frame rate.
pub const MAX_FPS: f64 = 1000.0;

/// The `?OPTIONS` of a live synthetic source: `live`, `delay=SECONDS`, `fps=N`,
/// `stall=FROM-TO`, comma-separated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LiveTiming {
    /// Frames per second.
    pub fps: f64,
    /// How much later than frame / fps after the start each frame is captured (seconds).
    pub delay_s: f64,
    /// Frames FROM..TO are not captured (the source stalls).
    pub stall: Option<(u64, u64)>,
}

impl Default for LiveTiming {
    fn default() -> Self {
        Self {
            fps: super::DEFAULT_FPS,
            delay_s: 0.0,
            stall: None,
        }
    }
}

impl LiveTiming {
    /// Reads the options after the `?` of `spec` (named in errors).
    pub fn parse(options: &str, spec: &str) -> Result<LiveTiming> {
        let bad = |why: String| {
            Error::Invalid(format!(
                "bad live synthetic source '{spec}': {why} (options after '?': live, \
                 delay=SECONDS, fps=N, stall=FROM-TO, comma-separated)"
            ))
        };
        let mut timing = LiveTiming::default();
        for item in options.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = item.split_once('=').unwrap_or((item, ""));
            let number = |v: &str| {
                v.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|n| n.is_finite())
                    .ok_or_else(|| bad(format!("{key}: '{v}' is not a number")))
            };
            match key.trim() {
                "live" if value.is_empty() => {}
                "delay" => {
                    timing.delay_s = number(value)?;
                    if !(0.0..=MAX_DELAY_S).contains(&timing.delay_s) {
                        return Err(bad(format!(
                            "delay {value}: give 0 to {MAX_DELAY_S} seconds"
                        )));
                    }
                }
                "fps" => {
                    timing.fps = number(value)?;
                    if !(timing.fps > 0.0 && timing.fps <= MAX_FPS) {
                        return Err(bad(format!(
                            "fps {value}: give a rate above 0, up to {MAX_FPS}"
                        )));
                    }
                }
                "stall" => {
                    let frames = value.split_once('-').and_then(|(a, b)| {
                        Some((a.trim().parse::<u64>().ok()?, b.trim().parse::<u64>().ok()?))
                    });
                    match frames {
                        Some((from, to)) if from < to => timing.stall = Some((from, to)),
                        _ => {
                            return Err(bad(format!(
                                "stall {value}: give the frames FROM-TO it leaves out, FROM \
                                 below TO"
                            )))
                        }
                    }
                }
                other => return Err(bad(format!("unknown option '{other}'"))),
            }
        }
        Ok(timing)
    }

    /// The seconds from the start to the capture of frame `index`.
    fn due_s(&self, index: u64) -> f64 {
        self.delay_s + index as f64 / self.fps
    }
}

impl std::fmt::Display for LiveTiming {
    /// The options as `parse` reads them: `live`, then those not at their default.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("live")?;
        if self.delay_s != 0.0 {
            write!(f, ",delay={}", self.delay_s)?;
        }
        if self.fps != super::DEFAULT_FPS {
            write!(f, ",fps={}", self.fps)?;
        }
        if let Some((from, to)) = self.stall {
            write!(f, ",stall={from}-{to}")?;
        }
        Ok(())
    }
}

/// Starts the live synthetic sources of one run together: each waits for it before its first
/// frame. Dropping it unfired also lets them go (each from its own first frame), so that no
/// source waits for a start that does not come while its pipeline is stopped.
pub struct StartTrigger {
    at: Arc<OnceLock<Instant>>,
    gate: Option<Sender<()>>,
    signal: StartSignal,
}

/// What a source waits on (`StartTrigger::signal`).
#[derive(Clone, Debug)]
pub struct StartSignal {
    at: Arc<OnceLock<Instant>>,
    /// Disconnected once the trigger fired or is gone.
    gate: Receiver<()>,
}

impl PartialEq for StartSignal {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.at, &other.at)
    }
}

impl Default for StartTrigger {
    fn default() -> Self {
        let at = Arc::new(OnceLock::new());
        let (tx, rx) = crossbeam_channel::bounded(0);
        StartTrigger {
            signal: StartSignal {
                at: at.clone(),
                gate: rx,
            },
            at,
            gate: Some(tx),
        }
    }
}

impl StartTrigger {
    pub fn new() -> Self {
        Self::default()
    }

    /// For each source to wait on.
    pub fn signal(&self) -> StartSignal {
        self.signal.clone()
    }

    /// Starts every source waiting, now.
    pub fn fire(&mut self) {
        let _ = self.at.set(Instant::now());
        self.gate = None;
    }
}

impl StartSignal {
    /// Waits for the start; its moment (now, if the trigger went without firing).
    fn wait(&self) -> Instant {
        // Nothing is ever sent: the gate opens when the trigger drops its sender.
        let _ = self.gate.recv();
        self.at.get().copied().unwrap_or_else(Instant::now)
    }
}

/// The pacing of one live synthetic source.
#[derive(Debug)]
pub struct LiveSchedule {
    timing: LiveTiming,
    signal: Option<StartSignal>,
    /// When frame 0 was due less its delay (known from the first frame on).
    start: Option<Instant>,
}

impl LiveSchedule {
    /// `signal`: the run's common start, None to start at the first frame.
    pub fn new(timing: LiveTiming, signal: Option<StartSignal>) -> Self {
        Self {
            timing,
            signal,
            start: None,
        }
    }

    pub fn timing(&self) -> &LiveTiming {
        &self.timing
    }

    /// Waits until the frame to deliver after `next` is captured, and says which it is:
    /// `next`, or a later one where frames were lost (the source was asked too late) or are
    /// left out (a stall).
    pub fn wait_for(&mut self, next: u64) -> u64 {
        let start = *self.start.get_or_insert_with(|| match &self.signal {
            Some(signal) => signal.wait(),
            None => Instant::now(),
        });
        let timing = self.timing;
        // The first frame still buffered: those due more than the buffers' time ago are lost.
        let first_kept = |now: Instant| {
            let buffered = f64::from(BUFFERED_FRAMES) / timing.fps;
            let late_s = now.saturating_duration_since(start).as_secs_f64() - buffered;
            ((late_s - timing.delay_s) * timing.fps).ceil().max(0.0) as u64
        };
        let mut index = next.max(first_kept(Instant::now()));
        if let Some((_, to)) = timing
            .stall
            .filter(|&(from, to)| (from..to).contains(&index))
        {
            index = to.max(first_kept(Instant::now()));
        }
        let due = start + Duration::from_secs_f64(timing.due_s(index));
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_print_back() {
        let t = LiveTiming::parse("live,delay=0.004,fps=30,stall=10-40", "s").unwrap();
        assert_eq!(
            t,
            LiveTiming {
                fps: 30.0,
                delay_s: 0.004,
                stall: Some((10, 40))
            }
        );
        assert_eq!(t.to_string(), "live,delay=0.004,fps=30,stall=10-40");
        assert_eq!(
            LiveTiming::parse("live", "s").unwrap(),
            LiveTiming::default()
        );
        assert_eq!(LiveTiming::default().to_string(), "live");
        for bad in [
            "delay=-1",
            "delay=x",
            "delay=11",
            "fps=0",
            "fps=inf",
            "stall=5-5",
            "stall=5",
            "live=1",
            "speed=2",
        ] {
            let err = LiveTiming::parse(bad, "synthetic?x")
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("synthetic?x") && err.contains("delay=SECONDS"),
                "{err}"
            );
        }
    }

    /// Frames come at start + delay + i / fps; a stall leaves its frames out and the source
    /// goes on at the time of the next.
    #[test]
    fn frames_keep_to_their_schedule_and_a_stall_leaves_frames_out() {
        let timing = LiveTiming {
            fps: 50.0,
            delay_s: 0.02,
            stall: Some((3, 8)),
        };
        let mut trigger = StartTrigger::new();
        let mut schedule = LiveSchedule::new(timing, Some(trigger.signal()));
        trigger.fire();
        let start = *trigger.at.get().unwrap();
        let mut next = 0;
        let mut delivered = Vec::new();
        for _ in 0..6 {
            let index = schedule.wait_for(next);
            let at = start.elapsed().as_secs_f64();
            // Never early; late only by the machine's wake-up.
            assert!(at >= timing.due_s(index), "frame {index} at {at}");
            assert!(at < timing.due_s(index) + 0.1, "frame {index} at {at}");
            delivered.push(index);
            next = index + 1;
        }
        assert_eq!(delivered, [0, 1, 2, 8, 9, 10]);
    }

    /// Asked late, a source delivers the frames still buffered and loses the older ones.
    #[test]
    fn a_late_source_loses_the_frames_older_than_its_buffers() {
        let timing = LiveTiming {
            fps: 100.0,
            ..LiveTiming::default()
        };
        let mut schedule = LiveSchedule::new(timing, None);
        assert_eq!(schedule.wait_for(0), 0);
        std::thread::sleep(Duration::from_millis(200));
        // About 20 frames went by; those of the last `BUFFERED_FRAMES` periods are kept.
        let kept = |elapsed: Duration| {
            let late_s = elapsed.as_secs_f64() - f64::from(BUFFERED_FRAMES) / 100.0;
            (late_s * 100.0).ceil() as u64
        };
        let start = schedule.start.unwrap();
        let before = kept(start.elapsed());
        let index = schedule.wait_for(1);
        let after = kept(start.elapsed());
        assert!(
            before >= 15 && (before..=after).contains(&index),
            "{before} {index} {after}"
        );
    }

    /// A trigger that goes unfired lets its sources go.
    #[test]
    fn an_unfired_trigger_lets_its_sources_go() {
        let trigger = StartTrigger::new();
        let signal = trigger.signal();
        let waiter = std::thread::spawn(move || signal.wait());
        drop(trigger);
        waiter.join().unwrap();
    }
}
