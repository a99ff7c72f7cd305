//! Consumers of results that write them out: CSV/JSONL files (`export`; the columns in
//! `columns`, their text in `row_text`, Parquet and Arrow in `columnar`, a Parquet row
//! group's columns encoded in `column_lanes`, all written at the engine's rate by `writer`),
//! the per-track summary as CSV, Parquet or Arrow (`tracks`), the marker rows of
//! `analyze --markers` (`markers`), the recording of the analysed frames (`record`), live
//! streams to other programs (`stream`), and files written under a temporary name and renamed
//! into place (`files`).

mod column_lanes;
pub mod columnar;
pub mod columns;
pub mod export;
pub mod files;
pub mod markers;
pub mod record;
pub mod row_text;
pub mod stream;
pub mod tracks;
pub mod writer;
