//! The loader thread's loop: record batches in, exact-size tensor batches out.
//!
//! In order, the rows of the queued record batches are cut into runs of `batch_size` rows: a
//! batch inside one record batch is one run (views), a batch across record batches several (one
//! copy). Shuffled, rows are drawn from a window of at least `buffer_size` rows, permuted, and
//! gathered `batch_size` at a time; the rows a window leaves over are shuffled into the next.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;

use arrow_array::RecordBatch;

use crate::assemble::{Piece, Run, assemble};
use crate::columns::Columns;
use crate::rng::Rng;
use crate::source::Pieces;
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
    /// The next record batch with rows, or `None` at the end.
    fn next(&mut self) -> Result<Option<RecordBatch>> {
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
                return Ok(Some(batch));
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
    if spec.shuffle {
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
    let mut queue: VecDeque<RecordBatch> = VecDeque::new();
    let mut taken = 0usize;
    let mut queued = 0usize;
    loop {
        while queued < spec.batch_size {
            match input.next() {
                Ok(Some(batch)) => {
                    queued += batch.num_rows();
                    queue.push_back(batch);
                }
                Ok(None) => break,
                Err(error) => {
                    emit(Err(error));
                    return;
                }
            }
        }
        if queued == 0 || (queued < spec.batch_size && spec.drop_last) {
            return;
        }
        let want = queued.min(spec.batch_size);
        let mut pieces = Vec::new();
        let mut runs = Vec::new();
        let mut left = want;
        while left > 0 {
            let front = &queue[0];
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

/// Batches of rows shuffled within windows of `buffer_size` rows.
fn shuffled(
    spec: &BatchSpec,
    input: &mut Input<'_>,
    emit: &mut dyn FnMut(Result<TensorBatch>) -> bool,
) {
    let mut rng = Rng::new(spec.seed, ROW_STREAM ^ ((spec.shard_index as u64) << 8));
    let window = spec.buffer_size.max(spec.batch_size);
    // The record batches of the window, each with the views that copies from it need, worked
    // out once however many batches it gives rows to.
    let mut pieces: Vec<Piece> = Vec::new();
    // The rows of the window: (index into `pieces`, row).
    let mut rows: Vec<(usize, usize)> = Vec::new();
    loop {
        while rows.len() < window {
            match input.next() {
                Ok(Some(batch)) => {
                    let piece = pieces.len();
                    rows.extend((0..batch.num_rows()).map(|row| (piece, row)));
                    pieces.push(Piece::for_shuffle(batch));
                }
                Ok(None) => break,
                Err(error) => {
                    emit(Err(error));
                    return;
                }
            }
        }
        rng.shuffle(&mut rows);
        let exhausted = input.exhausted;
        while rows.len() >= spec.batch_size || (exhausted && !spec.drop_last && !rows.is_empty()) {
            let start = rows.len().saturating_sub(spec.batch_size);
            let runs = coalesce(&rows[start..]);
            rows.truncate(start);
            if !emit(assemble(spec, input.columns(), &mut pieces, &runs)) {
                return;
            }
        }
        if exhausted {
            return;
        }
        // Keep only the record batches that the left-over rows still need (fewer than a batch's
        // rows), so that the pieces kept stay bounded by the window.
        let mut old: Vec<Option<Piece>> = pieces.into_iter().map(Some).collect();
        let mut renumber = vec![usize::MAX; old.len()];
        let mut kept = Vec::new();
        for (piece, _) in &mut rows {
            if renumber[*piece] == usize::MAX {
                renumber[*piece] = kept.len();
                kept.push(old[*piece].take().expect("each piece is moved once"));
            }
            *piece = renumber[*piece];
        }
        pieces = kept;
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
