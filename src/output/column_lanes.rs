//! A Parquet row group's columns encoded on rayon's threads as its pieces come, without a
//! wait after each piece: the columns are split into lanes (one a thread, balanced by their
//! measured cost, `ColumnGroups`), and each lane is a chain of tasks that encodes its columns'
//! pieces one after the other, in order. A lane that is done with a piece goes on to the next
//! while the others finish theirs; only which thread encodes depends on timing, never the
//! order in which a column's values are appended, so the file is the same on every run.

use arrow_array::{new_null_array, Array, ArrayRef, RecordBatch};
use arrow_schema::{Field, SchemaRef};
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowLeafColumn,
};
use parquet::errors::{ParquetError, Result};
use rayon::prelude::*;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// Pieces that may be in the lanes at once: a lane goes on to the next piece while the others
/// finish this one; the writer waits before it hands over more, so that the rows in memory
/// stay a few pieces.
const PIECES_IN_FLIGHT: u64 = 2;

/// Rows of an all-null column written at a time from one block of nulls made once: the
/// column writers' batch size (`parquet_properties`), so that its pages end where they would
/// if the column's nulls were written in one go.
pub(crate) const NULL_BLOCK: usize = 1024;

/// What a lane does next.
enum Work {
    Piece(RecordBatch),
    /// The row group's end: the lane's columns closed.
    Close,
}

/// A lane: some of the row group's columns, encoded a piece at a time by one task at a time.
#[derive(Default)]
struct Lane {
    /// Its columns (index in the row group, writer); out of here while a task encodes them.
    writers: Vec<(usize, ArrowColumnWriter)>,
    queue: VecDeque<Work>,
    /// A task is queued or running for the lane.
    busy: bool,
    /// Pieces encoded in this row group.
    done: u64,
}

/// What the lanes share with the writer.
struct State {
    lanes: Vec<Lane>,
    /// Each column's time in this row group, ms.
    times: Vec<f64>,
    /// The closed columns, by index.
    closed: Vec<Option<ArrowColumnChunk>>,
    /// A lane's failure, not yet reported.
    error: Option<ParquetError>,
    /// A lane has failed (the row group cannot be finished).
    failed: bool,
}

struct Shared {
    state: Mutex<State>,
    /// A lane finished a piece or became idle.
    changed: Condvar,
    schema: SchemaRef,
    /// Per column: `NULL_BLOCK` nulls as a leaf, for a nullable column.
    null_blocks: Vec<Option<ArrowLeafColumn>>,
}

/// The open row group's columns in lanes on the pool.
pub(crate) struct ColumnLanes {
    shared: Arc<Shared>,
    /// The columns' costs, from which each row group's lanes are made.
    groups: ColumnGroups,
    /// Pieces handed to the lanes in the open row group.
    sent: u64,
    open: bool,
    /// One lane (a pool of one thread): its work done on the caller's thread, as it would be
    /// on the pool, without depending on the pool's one thread being free.
    inline: bool,
}

impl ColumnLanes {
    /// Lanes for row groups of `schema`'s columns (one leaf each).
    pub(crate) fn new(schema: SchemaRef) -> Result<ColumnLanes> {
        let columns = schema.fields().len();
        let null_blocks = schema
            .fields()
            .iter()
            .map(|field| null_block(field))
            .collect::<Result<Vec<_>>>()?;
        let state = State {
            lanes: Vec::new(),
            times: vec![0.0; columns],
            closed: (0..columns).map(|_| None).collect(),
            error: None,
            failed: false,
        };
        Ok(ColumnLanes {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                changed: Condvar::new(),
                schema,
                null_blocks,
            }),
            groups: ColumnGroups::new(columns),
            sent: 0,
            open: false,
            inline: false,
        })
    }

    /// A row group is open (pieces were handed over and it is not closed).
    pub(crate) fn is_open(&self) -> bool {
        self.open
    }

    /// A row group begun with `writers` (one a column, in order), dealt into lanes by the
    /// columns' costs so far.
    pub(crate) fn open(&mut self, writers: Vec<ArrowColumnWriter>) -> Result<()> {
        self.groups.regroup();
        let mut state = wait(&self.shared, |_| true)?;
        state.lanes = (0..self.groups.groups).map(|_| Lane::default()).collect();
        for (k, writer) in writers.into_iter().enumerate() {
            let lane = self.groups.group_of.get(k).copied().unwrap_or(0);
            state.lanes[lane].writers.push((k, writer));
        }
        state.lanes.retain(|lane| !lane.writers.is_empty());
        self.inline = state.lanes.len() == 1;
        drop(state);
        self.sent = 0;
        self.open = true;
        Ok(())
    }

    /// `piece`'s columns queued in their lanes, once no lane is more than
    /// `PIECES_IN_FLIGHT - 1` pieces behind; a lane's failure so far is returned.
    pub(crate) fn encode(&mut self, piece: RecordBatch) -> Result<()> {
        let ahead = self.sent;
        let mut state = wait(&self.shared, |state| {
            state
                .lanes
                .iter()
                .all(|lane| lane.done + PIECES_IN_FLIGHT > ahead)
        })?;
        let start: Vec<usize> = (0..state.lanes.len())
            .filter(|&lane| queue(&mut state, lane, Work::Piece(piece.clone())))
            .collect();
        drop(state);
        self.start(&start);
        self.sent += 1;
        Ok(())
    }

    /// The row group's columns closed in their lanes: their chunks, in column order.
    pub(crate) fn close(&mut self) -> Result<Vec<ArrowColumnChunk>> {
        let mut state = wait(&self.shared, |_| true)?;
        let start: Vec<usize> = (0..state.lanes.len())
            .filter(|&lane| queue(&mut state, lane, Work::Close))
            .collect();
        drop(state);
        self.start(&start);
        self.open = false;
        let mut state = wait(&self.shared, |state| {
            state.lanes.iter().all(|lane| !lane.busy)
        })?;
        for (k, ms) in state.times.iter_mut().enumerate() {
            self.groups.record(k, std::mem::take(ms));
        }
        let chunks = state
            .closed
            .iter_mut()
            .map(|chunk| chunk.take())
            .collect::<Option<Vec<_>>>();
        state.lanes.clear();
        chunks
            .ok_or_else(|| ParquetError::General("a column of the row group was not closed".into()))
    }

    /// A task for each of `lanes` (marked busy by `queue`): on the pool, or on this thread
    /// when there is one lane.
    fn start(&self, lanes: &[usize]) {
        for &lane in lanes {
            if self.inline {
                run_lane(&self.shared, lane);
            } else {
                let shared = self.shared.clone();
                rayon::spawn(move || run_lane(&shared, lane));
            }
        }
    }
}

/// `work` at the end of a lane's queue; whether a task is to be started for the lane (none
/// is running: the lane is then marked busy).
fn queue(state: &mut State, lane: usize, work: Work) -> bool {
    let l = &mut state.lanes[lane];
    l.queue.push_back(work);
    !std::mem::replace(&mut l.busy, true)
}

/// The state once `ready` holds of it; a lane's failure instead, as soon as there is one.
fn wait(shared: &Shared, ready: impl Fn(&State) -> bool) -> Result<MutexGuard<'_, State>> {
    let mut state = lock(shared);
    loop {
        if let Some(e) = state.error.take() {
            return Err(e);
        }
        if state.failed {
            return Err(ParquetError::General(
                "a column of the row group failed earlier".into(),
            ));
        }
        if ready(&state) {
            return Ok(state);
        }
        state = shared
            .changed
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner);
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared.state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A lane's task: its queue's work done in order, the lane's columns held by this task alone
/// meanwhile; it ends when the queue is empty (the next piece starts a new one).
fn run_lane(shared: &Shared, lane: usize) {
    loop {
        let (work, mut writers) = {
            let mut state = lock(shared);
            let l = &mut state.lanes[lane];
            match l.queue.pop_front() {
                Some(work) => (work, std::mem::take(&mut l.writers)),
                None => {
                    l.busy = false;
                    drop(state);
                    shared.changed.notify_all();
                    return;
                }
            }
        };
        let mut times = Vec::with_capacity(writers.len());
        // A panic in the encoder is the row group's failure, not the process's end.
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match work {
            Work::Piece(piece) => encode_piece(shared, &mut writers, &piece, &mut times)
                .map(|()| Done::Encoded(writers)),
            Work::Close => close_columns(writers, &mut times).map(Done::Closed),
        }))
        .unwrap_or_else(|_| {
            Err(ParquetError::General(
                "the encoding of a column panicked".into(),
            ))
        });
        let mut state = lock(shared);
        for (k, ms) in times {
            state.times[k] += ms;
        }
        match done {
            Ok(Done::Encoded(writers)) => {
                let l = &mut state.lanes[lane];
                l.writers = writers;
                l.done += 1;
            }
            Ok(Done::Closed(chunks)) => {
                for (k, chunk) in chunks {
                    state.closed[k] = Some(chunk);
                }
            }
            Err(e) => {
                state.lanes[lane].queue.clear();
                if !state.failed {
                    state.error = Some(e);
                    state.failed = true;
                }
            }
        }
        drop(state);
        shared.changed.notify_all();
    }
}

/// What a lane's work left.
enum Done {
    Encoded(Vec<(usize, ArrowColumnWriter)>),
    Closed(Vec<(usize, ArrowColumnChunk)>),
}

/// The lane's columns of `piece` encoded, each one's time noted.
fn encode_piece(
    shared: &Shared,
    writers: &mut [(usize, ArrowColumnWriter)],
    piece: &RecordBatch,
    times: &mut Vec<(usize, f64)>,
) -> Result<()> {
    for (k, writer) in writers {
        let clock = Instant::now();
        let field = shared.schema.field(*k);
        encode_column(
            writer,
            field,
            piece.column(*k),
            shared.null_blocks[*k].as_ref(),
        )?;
        times.push((*k, clock.elapsed().as_secs_f64() * 1e3));
    }
    Ok(())
}

/// `NULL_BLOCK` nulls of `field` as a leaf, made once for a nullable column (none for a
/// column that is never null).
pub fn null_block(field: &Field) -> Result<Option<ArrowLeafColumn>> {
    if !field.is_nullable() {
        return Ok(None);
    }
    Ok(compute_leaves(field, &new_null_array(field.data_type(), NULL_BLOCK))?.pop())
}

/// A piece of `field`'s column encoded into its writer: a column all null in the piece
/// from `null_block` (`null_block(field)`), any other from its levels worked out.
pub fn encode_column(
    writer: &mut ArrowColumnWriter,
    field: &Field,
    column: &ArrayRef,
    null_block: Option<&ArrowLeafColumn>,
) -> Result<()> {
    match null_block {
        Some(block) if column.null_count() == column.len() => {
            write_nulls(writer, field, block, column.len())
        }
        _ => {
            for leaf in compute_leaves(field, column)? {
                writer.write(&leaf)?;
            }
            Ok(())
        }
    }
}

/// `rows` nulls of a nullable column: `block` (`NULL_BLOCK` nulls, made once) as many times as
/// it fits, the rest from a short array; the same values, levels and pages as the nulls
/// written in one go, without their levels being worked out anew for every piece.
fn write_nulls(
    writer: &mut ArrowColumnWriter,
    field: &Field,
    block: &ArrowLeafColumn,
    rows: usize,
) -> Result<()> {
    for _ in 0..rows / NULL_BLOCK {
        writer.write(block)?;
    }
    let rest = rows % NULL_BLOCK;
    if rest > 0 {
        for leaf in compute_leaves(field, &new_null_array(field.data_type(), rest))? {
            writer.write(&leaf)?;
        }
    }
    Ok(())
}

/// The lane's columns closed, each one's time noted.
fn close_columns(
    writers: Vec<(usize, ArrowColumnWriter)>,
    times: &mut Vec<(usize, f64)>,
) -> Result<Vec<(usize, ArrowColumnChunk)>> {
    writers
        .into_iter()
        .map(|(k, writer)| {
            let clock = Instant::now();
            let chunk = writer.close()?;
            times.push((k, clock.elapsed().as_secs_f64() * 1e3));
            Ok((k, chunk))
        })
        .collect()
}

/// Per-column work spread over the pool as a few large tasks, one a thread, rather than a task
/// a column: the handing over of a task and the pool's idle spinning while it waits cost about
/// as much as a small column's work. The columns are grouped by their measured cost (the
/// costliest first, each into the cheapest group so far), so that the groups end together.
pub(super) struct ColumnGroups {
    /// Each column's cost, ms, smoothed over the runs.
    costs: Vec<f64>,
    /// The group of each column.
    pub(super) group_of: Vec<usize>,
    /// Columns in order of cost, costliest first (reused).
    order: Vec<usize>,
    /// Each group's cost (reused).
    loads: Vec<f64>,
    pub(super) groups: usize,
}

impl ColumnGroups {
    /// `columns` columns, of equal cost until they are measured.
    pub(super) fn new(columns: usize) -> ColumnGroups {
        let mut groups = ColumnGroups {
            costs: vec![1.0; columns],
            group_of: vec![0; columns],
            order: (0..columns).collect(),
            loads: Vec::new(),
            groups: 0,
        };
        groups.regroup();
        groups
    }

    /// The columns assigned to as many groups as the pool has threads, by their costs.
    pub(super) fn regroup(&mut self) {
        self.assign(rayon::current_num_threads());
    }

    /// Column `k` took `ms` (smoothed into its cost; the groups change at `regroup`).
    pub(super) fn record(&mut self, k: usize, ms: f64) {
        if let Some(cost) = self.costs.get_mut(k) {
            *cost = 0.5 * (*cost + ms);
        }
    }

    /// The columns assigned to `groups` groups (fewer when there are fewer columns), by
    /// their costs.
    fn assign(&mut self, groups: usize) {
        self.groups = groups.clamp(1, self.costs.len().max(1));
        let costs = &self.costs;
        self.order.sort_by(|&a, &b| costs[b].total_cmp(&costs[a]));
        self.loads.clear();
        self.loads.resize(self.groups, 0.0);
        for &k in &self.order {
            let (cheapest, _) = self
                .loads
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(b.1))
                .unwrap_or((0, &0.0));
            self.group_of[k] = cheapest;
            self.loads[cheapest] += costs[k];
        }
    }

    /// `work` on each of `items` (one a column, in column order): a group of them a task on
    /// the pool, or all on this thread when there is one group; the first error stops it.
    /// Each column's time is measured, and the groups follow the costs.
    pub(super) fn run<T: Send, E: Send>(
        &mut self,
        items: impl IntoIterator<Item = T>,
        work: impl Fn(T) -> Result<(), E> + Sync,
    ) -> Result<(), E> {
        let timed = |k: usize, item: T| -> Result<(usize, f64), E> {
            let clock = Instant::now();
            work(item)?;
            Ok((k, clock.elapsed().as_secs_f64() * 1e3))
        };
        let times: Vec<(usize, f64)> = if self.groups == 1 {
            items
                .into_iter()
                .enumerate()
                .map(|(k, item)| timed(k, item))
                .collect::<Result<_, E>>()?
        } else {
            let mut tasks: Vec<Vec<(usize, T)>> = (0..self.groups).map(|_| Vec::new()).collect();
            for (k, item) in items.into_iter().enumerate() {
                tasks[self.group_of[k]].push((k, item));
            }
            let done = tasks
                .into_par_iter()
                .map(|task| {
                    task.into_iter()
                        .map(|(k, item)| timed(k, item))
                        .collect::<Result<Vec<_>, E>>()
                })
                .collect::<Result<Vec<_>, E>>()?;
            done.into_iter().flatten().collect()
        };
        for (k, ms) in times {
            self.record(k, ms);
        }
        self.regroup();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::columnar::{parquet_properties, Compression};
    use arrow_schema::{DataType, Schema};
    use parquet::arrow::ArrowWriter;
    use std::io::Write;
    use std::sync::Arc;

    /// A file of one nullable column of `rows` nulls, written by `write` into its one row
    /// group's column writer.
    fn file_of_nulls(
        field: &Field,
        rows: usize,
        write: impl Fn(&mut ArrowColumnWriter) -> Result<()>,
    ) -> Vec<u8> {
        let schema = Arc::new(Schema::new(vec![field.clone()]));
        let props = parquet_properties(&schema, Compression::Snappy);
        let writer = ArrowWriter::try_new(Vec::new(), schema, Some(props)).unwrap();
        let (mut file, factory) = writer.into_serialized_writer().unwrap();
        let mut columns = factory.create_column_writers(0).unwrap();
        write(&mut columns[0]).unwrap();
        let chunk = columns.pop().unwrap().close().unwrap();
        let mut group = file.next_row_group().unwrap();
        chunk.append_to_row_group(&mut group).unwrap();
        group.close().unwrap();
        let bytes = file.into_inner().unwrap();
        assert!(rows > 0);
        bytes
    }

    /// A column that fails in its lane (here a piece of the wrong type) is the row group's
    /// error, returned to the writer with its reason, not a hang; the lanes take nothing
    /// more.
    #[test]
    fn a_lane_that_fails_is_the_row_groups_error() {
        use arrow_array::{Float64Array, UInt64Array};
        let fields: Vec<Field> = (0..4)
            .map(|k| Field::new(format!("x{k}"), DataType::Float64, false))
            .collect();
        let schema = Arc::new(Schema::new(fields.clone()));
        let props = parquet_properties(&schema, Compression::None);
        let writer = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props)).unwrap();
        let (_file, factory) = writer.into_serialized_writer().unwrap();
        let mut lanes = ColumnLanes::new(schema.clone()).unwrap();
        lanes
            .open(factory.create_column_writers(0).unwrap())
            .unwrap();
        let good: Vec<ArrayRef> = (0..4)
            .map(|_| Arc::new(Float64Array::from(vec![1.0, 2.0])) as ArrayRef)
            .collect();
        lanes
            .encode(RecordBatch::try_new(schema.clone(), good.clone()).unwrap())
            .unwrap();
        // The third column's piece holds integers.
        let mut bad = good;
        bad[2] = Arc::new(UInt64Array::from(vec![1, 2]));
        let mut bad_fields = fields;
        bad_fields[2] = Field::new("x2", DataType::UInt64, false);
        let bad_schema = Arc::new(Schema::new(bad_fields));
        let failed = lanes
            .encode(RecordBatch::try_new(bad_schema, bad).unwrap())
            .and_then(|()| lanes.close().map(|_| ()));
        let text = failed.unwrap_err().to_string();
        assert!(text.contains("Incompatible type"), "{text}");
        assert!(lanes.close().is_err());
    }

    /// Nulls written in blocks make the same file, byte for byte, as the nulls' levels worked
    /// out and written in one go: pages, levels and statistics alike.
    #[test]
    fn nulls_written_in_blocks_are_the_nulls_written_at_once() {
        for (data_type, rows) in [
            (DataType::Float64, 3 * NULL_BLOCK + 17),
            (DataType::UInt64, 25 * NULL_BLOCK),
            (DataType::Utf8, NULL_BLOCK - 1),
        ] {
            let field = Field::new("x", data_type.clone(), true);
            let block = null_block(&field).unwrap().unwrap();
            let blocks = file_of_nulls(&field, rows, |w| write_nulls(w, &field, &block, rows));
            let at_once = file_of_nulls(&field, rows, |w| {
                for leaf in compute_leaves(&field, &new_null_array(&data_type, rows))? {
                    w.write(&leaf)?;
                }
                Ok(())
            });
            assert!(blocks == at_once, "{data_type:?}");
            let mut file = tempfile::tempfile().unwrap();
            file.write_all(&blocks).unwrap();
            let reader =
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
                    .unwrap()
                    .build()
                    .unwrap();
            let (mut read, mut nulls) = (0, 0);
            for batch in reader {
                let column = batch.unwrap().column(0).clone();
                read += column.len();
                nulls += column.null_count();
            }
            assert_eq!((read, nulls), (rows, rows), "{data_type:?}");
        }
    }

    /// The columns' groups end together: the costliest columns apart, the cheap ones filling
    /// up the groups; every column run once, in its group, and the first error returned.
    #[test]
    fn column_groups_balance_the_columns_costs() {
        let mut groups = ColumnGroups::new(7);
        groups.costs = vec![1.0, 8.0, 1.0, 7.0, 2.0, 4.0, 1.0];
        groups.assign(3);
        let mut loads = [0.0; 3];
        for (k, &g) in groups.group_of.iter().enumerate() {
            loads[g] += groups.costs[k];
        }
        assert_eq!(loads.iter().copied().fold(0.0, f64::max), 8.0);
        assert_ne!(groups.group_of[1], groups.group_of[3]);
        let mut seen = vec![0u32; 7];
        groups
            .run(seen.iter_mut(), |n| {
                *n += 1;
                Ok::<(), String>(())
            })
            .unwrap();
        assert_eq!(seen, vec![1; 7]);
        let failed = groups.run(0..7, |k| if k == 4 { Err(k) } else { Ok(()) });
        assert_eq!(failed, Err(4));
    }
}
