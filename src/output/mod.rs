//! Consumers of results that write them out: CSV/JSONL files and the per-track summary.

pub mod export;
