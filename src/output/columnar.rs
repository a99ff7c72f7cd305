//! Parquet and Arrow IPC output (`--out rows.parquet`, `--out rows.arrow`): the rows as
//! columnar batches built straight from the results, one batch (a Parquet row group) per
//! `frames_per_group` frames, with the columns and values of the CSV.
//!
//! The schema (version `SCHEMA_VERSION`, in the schema's metadata under `SCHEMA_VERSION_KEY`,
//! which Parquet files also carry in their key-value metadata): one field per column written
//! (`crate::output::columns`), named as in the CSV header, in its order. Integers are `uint64`,
//! floats `float64`, `file` is `utf8`, `damaged` is `bool`; `track` and the sub-pixel, shape
//! and world columns are nullable (null where the CSV field is empty), the others never null.
//! A NaN that the CSV writes as `NaN` is a NaN here too. Version 2 added `damaged`.

use super::columns::{Column, Columns, Kind};
use super::row_text::{FrameRows, Value};
use arrow_array::builder::{BooleanBuilder, Float64Builder, StringBuilder, UInt64Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};
use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::Arc;

/// The version of the row schema; raised when a column changes type or meaning.
pub const SCHEMA_VERSION: &str = "2";
/// The metadata key that holds `SCHEMA_VERSION`.
pub const SCHEMA_VERSION_KEY: &str = "markerscope.rows.schema_version";

/// Frames per batch (a Parquet row group) unless asked otherwise.
pub const DEFAULT_FRAMES_PER_GROUP: u64 = 100;

/// The columnar formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Columnar {
    Parquet,
    Arrow,
}

/// How a Parquet file is compressed (`--compression`; Arrow IPC files are not compressed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Compression {
    None,
    /// Fast, and what most readers expect (the default).
    #[default]
    Snappy,
    Lz4,
}

/// The Arrow schema of `columns`, versioned.
pub fn schema(columns: &Columns) -> SchemaRef {
    let fields: Vec<Field> = columns
        .as_slice()
        .iter()
        .map(|&c| {
            let (data_type, nullable) = match c.kind() {
                Kind::UInt => (DataType::UInt64, false),
                Kind::OptUInt => (DataType::UInt64, true),
                Kind::Float => (DataType::Float64, false),
                Kind::OptFloat => (DataType::Float64, true),
                Kind::Text => (DataType::Utf8, false),
                Kind::Bool => (DataType::Boolean, false),
            };
            Field::new(c.name(), data_type, nullable)
        })
        .collect();
    let metadata = HashMap::from([(SCHEMA_VERSION_KEY.to_string(), SCHEMA_VERSION.to_string())]);
    Arc::new(Schema::new_with_metadata(fields, metadata))
}

/// One column being filled.
enum Builder {
    UInt(UInt64Builder),
    Float(Float64Builder),
    Text(StringBuilder),
    Bool(BooleanBuilder),
}

/// The rows of several frames gathered column by column into a batch.
pub struct BatchBuilder {
    columns: Columns,
    schema: SchemaRef,
    builders: Vec<Builder>,
    rows: u64,
}

impl BatchBuilder {
    pub fn new(columns: Columns) -> BatchBuilder {
        let builders = columns
            .as_slice()
            .iter()
            .map(|c| match c.kind() {
                Kind::UInt | Kind::OptUInt => Builder::UInt(UInt64Builder::new()),
                Kind::Float | Kind::OptFloat => Builder::Float(Float64Builder::new()),
                Kind::Text => Builder::Text(StringBuilder::new()),
                Kind::Bool => Builder::Bool(BooleanBuilder::new()),
            })
            .collect();
        BatchBuilder {
            schema: schema(&columns),
            columns,
            builders,
            rows: 0,
        }
    }

    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Rows gathered since the last batch.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The rows of one frame, appended column by column.
    pub fn add(&mut self, rows: &FrameRows<'_>) {
        for (&column, builder) in self.columns.as_slice().iter().zip(&mut self.builders) {
            append(builder, column, rows);
        }
        self.rows += rows.len() as u64;
    }

    /// The rows gathered, as a batch; the builders start again empty.
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        let arrays: Vec<ArrayRef> = self
            .builders
            .iter_mut()
            .map(|b| -> ArrayRef {
                match b {
                    Builder::UInt(b) => Arc::new(b.finish()),
                    Builder::Float(b) => Arc::new(b.finish()),
                    Builder::Text(b) => Arc::new(b.finish()),
                    Builder::Bool(b) => Arc::new(b.finish()),
                }
            })
            .collect();
        self.rows = 0;
        RecordBatch::try_new(self.schema.clone(), arrays)
    }
}

/// Column `column` of every row of a frame.
fn append(builder: &mut Builder, column: Column, rows: &FrameRows<'_>) {
    for i in 0..rows.len() {
        match (&mut *builder, rows.value(column, i)) {
            (Builder::UInt(b), Value::UInt(v)) => b.append_value(v),
            (Builder::Float(b), Value::Float(v)) => b.append_value(v),
            (Builder::Text(b), Value::Text(s)) => b.append_value(s),
            (Builder::Bool(b), Value::Bool(v)) => b.append_value(v),
            (Builder::UInt(b), _) => b.append_null(),
            (Builder::Float(b), _) => b.append_null(),
            (Builder::Text(b), _) => b.append_null(),
            (Builder::Bool(b), _) => b.append_null(),
        }
    }
}

/// A Parquet or Arrow IPC file being written, batch by batch.
pub enum BatchFile<W: Write + Send> {
    Parquet(parquet::arrow::ArrowWriter<W>),
    Arrow(arrow_ipc::writer::FileWriter<W>),
}

impl<W: Write + Send> BatchFile<W> {
    pub fn create(
        out: W,
        format: Columnar,
        schema: SchemaRef,
        compression: Compression,
    ) -> io::Result<BatchFile<W>> {
        match format {
            Columnar::Parquet => {
                use parquet::basic::Compression as C;
                use parquet::file::metadata::KeyValue;
                use parquet::file::properties::WriterProperties;
                let codec = match compression {
                    Compression::None => C::UNCOMPRESSED,
                    Compression::Snappy => C::SNAPPY,
                    Compression::Lz4 => C::LZ4_RAW,
                };
                let props = WriterProperties::builder()
                    .set_compression(codec)
                    // Row groups end where the batches do (`write` flushes each).
                    .set_max_row_group_size(usize::MAX)
                    .set_key_value_metadata(Some(vec![KeyValue::new(
                        SCHEMA_VERSION_KEY.to_string(),
                        SCHEMA_VERSION.to_string(),
                    )]))
                    .build();
                let writer = parquet::arrow::ArrowWriter::try_new(out, schema, Some(props))
                    .map_err(parquet_error)?;
                Ok(BatchFile::Parquet(writer))
            }
            Columnar::Arrow => {
                let writer =
                    arrow_ipc::writer::FileWriter::try_new(out, &schema).map_err(arrow_error)?;
                Ok(BatchFile::Arrow(writer))
            }
        }
    }

    /// One batch: a row group of its own (Parquet), a record batch (Arrow).
    pub fn write(&mut self, batch: &RecordBatch) -> io::Result<()> {
        match self {
            BatchFile::Parquet(w) => {
                w.write(batch).map_err(parquet_error)?;
                w.flush().map_err(parquet_error)
            }
            BatchFile::Arrow(w) => w.write(batch).map_err(arrow_error),
        }
    }

    /// The file's footer written and flushed.
    pub fn finish(self) -> io::Result<()> {
        match self {
            BatchFile::Parquet(w) => {
                let mut out = w.into_inner().map_err(parquet_error)?;
                out.flush()
            }
            BatchFile::Arrow(mut w) => {
                w.finish().map_err(arrow_error)?;
                w.get_mut().flush()
            }
        }
    }
}

/// The I/O error inside, else the message.
fn parquet_error(e: parquet::errors::ParquetError) -> io::Error {
    match e {
        parquet::errors::ParquetError::External(inner) => match inner.downcast::<io::Error>() {
            Ok(io) => *io,
            Err(other) => io::Error::other(other.to_string()),
        },
        other => io::Error::other(other.to_string()),
    }
}

fn arrow_error(e: ArrowError) -> io::Error {
    match e {
        ArrowError::IoError(_, io) => io,
        other => io::Error::other(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::stats::Moments;
    use crate::output::export::Format;
    use crate::output::row_text::RowExtras;
    use crate::output::writer::{BatchOptions, RowWriter};
    use arrow_array::{Array, Float64Array, StringArray, UInt64Array};
    use std::sync::Mutex;

    /// A buffer the writer thread fills and the test reads.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// `frames` frames of `rows` rows with a track each, every other row with a world position
    /// (NaN: null), written in `format`; the file's bytes.
    fn write(format: Format, frames: u64, rows: u32, frames_per_group: u64) -> Vec<u8> {
        let out = Shared::default();
        let batches = BatchOptions {
            frames_per_group,
            compression: Compression::Lz4,
        };
        let columns =
            crate::output::columns::ColumnChoice::parse("frame,track,file,centroid_x,x_world")
                .unwrap()
                .resolve(Default::default());
        let mut w = RowWriter::start(Box::new(out.clone()), format, columns, batches).unwrap();
        for f in 0..frames {
            let stats: Vec<_> = (0..rows)
                .map(|i| {
                    let mut m = Moments::EMPTY;
                    m.add_run(i, 0, 1 + i % 3);
                    m.to_stats(i + 1)
                })
                .collect();
            let ids: Vec<u64> = (0..rows as u64).map(|i| f * 100 + i).collect();
            let world: Vec<[f64; 2]> = (0..rows)
                .map(|i| [if i % 2 == 0 { f64::from(i) } else { f64::NAN }, 0.0])
                .collect();
            w.write_frame(&FrameRows {
                frame: f,
                time_s: 0.0,
                file: "é,x",
                stats: &stats,
                extras: RowExtras {
                    track_ids: &ids,
                    world: &world,
                    ..RowExtras::default()
                },
            })
            .unwrap();
        }
        let times = w.finish().unwrap();
        assert_eq!(times.rows, frames * u64::from(rows));
        let bytes = out.0.lock().unwrap().clone();
        bytes
    }

    /// The batches' columns against what was written: frame, track, file, centroid (x + 1
    /// for the run [0, 1 + i % 3)), world (null for NaN).
    fn check(batches: &[RecordBatch], rows: u32) {
        let mut n = 0u64;
        for batch in batches {
            let col = |name: &str| batch.column_by_name(name).unwrap().clone();
            let frame = col("frame");
            let frame = frame.as_any().downcast_ref::<UInt64Array>().unwrap();
            let track = col("track");
            let track = track.as_any().downcast_ref::<UInt64Array>().unwrap();
            let file = col("file");
            let file = file.as_any().downcast_ref::<StringArray>().unwrap();
            let cx = col("centroid_x");
            let cx = cx.as_any().downcast_ref::<Float64Array>().unwrap();
            let world = col("x_world");
            let world = world.as_any().downcast_ref::<Float64Array>().unwrap();
            for r in 0..batch.num_rows() {
                let (f, i) = (n / u64::from(rows), n % u64::from(rows));
                assert_eq!(frame.value(r), f);
                assert_eq!(track.value(r), f * 100 + i);
                assert_eq!(file.value(r), "é,x");
                assert_eq!(cx.value(r), (i % 3) as f64 / 2.0);
                assert_eq!(world.is_null(r), i % 2 == 1);
                n += 1;
            }
        }
        assert!(n > 0);
    }

    #[test]
    fn parquet_holds_the_rows_in_a_row_group_per_n_frames() {
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
        let bytes = write(Format::Parquet, 7, 300, 3);
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        let meta = reader.metadata().clone();
        assert_eq!(meta.num_row_groups(), 3);
        assert_eq!(meta.row_group(0).num_rows(), 900);
        assert_eq!(meta.row_group(2).num_rows(), 300);
        let kv = meta.file_metadata().key_value_metadata().unwrap();
        assert!(kv
            .iter()
            .any(|k| k.key == SCHEMA_VERSION_KEY && k.value.as_deref() == Some(SCHEMA_VERSION)));
        let batches: Vec<RecordBatch> = reader.build().unwrap().map(|b| b.unwrap()).collect();
        check(&batches, 300);
    }

    #[test]
    fn arrow_holds_the_rows_in_a_batch_per_n_frames() {
        let bytes = write(Format::Arrow, 5, 40, 2);
        let reader = arrow_ipc::reader::FileReader::try_new(io::Cursor::new(bytes), None).unwrap();
        assert_eq!(reader.num_batches(), 3);
        assert_eq!(
            reader.schema().metadata()[SCHEMA_VERSION_KEY],
            SCHEMA_VERSION
        );
        let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
        check(&batches, 40);
    }
}
