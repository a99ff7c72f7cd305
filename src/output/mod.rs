//! Consumers of results that write them out: CSV/JSONL files and the per-track summary
//! (`export`), the recording of the analysed frames (`record`), live streams to other programs
//! (`stream`).

pub mod export;
pub mod record;
pub mod stream;
