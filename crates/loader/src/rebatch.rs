//! The loader thread's loop: record batches in, exact-size tensor batches out.
//!
//! In order, the rows of the queued record batches are cut into runs of `batch_size` rows: a
//! batch inside one record batch is one run (views), a batch across record batches several (one
//! copy). Shuffled, rows are drawn from a window of at least `buffer_size` rows, permuted, and
//! gathered `batch_size` at a time; the rows a window leaves over are shuffled into the next.
//! With a token budget a batch takes rows while they fit (see [`crate::sequences::tokens`]); with length
//! buckets a window's rows are sorted by length, cut into batches, and the batches shuffled.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;

use arrow_array::RecordBatch;

use crate::assemble::{Piece, Run, assemble};
use crate::columns::Columns;
use crate::images::Locate;
use crate::rng::Rng;
use crate::sequences::tokens::{Budget, Fit, RowLengths, cut_from_end};
use crate::source::{Pieces, Tagged};
use crate::state::{Position, Start, WindowStart};
use crate::{BatchSpec, Error, Result, TensorBatch};

/// The stream of the row shuffle's generator, mixed with the shard index.
const ROW_STREAM: u64 = 2;

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
    /// Where the units' rows lie in the source's files, for the columns.
    locate: Option<Locate>,
}

impl Input<'_> {
    /// The next record batch with rows, and the lengths of its sequence rows when a budget or
    /// buckets need them, or `None` at the end.
    fn next(&mut self) -> Result<Option<(RecordBatch, RowLengths, Tag)>> {
        if let Some(held) = self.held.take() {
            return Ok(Some(held));
        }
        while !self.exhausted {
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
            let index = self.count;
            self.count += 1;
            match &self.columns {
                None => {
                    let mut columns = Columns::resolve(self.spec, &batch)?;
                    columns.locate = self.locate.take();
                    self.columns = Some(columns);
                }
                Some(columns) => {
                    columns.check_schema(&batch, || format!("record batch {index}"))?
                }
            }
            if batch.num_rows() > 0 {
                let cutting = self.spec.cutting();
                let lengths = RowLengths::of(cutting, &self.columns().sequences, &batch)?;
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

/// Runs the loop from `start` until the source ends, an error is sent, the consumer hangs up or
/// `stop` is set.
pub(crate) fn run(
    spec: &BatchSpec,
    pieces: Pieces,
    locate: Option<Locate>,
    start: &Start,
    sender: &SyncSender<Marked>,
    stop: &AtomicBool,
) {
    let mut input = Input {
        spec,
        pieces,
        columns: None,
        count: 0,
        exhausted: false,
        held: None,
        locate,
    };
    let mut emit = |batch: Marked| -> bool {
        let failed = batch.is_err();
        !stop.load(Ordering::Relaxed) && sender.send(batch).is_ok() && !failed
    };
    match start {
        Start::Window(window) => shuffled(spec, &mut input, window, &mut emit),
        Start::Rows { .. } => in_order(spec, &mut input, &mut emit),
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
        if spec.skips_images() {
            // The hook of `on_error="skip"`: rows that are not images are replaced by the rows
            // that follow, taken from the queue (reading more record batches as needed).
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

/// Batches of rows shuffled within windows of `buffer_size` rows, and with `bucket_by_length`
/// sorted by length within them (shuffled first only when `shuffle` is on), from `start`.
///
/// A window reads whole items. Resumed, the items of the rows carried into the first window are
/// read again and those rows picked out, the generator continues from its saved state, and the
/// batches of the first window already given are passed over.
fn shuffled(
    spec: &BatchSpec,
    input: &mut Input<'_>,
    start: &WindowStart,
    emit: &mut dyn FnMut(Marked) -> bool,
) {
    let mut rng = match start.rng {
        Some(state) => Rng::from_state(state),
        None => Rng::new(
            spec.epoch_seed(),
            ROW_STREAM ^ ((spec.shard_index as u64) << 8),
        ),
    };
    let window = spec.buffer_size.max(spec.batch_size);
    // The record batches of the window, each with the views that copies from it need, worked
    // out once however many batches it gives rows to, the lengths of its sequence rows, and
    // where its rows are in the shard's items.
    let mut pieces: Vec<Piece> = Vec::new();
    let mut lengths: Vec<RowLengths> = Vec::new();
    let mut tags: Vec<Tag> = Vec::new();
    // The rows of the window: (index into `pieces`, row).
    let mut rows: Vec<(usize, usize)> = Vec::new();
    if let Err(error) = carry_in(
        input,
        start,
        &mut pieces,
        &mut lengths,
        &mut tags,
        &mut rows,
    ) {
        emit(Err(error));
        return;
    }
    let mut next_item = start.start;
    let mut skip = start.skip;
    let mut at_boundary = true;
    let where_is = |tags: &[Tag], &(piece, row): &(usize, usize)| -> [u64; 2] {
        let tag = tags[piece];
        [tag.item, tag.first + row as u64]
    };
    loop {
        let carried: Vec<[u64; 2]> = rows.iter().map(|row| where_is(&tags, row)).collect();
        let rng_before = rng.state();
        let window_start = next_item;
        let mut sizes: Vec<u64> = Vec::new();
        while rows.len() < window || !at_boundary {
            match input.next() {
                Ok(Some((batch, row_lengths, tag))) => {
                    let piece = pieces.len();
                    let at = tag.item.saturating_sub(window_start) as usize;
                    if sizes.len() <= at {
                        sizes.resize(at + 1, 0);
                    }
                    sizes[at] += batch.num_rows() as u64;
                    next_item = tag.item.saturating_add(1);
                    at_boundary = tag.last;
                    rows.extend((0..batch.num_rows()).map(|row| (piece, row)));
                    pieces.push(Piece::for_shuffle(batch).at(tag.item, tag.first));
                    lengths.push(row_lengths);
                    tags.push(tag);
                }
                Ok(None) => break,
                Err(error) => {
                    emit(Err(error));
                    return;
                }
            }
        }
        if rows.is_empty() {
            // The source (or this shard's part of it) ended without rows: no batch, and maybe
            // no record batch that resolved the columns either.
            return;
        }
        if spec.shuffle {
            rng.shuffle(&mut rows);
        }
        if spec.bucket_by_length {
            // Stable, so that rows of one length keep the shuffled order.
            rows.sort_by_key(|&(piece, row)| lengths[piece].longest(row));
        }
        let exhausted = input.exhausted;
        let cutting = spec.cutting();
        let mut cut = Vec::new();
        loop {
            let start = match cut_from_end(cutting, &input.columns().sequences, &rows, &lengths) {
                Ok(Some(start)) => start,
                Ok(None) if exhausted && !spec.drop_last && !rows.is_empty() => 0,
                Ok(None) => break,
                Err(error) => {
                    emit(Err(error));
                    return;
                }
            };
            cut.push(coalesce(&rows[start..]));
            rows.truncate(start);
        }
        if spec.bucket_by_length && spec.shuffle {
            rng.shuffle(&mut cut);
        } else if spec.bucket_by_length {
            // Cut from the end of the rows sorted by length: the shortest rows come first.
            cut.reverse();
        }
        // A state is never saved after a window's last batch (it then stands between windows),
        // so a resumed window has more batches than it gave.
        if skip > 0 && skip >= cut.len() as u64 {
            emit(Err(Error::InvalidState {
                reason: format!(
                    "the state has given {skip} batches of a window that holds {}",
                    cut.len()
                ),
            }));
            return;
        }
        let record = Arc::new(WindowRecord {
            rng: rng_before,
            carried,
            start: window_start,
            sizes,
        });
        // After a window's last batch the stream stands between windows: the rows left over,
        // the generator as it is now, and the next item.
        let between = Arc::new(WindowRecord {
            rng: rng.state(),
            carried: rows.iter().map(|row| where_is(&tags, row)).collect(),
            start: next_item,
            sizes: Vec::new(),
        });
        for (j, runs) in cut.iter().enumerate().skip(skip as usize) {
            let mark = if j + 1 == cut.len() {
                Mark::Window {
                    record: between.clone(),
                    emitted: 0,
                }
            } else {
                Mark::Window {
                    record: record.clone(),
                    emitted: j as u64 + 1,
                }
            };
            let batch = assemble(spec, input.columns(), &mut pieces, runs);
            if !emit(batch.map(|batch| (batch, mark))) {
                return;
            }
        }
        skip = 0;
        if exhausted {
            return;
        }
        // Keep only the record batches that the left-over rows still need (fewer than a batch's
        // rows), so that the pieces kept stay bounded by the window.
        let mut old: Vec<Option<(Piece, RowLengths, Tag)>> = pieces
            .into_iter()
            .zip(lengths)
            .zip(tags)
            .map(|((piece, lengths), tag)| Some((piece, lengths, tag)))
            .collect();
        let mut renumber = vec![usize::MAX; old.len()];
        let mut kept = Vec::new();
        for (piece, _) in &mut rows {
            if renumber[*piece] == usize::MAX {
                renumber[*piece] = kept.len();
                kept.push(old[*piece].take().expect("each piece is moved once"));
            }
            *piece = renumber[*piece];
        }
        (pieces, lengths, tags) = (Vec::new(), Vec::new(), Vec::new());
        for (piece, row_lengths, tag) in kept {
            pieces.push(piece);
            lengths.push(row_lengths);
            tags.push(tag);
        }
    }
}

/// Reads the items of the rows carried into a resumed stream's first window (those before its
/// start) and puts those rows, in their saved order, into `rows`.
fn carry_in(
    input: &mut Input<'_>,
    start: &WindowStart,
    pieces: &mut Vec<Piece>,
    lengths: &mut Vec<RowLengths>,
    tags: &mut Vec<Tag>,
    rows: &mut Vec<(usize, usize)>,
) -> Result<()> {
    if start.carried.is_empty() {
        return Ok(());
    }
    let mut read: Vec<(RecordBatch, RowLengths, Tag)> = Vec::new();
    while let Some(piece) = input.next()? {
        if piece.2.item >= start.start {
            input.held = Some(piece);
            break;
        }
        read.push(piece);
    }
    let mut index = vec![usize::MAX; read.len()];
    // The record batches come in ascending items, each item's from its first row on: the one
    // that holds a row is the last that starts at or before it.
    for &[item, row] in &start.carried {
        let after = read.partition_point(|(_, _, tag)| (tag.item, tag.first) <= (item, row));
        let found = after.checked_sub(1).filter(|&at| {
            let (batch, _, tag) = &read[at];
            tag.item == item && row < tag.first + batch.num_rows() as u64
        });
        let Some(at) = found else {
            return Err(Error::InvalidState {
                reason: format!(
                    "the state carries row {row} of item {item}, which has no such row"
                ),
            });
        };
        if index[at] == usize::MAX {
            index[at] = pieces.len();
            let (batch, row_lengths, tag) = read[at].clone();
            pieces.push(Piece::for_shuffle(batch).at(tag.item, tag.first));
            lengths.push(row_lengths);
            tags.push(tag);
        }
        rows.push((index[at], (row - read[at].2.first) as usize));
    }
    Ok(())
}

/// Runs for `rows`, merging neighbours that are consecutive rows of one record batch.
fn coalesce(rows: &[(usize, usize)]) -> Vec<Run> {
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
