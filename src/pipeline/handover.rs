//! How the pipeline's threads wait for each other's frames when the frames are labeled on the
//! GPU: a thread that sleeps until a frame comes is woken by the system, and on an idle host
//! that wake-up took 0.05–0.6 ms (a virtual machine's idle cores are halted), often more than
//! the work of a light frame. So a thread keeps its core, polling, where a frame is about to
//! come:
//!
//! - the tracking thread from the moment the worker starts a frame on the GPU (`Herald`): it
//!   is labeled meanwhile, and the tracker is awake when it comes;
//! - the worker after each frame of a fast stream (`Arrivals`): frames that came within
//!   `POLL_STREAM_GAP` of each other; a camera's (every 8 ms or more) are waited for asleep.
//!
//! The CPU path never polls: its labeling and tracking keep every core busy, and a polling
//! thread would take one from them (their hand-overs find the cores awake anyway). Nor do the
//! pipelines of a run of several sources, nor a host of fewer than `POLL_MIN_THREADS`
//! threads: the frames' decoding and rows need the cores (the worker already spins while it
//! waits for the GPU).
//!
//! H200 host of 16 cores (`bench --pipeline --scenes clutter,demo --sizes 1920x1080 --backend
//! cuda --frames 2000 --json`, `bench/scripts/frame_kinds.py`): each kind of the clutter
//! scene's frames at p99 1.31–2.49× its median asleep, 1.07–1.62× with these and light frames
//! tracked on the tracking thread itself (`Tracker::would_use_pool`); the demo's frames p50 /
//! p99 0.24 / 0.59–0.80 ms asleep, 0.20 / 0.22–0.24 ms now; the rates the same. Polling for only
//! 0.2 ms after each frame left the tail as it was: a frame's round in that pass is longer.

use crossbeam_channel::{Receiver, Sender};
use std::time::{Duration, Instant};

/// How long the tracking thread polls for a frame it was told of before it sleeps: longer than
/// the GPU takes for a dense frame (the clutter scene's 98,871 components: ~1.5 ms), short
/// enough that a frame that never comes (its labeling failed) costs little.
const HERALDED_POLL: Duration = Duration::from_millis(3);

/// How long the worker polls for the next frame of a fast stream before it sleeps.
const POLL_WINDOW: Duration = Duration::from_millis(1);

/// Frames that come within this of each other make a fast stream (250 frames/s and more).
const POLL_STREAM_GAP: Duration = Duration::from_millis(4);

/// Hosts with fewer threads than this never poll.
const POLL_MIN_THREADS: usize = 4;

/// May a pipeline's threads poll on a host of `threads` threads?
pub(super) fn host_may_poll(threads: usize) -> bool {
    threads >= POLL_MIN_THREADS
}

/// Calls `take` until it gives something or `window` has passed.
pub(super) fn poll_for<T>(window: Duration, mut take: impl FnMut() -> Option<T>) -> Option<T> {
    if window.is_zero() {
        return None;
    }
    let start = Instant::now();
    loop {
        if let Some(item) = take() {
            return Some(item);
        }
        if start.elapsed() >= window {
            return None;
        }
        for _ in 0..64 {
            std::hint::spin_loop();
        }
    }
}

/// The worker tells the tracking thread that a frame is on its way (labeled on the GPU now).
pub(super) struct Herald {
    tx: Sender<()>,
}

/// The tracking thread's end of the herald.
pub(super) struct Heralded {
    rx: Receiver<()>,
}

/// A herald and its receiving end.
pub(super) fn herald() -> (Herald, Heralded) {
    // One message is enough: it says "at least one frame is coming".
    let (tx, rx) = crossbeam_channel::bounded(1);
    (Herald { tx }, Heralded { rx })
}

impl Herald {
    /// A frame is on its way. Never waits.
    pub(super) fn announce(&self) {
        let _ = self.tx.try_send(());
    }
}

impl Heralded {
    /// The next item of `items`, waiting for one: polling for `HERALDED_POLL` once told one is
    /// coming, asleep otherwise. None once `items` is closed and empty.
    pub(super) fn next<T>(&self, items: &Receiver<T>) -> Option<T> {
        loop {
            match items.try_recv() {
                Ok(item) => return Some(item),
                Err(crossbeam_channel::TryRecvError::Disconnected) => return None,
                Err(crossbeam_channel::TryRecvError::Empty) => {}
            }
            crossbeam_channel::select! {
                recv(items) -> item => return item.ok(),
                recv(self.rx) -> told => {
                    if told.is_err() {
                        // The worker has gone: only its last items are left to take.
                        return items.recv().ok();
                    }
                    if let Some(item) = poll_for(HERALDED_POLL, || items.try_recv().ok()) {
                        return Some(item);
                    }
                }
            }
        }
    }
}

/// When the worker's frames came: whether they make a fast stream, worth polling for.
#[derive(Default)]
pub(super) struct Arrivals {
    last: Option<Instant>,
    gap: Option<Duration>,
    /// The last frame was labeled on the GPU, and the worker may poll for the next.
    polling: bool,
}

impl Arrivals {
    /// A frame came now.
    pub(super) fn arrived(&mut self) {
        let now = Instant::now();
        self.gap = self.last.map(|last| now - last);
        self.last = Some(now);
    }

    /// The last frame was labeled on the GPU and its pipeline is the only one (or not).
    pub(super) fn polling(&mut self, polling: bool) {
        self.polling = polling;
    }

    /// How long to poll for the next frame before sleeping: `POLL_WINDOW` after a GPU frame of
    /// a fast stream, else none.
    pub(super) fn poll_window(&self) -> Duration {
        match self.gap {
            Some(gap) if self.polling && gap <= POLL_STREAM_GAP => POLL_WINDOW,
            _ => Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fast_stream_of_gpu_frames_is_polled_for_and_nothing_else() {
        let mut a = Arrivals::default();
        a.polling(true);
        a.arrived();
        assert_eq!(a.poll_window(), Duration::ZERO, "one frame is no stream");
        a.arrived();
        assert_eq!(a.poll_window(), POLL_WINDOW);
        a.polling(false);
        assert_eq!(a.poll_window(), Duration::ZERO, "the CPU path never polls");
        a.polling(true);
        a.last = Some(Instant::now() - 2 * POLL_STREAM_GAP);
        a.arrived();
        assert_eq!(
            a.poll_window(),
            Duration::ZERO,
            "a slow source is waited for asleep"
        );
    }

    #[test]
    fn a_heralded_thread_takes_every_item_and_ends_with_its_sender() {
        let (herald, heralded) = herald();
        let (tx, rx) = crossbeam_channel::unbounded();
        let receiver = std::thread::spawn(move || {
            let mut got = Vec::new();
            while let Some(k) = heralded.next(&rx) {
                got.push(k);
            }
            got
        });
        for k in 0..100u32 {
            // Told of some, not of others; a herald with no frame after it costs a poll.
            if k % 3 != 0 {
                herald.announce();
            }
            if k % 10 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            tx.send(k).unwrap();
        }
        herald.announce();
        drop(tx);
        assert_eq!(receiver.join().unwrap(), (0..100).collect::<Vec<_>>());
        drop(herald);
    }

    #[test]
    fn a_heralded_thread_ends_when_the_herald_goes_first() {
        let (herald, heralded) = herald();
        let (tx, rx) = crossbeam_channel::unbounded();
        tx.send(1u8).unwrap();
        drop(herald);
        let receiver = std::thread::spawn(move || {
            let mut got = Vec::new();
            while let Some(k) = heralded.next(&rx) {
                got.push(k);
            }
            got
        });
        tx.send(2).unwrap();
        drop(tx);
        assert_eq!(receiver.join().unwrap(), vec![1, 2]);
    }

    #[test]
    fn polling_gives_up_after_its_window() {
        let start = Instant::now();
        assert_eq!(poll_for(Duration::from_millis(2), || None::<u8>), None);
        assert!(start.elapsed() >= Duration::from_millis(2));
        assert_eq!(
            poll_for(Duration::ZERO, || Some(1)),
            None,
            "no window, no poll"
        );
        assert_eq!(poll_for(Duration::from_millis(2), || Some(1)), Some(1));
    }
}
