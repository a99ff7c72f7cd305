//! Capture thread → worker: the thresholded frames and the messages between them, in order.

use super::handover::poll_for;
use super::{PipelineEvent, PipelineSettings};
use crate::ccl::StepTime;
use crate::frame::image::{BinaryImage, PackedBinary};
use crate::frame::mask::PixelMask;
use crate::source::Frame;
use crate::threshold::levels::ThresholdLevels;
use crate::threshold::StagedGrey;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// A thresholded frame on its way to the worker.
pub(super) struct Captured {
    pub(super) frame: Frame,
    pub(super) settings: Arc<PipelineSettings>,
    /// The byte mask (always for CPU algorithms; for GPU ones only when `want_binary`). The
    /// buffers are the capture thread's, reused once every holder has dropped them.
    pub(super) binary: Option<Arc<BinaryImage>>,
    /// The bit-packed mask for GPU algorithms.
    pub(super) packed: Option<Arc<PackedBinary>>,
    /// The levels the frame was thresholded with (only when sub-pixel centroids are wanted).
    pub(super) levels: Option<Arc<ThresholdLevels>>,
    /// The settings' mask at the frame's size, for a labeler that thresholds the frame itself
    /// (the capture thread applies it to the masks it makes).
    pub(super) pixel_mask: Option<Arc<PixelMask>>,
    /// The grey frame in page-locked memory, for a GPU labeler that thresholds it itself
    /// (`Backends::stage_grey`): its upload is then the DMA alone. Held until the labeling
    /// has finished with it.
    pub(super) staged_grey: Option<StagedGrey>,
    pub(super) steps: Vec<StepTime>,
}

pub(super) enum Item {
    Frame(Box<Captured>),
    /// A message from the capture thread, delivered in order with the frames.
    Event(PipelineEvent),
}

/// What `FrameQueue::try_pop` found.
pub(super) enum Next {
    Item(Item),
    /// Nothing waiting yet.
    Empty,
    Closed,
}

/// Capture thread → worker. A mutex-guarded deque rather than a channel, because live delivery
/// must drop the oldest *frame* while keeping messages (end of stream, source errors) in order.
pub(super) struct FrameQueue {
    pub(super) state: Mutex<QueueState>,
    pub(super) changed: Condvar,
    pub(super) capacity: usize,
    /// Rung on every push and on closing: a worker that takes from several queues
    /// (`set_worker`) waits on it.
    pub(super) bell: Option<Arc<Doorbell>>,
}

/// What a worker of several queues waits on: a count of the times something came.
#[derive(Default)]
pub(super) struct Doorbell {
    rung: Mutex<u64>,
    changed: Condvar,
}

impl Doorbell {
    pub(super) fn ring(&self) {
        *self.rung.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.changed.notify_all();
    }

    /// The count now: what `wait_past` waits to see change.
    pub(super) fn rung(&self) -> u64 {
        *self.rung.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the bell has rung since the count was `seen`, at most `timeout`.
    pub(super) fn wait_past(&self, seen: u64, timeout: Duration) {
        let rung = self.rung.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self
            .changed
            .wait_timeout_while(rung, timeout, |r| *r == seen)
            .unwrap_or_else(|e| e.into_inner());
    }
}

pub(super) struct QueueState {
    pub(super) items: VecDeque<Item>,
    pub(super) frames: usize,
    pub(super) closed: bool,
}

impl FrameQueue {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new(QueueState {
                items: VecDeque::new(),
                frames: 0,
                closed: false,
            }),
            changed: Condvar::new(),
            capacity,
            bell: None,
        }
    }

    /// Rings `bell` too when something comes (see `bell`).
    pub(super) fn with_bell(mut self, bell: Arc<Doorbell>) -> Self {
        self.bell = Some(bell);
        self
    }

    fn ring(&self) {
        if let Some(bell) = &self.bell {
            bell.ring();
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Live: never waits; drops the oldest queued frames to make room. Returns how many.
    pub(super) fn push_dropping_oldest(&self, item: Item) -> u64 {
        let mut s = self.lock();
        let mut dropped = 0;
        if matches!(item, Item::Frame(_)) {
            while s.frames >= self.capacity {
                let Some(pos) = s.items.iter().position(|i| matches!(i, Item::Frame(_))) else {
                    break;
                };
                s.items.remove(pos);
                s.frames -= 1;
                dropped += 1;
            }
            s.frames += 1;
        }
        s.items.push_back(item);
        self.changed.notify_all();
        drop(s);
        self.ring();
        dropped
    }

    /// Lossless: waits while the queue holds `capacity` frames. False once closed.
    pub(super) fn push_waiting(&self, item: Item) -> bool {
        let mut s = self.lock();
        if matches!(item, Item::Frame(_)) {
            while s.frames >= self.capacity && !s.closed {
                s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            s.frames += 1;
        }
        if s.closed {
            return false;
        }
        s.items.push_back(item);
        self.changed.notify_all();
        drop(s);
        self.ring();
        true
    }

    /// Frames waiting for the worker now.
    pub(super) fn waiting_frames(&self) -> usize {
        self.lock().frames
    }

    /// The next item, waiting for one (polling for up to `poll` first: `handover`); None once
    /// closed.
    pub(super) fn pop(&self, poll: Duration) -> Option<Item> {
        let polled = poll_for(poll, || match self.try_pop() {
            Next::Item(item) => Some(Some(item)),
            Next::Closed => Some(None),
            Next::Empty => None,
        });
        if let Some(item) = polled {
            return item;
        }
        let mut s = self.lock();
        loop {
            if s.closed {
                return None;
            }
            if let Some(item) = s.items.pop_front() {
                if matches!(item, Item::Frame(_)) {
                    s.frames -= 1;
                }
                self.changed.notify_all();
                return Some(item);
            }
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The next item if one is waiting, without waiting.
    pub(super) fn try_pop(&self) -> Next {
        let mut s = self.lock();
        if s.closed {
            return Next::Closed;
        }
        match s.items.pop_front() {
            Some(item) => {
                if matches!(item, Item::Frame(_)) {
                    s.frames -= 1;
                }
                self.changed.notify_all();
                Next::Item(item)
            }
            None => Next::Empty,
        }
    }

    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
        self.ring();
    }
}
