//! Consumers of results that write them out: CSV/JSONL files and the per-track summary
//! (`export`), the marker rows of `analyze --markers` (`markers`), the recording of the
//! analysed frames (`record`), live streams to other programs (`stream`).

pub mod export;
pub mod markers;
pub mod record;
pub mod stream;
