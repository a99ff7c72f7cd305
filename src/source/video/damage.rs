//! What a decoding leaves out or flags (damaged frames and data, frames predicted from them) and where
//! NVDEC handed over to the CPU decoder, its frame numbers counted from the decoding's first
//! frame (a segment's, `segments`).

use crate::source::{SkipAt, Skipped};
use std::path::PathBuf;

/// A frame or data left out, or a frame flagged as damaged, its frame numbers counted from the
/// decoding's first frame.
#[derive(Clone, Debug)]
pub(super) struct LeftOut {
    pub at: SkipAt,
    pub why: Why,
}

#[derive(Clone, Debug)]
pub(super) enum Why {
    Said(String),
    /// A frame predicted from damaged data (no keyframe since).
    PredictedFrom(SkipAt),
}

/// `at` with `base` frames before it.
pub(super) fn shifted(at: SkipAt, base: u64) -> SkipAt {
    match at {
        SkipAt::Frame(i) => SkipAt::Frame(base + i),
        SkipAt::Before(i) => SkipAt::Before(base + i),
        SkipAt::Damaged(i) => SkipAt::Damaged(base + i),
    }
}

impl LeftOut {
    /// As the caller sees it, with `base` frames before the decoding's first.
    pub(super) fn skipped(&self, base: u64) -> Skipped {
        let reason = match &self.why {
            Why::Said(reason) => reason.clone(),
            Why::PredictedFrom(cause) => {
                let cause = match shifted(*cause, base) {
                    SkipAt::Frame(i) | SkipAt::Damaged(i) => format!("the damaged frame {i}"),
                    SkipAt::Before(i) => format!("the damaged data before frame {i}"),
                };
                format!(
                    "it is predicted from {cause} (no keyframe since), so it may carry the damage"
                )
            }
        };
        Skipped {
            at: shifted(self.at, base),
            name: String::new(),
            reason,
        }
    }
}

/// The CPU decoder took over from NVDEC at `frame` (counted as `LeftOut`'s).
#[derive(Clone, Debug)]
pub(super) struct HandOver {
    pub path: PathBuf,
    pub decoder: String,
    pub frame: u64,
    pub why: String,
}

impl HandOver {
    pub(super) fn notice(&self, base: u64) -> String {
        format!(
            "{}: NVDEC ({}) stopped at frame {} ({}); decoding on the CPU from there",
            self.path.display(),
            self.decoder,
            base + self.frame,
            self.why
        )
    }
}
