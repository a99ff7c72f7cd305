//! CPU backend: the oracle (reference), the fast run-based labeler (the no-GPU fallback), and
//! Komura's generalized labeling of arbitrary graphs (library API).

pub mod graph;
pub mod lsl;
pub mod oracle;
