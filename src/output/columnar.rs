//! Parquet and Arrow IPC output (`--out rows.parquet`, `--out rows.arrow`): the rows as
//! columnar batches built straight from the results, a Parquet row group (an Arrow record
//! batch) per `frames_per_group` frames, with the columns and values of the CSV. A Parquet
//! row group is encoded a batch of a few frames at a time (`ParquetFile::write`).
//!
//! The schema (version `SCHEMA_VERSION`, in the schema's metadata under `SCHEMA_VERSION_KEY`,
//! which Parquet files also carry in their key-value metadata): one field per column written
//! (`crate::output::columns`), named as in the CSV header, in its order. Integers are `uint64`,
//! floats `float64`, `file` is `utf8`, `damaged` is `bool`; `track` and the sub-pixel, shape
//! and world columns are nullable (null where the CSV field is empty), the others never null.
//! A NaN that the CSV writes as `NaN` is a NaN here too. Version 2 added `damaged`. Extra
//! key-value metadata (`BatchOptions::metadata`: a batch run's settings, the markerscope
//! version, the source) goes beside the version, in the schema and the Parquet file alike.

pub use super::column_lanes::{encode_column, null_block};
use super::column_lanes::{ColumnGroups, ColumnLanes, NULL_BLOCK};
use super::columns::{Column, Columns, Kind};
use super::row_text::{FrameRows, Value};
use crate::ccl::descriptors::ShapeDescriptors;
use crate::ccl::stats::ComponentStats;
use crate::ccl::subpixel::SubpixelCentroid;
use arrow_array::builder::{
    BooleanBuilder, Float64Builder, PrimitiveBuilder, StringBuilder, UInt64Builder,
};
use arrow_array::types::ArrowPrimitiveType;
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

/// The Arrow schema of `columns`, versioned, with the `extra` metadata.
pub fn schema(columns: &Columns, extra: &[(String, String)]) -> SchemaRef {
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
                Kind::OptText => (DataType::Utf8, true),
                Kind::Bool => (DataType::Boolean, false),
            };
            Field::new(c.name(), data_type, nullable)
        })
        .collect();
    versioned_schema(fields, (SCHEMA_VERSION_KEY, SCHEMA_VERSION), extra)
}

/// A schema of `fields` with its version (key, value) and the `extra` metadata in its
/// metadata (the version wins over an extra of the same key).
pub fn versioned_schema(
    fields: Vec<Field>,
    (key, version): (&str, &str),
    extra: &[(String, String)],
) -> SchemaRef {
    let mut metadata: HashMap<String, String> = extra.iter().cloned().collect();
    metadata.insert(key.to_string(), version.to_string());
    Arc::new(Schema::new_with_metadata(fields, metadata))
}

/// One column being filled.
enum Builder {
    UInt(UInt64Builder),
    Float(Float64Builder),
    Text(StringBuilder),
    Bool(BooleanBuilder),
}

impl Builder {
    /// An empty column of `kind` with room for `rows` values.
    fn new(kind: Kind, rows: usize) -> Builder {
        match kind {
            Kind::UInt | Kind::OptUInt => Builder::UInt(UInt64Builder::with_capacity(rows)),
            Kind::Float | Kind::OptFloat => Builder::Float(Float64Builder::with_capacity(rows)),
            Kind::Text | Kind::OptText => Builder::Text(StringBuilder::new()),
            Kind::Bool => Builder::Bool(BooleanBuilder::with_capacity(rows)),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::UInt(b) => Arc::new(b.finish()),
            Builder::Float(b) => Arc::new(b.finish()),
            Builder::Text(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
        }
    }
}

/// Rows of a frame from which its columns are filled on several threads (a group of columns a
/// task); fewer are filled on the caller's thread.
const PARALLEL_ROWS: usize = 2048;

/// The rows of several frames gathered column by column into a batch.
pub struct BatchBuilder {
    columns: Columns,
    schema: SchemaRef,
    builders: Vec<Builder>,
    /// How the columns are spread over the pool when a frame's are filled in parallel.
    groups: ColumnGroups,
    rows: u64,
}

impl BatchBuilder {
    /// Batches of `columns`, the schema carrying the `extra` metadata.
    pub fn new(columns: Columns, extra: &[(String, String)]) -> BatchBuilder {
        BatchBuilder {
            schema: schema(&columns, extra),
            builders: builders(&columns, 0),
            groups: ColumnGroups::new(columns.as_slice().len()),
            columns,
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

    /// The rows of one frame, appended column by column (the columns on all cores when the
    /// frame has many rows).
    pub fn add(&mut self, rows: &FrameRows<'_>) {
        let columns = self.columns.as_slice();
        if rows.len() >= PARALLEL_ROWS {
            self.groups
                .run(
                    self.builders.iter_mut().zip(columns),
                    |(builder, &column)| {
                        append(builder, column, rows);
                        Ok::<(), std::convert::Infallible>(())
                    },
                )
                .unwrap_or_else(|never| match never {});
        } else {
            for (builder, &column) in self.builders.iter_mut().zip(columns) {
                append(builder, column, rows);
            }
        }
        self.rows += rows.len() as u64;
    }

    /// The rows gathered, as a batch; the builders start again empty, with room for as many
    /// rows (the next batch is likely as large).
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        let arrays: Vec<ArrayRef> = self.builders.iter_mut().map(Builder::finish).collect();
        self.builders = builders(&self.columns, self.rows as usize);
        self.rows = 0;
        RecordBatch::try_new(self.schema.clone(), arrays)
    }
}

/// An empty builder per column, each with room for `rows` values.
fn builders(columns: &Columns, rows: usize) -> Vec<Builder> {
    columns
        .as_slice()
        .iter()
        .map(|c| Builder::new(c.kind(), rows))
        .collect()
}

/// Column `column` of every row of a frame, appended: a typed loop over the slice that holds
/// it (no dispatch per value), a run of one value, or a run of nulls for what was not
/// computed. The values are those of `FrameRows::value` (a test compares them).
fn append(builder: &mut Builder, column: Column, rows: &FrameRows<'_>) {
    let n = rows.len();
    let (stats, extras) = (rows.stats, &rows.extras);
    let shape =
        |b: &mut Float64Builder, f: fn(&ShapeDescriptors) -> f64| optional(b, n, extras.shapes, f);
    // NaN (a point on the plane's horizon) is null.
    let world = |b: &mut Float64Builder, k: usize| {
        if extras.world.is_empty() {
            b.append_nulls(n);
        } else {
            b.extend(
                extras
                    .world
                    .iter()
                    .map(|w| w[k].is_finite().then_some(w[k])),
            );
        }
    };
    let subpixel = |b: &mut Float64Builder, f: fn(&SubpixelCentroid) -> f64| {
        optional(b, n, extras.subpixel, f)
    };
    match builder {
        Builder::UInt(b) => {
            let mut each = |f: fn(&ComponentStats) -> u64| mapped(b, stats, f);
            match column {
                Column::Frame => b.append_value_n(rows.frame, n),
                Column::Label => each(|s| s.label.into()),
                Column::Left => each(|s| s.left.into()),
                Column::Top => each(|s| s.top.into()),
                Column::Width => each(|s| s.width.into()),
                Column::Height => each(|s| s.height.into()),
                Column::Area => each(|s| s.area),
                Column::SumX => each(|s| s.sum_x),
                Column::SumY => each(|s| s.sum_y),
                Column::Track if extras.track_ids.is_empty() => b.append_nulls(n),
                Column::Track => b.append_slice(extras.track_ids),
                other => append_values(builder, other, rows),
            }
        }
        Builder::Float(b) => match column {
            Column::CentroidX => mapped(b, stats, |s| s.centroid_x),
            Column::CentroidY => mapped(b, stats, |s| s.centroid_y),
            Column::TimeS => b.append_value_n(rows.time_s, n),
            Column::SubpixelX => subpixel(b, |c| c.x),
            Column::SubpixelY => subpixel(b, |c| c.y),
            Column::Mu20 => shape(b, |d| d.mu20),
            Column::Mu02 => shape(b, |d| d.mu02),
            Column::Mu11 => shape(b, |d| d.mu11),
            Column::OrientationDeg => shape(b, |d| d.orientation_deg),
            Column::MajorAxis => shape(b, |d| d.major_axis),
            Column::MinorAxis => shape(b, |d| d.minor_axis),
            Column::Eccentricity => shape(b, |d| d.eccentricity),
            Column::InertiaRatio => shape(b, |d| d.inertia_ratio),
            Column::Perimeter => shape(b, |d| d.perimeter),
            Column::Circularity => shape(b, |d| d.circularity),
            Column::XWorld => world(b, 0),
            Column::YWorld => world(b, 1),
            other => append_values(builder, other, rows),
        },
        Builder::Text(b) => match column {
            Column::File => (0..n).for_each(|_| b.append_value(rows.file)),
            other => append_values(builder, other, rows),
        },
        Builder::Bool(b) => match column {
            Column::Damaged => b.append_n(n, extras.damaged),
            other => append_values(builder, other, rows),
        },
    }
}

/// `value` of each of `items` appended, none null: the room made in one go, then filled in
/// one pass (no check of room or null flag a value).
fn mapped<T: ArrowPrimitiveType, I>(
    b: &mut PrimitiveBuilder<T>,
    items: &[I],
    value: impl Fn(&I) -> T::Native,
) {
    let start = b.values_slice().len();
    b.append_value_n(T::Native::default(), items.len());
    for (slot, item) in b.values_slice_mut()[start..].iter_mut().zip(items) {
        *slot = value(item);
    }
}

/// A column of an extra: `value` of each of `items`, or `n` nulls when it was not computed
/// (`items` empty).
fn optional<T>(b: &mut Float64Builder, n: usize, items: &[T], value: fn(&T) -> f64) {
    if items.is_empty() {
        b.append_nulls(n);
    } else {
        mapped(b, items, value);
    }
}

/// Column `column` of every row of a frame, value by value (`FrameRows::value`).
fn append_values(builder: &mut Builder, column: Column, rows: &FrameRows<'_>) {
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
    /// Boxed: its column writers and their groups make it far larger than the Arrow writer.
    Parquet(Box<ParquetFile<W>>),
    Arrow(arrow_ipc::writer::FileWriter<W>),
}

/// A Parquet file being written a row group at a time: the row group's columns are encoded
/// and compressed as its rows come, a piece of a few frames at a time, on all cores (the
/// columns in lanes, `ColumnLanes`, which go from piece to piece without waiting for each
/// other), so that the rows in memory are a few pieces', not a row group's.
pub struct ParquetFile<W: Write + Send> {
    file: parquet::file::writer::SerializedFileWriter<W>,
    columns: parquet::arrow::arrow_writer::ArrowRowGroupWriterFactory,
    /// The open row group's columns, being encoded.
    lanes: ColumnLanes,
    row_groups: usize,
}

/// How the rows' Parquet files are written: `compression`, the schema's metadata (the version,
/// the extras) as the file's key-value metadata, row groups as large as the batches.
pub fn parquet_properties(
    schema: &SchemaRef,
    compression: Compression,
) -> parquet::file::properties::WriterProperties {
    use parquet::basic::Compression as C;
    use parquet::file::metadata::KeyValue;
    use parquet::file::properties::WriterProperties;
    let codec = match compression {
        Compression::None => C::UNCOMPRESSED,
        Compression::Snappy => C::SNAPPY,
        Compression::Lz4 => C::LZ4_RAW,
    };
    // In key order, so that the same run writes the same bytes.
    let mut metadata: Vec<KeyValue> = schema
        .metadata()
        .iter()
        .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
        .collect();
    metadata.sort_by(|a, b| a.key.cmp(&b.key));
    WriterProperties::builder()
        .set_compression(codec)
        // Row groups end where the batches do (`write` makes one of each).
        .set_max_row_group_size(usize::MAX)
        // Pinned: an all-null column is written in blocks of this many rows (`NULL_BLOCK`).
        .set_write_batch_size(NULL_BLOCK)
        .set_key_value_metadata(Some(metadata))
        .build()
}

impl<W: Write + Send> ParquetFile<W> {
    fn create(out: W, schema: SchemaRef, compression: Compression) -> io::Result<Self> {
        let props = parquet_properties(&schema, compression);
        // Arrow's writer puts the Arrow schema in the file's metadata, as readers expect; its
        // parts then write the row groups.
        let writer = parquet::arrow::ArrowWriter::try_new(out, schema.clone(), Some(props))
            .map_err(parquet_error)?;
        let (file, columns) = writer.into_serialized_writer().map_err(parquet_error)?;
        Ok(ParquetFile {
            file,
            columns,
            lanes: ColumnLanes::new(schema).map_err(parquet_error)?,
            row_groups: 0,
        })
    }

    /// The rows of `batch` added to the row group being written (one begun if none is), its
    /// columns handed to their lanes; `ends_group`: the row group then closed and written.
    fn write(&mut self, batch: &RecordBatch, ends_group: bool) -> parquet::errors::Result<()> {
        if batch.num_rows() > 0 {
            if !self.lanes.is_open() {
                let writers = self.columns.create_column_writers(self.row_groups)?;
                self.lanes.open(writers)?;
            }
            self.lanes.encode(batch.clone())?;
        }
        if ends_group {
            self.close_group()?;
        }
        Ok(())
    }

    /// The row group being written, its columns' last pages encoded in their lanes, appended
    /// to the file in column order; nothing when none is open.
    fn close_group(&mut self) -> parquet::errors::Result<()> {
        if !self.lanes.is_open() {
            return Ok(());
        }
        let chunks = self.lanes.close()?;
        let mut row_group = self.file.next_row_group()?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut row_group)?;
        }
        row_group.close()?;
        self.row_groups += 1;
        Ok(())
    }

    /// The last row group and the footer written; the output.
    fn finish(mut self) -> parquet::errors::Result<W> {
        self.close_group()?;
        self.file.into_inner()
    }
}

impl<W: Write + Send> BatchFile<W> {
    pub fn create(
        out: W,
        format: Columnar,
        schema: SchemaRef,
        compression: Compression,
    ) -> io::Result<BatchFile<W>> {
        match format {
            Columnar::Parquet => ParquetFile::create(out, schema, compression)
                .map(|f| BatchFile::Parquet(Box::new(f))),
            Columnar::Arrow => {
                let writer =
                    arrow_ipc::writer::FileWriter::try_new(out, &schema).map_err(arrow_error)?;
                Ok(BatchFile::Arrow(writer))
            }
        }
    }

    /// One batch: rows of a row group, which `ends_group` closes (Parquet); a record batch
    /// (Arrow: a batch is a whole group).
    pub fn write(&mut self, batch: &RecordBatch, ends_group: bool) -> io::Result<()> {
        match self {
            BatchFile::Parquet(file) => file.write(batch, ends_group).map_err(parquet_error),
            BatchFile::Arrow(w) => w.write(batch).map_err(arrow_error),
        }
    }

    /// The file's footer written and flushed.
    pub fn finish(self) -> io::Result<()> {
        match self {
            BatchFile::Parquet(file) => {
                let mut out = file.finish().map_err(parquet_error)?;
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
    use crate::output::columns::{ColumnChoice, InUse};
    use crate::output::export::Format;
    use crate::output::row_text::{RowExtras, SourceColumns};
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
            ..BatchOptions::default()
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

    /// Every column of a batch against `FrameRows::value`, the one home of what a row holds:
    /// frames large enough to be filled column by column on all cores and small ones, with
    /// every extra computed (a NaN world position among them) or none.
    #[test]
    fn typed_columns_hold_the_rows_values() {
        use crate::ccl::descriptors::ShapeDescriptors;
        use arrow_array::{BooleanArray, StringArray};
        let n = PARALLEL_ROWS + 37;
        let stats: Vec<_> = (0..n as u32)
            .map(|i| {
                let mut m = Moments::EMPTY;
                let x0 = i / 7 % 1000;
                m.add_run(i % 1000, x0, x0 + 1 + i % 11);
                m.to_stats(i + 1)
            })
            .collect();
        let tracks: Vec<u64> = (0..n as u64).map(|i| i * 3 + 1).collect();
        let subpixel: Vec<SubpixelCentroid> = (0..n as u64)
            .map(|i| SubpixelCentroid::from_sums(i as u32 + 1, 7 + i, 3 * i + 1, 5 * i + 2))
            .collect();
        let shapes: Vec<ShapeDescriptors> = (0..n)
            .map(|i| {
                let v = i as f64;
                ShapeDescriptors {
                    label: i as u32 + 1,
                    mu20: v,
                    mu02: v + 0.5,
                    mu11: -v,
                    orientation_deg: v / 3.0,
                    major_axis: v * 2.0,
                    minor_axis: v / 7.0,
                    eccentricity: 1.0 / (v + 1.0),
                    inertia_ratio: 0.25,
                    perimeter: v + 4.0,
                    circularity: f64::NAN,
                }
            })
            .collect();
        let world: Vec<[f64; 2]> = (0..n)
            .map(|i| {
                let x = if i % 5 == 0 { f64::NAN } else { i as f64 * 0.1 };
                [x, -(i as f64)]
            })
            .collect();
        let full = FrameRows {
            frame: 12,
            time_s: 0.2,
            file: "a,b.png",
            stats: &stats,
            extras: RowExtras {
                track_ids: &tracks,
                subpixel: &subpixel,
                shapes: &shapes,
                world: &world,
                damaged: true,
                source: Some(SourceColumns {
                    index: 2,
                    name: "clip,2.mp4",
                    time_source: "file",
                    frame_set: 7,
                    skew_ms: -1.25,
                }),
                merged: &[],
            },
        };
        let bare = FrameRows {
            frame: 13,
            stats: &stats[..40],
            extras: RowExtras::default(),
            ..full
        };
        let small = FrameRows {
            stats: &stats[..40],
            extras: RowExtras {
                track_ids: &tracks[..40],
                subpixel: &subpixel[..40],
                shapes: &shapes[..40],
                world: &world[..40],
                damaged: false,
                source: None,
                merged: &[],
            },
            ..full
        };
        let frames = [full, bare, small];
        // Every column, the source columns of a run of several sources with them.
        let several = InUse {
            sources: true,
            ..InUse::default()
        };
        let columns = ColumnChoice::All.resolve(several);
        let mut builder = BatchBuilder::new(columns.clone(), &[]);
        for rows in &frames {
            builder.add(rows);
        }
        assert_eq!(builder.rows(), (n + 80) as u64);
        let batch = builder.finish().unwrap();
        assert_eq!(builder.rows(), 0);
        for (k, &column) in columns.as_slice().iter().enumerate() {
            let array = batch.column(k);
            let mut r = 0;
            for rows in &frames {
                for i in 0..rows.len() {
                    let got = if array.is_null(r) {
                        Value::Missing
                    } else if let Some(a) = array.as_any().downcast_ref::<UInt64Array>() {
                        Value::UInt(a.value(r))
                    } else if let Some(a) = array.as_any().downcast_ref::<Float64Array>() {
                        Value::Float(a.value(r))
                    } else if let Some(a) = array.as_any().downcast_ref::<StringArray>() {
                        Value::Text(a.value(r))
                    } else {
                        let a = array.as_any().downcast_ref::<BooleanArray>().unwrap();
                        Value::Bool(a.value(r))
                    };
                    let want = match rows.value(column, i) {
                        // A NaN shape value is a NaN (not null), as in the CSV.
                        Value::Float(v) if v.is_nan() => {
                            assert!(matches!(got, Value::Float(g) if g.is_nan()), "{column:?}");
                            r += 1;
                            continue;
                        }
                        want => want,
                    };
                    assert_eq!(got, want, "{column:?}, row {i} of frame {}", rows.frame);
                    r += 1;
                }
            }
            assert_eq!(r, array.len());
        }
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

    /// Row groups of more rows than a piece are encoded a piece at a time: each still holds
    /// its frames' rows, the last one too when the run ends just after a piece of it.
    #[test]
    fn parquet_row_groups_written_in_pieces_hold_their_rows() {
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
        // A piece a frame; the fourth frame's piece leaves its group open until the end.
        let rows = crate::output::writer::PIECE_ROWS as u32 + 100;
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&write(Format::Parquet, 4, rows, 3)).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        let meta = reader.metadata().clone();
        assert_eq!(meta.num_row_groups(), 2);
        assert_eq!(meta.row_group(0).num_rows(), 3 * i64::from(rows));
        assert_eq!(meta.row_group(1).num_rows(), i64::from(rows));
        let batches: Vec<RecordBatch> = reader.build().unwrap().map(|b| b.unwrap()).collect();
        check(&batches, rows);
    }

    /// The columns' lanes run on the pool at whatever pace they get: the same rows make the
    /// same file, byte for byte, however the encoding was spread over the threads.
    #[test]
    fn parquet_files_do_not_depend_on_the_lanes_timing() {
        // Two row groups of two pieces each (a piece every four frames).
        let first = write(Format::Parquet, 12, 20_000, 6);
        for _ in 0..2 {
            assert!(write(Format::Parquet, 12, 20_000, 6) == first);
        }
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&first).unwrap();
        let reader =
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        assert_eq!(reader.metadata().num_row_groups(), 2);
        let batches: Vec<RecordBatch> = reader.build().unwrap().map(|b| b.unwrap()).collect();
        check(&batches, 20_000);
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
