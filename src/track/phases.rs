//! Wall-clock times of the phases of one `Tracker::update`, for benchmarks
//! (`Tracker::time_phases`). Off, a phase boundary costs one branch.

use std::time::Instant;

#[derive(Debug, Default)]
pub(super) struct PhaseClock {
    on: bool,
    last: Option<Instant>,
    /// The latest frame's phases, in order: name and milliseconds.
    times: Vec<(&'static str, f64)>,
}

impl PhaseClock {
    pub(super) fn set(&mut self, on: bool) {
        self.on = on;
        self.times.clear();
    }

    /// A frame begins.
    #[inline]
    pub(super) fn start(&mut self) {
        if self.on {
            self.times.clear();
            self.last = Some(Instant::now());
        }
    }

    /// Phase `name` ends here (it began where the one before ended).
    #[inline]
    pub(super) fn lap(&mut self, name: &'static str) {
        if let (true, Some(last)) = (self.on, self.last) {
            let now = Instant::now();
            self.times
                .push((name, now.duration_since(last).as_secs_f64() * 1e3));
            self.last = Some(now);
        }
    }

    pub(super) fn times(&self) -> &[(&'static str, f64)] {
        &self.times
    }
}
