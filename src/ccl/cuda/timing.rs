//! Step events read as the labeling reports them: a `StepTime` per step, and the resident
//! timing of a whole run.

use crate::ccl::{ResidentTiming, StepTime};
use crate::error::Result;
use crate::gpu::events::StepEvents;

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
