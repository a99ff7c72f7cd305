//! The memory held by results waiting for a lossless consumer.
//!
//! A lossless event queue holds up to `LOSSLESS_EVENT_QUEUE` events, and a frame result holds
//! about 130 bytes per component. On dense frames (a 2000×2000 checkerboard has 2 million
//! components) a consumer slower than the worker (an exporter writing rows) would let sixteen
//! such results pile up: gigabytes for data that is written one frame at a time. So the worker
//! also waits while the results in the queue hold more than a byte budget; one result always
//! passes, however large. The tracking stage's lossless queue (frames labeled, not yet
//! tracked) keeps to the same budget.

use super::{FrameResult, PipelineEvent};
use std::collections::VecDeque;
use std::time::Duration;

/// Bytes of results a lossless event queue may hold: every one of its events when they are
/// 1080p frames of markers (2 MB each), eight 4K frames, a single frame of half a million
/// components or more.
pub(super) const LOSSLESS_RESULT_BUDGET: u64 = 64 << 20;

/// How often a worker waiting for room looks again (the consumer takes a result every few
/// milliseconds at least when results are this large).
const ROOM_POLL: Duration = Duration::from_millis(2);

/// The events sent and not yet taken, oldest first, with the bytes each holds.
pub(super) struct Backlog {
    sent: VecDeque<u64>,
    held: u64,
    budget: u64,
}

impl Backlog {
    pub(super) fn new(budget: u64) -> Self {
        Self {
            sent: VecDeque::new(),
            held: 0,
            budget,
        }
    }

    /// Bytes the events still queued hold, given how many are queued (the consumer takes them
    /// oldest first, so the ones taken are at the front).
    pub(super) fn held(&mut self, queued: usize) -> u64 {
        while self.sent.len() > queued {
            if let Some(bytes) = self.sent.pop_front() {
                self.held -= bytes;
            }
        }
        self.held
    }

    /// Waits until an event of `bytes` fits the budget beside the events still queued
    /// (`queued()` of them), or the queue is empty, or `give_up()` (messages, 0 bytes, never
    /// wait); then counts it as sent.
    /// The caller sends it next, from the same thread.
    pub(super) fn make_room(
        &mut self,
        bytes: u64,
        queued: impl Fn() -> usize,
        give_up: impl Fn() -> bool,
    ) {
        loop {
            let queued = queued();
            if bytes == 0 || queued == 0 || self.held(queued) + bytes <= self.budget || give_up() {
                break;
            }
            std::thread::sleep(ROOM_POLL);
        }
        self.sent.push_back(bytes);
        self.held += bytes;
    }

    /// The event that was counted last was not sent after all (the pipeline is stopping).
    pub(super) fn unsent(&mut self) {
        if let Some(bytes) = self.sent.pop_back() {
            self.held -= bytes;
        }
    }
}

/// What an event holds in memory, about: the images and tables of a frame result (the grey
/// frame may be shared with the source; it is counted all the same).
pub(super) fn event_bytes(event: &PipelineEvent) -> u64 {
    match event {
        PipelineEvent::Frame(result) => result_bytes(result),
        _ => 0,
    }
}

pub(super) fn result_bytes(r: &FrameResult) -> u64 {
    use std::mem::size_of_val;
    // The frame's size, not its pixels: a frame on the GPU is not copied to be counted.
    let images = r.grey.width as usize * r.grey.height as usize
        + r.binary.as_ref().map_or(0, |b| b.data.len())
        + r.labels.as_ref().map_or(0, |l| size_of_val(&l.data[..]));
    let tables = size_of_val(&r.components[..])
        + size_of_val(&r.subpixel[..])
        + size_of_val(&r.track_ids[..])
        + size_of_val(&r.ended_tracks[..]);
    (images + tables) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn waits_while_the_queued_events_hold_more_than_the_budget() {
        let mut backlog = Backlog::new(100);
        backlog.make_room(40, || 0, || false);
        backlog.make_room(40, || 1, || false);
        // A third 40-byte event waits until the consumer has taken the oldest.
        let polls = Cell::new(0);
        let queued = || {
            polls.set(polls.get() + 1);
            if polls.get() < 3 {
                2
            } else {
                1
            }
        };
        backlog.make_room(40, queued, || false);
        assert_eq!(polls.get(), 3, "waited until one was taken");
        assert_eq!(backlog.held(2), 80);
        assert_eq!(backlog.held(0), 0, "all taken");
    }

    #[test]
    fn one_event_always_passes_and_a_stopping_pipeline_waits_for_nothing() {
        let mut backlog = Backlog::new(10);
        backlog.make_room(1_000, || 0, || false);
        assert_eq!(backlog.held(1), 1_000, "an empty queue takes anything");
        backlog.make_room(1_000, || 1, || true);
        assert_eq!(backlog.held(2), 2_000);
        backlog.unsent();
        assert_eq!(backlog.held(1), 1_000);
        // Messages hold nothing.
        assert_eq!(event_bytes(&PipelineEvent::Notice("n".into())), 0);
        backlog.make_room(0, || 1, || false);
        assert_eq!(backlog.held(2), 1_000);
    }
}
