//! The per-track summary of a run (`analyze --tracks FILE`): one row per track, with the
//! columns of `export::TRACKS_CSV_HEADER`, in the order the tracks end (the tracks still
//! running at the end last, by ID). A CSV unless the file's extension asks for Parquet
//! (`.parquet`, `.pq`) or Arrow IPC (`.arrow`, `.feather`).
//!
//! The columnar schema (version `TRACKS_SCHEMA_VERSION` under `TRACKS_SCHEMA_VERSION_KEY`,
//! beside the extra metadata of `BatchOptions::metadata`): `track`, `first_frame`,
//! `last_frame`, `length` as `uint64`, `mean_area`, `path_length`, `last_x`, `last_y` as
//! `float64`, none of them null. A batch (a Parquet row group) holds `TRACKS_PER_GROUP` rows
//! (the last fewer), so what is held stays bounded on scenes that end thousands of tracks a frame.

use super::columnar::{versioned_schema, BatchFile};
use super::export::{Encoding, Format, TrackWriter, TRACKS_CSV_HEADER};
use super::writer::BatchOptions;
use crate::track::TrackSummary;
use arrow_array::{ArrayRef, Float64Array, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Field, SchemaRef};
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

/// The version of the track summary's columnar schema; raised when a column changes type or
/// meaning.
pub const TRACKS_SCHEMA_VERSION: &str = "1";
/// The metadata key that holds `TRACKS_SCHEMA_VERSION`.
pub const TRACKS_SCHEMA_VERSION_KEY: &str = "markerscope.tracks.schema_version";

/// Rows gathered before a batch (a Parquet row group) is written.
pub const TRACKS_PER_GROUP: usize = 1 << 16;

/// The columns of the summary that are integers (the others are floats).
const INTEGER_COLUMNS: usize = 4;

/// The columnar schema of the summary, with the `extra` metadata.
pub fn tracks_schema(extra: &[(String, String)]) -> SchemaRef {
    let fields = TRACKS_CSV_HEADER
        .split(',')
        .enumerate()
        .map(|(k, name)| {
            let data_type = if k < INTEGER_COLUMNS {
                DataType::UInt64
            } else {
                DataType::Float64
            };
            Field::new(name, data_type, false)
        })
        .collect();
    versioned_schema(
        fields,
        (TRACKS_SCHEMA_VERSION_KEY, TRACKS_SCHEMA_VERSION),
        extra,
    )
}

/// A track summary file being written as tracks end.
pub enum TrackFile {
    Csv(TrackWriter<BufWriter<Box<dyn Write + Send>>>),
    Columnar {
        file: Box<BatchFile<Box<dyn Write + Send>>>,
        schema: SchemaRef,
        /// Rows not yet in a batch.
        held: Vec<TrackSummary>,
    },
}

impl TrackFile {
    /// The summary for `path` (its extension picks the format) written to `out`; Parquet
    /// compressed and Parquet and Arrow given metadata as `batches` says.
    pub fn create(
        out: Box<dyn Write + Send>,
        path: &Path,
        batches: &BatchOptions,
    ) -> io::Result<TrackFile> {
        match Format::from_path(path).map(Format::encoding) {
            Some(Encoding::Columnar(columnar)) => {
                let schema = tracks_schema(&batches.metadata);
                let file = BatchFile::create(out, columnar, schema.clone(), batches.compression)?;
                Ok(TrackFile::Columnar {
                    file: Box::new(file),
                    schema,
                    held: Vec::new(),
                })
            }
            _ => TrackWriter::new(BufWriter::with_capacity(1 << 16, out)).map(TrackFile::Csv),
        }
    }

    /// One row per track, in the order given.
    pub fn write(&mut self, tracks: &[TrackSummary]) -> io::Result<()> {
        match self {
            TrackFile::Csv(w) => w.write(tracks),
            TrackFile::Columnar { file, schema, held } => {
                held.extend_from_slice(tracks);
                if held.len() >= TRACKS_PER_GROUP {
                    let mut groups = held.chunks_exact(TRACKS_PER_GROUP);
                    for group in &mut groups {
                        file.write(&batch(schema, group)?, true)?;
                    }
                    let rest = groups.remainder().len();
                    held.drain(..held.len() - rest);
                }
                Ok(())
            }
        }
    }

    /// The rows still held written, the file completed and flushed.
    pub fn finish(self) -> io::Result<()> {
        match self {
            TrackFile::Csv(w) => w.finish()?.flush(),
            TrackFile::Columnar {
                mut file,
                schema,
                held,
            } => {
                if !held.is_empty() {
                    file.write(&batch(&schema, &held)?, true)?;
                }
                file.finish()
            }
        }
    }
}

/// The rows of `tracks` as one batch of `schema`.
fn batch(schema: &SchemaRef, tracks: &[TrackSummary]) -> io::Result<RecordBatch> {
    let uint = |f: fn(&TrackSummary) -> u64| -> ArrayRef {
        Arc::new(tracks.iter().map(f).collect::<UInt64Array>())
    };
    let float = |f: fn(&TrackSummary) -> f64| -> ArrayRef {
        Arc::new(tracks.iter().map(f).collect::<Float64Array>())
    };
    let columns = vec![
        uint(|t| t.id),
        uint(|t| t.first_frame),
        uint(|t| t.last_frame),
        uint(|t| t.length),
        float(|t| t.mean_area),
        float(|t| t.path_length),
        float(|t| t.last_x),
        float(|t| t.last_y),
    ];
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, UInt64Type};

    /// `tracks` written to a file named `name` (in two calls, the first of `split` rows), as
    /// `batches` says; the file's bytes.
    fn written(
        name: &str,
        tracks: &[TrackSummary],
        split: usize,
        batches: &BatchOptions,
    ) -> Vec<u8> {
        let temp = tempfile::NamedTempFile::new().unwrap();
        let out: Box<dyn Write + Send> = Box::new(temp.reopen().unwrap());
        let mut file = TrackFile::create(out, Path::new(name), batches).unwrap();
        let (first, second) = tracks.split_at(split);
        file.write(first).unwrap();
        file.write(second).unwrap();
        file.finish().unwrap();
        std::fs::read(temp.path()).unwrap()
    }

    fn summary(id: u64) -> TrackSummary {
        TrackSummary {
            id,
            first_frame: id / 3,
            last_frame: id / 3 + id % 5,
            length: id % 5 + 1,
            mean_area: id as f64 * 0.5,
            path_length: (id as f64).sqrt(),
            last_x: -(id as f64),
            last_y: 1.0 / (id as f64 + 1.0),
        }
    }

    /// More rows than a batch holds, given in two calls: the Arrow file has them in order, in
    /// a batch per `TRACKS_PER_GROUP` rows, with the version and the extra metadata.
    #[test]
    fn arrow_summary_holds_the_rows_in_order_with_the_metadata() {
        let batches = BatchOptions {
            metadata: vec![("markerscope.source".into(), "a.mp4".into())],
            ..BatchOptions::default()
        };
        let all: Vec<TrackSummary> = (0..TRACKS_PER_GROUP as u64 + 10)
            .rev()
            .map(summary)
            .collect();
        let bytes = written("t.arrow", &all, 100, &batches);
        let reader = arrow_ipc::reader::FileReader::try_new(io::Cursor::new(bytes), None).unwrap();
        let meta = reader.schema().metadata().clone();
        assert_eq!(meta[TRACKS_SCHEMA_VERSION_KEY], TRACKS_SCHEMA_VERSION);
        assert_eq!(meta["markerscope.source"], "a.mp4");
        assert_eq!(reader.num_batches(), 2);
        let mut got = Vec::new();
        for batch in reader {
            let batch = batch.unwrap();
            let uint = |k: usize| batch.column(k).as_primitive::<UInt64Type>().clone();
            let float = |k: usize| batch.column(k).as_primitive::<Float64Type>().clone();
            for r in 0..batch.num_rows() {
                got.push(TrackSummary {
                    id: uint(0).value(r),
                    first_frame: uint(1).value(r),
                    last_frame: uint(2).value(r),
                    length: uint(3).value(r),
                    mean_area: float(4).value(r),
                    path_length: float(5).value(r),
                    last_x: float(6).value(r),
                    last_y: float(7).value(r),
                });
            }
        }
        assert_eq!(got, all);
    }

    /// Another extension, or none: the CSV, as before.
    #[test]
    fn other_names_get_the_csv() {
        let bytes = written("t.txt", &[summary(4)], 0, &BatchOptions::default());
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(text, format!("{TRACKS_CSV_HEADER}\n4,1,5,5,2,2,-4,0.2\n"));
    }
}
