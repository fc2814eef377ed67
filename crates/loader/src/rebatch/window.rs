//! Shuffle windows and length buckets: rows drawn from windows of `buffer_size` rows, shuffled,
//! sorted by length, cut into batches; the rows a window leaves over are carried into the next.

use std::sync::Arc;

use arrow_array::RecordBatch;

use super::{Input, Mark, Marked, Tag, WindowRecord, coalesce};
use crate::assemble::{Piece, assemble};
use crate::rng::{Rng, row_stream};
use crate::sequences::tokens::{RowLengths, cut_from_end};
use crate::state::WindowStart;
use crate::{BatchSpec, Error, Result};

/// Batches of rows shuffled within windows of `buffer_size` rows, and with `bucket_by_length`
/// sorted by length within them (shuffled first only when `shuffle` is on), from `start`.
///
/// A window reads whole items. Resumed, the items of the rows carried into the first window are
/// read again and those rows picked out, the generator continues from its saved state, and the
/// batches of the first window already given are passed over.
pub(super) fn shuffled(
    spec: &BatchSpec,
    input: &mut Input<'_>,
    start: &WindowStart,
    emit: &mut dyn FnMut(Marked) -> bool,
) {
    let mut rng = match start.rng {
        Some(state) => Rng::from_state(state),
        None => Rng::new(spec.epoch_seed(), row_stream(spec.shard_index as u64)),
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
