//! Where the Parquet writer's time goes for the clutter scene's rows (`synthetic:random`,
//! ≈10,000 components a 1080p frame, with track IDs and sub-pixel centroids as `analyze`
//! writes them): the Arrow columns built from the rows a piece at a time, each column encoded
//! and compressed on one thread, the row groups appended to the file, the all-null columns
//! (from a block of nulls, as the writer writes them, and from their levels); then the whole
//! writer (`RowWriter`) to a file in Parquet, Arrow IPC and CSV, as frames/s.
//!
//! cargo run --profile ci --example parquet_cost [frames] [frames_per_group]
//!     frames: frames written (default 300; the scene's 33 images go round), frames_per_group:
//!     frames per row group (default 100, as `analyze`). RAYON_NUM_THREADS sets the cores used.
//!     The writer's CPU time a frame (all threads) says what it costs on a busy machine.

use markerscope::ccl::cpu::lsl::Lsl;
use markerscope::ccl::stats::ComponentStats;
use markerscope::ccl::subpixel::SubpixelCentroid;
use markerscope::ccl::{Connectivity, Labeler, Want};
use markerscope::output::columnar::{
    encode_column, null_block, parquet_properties, BatchBuilder, Compression,
};
use markerscope::output::columns::{ColumnChoice, Columns, InUse};
use markerscope::output::export::Format;
use markerscope::output::row_text::{FrameRows, RowExtras};
use markerscope::output::writer::{BatchOptions, RowWriter};
use markerscope::source::synthetic::random_frame;
use markerscope::threshold::apply;
use markerscope::threshold::spec::ThresholdSpec;
use parquet::arrow::ArrowWriter;
use std::time::Instant;

#[path = "cpu_time.rs"]
mod cpu_time;
use cpu_time::process_cpu_ms;

type AnyResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The scene's images, labeled, with a grey-weighted centroid per component (on the scene's
/// black-and-white images, the centroid itself).
struct SceneFrame {
    stats: Vec<ComponentStats>,
    subpixel: Vec<SubpixelCentroid>,
}

fn scene(images: u64) -> AnyResult<Vec<SceneFrame>> {
    let mut lsl = Lsl::new();
    let mut out = Vec::new();
    for f in 0..images {
        let mask = apply(
            &random_frame(1920, 1080, f)?,
            &ThresholdSpec::Fixed(127),
            false,
        )?;
        let labeling = lsl.label(&mask, Connectivity::Eight, Want::Stats)?;
        let stats = labeling.stats.ok_or("the labeler returned no statistics")?;
        let subpixel = stats
            .iter()
            .map(|s| SubpixelCentroid {
                label: s.label,
                weight: s.area,
                sum_wx: s.sum_x,
                sum_wy: s.sum_y,
                x: s.centroid_x,
                y: s.centroid_y,
            })
            .collect();
        out.push(SceneFrame { stats, subpixel });
    }
    Ok(out)
}

/// Frame `f`'s rows: a new image every frame, new track IDs for every component (the scene
/// changes wholly), at 60 frames/s.
fn rows<'a>(scene: &'a [SceneFrame], f: u64, ids: &'a [u64]) -> FrameRows<'a> {
    let frame = &scene[(f % scene.len() as u64) as usize];
    FrameRows {
        frame: f,
        time_s: f as f64 / 60.0,
        file: "",
        stats: &frame.stats,
        extras: RowExtras {
            track_ids: &ids[..frame.stats.len()],
            subpixel: &frame.subpixel,
            ..RowExtras::default()
        },
    }
}

/// The columns all null in every piece, encoded on this thread into one row group both ways:
/// from a block of nulls made once (as the writer does) and from their levels worked out for
/// each piece; how many, and the ms of each way.
fn null_columns_cost(
    schema: &arrow_schema::SchemaRef,
    pieces: &[(arrow_array::RecordBatch, bool)],
) -> AnyResult<(usize, f64, f64)> {
    use arrow_array::Array;
    let nulls: Vec<usize> = (0..schema.fields().len())
        .filter(|&k| {
            schema.field(k).is_nullable()
                && pieces
                    .iter()
                    .all(|(p, _)| p.column(k).null_count() == p.num_rows())
        })
        .collect();
    let mut ms = [0.0; 2];
    for (way, ms) in ms.iter_mut().enumerate() {
        let props = parquet_properties(schema, Compression::Snappy);
        let writer = ArrowWriter::try_new(std::io::sink(), schema.clone(), Some(props))?;
        let (_file, factory) = writer.into_serialized_writer()?;
        let mut writers = factory.create_column_writers(0)?;
        let clock = Instant::now();
        for &k in &nulls {
            let field = schema.field(k);
            let block = if way == 0 { null_block(field)? } else { None };
            for (piece, _) in pieces {
                encode_column(&mut writers[k], field, piece.column(k), block.as_ref())?;
            }
        }
        *ms = clock.elapsed().as_secs_f64() * 1e3;
    }
    Ok((nulls.len(), ms[0], ms[1]))
}

fn main() -> AnyResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |k: usize, default: u64| -> AnyResult<u64> {
        match args.get(k) {
            Some(s) => Ok(s
                .parse()
                .map_err(|_| format!("expected a count, got '{s}'"))?),
            None => Ok(default),
        }
    };
    let (frames, per_group) = (number(0, 300)?, number(1, 100)?.max(1));
    let scene = scene(33)?;
    let most = scene.iter().map(|s| s.stats.len()).max().unwrap_or(0);
    let ids: Vec<Vec<u64>> = (0..frames)
        .map(|f| (0..most as u64).map(|i| f * most as u64 + i + 1).collect())
        .collect();
    let total_rows: usize = (0..frames)
        .map(|f| scene[(f % scene.len() as u64) as usize].stats.len())
        .sum();
    println!(
        "{frames} frames of synthetic:random 1920x1080, {:.0} rows a frame, {per_group} frames a row group, {} threads",
        total_rows as f64 / frames as f64,
        rayon::current_num_threads()
    );
    let columns = ColumnChoice::All.resolve(InUse {
        subpixel: true,
        ..InUse::default()
    });

    // The Arrow columns of each row group, built as the writer builds them: a piece of
    // `PIECE_ROWS` rows or more at a time, the last piece of a group ending it.
    const PIECE_ROWS: u64 = 65_536;
    let mut builder = BatchBuilder::new(columns.clone(), &[]);
    let mut pieces = Vec::new();
    let clock = Instant::now();
    for f in 0..frames {
        builder.add(&rows(&scene, f, &ids[f as usize]));
        let ends_group = (f + 1) % per_group == 0 || f + 1 == frames;
        if ends_group || builder.rows() >= PIECE_ROWS {
            pieces.push((builder.finish()?, ends_group));
        }
    }
    let build_ms = clock.elapsed().as_secs_f64() * 1e3;
    println!(
        "build Arrow columns: {:.3} ms a frame",
        build_ms / frames as f64
    );

    // Each column of each row group encoded on this thread alone, per compression.
    let schema = builder.schema();
    let null_blocks = schema
        .fields()
        .iter()
        .map(|field| null_block(field))
        .collect::<Result<Vec<_>, _>>()?;
    for compression in [Compression::None, Compression::Snappy, Compression::Lz4] {
        let props = parquet_properties(&schema, compression);
        let writer = ArrowWriter::try_new(std::io::sink(), schema.clone(), Some(props))?;
        let (mut file, factory) = writer.into_serialized_writer()?;
        let mut per_column = vec![0.0; columns.as_slice().len()];
        let (mut append_ms, mut groups) = (0.0, 0);
        let mut open = Vec::new();
        for (piece, ends_group) in &pieces {
            if open.is_empty() {
                open = factory.create_column_writers(groups)?;
            }
            for (((w, (field, array)), ms), nulls) in open
                .iter_mut()
                .zip(schema.fields().iter().zip(piece.columns()))
                .zip(per_column.iter_mut())
                .zip(&null_blocks)
            {
                let clock = Instant::now();
                encode_column(w, field, array, nulls.as_ref())?;
                *ms += clock.elapsed().as_secs_f64() * 1e3;
            }
            if !ends_group {
                continue;
            }
            let mut chunks = Vec::new();
            for (w, ms) in std::mem::take(&mut open).into_iter().zip(&mut per_column) {
                let clock = Instant::now();
                chunks.push(w.close()?);
                *ms += clock.elapsed().as_secs_f64() * 1e3;
            }
            let clock = Instant::now();
            let mut group = file.next_row_group()?;
            for chunk in chunks {
                chunk.append_to_row_group(&mut group)?;
            }
            group.close()?;
            append_ms += clock.elapsed().as_secs_f64() * 1e3;
            groups += 1;
        }
        let encode: f64 = per_column.iter().sum();
        let mut costly: Vec<(usize, f64)> = per_column.iter().copied().enumerate().collect();
        costly.sort_by(|a, b| b.1.total_cmp(&a.1));
        let top: Vec<String> = costly[..5]
            .iter()
            .map(|&(k, ms)| format!("{} {:.3}", columns.as_slice()[k].name(), ms / frames as f64))
            .collect();
        println!(
            "encode {compression:?}, one thread: {:.3} ms a frame (costliest columns: {}); \
             append to the file {:.3}",
            encode / frames as f64,
            top.join(", "),
            append_ms / frames as f64
        );
    }

    let (nulls, from_block, from_levels) = null_columns_cost(&schema, &pieces)?;
    println!(
        "the {nulls} all-null columns, one thread: {:.3} ms a frame from a block of nulls, \
         {:.3} from their levels worked out",
        from_block / frames as f64,
        from_levels / frames as f64
    );

    // The whole writer, to a file, on all cores.
    for format in [Format::Parquet, Format::Arrow, Format::Csv] {
        let file = tempfile::NamedTempFile::new()?;
        let out = Box::new(std::io::BufWriter::new(file.reopen()?));
        let options = BatchOptions {
            frames_per_group: per_group,
            ..BatchOptions::default()
        };
        let (clock, cpu) = (Instant::now(), process_cpu_ms());
        let mut writer = RowWriter::start(out, format, Columns::clone(&columns), options)?;
        for f in 0..frames {
            writer.write_frame(&rows(&scene, f, &ids[f as usize]))?;
        }
        let times = writer.finish()?;
        let wall = clock.elapsed().as_secs_f64();
        let cpu_ms = (process_cpu_ms() - cpu) / frames as f64;
        let (format_ms, write_ms) = times.per_frame();
        println!(
            "{format:?} writer to a file: {:.1} frames/s (format {format_ms:.3}, write {write_ms:.3} ms a frame; \
             CPU {cpu_ms:.3} ms a frame, all threads), {:.1} MB",
            frames as f64 / wall,
            file.as_file().metadata()?.len() as f64 / 1e6
        );
    }
    Ok(())
}
