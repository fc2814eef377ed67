//! The loader thread's loop: record batches in, exact-size tensor batches out.
//!
//! In order, the rows of the queued record batches are cut into runs of `batch_size` rows: a
//! batch inside one record batch is one run (views), a batch across record batches several (one
//! copy). Shuffled, rows are drawn from a window of at least `buffer_size` rows, permuted, and
//! gathered `batch_size` at a time; the rows a window leaves over are shuffled into the next.
//! With a token budget a batch takes rows while they fit (see [`crate::tokens`]); with length
//! buckets a window's rows are sorted by length, cut into batches, and the batches shuffled.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;

use arrow_array::RecordBatch;

use crate::assemble::{Piece, Run, assemble};
use crate::columns::Columns;
use crate::rng::Rng;
use crate::source::Pieces;
use crate::tokens::{Budget, Fit, RowLengths, cut_from_end};
use crate::{BatchSpec, Result, TensorBatch};

/// The stream of the row shuffle's generator, mixed with the shard index.
const ROW_STREAM: u64 = 2;

/// Record batches pulled from the source, checked against the first one's schema.
struct Input<'a> {
    spec: &'a BatchSpec,
    pieces: Pieces,
    columns: Option<Columns>,
    count: usize,
    exhausted: bool,
}

impl Input<'_> {
    /// The next record batch with rows, and the lengths of its sequence rows when a budget or
    /// buckets need them, or `None` at the end.
    fn next(&mut self) -> Result<Option<(RecordBatch, RowLengths)>> {
        while !self.exhausted {
            let Some(batch) = self.pieces.next() else {
                self.exhausted = true;
                break;
            };
            let batch = batch?;
            let index = self.count;
            self.count += 1;
            match &self.columns {
                None => self.columns = Some(Columns::resolve(self.spec, &batch)?),
                Some(columns) => {
                    columns.check_schema(&batch, || format!("record batch {index}"))?
                }
            }
            if batch.num_rows() > 0 {
                let lengths = RowLengths::of(self.spec, &self.columns().sequences, &batch)?;
                return Ok(Some((batch, lengths)));
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

/// Runs the loop until the source ends, an error is sent, the consumer hangs up or `stop` is
/// set.
pub(crate) fn run(
    spec: &BatchSpec,
    pieces: Pieces,
    sender: &SyncSender<Result<TensorBatch>>,
    stop: &AtomicBool,
) {
    let mut input = Input {
        spec,
        pieces,
        columns: None,
        count: 0,
        exhausted: false,
    };
    let mut emit = |batch: Result<TensorBatch>| -> bool {
        let failed = batch.is_err();
        !stop.load(Ordering::Relaxed) && sender.send(batch).is_ok() && !failed
    };
    if spec.shuffle || spec.bucket_by_length {
        shuffled(spec, &mut input, &mut emit);
    } else {
        in_order(spec, &mut input, &mut emit);
    }
}

/// Batches in the source's order.
fn in_order(
    spec: &BatchSpec,
    input: &mut Input<'_>,
    emit: &mut dyn FnMut(Result<TensorBatch>) -> bool,
) {
    // Queued record batches and the rows of the front one already taken.
    let mut queue: VecDeque<(RecordBatch, RowLengths)> = VecDeque::new();
    let mut taken = 0usize;
    let mut queued = 0usize;
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
        let mut left = want;
        while left > 0 {
            let front = &queue[0].0;
            let len = (front.num_rows() - taken).min(left);
            runs.push(Run {
                piece: pieces.len(),
                start: taken,
                len,
            });
            pieces.push(Piece::new(front.clone()));
            left -= len;
            taken += len;
            if taken == front.num_rows() {
                queue.pop_front();
                taken = 0;
            }
        }
        queued -= want;
        if !emit(assemble(spec, input.columns(), &mut pieces, &runs)) {
            return;
        }
    }
}

/// With a token budget, the rows of the next batch in order, from row `taken` of the queue's
/// front on while they fit, and whether the batch is full (rather than cut short by the end of
/// the queue); `None` without a budget.
fn rows_that_fit(
    spec: &BatchSpec,
    columns: &Columns,
    queue: &VecDeque<(RecordBatch, RowLengths)>,
    taken: usize,
) -> Result<Option<(usize, bool)>> {
    if spec.max_tokens.is_none() {
        return Ok(None);
    }
    let mut budget = Budget::new(spec, &columns.sequences);
    let mut from = taken;
    for (batch, lengths) in queue {
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
/// sorted by length within them (shuffled first only when `shuffle` is on).
fn shuffled(
    spec: &BatchSpec,
    input: &mut Input<'_>,
    emit: &mut dyn FnMut(Result<TensorBatch>) -> bool,
) {
    let mut rng = Rng::new(spec.seed, ROW_STREAM ^ ((spec.shard_index as u64) << 8));
    let window = spec.buffer_size.max(spec.batch_size);
    // The record batches of the window, each with the views that copies from it need, worked
    // out once however many batches it gives rows to, and the lengths of its sequence rows.
    let mut pieces: Vec<Piece> = Vec::new();
    let mut lengths: Vec<RowLengths> = Vec::new();
    // The rows of the window: (index into `pieces`, row).
    let mut rows: Vec<(usize, usize)> = Vec::new();
    loop {
        while rows.len() < window {
            match input.next() {
                Ok(Some((batch, row_lengths))) => {
                    let piece = pieces.len();
                    rows.extend((0..batch.num_rows()).map(|row| (piece, row)));
                    pieces.push(Piece::for_shuffle(batch));
                    lengths.push(row_lengths);
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
        let mut cut = Vec::new();
        loop {
            let start = match cut_from_end(spec, &input.columns().sequences, &rows, &lengths) {
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
        for runs in &cut {
            if !emit(assemble(spec, input.columns(), &mut pieces, runs)) {
                return;
            }
        }
        if exhausted {
            return;
        }
        // Keep only the record batches that the left-over rows still need (fewer than a batch's
        // rows), so that the pieces kept stay bounded by the window.
        let mut old: Vec<Option<(Piece, RowLengths)>> =
            pieces.into_iter().zip(lengths).map(Some).collect();
        let mut renumber = vec![usize::MAX; old.len()];
        let mut kept = Vec::new();
        for (piece, _) in &mut rows {
            if renumber[*piece] == usize::MAX {
                renumber[*piece] = kept.len();
                kept.push(old[*piece].take().expect("each piece is moved once"));
            }
            *piece = renumber[*piece];
        }
        (pieces, lengths) = kept.into_iter().unzip();
    }
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
