//! CPU backend: the oracle (reference) and the fast run-based labeler (the no-GPU fallback).

pub mod lsl;
pub mod oracle;
