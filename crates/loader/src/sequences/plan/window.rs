//! One window of a planned epoch: its rows (those carried in, then its items' rows), shuffled
//! and sorted as the options say, and cut into batches from the end; the rows too few for a
//! batch are carried into the next window, or make the epoch's last, short batch. Rows in order
//! and cut by rows alone are cut from the start instead, so that the batches keep the rows'
//! order across windows (the rows carried are the window's last).

use std::ops::Range;

use super::{Context, Row};
use crate::Result;
use crate::memory::reserve;
use crate::rng::Rng;
use crate::sequences::tokens::cut_from_end_by;

/// The stream of a window's generator, mixed with the window's index, so that each window is
/// shuffled by a generator of its own (a window is cut again, alone, when a shard takes its
/// batches).
const WINDOW_STREAM: u64 = 3;

/// A window cut into batches.
pub(super) struct WindowCut {
    /// The window's rows in their final order (shuffled, sorted by length).
    pub(super) rows: Vec<Row>,
    /// Each batch's rows (a range of `rows`) in the order the batches are given, and whether
    /// the batch is the epoch's last, short one.
    pub(super) batches: Vec<(Range<usize>, bool)>,
    /// The rows carried into the next window, in their order.
    pub(super) leftover: Vec<Row>,
}

/// Cuts window `index`, whose rows are `carried` and those of the items `items`; `last` when it
/// is the epoch's last window (its rows left over make a short batch).
pub(super) fn cut_window(
    context: &Context<'_>,
    index: usize,
    carried: &[Row],
    items: Range<usize>,
    last: bool,
) -> Result<WindowCut> {
    let options = context.options;
    let mut rows: Vec<Row> = Vec::new();
    reserve(&mut rows, context.rows_in(items.clone()) + carried.len())?;
    rows.extend_from_slice(carried);
    for item in items {
        context.push_rows(item, &mut rows);
    }
    let mut rng = Rng::new(
        options.seed,
        WINDOW_STREAM ^ ((index as u64).wrapping_add(1) << 16),
    );
    if by_rows(options) {
        let rng = options.shuffle.then_some(&mut rng);
        return Ok(cut_by_rows(rows, options.cutting.batch_size, last, rng));
    }
    if options.shuffle {
        rng.shuffle(&mut rows);
    }
    if options.cutting.bucket_by_length {
        // Stable, so that rows of one length keep the shuffled order.
        rows.sort_by_key(|&row| context.longest(row));
    }
    let mut batches = Vec::new();
    let mut end = rows.len();
    while let Some(start) = cut_from_end_by(options.cutting, options.sequences, end, |at, c| {
        context.kept(rows[at], c)
    })? {
        batches.push((start..end, false));
        end = start;
    }
    let leftover = if last {
        if end > 0 {
            batches.push((0..end, true));
        }
        Vec::new()
    } else {
        rows[..end].to_vec()
    };
    if options.cutting.bucket_by_length && options.shuffle {
        rng.shuffle(&mut batches);
    } else {
        // Cut from the end: reversed, the batches come in the rows' order (shortest first when
        // sorted by length), and the epoch's short batch, cut last, last of all.
        batches.reverse();
        if batches.first().is_some_and(|&(_, short)| short) {
            batches.rotate_left(1);
        }
    }
    Ok(WindowCut {
        rows,
        batches,
        leftover,
    })
}

/// Whether batches are cut by rows alone (no budget, no buckets): a window's cut then follows
/// from its number of rows, which the first pass counts without listing them.
pub(super) fn by_rows(options: &super::PlanOptions<'_>) -> bool {
    !options.cutting.bucket_by_length && options.cutting.max_tokens.is_none()
}

/// Cuts `rows` into batches of `batch_size` rows from the start: the rows after the last full
/// batch (the window's last rows, in order) are carried into the next window, or, when `last`,
/// make the epoch's short batch, last; the others are shuffled first by `rng`, if given.
fn cut_by_rows(
    mut rows: Vec<Row>,
    batch_size: usize,
    last: bool,
    rng: Option<&mut Rng>,
) -> WindowCut {
    let batch_size = batch_size.max(1);
    let full = rows.len() / batch_size * batch_size;
    let leftover = if last {
        Vec::new()
    } else {
        rows.split_off(full)
    };
    if let Some(rng) = rng {
        rng.shuffle(&mut rows);
    }
    let mut batches: Vec<(Range<usize>, bool)> = (0..full)
        .step_by(batch_size)
        .map(|start| (start..start + batch_size, false))
        .collect();
    if full < rows.len() {
        batches.push((full..rows.len(), true));
    }
    WindowCut {
        rows,
        batches,
        leftover,
    }
}

/// What [`cut_window`] gives a window of `rows` rows cut by rows alone, without listing them:
/// its number of full batches, the rows of the epoch's short batch (when `last`), and the rows
/// it carries, its last `rows % batch_size` (none when `last`), which `carried` and the items'
/// own tails give.
pub(super) fn count_by_rows(
    context: &Context<'_>,
    carried: &[Row],
    items: Range<usize>,
    rows: usize,
    last: bool,
) -> (usize, Option<usize>, Vec<Row>) {
    let batch_size = context.options.cutting.batch_size.max(1);
    let full = rows / batch_size;
    let left = rows - full * batch_size;
    if last {
        return (full, (left > 0).then_some(left), Vec::new());
    }
    // The last `left` rows: from the items' ends, then from the end of the rows carried in.
    let mut tails: Vec<Vec<Row>> = Vec::new();
    let mut need = left;
    for item in items.rev() {
        if need == 0 {
            break;
        }
        let tail = context.tail_of_item(item, need);
        need -= tail.len();
        tails.push(tail);
    }
    let mut leftover = carried[carried.len().saturating_sub(need)..].to_vec();
    for tail in tails.into_iter().rev() {
        leftover.extend(tail);
    }
    (full, None, leftover)
}
