//! The rows of a run written at the engine's rate: each frame's rows are formatted on all cores
//! (rayon) into buffers that go round and are reused, and one writer thread writes them in
//! order, so that the next frame is formatted while this one is written. Parquet rows are
//! gathered into Arrow columns a piece of a few frames at a time, which the writer thread
//! hands to the open row group's column lanes on all cores (a lane goes on to the next piece
//! while the others finish this one) for the row group of `frames_per_group` frames; Arrow
//! rows into a batch per `frames_per_group` frames. The writer's time is its own stage
//! (`OutputTimes`); a write that fails stops the run with its reason, and the rows counted as
//! written are those the output took.

use super::columnar::{BatchBuilder, BatchFile, Columnar, Compression};
use super::columns::Columns;
use super::export::{skipped_record, Encoding, Format};
use super::row_text::{FrameRows, TextFormat};
use crate::source::Skipped;
use arrow_array::RecordBatch;
use crossbeam_channel::{Receiver, Sender};
use rayon::prelude::*;
use std::io::{self, Write};
use std::ops::Range;
use std::thread::JoinHandle;
use std::time::Instant;

/// Rows per formatting task: large enough that a task outweighs its scheduling, small enough
/// that a 1080p clutter frame (≈10,000 rows) spreads over 16 cores.
const CHUNK_ROWS: usize = 512;

/// Formatted chunks waiting for the writer: about three clutter frames. When the writer falls
/// behind, formatting waits (nothing is dropped).
const QUEUED_CHUNKS: usize = 64;

/// Arrow batches sent to the writer and not yet written: a batch holds many frames (hundreds
/// of MB for dense scenes), so when the writer falls behind, the next batch waits for one of
/// these rather than the queue filling with 64 of them.
const QUEUED_BATCHES: usize = 2;

/// Parquet pieces sent to the writer and not yet handed to the column lanes (which hold two
/// more at most): at most 90 MB with every column, some forty clutter frames, so that a
/// writer that is slow for a moment does not hold up the frames at once.
const QUEUED_PIECES: usize = 6;

/// Rows of a Parquet piece: the rows gathered are sent to the writer once they are as many
/// (or the row group ends). Enough that a column's piece far outweighs its task on the pool
/// (about six 1080p clutter frames), few enough that the pieces in flight stay small (15 MB
/// with every column) where a row group's columns would be hundreds of MB.
pub(crate) const PIECE_ROWS: u64 = 65_536;

/// Where the formatting and the writing of a run's rows spent their time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OutputTimes {
    /// Rows the output took.
    pub rows: u64,
    /// Frames whose rows were written.
    pub frames: u64,
    /// Formatting, on the caller's side (wall time, all cores together), ms.
    pub format_ms: f64,
    /// The writer thread's wall time in its writes and the final flush (Parquet: its waits
    /// for the column lanes that encode on all cores included), ms; its waits for rows are not
    /// counted.
    pub write_ms: f64,
}

impl OutputTimes {
    /// Mean ms a frame: formatting, writing.
    pub fn per_frame(&self) -> (f64, f64) {
        let n = self.frames.max(1) as f64;
        (self.format_ms / n, self.write_ms / n)
    }
}

/// A piece of the output, and how many rows it holds.
struct Chunk {
    piece: Piece,
    rows: u64,
}

enum Piece {
    Text(Vec<u8>),
    /// Rows of a row group (Parquet; an Arrow batch is a whole group), and whether the group
    /// ends with them.
    Batch {
        batch: RecordBatch,
        ends_group: bool,
    },
}

/// Where the writer thread writes.
enum Destination {
    Text(Box<dyn Write + Send>),
    Batches(Box<BatchFile<Box<dyn Write + Send>>>),
}

/// How the rows are encoded before the writer gets them.
enum Encoder {
    Text(TextFormat),
    Batches {
        builder: BatchBuilder,
        frames_per_group: u64,
        /// Frames of the group being gathered.
        frames: u64,
        /// Rows from which a piece of a group is sent before the group ends (Parquet).
        piece_rows: u64,
        /// Pieces of the group were sent, and its end is still to be.
        group_open: bool,
    },
}

/// The settings of the columnar formats (the rows' and the `--tracks` summary's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchOptions {
    /// Frames per batch (a Parquet row group).
    pub frames_per_group: u64,
    pub compression: Compression,
    /// Key-value metadata written beside the schema version (a batch run's settings, the
    /// markerscope version, the source); none unless asked for.
    pub metadata: Vec<(String, String)>,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            frames_per_group: super::columnar::DEFAULT_FRAMES_PER_GROUP,
            compression: Compression::default(),
            metadata: Vec::new(),
        }
    }
}

/// What the writer thread ends with.
struct WriterEnd {
    rows: u64,
    write_ms: f64,
    error: Option<io::Error>,
}

/// Component rows (and JSONL's skip records) to one output in a text format, formatted in
/// parallel and written in order by a thread of their own.
pub struct RowWriter {
    encoder: Encoder,
    columns: Columns,
    to_writer: Option<Sender<Chunk>>,
    /// Buffers the writer is done with, to be formatted into again; an empty one for each
    /// batch written.
    free: Receiver<Vec<u8>>,
    /// Batches sent and not yet written.
    batches_queued: usize,
    /// How many may be (`QUEUED_BATCHES`, `QUEUED_PIECES`).
    batches_queue: usize,
    writer: Option<JoinHandle<WriterEnd>>,
    /// The buffers of the frames being formatted, one a piece.
    chunks: Vec<Vec<u8>>,
    /// The pieces of the frames being formatted: a frame's place among them, its rows.
    pieces: Vec<(usize, Range<usize>)>,
    /// Pieces formatted, not yet sent.
    staged: Vec<Chunk>,
    frames: u64,
    format_ms: f64,
}

impl RowWriter {
    /// Starts the writer thread on `out`; the CSV header (of `columns`) is the first thing
    /// written, a Parquet or Arrow file's schema its header.
    pub fn start(
        out: Box<dyn Write + Send>,
        format: Format,
        columns: Columns,
        batches: BatchOptions,
    ) -> io::Result<RowWriter> {
        let mut batches_queue = 0;
        let (encoder, destination) = match format.encoding() {
            Encoding::Text(text) => (Encoder::Text(text), Destination::Text(out)),
            Encoding::Columnar(columnar) => {
                if batches.frames_per_group == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "a row group needs at least 1 frame",
                    ));
                }
                let builder = BatchBuilder::new(columns.clone(), &batches.metadata);
                let file = BatchFile::create(out, columnar, builder.schema(), batches.compression)?;
                let (piece_rows, queue) = match columnar {
                    Columnar::Parquet => (PIECE_ROWS, QUEUED_PIECES),
                    Columnar::Arrow => (u64::MAX, QUEUED_BATCHES),
                };
                batches_queue = queue;
                let encoder = Encoder::Batches {
                    builder,
                    frames_per_group: batches.frames_per_group,
                    frames: 0,
                    piece_rows,
                    group_open: false,
                };
                (encoder, Destination::Batches(Box::new(file)))
            }
        };
        let (to_writer, chunks) = crossbeam_channel::bounded::<Chunk>(QUEUED_CHUNKS);
        let (give_back, free) = crossbeam_channel::unbounded();
        let writer = std::thread::Builder::new()
            .name("row-writer".into())
            .spawn(move || write_chunks(destination, &chunks, &give_back))?;
        let mut rows = RowWriter {
            encoder,
            columns,
            to_writer: Some(to_writer),
            free,
            batches_queued: 0,
            batches_queue,
            writer: Some(writer),
            chunks: Vec::new(),
            pieces: Vec::new(),
            staged: Vec::new(),
            frames: 0,
            format_ms: 0.0,
        };
        if let Encoder::Text(TextFormat::Csv) = rows.encoder {
            let mut header = rows.columns.header().into_bytes();
            header.push(b'\n');
            rows.send(Chunk {
                piece: Piece::Text(header),
                rows: 0,
            })?;
        }
        Ok(rows)
    }

    /// Formats the rows of one frame (on all cores when there are many) and queues them for
    /// the writer; waits while the writer is behind. The writer's failure is returned here or
    /// by `finish`.
    pub fn write_frame(&mut self, rows: &FrameRows<'_>) -> io::Result<()> {
        self.write_frames(std::slice::from_ref(rows))
    }

    /// The rows of several frames, in order, as `write_frame` of each: text rows are
    /// formatted all together on all cores (the frames of a frame set, where each holds too
    /// few rows to spread over them alone).
    pub fn write_frames(&mut self, frames: &[FrameRows<'_>]) -> io::Result<()> {
        for rows in frames {
            rows.check()?;
        }
        let clock = Instant::now();
        self.frames += frames.len() as u64;
        match &mut self.encoder {
            Encoder::Text(format) => {
                let format = *format;
                self.format_text(format, frames);
            }
            Encoder::Batches { .. } => {
                for rows in frames {
                    self.add_to_batch(rows)?;
                }
            }
        }
        self.format_ms += clock.elapsed().as_secs_f64() * 1e3;
        self.send_staged()
    }

    /// One frame's rows into the batch being gathered; the batch staged where its group ends
    /// or it holds a piece's rows.
    fn add_to_batch(&mut self, rows: &FrameRows<'_>) -> io::Result<()> {
        let Encoder::Batches {
            builder,
            frames_per_group,
            frames,
            piece_rows,
            ..
        } = &mut self.encoder
        else {
            return Ok(());
        };
        builder.add(rows);
        *frames += 1;
        let ends_group = *frames == *frames_per_group;
        if ends_group {
            *frames = 0;
        }
        if ends_group || builder.rows() >= *piece_rows {
            self.stage_batch(ends_group)?;
        }
        Ok(())
    }

    /// The frames' rows in pieces of at most `CHUNK_ROWS` (at least one a frame, as an empty
    /// frame's text may not be empty) formatted in parallel, staged in order.
    fn format_text(&mut self, format: TextFormat, frames: &[FrameRows<'_>]) {
        self.pieces.clear();
        for (f, rows) in frames.iter().enumerate() {
            let n = rows.len();
            for k in 0..n.div_ceil(CHUNK_ROWS).max(1) {
                self.pieces
                    .push((f, k * CHUNK_ROWS..((k + 1) * CHUNK_ROWS).min(n)));
            }
        }
        self.chunks.clear();
        for _ in 0..self.pieces.len() {
            let mut buffer = self.free.try_recv().unwrap_or_default();
            buffer.clear();
            self.chunks.push(buffer);
        }
        let columns = &self.columns;
        let piece = |(f, range): &(usize, Range<usize>), buffer: &mut Vec<u8>| {
            frames[*f].text(format, columns, range.clone(), buffer);
        };
        if self.pieces.len() == 1 {
            piece(&self.pieces[0], &mut self.chunks[0]);
        } else {
            self.chunks
                .par_iter_mut()
                .zip(self.pieces.par_iter())
                .for_each(|(buffer, at)| piece(at, buffer));
        }
        for (text, (_, range)) in self.chunks.drain(..).zip(&self.pieces) {
            self.staged.push(Chunk {
                piece: Piece::Text(text),
                rows: range.len() as u64,
            });
        }
    }

    /// The rows gathered so far, as one batch staged for the writer; `ends_group`: the row
    /// group ends with them. Nothing when there are no rows, unless they end a group of which
    /// pieces were sent.
    fn stage_batch(&mut self, ends_group: bool) -> io::Result<()> {
        let Encoder::Batches {
            builder,
            group_open,
            ..
        } = &mut self.encoder
        else {
            return Ok(());
        };
        let rows = builder.rows();
        if rows == 0 && !(ends_group && *group_open) {
            return Ok(());
        }
        let batch = builder
            .finish()
            .map_err(|e| io::Error::other(e.to_string()))?;
        *group_open = !ends_group;
        self.staged.push(Chunk {
            piece: Piece::Batch { batch, ends_group },
            rows,
        });
        Ok(())
    }

    /// What is staged, to the writer in order.
    fn send_staged(&mut self) -> io::Result<()> {
        let mut staged = std::mem::take(&mut self.staged);
        let mut sent = Ok(());
        for chunk in staged.drain(..) {
            if sent.is_ok() {
                sent = self.send(chunk);
            }
        }
        self.staged = staged;
        sent
    }

    /// Records skipped input in stream order: a JSONL side record; nothing in a CSV.
    pub fn write_skipped(&mut self, skipped: &Skipped) -> io::Result<()> {
        if let Encoder::Text(TextFormat::Jsonl) = self.encoder {
            let mut text = self.free.try_recv().unwrap_or_default();
            text.clear();
            skipped_record(skipped, &mut text);
            self.send(Chunk {
                piece: Piece::Text(text),
                rows: 0,
            })?;
        }
        Ok(())
    }

    /// Everything written and flushed: the rows written and the time spent; or the first
    /// write error.
    pub fn finish(mut self) -> io::Result<OutputTimes> {
        let clock = Instant::now();
        self.stage_batch(true)?;
        self.format_ms += clock.elapsed().as_secs_f64() * 1e3;
        self.send_staged()?;
        let end = self.stop_writer();
        match end.error {
            Some(e) => Err(e),
            None => Ok(OutputTimes {
                rows: end.rows,
                frames: self.frames,
                format_ms: self.format_ms,
                write_ms: end.write_ms,
            }),
        }
    }

    fn send(&mut self, chunk: Chunk) -> io::Result<()> {
        if let Piece::Batch { .. } = chunk.piece {
            while self.batches_queued >= self.batches_queue {
                match self.free.recv() {
                    Ok(_) => self.batches_queued -= 1,
                    // The writer stopped: the send below says why.
                    Err(_) => break,
                }
            }
            self.batches_queued += 1;
        }
        let sent = match &self.to_writer {
            Some(to_writer) => to_writer.send(chunk).is_ok(),
            None => false,
        };
        if sent {
            return Ok(());
        }
        // The writer stopped: it failed.
        let end = self.stop_writer();
        Err(end
            .error
            .unwrap_or_else(|| io::Error::other("the row writer stopped")))
    }

    /// Closes the queue and waits for the writer to write what it holds.
    fn stop_writer(&mut self) -> WriterEnd {
        self.to_writer = None;
        let lost = |why: &str| WriterEnd {
            rows: 0,
            write_ms: 0.0,
            error: Some(io::Error::other(why.to_string())),
        };
        match self.writer.take() {
            Some(handle) => handle
                .join()
                .unwrap_or_else(|_| lost("the row writer panicked")),
            None => lost("the row writer has already stopped"),
        }
    }
}

impl Drop for RowWriter {
    /// A run that ends early (an error elsewhere) still stops the thread.
    fn drop(&mut self) {
        if self.writer.is_some() {
            self.stop_writer();
        }
    }
}

/// The writer thread: each chunk written whole, in the order it came; a text buffer handed
/// back. Stops at the first error (the sender then sees the queue closed). The rows of a
/// Parquet row group count as written once the group is (its pieces are encoded in memory
/// until then).
fn write_chunks(
    mut destination: Destination,
    chunks: &Receiver<Chunk>,
    give_back: &Sender<Vec<u8>>,
) -> WriterEnd {
    let mut end = WriterEnd {
        rows: 0,
        write_ms: 0.0,
        error: None,
    };
    // Rows of the row group being written.
    let mut in_group = 0;
    for chunk in chunks {
        let clock = Instant::now();
        let written = match (&mut destination, &chunk.piece) {
            (Destination::Text(out), Piece::Text(text)) => out.write_all(text),
            (Destination::Batches(file), Piece::Batch { batch, ends_group }) => {
                file.write(batch, *ends_group)
            }
            _ => Err(io::Error::other(
                "a piece of the wrong format for the output",
            )),
        };
        end.write_ms += clock.elapsed().as_secs_f64() * 1e3;
        if let Err(e) = written {
            end.error = Some(failed_after(e, end.rows));
            return end;
        }
        // The formatting side may be gone already (finishing).
        let _ = match chunk.piece {
            Piece::Text(text) => {
                end.rows += chunk.rows;
                give_back.send(text)
            }
            Piece::Batch { batch, ends_group } => {
                in_group += chunk.rows;
                if ends_group {
                    end.rows += std::mem::take(&mut in_group);
                }
                drop(batch);
                give_back.send(Vec::new())
            }
        };
    }
    let clock = Instant::now();
    let finished = match destination {
        Destination::Text(mut out) => out.flush(),
        Destination::Batches(file) => file.finish(),
    };
    match finished {
        Ok(()) => end.rows += in_group,
        Err(e) => end.error = Some(failed_after(e, end.rows)),
    }
    end.write_ms += clock.elapsed().as_secs_f64() * 1e3;
    end
}

/// The write error with how many rows the output took whole before it (of the same kind).
fn failed_after(e: io::Error, rows: u64) -> io::Error {
    io::Error::new(e.kind(), format!("{e}; {rows} rows were written before it"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::stats::Moments;
    use crate::output::export::Exporter;
    use crate::output::row_text::RowExtras;
    use std::sync::{Arc, Mutex};

    /// A shared buffer that takes `limit` bytes, then fails as a full disk does.
    #[derive(Clone)]
    struct Limited {
        bytes: Arc<Mutex<Vec<u8>>>,
        limit: usize,
    }

    impl Write for Limited {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let mut bytes = self.bytes.lock().unwrap();
            let room = self.limit - bytes.len();
            if room == 0 {
                return Err(io::Error::from_raw_os_error(28)); // ENOSPC
            }
            let n = buf.len().min(room);
            bytes.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn frames(count: u64, rows: u32) -> Vec<(u64, Vec<crate::ccl::stats::ComponentStats>)> {
        (0..count)
            .map(|f| {
                let stats = (0..rows)
                    .map(|i| {
                        let mut m = Moments::EMPTY;
                        m.add_run(i, (f as u32) % 7, (f as u32) % 7 + 1 + i % 5);
                        m.to_stats(i + 1)
                    })
                    .collect();
                (f, stats)
            })
            .collect()
    }

    /// Frame `frame`'s rows: its statistics only, at time 0, from no file.
    fn bare(frame: u64, stats: &[crate::ccl::stats::ComponentStats]) -> FrameRows<'_> {
        FrameRows {
            frame,
            time_s: 0.0,
            file: "",
            stats,
            extras: RowExtras::default(),
        }
    }

    fn limited(limit: usize) -> Limited {
        Limited {
            bytes: Arc::default(),
            limit,
        }
    }

    /// A writer of every column into `sink`, and the single-thread exporter of the same text.
    fn writer_and_exporter(sink: &Limited, format: Format) -> (RowWriter, Exporter<Vec<u8>>) {
        let w = RowWriter::start(
            Box::new(sink.clone()),
            format,
            Columns::all(),
            BatchOptions::default(),
        )
        .unwrap();
        (w, Exporter::new(Vec::new(), format).unwrap())
    }

    /// Many frames, most over several chunks: the same text, in the same order, as the
    /// single-thread exporter writes.
    #[test]
    fn parallel_rows_are_the_exporters_text_in_order() {
        for format in [Format::Csv, Format::Jsonl] {
            let sink = limited(usize::MAX);
            let all = frames(12, 1500);
            let (mut w, mut e) = writer_and_exporter(&sink, format);
            for (f, stats) in &all {
                let rows = FrameRows {
                    frame: *f,
                    time_s: *f as f64 / 60.0,
                    file: "a,b.png",
                    stats,
                    extras: RowExtras::default(),
                };
                w.write_frame(&rows).unwrap();
                e.write_rows(&rows).unwrap();
            }
            let times = w.finish().unwrap();
            assert_eq!(times.rows, 12 * 1500);
            assert_eq!(times.frames, 12);
            let expected = e.finish().unwrap();
            assert!(*sink.bytes.lock().unwrap() == expected, "{format:?}");
        }
    }

    /// Frames written a group at a time (as a run of several sources writes a frame set's),
    /// one of them without rows: the single-thread exporter's text, frame after frame.
    #[test]
    fn frames_written_together_are_the_exporters_text_in_order() {
        for format in [Format::Csv, Format::Jsonl] {
            let sink = limited(usize::MAX);
            let mut all = frames(9, 700);
            all[4].1.clear();
            let (mut w, mut e) = writer_and_exporter(&sink, format);
            let rows: Vec<FrameRows<'_>> = all.iter().map(|(f, stats)| bare(*f, stats)).collect();
            for group in [&rows[..1], &rows[1..4], &rows[4..]] {
                w.write_frames(group).unwrap();
            }
            for r in &rows {
                e.write_rows(r).unwrap();
            }
            let times = w.finish().unwrap();
            assert_eq!(times.rows, 8 * 700);
            assert_eq!(times.frames, 9);
            let expected = e.finish().unwrap();
            assert!(*sink.bytes.lock().unwrap() == expected, "{format:?}");
        }
    }

    /// An output that fills up: the error with its reason, and the rows counted as written
    /// are whole rows that the output holds.
    #[test]
    fn a_full_output_is_an_error_and_no_row_counted_is_lost() {
        let sink = limited(100_000);
        let mut w = RowWriter::start(
            Box::new(sink.clone()),
            Format::Csv,
            Columns::all(),
            BatchOptions::default(),
        )
        .unwrap();
        let mut failed = None;
        for (f, stats) in frames(100, 700) {
            if let Err(e) = w.write_frame(&bare(f, &stats)) {
                failed = Some(e);
                break;
            }
        }
        let err = match failed {
            Some(e) => e,
            None => w.finish().unwrap_err(),
        };
        let text = err.to_string();
        assert!(text.contains("No space left on device"), "{text}");
        let reported: u64 = text
            .split("; ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{text}"));
        let held = sink.bytes.lock().unwrap().clone();
        assert_eq!(held.len(), 100_000);
        let whole_rows = held.iter().filter(|&&b| b == b'\n').count() as u64 - 1;
        assert!(
            reported > 0 && reported <= whole_rows,
            "{reported} of {whole_rows}"
        );
    }

    /// A Parquet file that fills up while a row group is written: the rows counted as written
    /// are those of the row groups before it, not the pieces of it already encoded.
    #[test]
    fn a_full_parquet_output_counts_the_row_groups_written() {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        // A piece a frame: the second group fails after a piece of it was encoded.
        let rows = PIECE_ROWS as u32 + 100;
        let all = frames(4, rows);
        let options = BatchOptions {
            frames_per_group: 2,
            ..BatchOptions::default()
        };
        let run = |sink: &Limited| {
            let mut w = RowWriter::start(
                Box::new(sink.clone()),
                Format::Parquet,
                Columns::all(),
                options.clone(),
            )?;
            for (f, stats) in &all {
                w.write_frame(&bare(*f, stats))?;
            }
            w.finish()
        };
        // Where the first row group ends in the whole file.
        let whole = limited(usize::MAX);
        assert_eq!(run(&whole).unwrap().rows, 4 * u64::from(rows));
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&whole.bytes.lock().unwrap()).unwrap();
        let reader = SerializedFileReader::new(file).unwrap();
        let first = reader.metadata().row_group(0);
        let first_end = first
            .columns()
            .iter()
            .map(|c| {
                let (start, len) = c.byte_range();
                start + len
            })
            .max()
            .unwrap();
        let full = limited(first_end as usize + 100);
        let text = run(&full).unwrap_err().to_string();
        assert!(text.contains("No space left on device"), "{text}");
        let first_group = format!("; {} rows were written before it", 2 * rows);
        assert!(text.ends_with(&first_group), "{text}");
    }

    /// An output that takes nothing while it is held.
    #[derive(Clone, Default)]
    struct Held {
        holding: Arc<std::sync::atomic::AtomicBool>,
        bytes: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Held {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            while self.holding.load(std::sync::atomic::Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            self.bytes.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// 20 frames of 50 rows, a group each, to an output held at first: how many frames the
    /// writer had taken after a while, then, once it is let go, the times and the bytes.
    fn written_while_held(format: Format) -> (usize, OutputTimes, Vec<u8>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let sink = Held::default();
        let batches = BatchOptions {
            frames_per_group: 1,
            compression: Compression::None,
            ..BatchOptions::default()
        };
        let w = RowWriter::start(Box::new(sink.clone()), format, Columns::all(), batches).unwrap();
        sink.holding.store(true, Ordering::SeqCst);
        let taken = Arc::new(AtomicUsize::new(0));
        let producer = {
            let taken = taken.clone();
            std::thread::spawn(move || {
                let mut w = w;
                for (f, stats) in frames(20, 50) {
                    w.write_frame(&bare(f, &stats)).unwrap();
                    taken.fetch_add(1, Ordering::SeqCst);
                }
                w.finish().unwrap()
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(300));
        let before = taken.load(Ordering::SeqCst);
        sink.holding.store(false, Ordering::SeqCst);
        let times = producer.join().unwrap();
        let bytes = sink.bytes.lock().unwrap().clone();
        (before, times, bytes)
    }

    /// A writer that falls behind holds the batches back: a few wait for it, not a queue
    /// full of them; once it writes again every row is in the file.
    #[test]
    fn batches_wait_for_a_writer_that_is_behind() {
        let (before, times, bytes) = written_while_held(Format::Arrow);
        // The two queued and the one the writer holds: not the 20 a queue of 64 would take.
        assert!(before <= 3, "{before} batches taken");
        assert_eq!(times.rows, 20 * 50);
        let reader = arrow_ipc::reader::FileReader::try_new(io::Cursor::new(bytes), None).unwrap();
        assert_eq!(reader.num_batches(), 20);
    }

    /// Parquet pieces wait for a writer that is behind as batches do, a few more of them
    /// (they are small); then every row is in the file, a row group a frame.
    #[test]
    fn parquet_pieces_wait_for_a_writer_that_is_behind() {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let (before, times, bytes) = written_while_held(Format::Parquet);
        // Those queued, the one the writer holds and one that the Parquet writer's own
        // buffer took whole: not the 20 a queue of 64 would take.
        assert!(before <= QUEUED_PIECES + 2, "{before} pieces taken");
        assert_eq!(times.rows, 20 * 50);
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        let reader = SerializedFileReader::new(file).unwrap();
        assert_eq!(reader.metadata().num_row_groups(), 20);
        assert_eq!(reader.metadata().file_metadata().num_rows(), 20 * 50);
    }

    #[test]
    fn rows_counted_are_the_rows_the_output_took() {
        let sink = limited(1 << 20);
        let mut w = RowWriter::start(
            Box::new(sink.clone()),
            Format::Jsonl,
            Columns::all(),
            BatchOptions::default(),
        )
        .unwrap();
        let all = frames(3, 600);
        for (f, stats) in &all {
            let rows = FrameRows {
                frame: *f,
                time_s: 0.0,
                file: "",
                stats,
                extras: RowExtras::default(),
            };
            w.write_frame(&rows).unwrap();
        }
        let times = w.finish().unwrap();
        let text = sink.bytes.lock().unwrap().clone();
        assert_eq!(
            times.rows,
            text.iter().filter(|&&b| b == b'\n').count() as u64
        );
        assert_eq!(times.rows, 1800);
    }
}
