//! The batches of a planned epoch: cut before any data was read (see
//! [`crate::sequences::plan`]), they are gathered here, each from the units its rows lie in.
//! The units are read whole, in the order the batches first need them, and each is kept until
//! the last batch that draws from it.

use std::collections::HashMap;

use super::{Input, Mark, Marked, coalesce};
use crate::assemble::{Piece, assemble};
use crate::sequences::plan::ShardBatches;
use crate::{BatchSpec, Error};

/// A record batch of a unit read for the plan: the piece (lent out while a batch is made from
/// it), its first row in the unit and its rows.
type Part = (Option<Piece>, u64, u64);

/// Gives the shard's planned `batches` in order.
pub(super) fn planned(
    spec: &BatchSpec,
    input: &mut Input<'_>,
    batches: &ShardBatches,
    emit: &mut dyn FnMut(Marked) -> bool,
) {
    // The last batch that draws from each unit read.
    let mut last_use = vec![0usize; batches.reads.len()];
    for b in 0..batches.len() {
        for &(read, _) in batches.batch(b) {
            last_use[read as usize] = b;
        }
    }
    let mut units: Vec<Vec<Part>> = (0..batches.reads.len()).map(|_| Vec::new()).collect();
    // The units read to their end.
    let mut loaded = 0usize;
    for b in 0..batches.len() {
        let rows = batches.batch(b);
        let needed = rows.iter().map(|&(read, _)| read as usize + 1).max();
        while loaded < needed.unwrap_or(0) {
            match input.next() {
                Ok(Some((batch, _, tag))) if tag.item as usize == loaded => {
                    let rows = batch.num_rows() as u64;
                    units[loaded].push((
                        Some(Piece::for_shuffle(batch).at(tag.item, tag.first)),
                        tag.first,
                        rows,
                    ));
                    if tag.last {
                        loaded += 1;
                    }
                }
                Ok(Some((_, _, tag))) => {
                    emit(Err(Error::Panicked {
                        message: format!(
                            "the planned units came out of order: unit {} after unit {loaded}",
                            tag.item
                        ),
                    }));
                    return;
                }
                Ok(None) => {
                    emit(Err(Error::Panicked {
                        message: format!(
                            "the source ended before the plan's unit {loaded} of {}",
                            batches.reads.len()
                        ),
                    }));
                    return;
                }
                Err(error) => {
                    emit(Err(error));
                    return;
                }
            }
        }
        // The batch's record batches are lent to `pieces` for the copy, and taken back.
        let mut lent: HashMap<(usize, usize), usize> = HashMap::new();
        let mut pieces: Vec<Piece> = Vec::new();
        let mut owners: Vec<(usize, usize)> = Vec::new();
        let mut picked: Vec<(usize, usize)> = Vec::with_capacity(rows.len());
        for &(read, row) in rows {
            let read = read as usize;
            let row = u64::from(row);
            let parts = &mut units[read];
            let at = parts.partition_point(|&(_, first, _)| first <= row);
            let found = at
                .checked_sub(1)
                .filter(|&at| row < parts[at].1 + parts[at].2);
            let Some(at) = found else {
                emit(Err(Error::Panicked {
                    message: format!("the plan's row {row} of unit {read} was not read"),
                }));
                return;
            };
            let index = *lent.entry((read, at)).or_insert_with(|| {
                let piece = parts[at]
                    .0
                    .take()
                    .expect("each part is lent once per batch");
                pieces.push(piece);
                owners.push((read, at));
                pieces.len() - 1
            });
            picked.push((index, (row - parts[at].1) as usize));
        }
        let runs = coalesce(&picked);
        let made = assemble(spec, input.columns(), &mut pieces, &runs);
        for ((read, at), piece) in owners.into_iter().zip(pieces) {
            units[read][at].0 = Some(piece);
        }
        for &(read, _) in rows {
            if last_use[read as usize] == b {
                units[read as usize].clear();
            }
        }
        let mark = Mark::Plan {
            batch: batches.first + b as u64 + 1,
        };
        if !emit(made.map(|batch| (batch, mark))) {
            return;
        }
    }
}
