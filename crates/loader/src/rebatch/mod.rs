//! The loader thread's loop: record batches in, exact-size tensor batches out.
//!
//! In order, the rows of the queued record batches are cut into runs of `batch_size` rows: a
//! batch inside one record batch is one run (views), a batch across record batches several (one
//! copy). Shuffled, rows are drawn from a window of at least `buffer_size` rows, permuted, and
//! gathered `batch_size` at a time; the rows a window leaves over are shuffled into the next.
//! With a token budget a batch takes rows while they fit (see [`crate::sequences::tokens`]); with
//! length buckets a window's rows are sorted by length, cut into batches, and the batches
//! shuffled (`window.rs`). A planned epoch's batches were cut before any data was read: its rows
//! are gathered batch by batch from the units they lie in (`planned.rs`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::handoff::Sender;

use arrow_array::RecordBatch;

use crate::assemble::{Piece, Run, assemble};
use crate::columns::Columns;
use crate::images::Origins;
use crate::sequences::plan::ShardBatches;
use crate::sequences::tokens::{Budget, Fit, RowLengths};
use crate::source::{Pieces, Tagged};
use crate::state::{Position, Start};
use crate::{BatchSpec, Result, TensorBatch};

mod planned;
mod window;

/// Where the stream stands after a batch: what [`Position`] it becomes when the consumer asks.
#[derive(Debug, Clone)]
pub(crate) enum Mark {
    /// In order: the next row is row `row` of item `item`.
    Rows { item: u64, row: u64 },
    /// From a window: its record, and the batches of it given.
    Window {
        record: Arc<WindowRecord>,
        emitted: u64,
    },
    /// In a planned epoch: the next batch is the shard's planned batch `batch`.
    Plan { batch: u64 },
}

/// A shuffle window as it started: the generator's state, the rows carried into it, its first
/// item and the rows of each item it read.
#[derive(Debug)]
pub(crate) struct WindowRecord {
    rng: u64,
    carried: Vec<[u64; 2]>,
    start: u64,
    sizes: Vec<u64>,
}

impl Mark {
    /// The position this mark stands for.
    pub(crate) fn position(&self) -> Position {
        match self {
            Mark::Rows { item, row } => Position::Rows {
                item: *item,
                row: *row,
            },
            Mark::Window { record, emitted } => Position::Window {
                rng: record.rng,
                carried: record.carried.clone(),
                start: record.start,
                sizes: record.sizes.clone(),
                emitted: *emitted,
            },
            Mark::Plan { batch } => Position::Plan { batch: *batch },
        }
    }
}

/// A batch and where the stream stands after it.
pub(crate) type Marked = Result<(TensorBatch, Mark)>;

/// Where a record batch's rows are: its item, the index of its first row among the item's, and
/// whether it is the item's last.
#[derive(Debug, Clone, Copy)]
struct Tag {
    item: u64,
    first: u64,
    last: bool,
}

/// Record batches pulled from the source, checked against the first one's schema.
struct Input<'a> {
    spec: &'a BatchSpec,
    pieces: Pieces,
    columns: Option<Columns>,
    count: usize,
    exhausted: bool,
    /// A record batch read ahead and handed back.
    held: Option<(RecordBatch, RowLengths, Tag)>,
    /// Where the rows come from (their files, the reader of image URLs), for the columns.
    origins: Option<Origins>,
    /// Whether the rows' lengths are needed (a budget or buckets cut as the rows are read).
    lengths: bool,
    /// Set when the loader is stopped: no further record batch is pulled from the source (a
    /// slow Python reader is not asked for the rest of a batch that nobody will take).
    stop: &'a AtomicBool,
}

impl Input<'_> {
    /// The next record batch with rows, and the lengths of its sequence rows when a budget or
    /// buckets need them, or `None` at the end.
    fn next(&mut self) -> Result<Option<(RecordBatch, RowLengths, Tag)>> {
        if let Some(held) = self.held.take() {
            return Ok(Some(held));
        }
        while !self.exhausted {
            if self.stop.load(Ordering::Relaxed) {
                self.exhausted = true;
                break;
            }
            let Some(piece) = self.pieces.next() else {
                self.exhausted = true;
                break;
            };
            let Tagged {
                batch,
                item,
                first,
                last,
            } = piece?;
            // Text columns become their token ids here, as each record batch arrives.
            let batch = crate::sequences::text::tokenize_texts(
                &self.spec.sequences,
                self.spec.allow_nulls,
                self.spec.decode_thread_count(),
                batch,
                first,
            )?;
            let index = self.count;
            self.count += 1;
            match &self.columns {
                None => {
                    let mut columns = Columns::resolve(self.spec, &batch)?;
                    columns.origins = self.origins.take().unwrap_or_default();
                    self.columns = Some(columns);
                }
                Some(columns) => {
                    columns.check_schema(&batch, || format!("record batch {index}"))?
                }
            }
            if batch.num_rows() > 0 {
                let lengths = if self.lengths {
                    RowLengths::of(self.spec.cutting(), &self.columns().sequences, &batch)?
                } else {
                    RowLengths::default()
                };
                return Ok(Some((batch, lengths, Tag { item, first, last })));
            }
        }
        Ok(None)
    }

    fn columns(&self) -> &Columns {
        self.columns
            .as_ref()
            .expect("resolved with the first record batch")
    }
}

/// Runs the loop from `start` (through the shard's `planned` batches, when the epoch is
/// planned) until the source ends, an error is sent, the consumer hangs up or `stop` is set.
pub(crate) fn run(
    spec: &BatchSpec,
    pieces: Pieces,
    origins: Origins,
    start: &Start,
    planned: Option<&ShardBatches>,
    sender: &mut Sender<Marked>,
    stop: &AtomicBool,
) {
    let mut input = Input {
        spec,
        pieces,
        columns: None,
        count: 0,
        exhausted: false,
        held: None,
        lengths: planned.is_none(),
        origins: Some(origins),
        stop,
    };
    let mut emit = |batch: Marked| -> bool {
        let failed = batch.is_err();
        !stop.load(Ordering::Relaxed) && sender.send(batch) && !failed
    };
    match (start, planned) {
        (_, Some(batches)) => planned::planned(spec, &mut input, batches, &mut emit),
        (Start::Window(window), None) => window::shuffled(spec, &mut input, window, &mut emit),
        (Start::Rows { .. } | Start::Plan { .. }, None) => {
            in_order(spec, &mut input, &mut emit);
        }
    }
}

/// Batches in the source's order.
fn in_order(spec: &BatchSpec, input: &mut Input<'_>, emit: &mut dyn FnMut(Marked) -> bool) {
    // Queued record batches and the rows of the front one already taken.
    let mut queue: VecDeque<(RecordBatch, RowLengths, Tag)> = VecDeque::new();
    let mut taken = 0usize;
    let mut queued = 0usize;
    // The last record batch used up, for the mark when the queue is empty.
    let mut popped: Option<(Tag, usize)> = None;
    loop {
        // A batch has at most `batch_size` rows, with a token budget too.
        while queued < spec.batch_size {
            match input.next() {
                Ok(Some(batch)) => {
                    queued += batch.0.num_rows();
                    queue.push_back(batch);
                }
                Ok(None) => break,
                Err(error) => {
                    emit(Err(error));
                    return;
                }
            }
        }
        let short = queued < spec.batch_size && spec.max_tokens.is_none();
        if queued == 0 || (short && spec.drop_last) {
            return;
        }
        let want = match rows_that_fit(spec, input.columns(), &queue, taken) {
            Ok(None) => queued.min(spec.batch_size),
            Ok(Some((_, false))) if spec.drop_last && input.exhausted => return,
            Ok(Some((want, _))) => want,
            Err(error) => {
                emit(Err(error));
                return;
            }
        };
        let mut pieces = Vec::new();
        let mut runs = Vec::new();
        take_rows(
            &mut queue,
            &mut taken,
            &mut popped,
            want,
            &mut pieces,
            &mut runs,
        );
        queued -= want;
        #[cfg(feature = "images")]
        if spec.fills_skipped_images() {
            // The hook of `on_error="skip"` read in order by one rank: rows that are not images
            // are replaced by the rows that follow, taken from the queue (reading more record
            // batches as needed). Elsewhere `assemble` leaves them out of their batch.
            let columns = input.columns().clone();
            let mut more = |want: usize, pieces: &mut Vec<Piece>, runs: &mut Vec<Run>| {
                while queued < want {
                    let Some(batch) = input.next()? else {
                        break;
                    };
                    queued += batch.0.num_rows();
                    queue.push_back(batch);
                }
                let rows = want.min(queued);
                take_rows(&mut queue, &mut taken, &mut popped, rows, pieces, runs);
                queued -= rows;
                Ok(rows)
            };
            let filled =
                crate::assemble::decode_filling(spec, &columns, &mut pieces, &mut runs, &mut more);
            let decoded = match filled {
                Ok(decoded) => decoded,
                Err(error) => {
                    emit(Err(error));
                    return;
                }
            };
            let rows = decoded.num_rows();
            if rows == 0 || (rows < spec.batch_size && spec.drop_last) {
                // The rows left were all skipped, or too few for a whole batch.
                return;
            }
            let mark = mark_of(&queue, taken, popped);
            let batch = crate::assemble::assemble_decoded(spec, &columns, &mut pieces, decoded);
            if !emit(batch.map(|batch| (batch, mark))) {
                return;
            }
            continue;
        }
        let mark = mark_of(&queue, taken, popped);
        let batch = assemble(spec, input.columns(), &mut pieces, &runs);
        if !emit(batch.map(|batch| (batch, mark))) {
            return;
        }
    }
}

/// Moves `want` rows from the front of `queue` (of which `taken` rows are taken) into runs of
/// new pieces; `popped` is the last record batch used up.
fn take_rows(
    queue: &mut VecDeque<(RecordBatch, RowLengths, Tag)>,
    taken: &mut usize,
    popped: &mut Option<(Tag, usize)>,
    want: usize,
    pieces: &mut Vec<Piece>,
    runs: &mut Vec<Run>,
) {
    let mut left = want;
    while left > 0 {
        let (front, _, tag) = &queue[0];
        let len = (front.num_rows() - *taken).min(left);
        runs.push(Run {
            piece: pieces.len(),
            start: *taken,
            len,
        });
        pieces.push(Piece::new(front.clone()).at(tag.item, tag.first));
        left -= len;
        *taken += len;
        if *taken == front.num_rows() {
            *popped = Some((*tag, *taken));
            queue.pop_front();
            *taken = 0;
        }
    }
}

/// Where the stream stands when the next row is row `taken` of the queue's front (or, with the
/// queue empty, after `popped`).
fn mark_of(
    queue: &VecDeque<(RecordBatch, RowLengths, Tag)>,
    taken: usize,
    popped: Option<(Tag, usize)>,
) -> Mark {
    match (queue.front(), popped) {
        (Some((_, _, tag)), _) => Mark::Rows {
            item: tag.item,
            row: tag.first + taken as u64,
        },
        (None, Some((tag, _))) if tag.last => Mark::Rows {
            item: tag.item.saturating_add(1),
            row: 0,
        },
        (None, Some((tag, rows))) => Mark::Rows {
            item: tag.item,
            row: tag.first + rows as u64,
        },
        (None, None) => Mark::Rows { item: 0, row: 0 },
    }
}

/// With a token budget, the rows of the next batch in order, from row `taken` of the queue's
/// front on while they fit, and whether the batch is full (rather than cut short by the end of
/// the queue); `None` without a budget.
fn rows_that_fit(
    spec: &BatchSpec,
    columns: &Columns,
    queue: &VecDeque<(RecordBatch, RowLengths, Tag)>,
    taken: usize,
) -> Result<Option<(usize, bool)>> {
    if spec.max_tokens.is_none() {
        return Ok(None);
    }
    let mut budget = Budget::new(spec.cutting(), &columns.sequences);
    let mut from = taken;
    for (batch, lengths, _) in queue {
        for row in from..batch.num_rows() {
            if budget.add(|c| lengths.get(c, row))? == Fit::Full {
                return Ok(Some((budget.rows(), true)));
            }
        }
        from = 0;
    }
    Ok(Some((budget.rows(), budget.is_full())))
}

/// Runs for `rows`, merging neighbours that are consecutive rows of one record batch.
pub(super) fn coalesce(rows: &[(usize, usize)]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::with_capacity(rows.len());
    for &(piece, row) in rows {
        match runs.last_mut() {
            Some(last) if last.piece == piece && last.start + last.len == row => last.len += 1,
            _ => runs.push(Run {
                piece,
                start: row,
                len: 1,
            }),
        }
    }
    runs
}
