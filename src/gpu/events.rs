//! Timing events of a run's steps on the device.

use super::{cuda_err, Gpu};
use crate::error::Result;
use cudarc::driver::CudaEvent;

/// A growing pool of timing events: event i starts step i, event i + 1 ends it.
#[derive(Default)]
pub struct StepEvents {
    events: Vec<CudaEvent>,
    /// While off, `record` records nothing: during a frame graph's capture (events inside a
    /// graph do not time its steps, `frame_graph`) and in runs nobody times (a caller's device
    /// arrays, where each event is host time before the next launch).
    off: bool,
}

impl StepEvents {
    /// A pool that records nothing until it is turned on (`set_off(false)`).
    pub fn off() -> StepEvents {
        StepEvents {
            events: Vec::new(),
            off: true,
        }
    }

    /// Whether it records nothing.
    pub fn is_off(&self) -> bool {
        self.off
    }

    /// Turns recording off or on again.
    pub fn set_off(&mut self, off: bool) {
        self.off = off;
    }

    /// Records event `i` on the stream, growing the pool when needed.
    pub fn record(&mut self, gpu: &Gpu, i: usize) -> Result<()> {
        if self.off {
            return Ok(());
        }
        while self.events.len() <= i {
            self.events.push(gpu.timing_event()?);
        }
        self.events[i]
            .record(&gpu.stream)
            .map_err(|e| cuda_err("recording an event", e))
    }

    /// Waits until event `i` has happened.
    pub fn wait(&self, i: usize) -> Result<()> {
        self.events[i]
            .synchronize()
            .map_err(|e| cuda_err("waiting for the GPU", e))
    }

    /// Milliseconds between events `from` and `to`.
    pub fn elapsed_ms(&self, from: usize, to: usize) -> Result<f64> {
        self.events[from]
            .elapsed_ms(&self.events[to])
            .map(|ms| ms as f64)
            .map_err(|e| cuda_err("reading event times", e))
    }
}
