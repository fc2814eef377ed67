//! The windows of a rank's plan cut as one loader of the rank cuts its shuffle windows (the
//! crate's `rebatch/window.rs`), so that its DataLoader workers, which take runs of the plan's
//! batches, give the batches the rank gives without workers.
//!
//! One generator runs through the windows (its stream the rank's, as a loader's is its
//! shard's). A window's rows (those carried in, then its items' rows in order) are shuffled
//! together, and batches of `batch_size` are cut from its end and given in that order; the rows
//! left over (fewer than a batch) are carried into the next window in their shuffled order. A
//! window whose filling found the end of the items (a loader's pull that found nothing) makes its
//! rows left over a short last batch, or drops them with `drop_last`; a window filled exactly by
//! the last item leaves its rows left over to a window of their own, shuffled again, as the
//! loader's next pull finds the end only then.

use std::ops::Range;

use super::window::WindowCut;
use super::{Context, Row};
use crate::Result;
use crate::memory::reserve;
use crate::rng::Rng;

/// Cuts the window of the rows `carried` and those of the items `items` as a loader does, with
/// `rng` as the loader's generator when the window starts; `exhausted` when its filling found
/// the end of the items. The rows come out in the order their batches are given.
pub(super) fn cut_like_loader(
    context: &Context<'_>,
    carried: &[Row],
    items: Range<usize>,
    exhausted: bool,
    rng: &mut Rng,
) -> Result<WindowCut> {
    let mut rows: Vec<Row> = Vec::new();
    reserve(&mut rows, context.rows_in(items.clone()) + carried.len())?;
    rows.extend_from_slice(carried);
    for item in items {
        context.push_rows(item, &mut rows);
    }
    rng.shuffle(&mut rows);
    let batch_size = context.options.cutting.batch_size.max(1);
    let full = rows.len() / batch_size;
    let left = rows.len() - full * batch_size;
    // Batches from the end: the `j`-th given holds the rows `len - (j + 1) * B .. len - j * B`.
    let mut given: Vec<Row> = Vec::new();
    reserve(&mut given, rows.len())?;
    let mut batches = Vec::with_capacity(full + 1);
    for j in 0..full {
        let end = rows.len() - j * batch_size;
        batches.push((given.len()..given.len() + batch_size, false));
        given.extend_from_slice(&rows[end - batch_size..end]);
    }
    let mut leftover = rows[..left].to_vec();
    if exhausted {
        if left > 0 && !context.options.drop_last {
            batches.push((given.len()..given.len() + left, true));
            given.extend_from_slice(&leftover);
        }
        leftover.clear();
    }
    Ok(WindowCut {
        rows: given,
        batches,
        leftover,
    })
}
