//! The steps of a run on the device: their names and end events as the kernels are queued
//! (`Steps`), and the events read as the labeling reports them, a `StepTime` per step and the
//! resident timing of a whole run.

use crate::ccl::{ResidentTiming, StepTime};
use crate::error::Result;
use crate::gpu::events::StepEvents;
use crate::gpu::launch::KernelLaunch;
use crate::gpu::Gpu;

/// Names the steps of a run and records the event that ends each one: event `first + i + 1`
/// ends step i of `names` (event `first`, recorded by the caller, starts the first). Names are
/// `&'static str`, or `Cow` where a step's name is made at run time.
pub struct Steps<'a, N = &'static str> {
    gpu: &'a Gpu,
    events: &'a mut StepEvents,
    first: usize,
    names: Vec<N>,
}

impl<'a, N> Steps<'a, N> {
    /// Steps that go on after `names` (whose end events are recorded already).
    pub fn new(gpu: &'a Gpu, events: &'a mut StepEvents, first: usize, names: Vec<N>) -> Self {
        Steps {
            gpu,
            events,
            first,
            names,
        }
    }

    /// The device whose stream the steps run on.
    pub fn gpu(&self) -> &'a Gpu {
        self.gpu
    }

    /// Ends the step `name`: records its end event.
    pub fn mark(&mut self, name: impl Into<N>) -> Result<()> {
        self.names.push(name.into());
        self.events.record(self.gpu, self.first + self.names.len())
    }

    /// Queues `launch` on the stream and ends its step.
    pub fn launch(&mut self, launch: impl KernelLaunch) -> Result<()>
    where
        &'static str: Into<N>,
    {
        let step = launch.step();
        launch.queue(&self.gpu.stream)?;
        self.mark(step)
    }

    /// The names of the steps so far.
    pub fn into_names(self) -> Vec<N> {
        self.names
    }
}

/// The labelers' reading of `StepEvents`.
pub trait StepTimings {
    /// The timing of a run whose step i ended at event i + 1 (event 0 recorded before the
    /// first): waits for the last event.
    fn resident_timing(&self, steps: &[impl AsRef<str>]) -> Result<ResidentTiming>;

    /// The durations of `steps` (step i between events i and i + 1).
    fn step_times(&self, steps: &[impl AsRef<str>]) -> Result<Vec<StepTime>>;
}

impl StepTimings for StepEvents {
    fn resident_timing(&self, steps: &[impl AsRef<str>]) -> Result<ResidentTiming> {
        let last = steps.len();
        self.wait(last)?;
        Ok(ResidentTiming {
            total_ms: self.elapsed_ms(0, last)?,
            steps: self.step_times(steps)?,
            count: 0,
        })
    }

    fn step_times(&self, steps: &[impl AsRef<str>]) -> Result<Vec<StepTime>> {
        steps
            .iter()
            .enumerate()
            .map(|(i, name)| Ok(StepTime::new(name.as_ref(), self.elapsed_ms(i, i + 1)?)))
            .collect()
    }
}
