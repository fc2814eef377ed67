//! A planned epoch: every batch of every shard worked out from the lengths of the sequence rows
//! before any data is read, so that each shard gets the same number of batches, each within the
//! token budget and, cut greedily, about as full as the others.
//!
//! Under a token budget or length buckets the batches depend on the data, so shards that each
//! cut their own rows get different numbers of batches, and a distributed run waits forever for
//! the shard that ran out. Here every shard computes the same global plan from the same inputs
//! (the rows' lengths, the seed and the epoch) and takes its share:
//!
//! 1. The epoch's items (units, or some rows of them, in the epoch's order) are read in windows
//!    of whole items holding at least `max(buffer_size, batch_size)` rows with the rows carried
//!    in; each window is shuffled, sorted by length and cut from its end into batches as an
//!    unplanned loader cuts a shuffle window (`window.rs`). The rows too few for a batch are
//!    carried into the next window; those of the last window make a short batch.
//! 2. The number of batches is made a multiple of the shards (`remainder.rs`): with
//!    `drop_last` the short batch and the lightest batches are dropped; without it the heaviest
//!    batches are split into balanced parts, so that every row is kept.
//! 3. Shard `s` of `n` takes the batches `s * T .. (s + 1) * T` of the list (`T` the count over
//!    `n`): consecutive batches, so that a shard reads the items of about `1 / n` of the windows
//!    rather than a part of every window. Only the windows of its batches are cut again to list
//!    their rows (the first pass keeps each window's carried rows and its batches' sizes).
//!
//! Cut by rows alone (no budget, no buckets), steps 2 and 3 are a deal of the epoch's rows
//! instead (`rows.rs`): shard `s` takes the `s`-th run of `1 / n` of the rows and cuts it into
//! full batches and a short last one, as many as every other shard, so that every shard's `j`-th
//! batch holds as many rows, to within one.
//!
//! The shards of the plan are the ranks ([`PlanOptions::num_ranks`]): what must be even is each
//! rank's count. A rank's DataLoader workers then deal its batches in runs (`workers.rs`), so
//! that the DataLoader gives the rank's batches, whole, and only the rank's last batch is short.
//!
//! What it costs: the lengths take 4 bytes per row and sequence column (`SourceLengths`); the
//! first pass holds one window's rows at a time and a few numbers per batch; the shard's batches
//! list its rows (8 bytes each).

use std::ops::Range;

use crate::memory::{ensure_available, reserve};
use crate::rng::Rng;
use crate::sequences::Sequence;
use crate::sequences::tokens::Cutting;
use crate::{Error, Result};

mod lengths;
mod loader_window;
mod remainder;
mod rows;
mod window;
mod workers;

pub(crate) use lengths::SourceLengths;
use loader_window::cut_like_loader;
use remainder::{Summary, parts, split, weight};
use rows::RowsDeal;
pub(crate) use rows::row_batches;
use window::{by_rows, count_by_rows, cut_window};
use workers::worker_run;
pub(crate) use workers::{rank_items, uneven_ranks};

/// A row of a planned epoch: the index of its item among the plan's items, and its row in the
/// item's unit.
pub(crate) type Row = (u32, u32);

/// What a plan is cut by: the spec's options, with the epoch's seed.
pub(crate) struct PlanOptions<'a> {
    /// Rows or tokens, and whether rows are sorted by length.
    pub(crate) cutting: Cutting,
    /// The sequence columns, each with the index of its lengths in [`SourceLengths`].
    pub(crate) sequences: &'a [(usize, Sequence)],
    /// Whether windows are shuffled.
    pub(crate) shuffle: bool,
    /// The epoch's seed.
    pub(crate) seed: u64,
    /// The rows of a window (at least; at least `batch_size` too).
    pub(crate) buffer_size: usize,
    /// Whether the remainder is dropped rather than split.
    pub(crate) drop_last: bool,
    /// The shards.
    pub(crate) num_shards: usize,
    /// With `shuffle`, cut by rows: the stream of the generator of one loader whose windows
    /// the plan's windows are cut as (`loader_window.rs`; a rank's own units planned for its
    /// DataLoader workers), or `None` for the plan's own windows.
    pub(crate) loader_stream: Option<u64>,
    /// The ranks among the shards (a divisor of `num_shards`; shard `s` is rank
    /// `s % num_ranks`'s, its `s / num_ranks`-th worker), 0 for one per shard: the plan gives
    /// every rank as many batches, and each rank's workers take runs of them.
    pub(crate) num_ranks: usize,
}

impl PlanOptions<'_> {
    /// The ranks, at least one and at most one per shard.
    fn ranks(&self) -> usize {
        let shards = self.num_shards.max(1);
        match self.num_ranks {
            0 => shards,
            ranks => ranks.min(shards),
        }
    }

    /// The workers of each rank.
    fn workers(&self) -> u64 {
        (self.num_shards.max(1) / self.ranks()) as u64
    }
}

/// One item of the epoch's work: the unit whose lengths it reads (its index in
/// [`SourceLengths`]) and its rows in that unit (ascending ranges, cut to the unit), `None` for
/// all of them.
#[derive(Debug, Clone)]
pub(crate) struct PlanItem {
    pub(crate) unit: usize,
    pub(crate) rows: Option<Vec<[u64; 2]>>,
}

/// A shard's planned batches from some batch on: the items it reads, in the order its batches
/// first need them, and the rows of each batch.
#[derive(Debug, Default)]
pub(crate) struct ShardBatches {
    /// The plan's items to read, by index, in order.
    pub(crate) reads: Vec<u32>,
    /// The rows of the batches, one batch after another: the index of the row's item in
    /// `reads`, and its row in the item's unit.
    pub(crate) rows: Vec<Row>,
    /// The end of each batch in `rows`.
    pub(crate) ends: Vec<usize>,
    /// The index of the first of these batches among the shard's.
    pub(crate) first: u64,
    /// The epoch's rows that no shard reads without `drop_last` (see
    /// [`EpochPlan::rows_left_out`]).
    pub(crate) left_out: u64,
}

impl ShardBatches {
    /// The number of batches listed.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// The rows of batch `index` of those listed.
    pub(crate) fn batch(&self, index: usize) -> &[Row] {
        let start = index.checked_sub(1).map_or(0, |before| self.ends[before]);
        &self.rows[start..self.ends[index]]
    }

    /// Appends `(item, row)` to the batch being listed, numbering its item among `reads` the
    /// first time a batch needs it (`read_of[item]`, `u32::MAX` until then).
    fn push_row(&mut self, read_of: &mut [u32], (item, row): Row) {
        let read = &mut read_of[item as usize];
        if *read == u32::MAX {
            *read = self.reads.len() as u32;
            self.reads.push(item);
        }
        self.rows.push((*read, row));
    }
}

/// What the passes share: the options, the lengths and the items.
pub(super) struct Context<'a> {
    options: &'a PlanOptions<'a>,
    lengths: &'a SourceLengths,
    items: &'a [PlanItem],
}

impl Context<'_> {
    /// The kept length of `row` in sequence column `c`.
    fn kept(&self, (item, row): Row, c: usize) -> usize {
        let (column, sequence) = &self.options.sequences[c];
        let unit = self.items[item as usize].unit;
        sequence.kept(self.lengths.get(unit, row, *column))
    }

    /// The longest kept length of `row`: its bucketing key.
    fn longest(&self, row: Row) -> usize {
        (0..self.options.sequences.len())
            .map(|c| self.kept(row, c))
            .max()
            .unwrap_or(0)
    }

    /// The rows of item `item`.
    fn item_rows(&self, item: usize) -> u64 {
        let PlanItem { unit, rows } = &self.items[item];
        let all = self.lengths.unit_rows(*unit);
        match rows {
            None => all,
            Some(ranges) => ranges
                .iter()
                .map(|&[a, b]| b.min(all).saturating_sub(a))
                .sum(),
        }
    }

    /// The rows of the items `items`.
    fn rows_in(&self, items: Range<usize>) -> usize {
        items.map(|item| self.item_rows(item) as usize).sum()
    }

    /// The last `count` rows of item `item` (all of them when it has fewer), in order.
    fn tail_of_item(&self, item: usize, count: usize) -> Vec<Row> {
        let PlanItem { unit, rows: ranges } = &self.items[item];
        let all = self.lengths.unit_rows(*unit);
        let whole = [[0, all]];
        let mut tail = Vec::new();
        for &[a, b] in ranges.as_deref().unwrap_or(&whole).iter().rev() {
            let mut row = b.min(all);
            while row > a && tail.len() < count {
                row -= 1;
                // Units and items were checked to fit in 32 bits when the plan started.
                tail.push((item as u32, row as u32));
            }
            if tail.len() == count {
                break;
            }
        }
        tail.reverse();
        tail
    }

    /// Appends the rows of item `item` to `rows`.
    fn push_rows(&self, item: usize, rows: &mut Vec<Row>) {
        let PlanItem { unit, rows: ranges } = &self.items[item];
        let all = self.lengths.unit_rows(*unit);
        let whole = [[0, all]];
        for &[a, b] in ranges.as_deref().unwrap_or(&whole) {
            // Units and items were checked to fit in 32 bits when the plan started.
            rows.extend((a..b.min(all)).map(|row| (item as u32, row as u32)));
        }
    }
}

/// A window as the first pass leaves it: its items, the rows carried into it, and its batches.
struct Window {
    items: Range<usize>,
    carried: Vec<Row>,
    last: bool,
    batches: Vec<Summary>,
    /// Cut as a loader cuts its windows: the generator's state when the window starts.
    rng: Option<u64>,
}

impl Window {
    /// Cuts this window, the `index`-th, again (the second pass lists its rows).
    fn cut(&self, context: &Context<'_>, index: usize) -> Result<window::WindowCut> {
        match self.rng {
            Some(state) => cut_like_loader(
                context,
                &self.carried,
                self.items.clone(),
                self.last,
                &mut Rng::from_state(state),
            ),
            None => cut_window(context, index, &self.carried, self.items.clone(), self.last),
        }
    }
}

/// The batches of shard `shard` of the epoch whose work is `items`, from its batch `from` on,
/// and the number of batches the shard gets.
///
/// Every shard that calls this with the same options, lengths and items gets its own part of
/// one plan: the shards' batches are disjoint, each row is in at most one of them (in exactly
/// one unless the remainder dropped it), and every rank has as many.
pub(crate) fn plan_shard(
    options: &PlanOptions<'_>,
    lengths: &SourceLengths,
    items: &[PlanItem],
    shard: usize,
    from: u64,
) -> Result<(ShardBatches, u64)> {
    let plan = EpochPlan::new(options, lengths, items)?;
    let count = plan.shard_count(shard);
    if from > count {
        return Err(Error::InvalidState {
            reason: format!(
                "the state's position is batch {from} of its shard; the shard has {count} \
                 batches in this epoch's plan"
            ),
        });
    }
    Ok((plan.batches(shard, from..count)?, count))
}

/// An epoch's plan after its first pass: every shard's batches can be listed from it.
pub(crate) struct EpochPlan<'a> {
    context: Context<'a>,
    windows: Vec<Window>,
    /// Cut by rows alone: the deal of the epoch's rows (`parts` is then empty).
    deal: Option<RowsDeal>,
    parts: Vec<u32>,
    /// The batches of every rank.
    per_rank: u64,
}

impl<'a> EpochPlan<'a> {
    /// Cuts every window of the epoch whose work is `items` and makes the count a multiple of
    /// the shards.
    pub(crate) fn new(
        options: &'a PlanOptions<'a>,
        lengths: &'a SourceLengths,
        items: &'a [PlanItem],
    ) -> Result<Self> {
        check_sizes(lengths, items)?;
        let context = Context {
            options,
            lengths,
            items,
        };
        reserve_for_batches(&context)?;
        let windows = first_pass(&context)?;
        if by_rows(options) {
            let rows = windows
                .iter()
                .flat_map(|window| &window.batches)
                .map(|batch| batch.rows)
                .sum();
            let deal = RowsDeal::new(
                rows,
                options.cutting.batch_size,
                options.ranks(),
                options.drop_last,
            );
            return Ok(EpochPlan {
                context,
                windows,
                deal: Some(deal),
                parts: Vec::new(),
                per_rank: deal.per_shard(),
            });
        }
        let mut summaries: Vec<Summary> = Vec::new();
        reserve(
            &mut summaries,
            windows.iter().map(|window| window.batches.len()).sum(),
        )?;
        summaries.extend(
            windows
                .iter()
                .flat_map(|window| window.batches.iter().copied()),
        );
        let parts = parts(&summaries, options.ranks(), options.drop_last);
        let count: u64 = parts.iter().map(|&p| u64::from(p)).sum();
        let per_rank = count / options.ranks() as u64;
        Ok(EpochPlan {
            context,
            windows,
            deal: None,
            parts,
            per_rank,
        })
    }

    /// The rank of shard `shard`, and its batches among the rank's.
    fn run_of(&self, shard: usize) -> (u64, Range<u64>) {
        let options = self.context.options;
        let ranks = options.ranks();
        let run = worker_run(self.per_rank, options.workers(), (shard / ranks) as u64);
        ((shard % ranks) as u64, run)
    }

    /// The number of batches shard `shard` gets: every rank's count, dealt to its workers.
    pub(crate) fn shard_count(&self, shard: usize) -> u64 {
        let (_, run) = self.run_of(shard);
        run.end - run.start
    }

    /// The batches `batches` (indices among the shard's, within
    /// [`shard_count`](Self::shard_count)) of shard `shard`.
    pub(crate) fn batches(&self, shard: usize, batches: Range<u64>) -> Result<ShardBatches> {
        let (rank, run) = self.run_of(shard);
        let count = run.end - run.start;
        let from = batches.start.min(count);
        let wanted = run.start + from..run.start + batches.end.clamp(from, count);
        let mut listed = match &self.deal {
            Some(deal) => rows::shard_batches(&self.context, &self.windows, deal, rank, wanted)?,
            None => {
                let first = rank * self.per_rank;
                second_pass(
                    &self.context,
                    &self.windows,
                    &self.parts,
                    first + wanted.start..first + wanted.end,
                )?
            }
        };
        listed.first = from;
        listed.left_out = self.rows_left_out();
        Ok(listed)
    }

    /// The epoch's rows that no shard reads although `drop_last` is off (0 with it): where the
    /// shards cannot all get as many batches of at least a row each, with fewer rows than the
    /// batches the ranks need, or batches of one row whose rows are not a multiple of the ranks.
    pub(crate) fn rows_left_out(&self) -> u64 {
        let options = self.context.options;
        if options.drop_last {
            return 0;
        }
        let batches = self.windows.iter().flat_map(|window| &window.batches);
        match &self.deal {
            Some(deal) => deal.dropped(batches.map(|batch| batch.rows).sum(), options.ranks()),
            None => batches
                .zip(&self.parts)
                .filter(|&(_, &parts)| parts == 0)
                .map(|(batch, _)| batch.rows)
                .sum(),
        }
    }

    /// The unit (as the plan's items name it) of a row that [`EpochPlan::batches`] listed in
    /// `listed`, whose `read` indexes the listing's `reads`.
    pub(crate) fn unit_of(&self, listed: &ShardBatches, read: u32) -> usize {
        self.context.items[listed.reads[read as usize] as usize].unit
    }
}

/// Refuses a source whose units or items cannot be numbered in 32 bits (a [`Row`]).
fn check_sizes(lengths: &SourceLengths, items: &[PlanItem]) -> Result<()> {
    let too_many = |what: String| {
        Err(Error::InvalidSpec {
            reason: format!(
                "{what}; a planned epoch (a token budget, length buckets, or batches that a deal \
                 of units would leave uneven, over several shards) holds at most 2**32 units of \
                 at most 2**32 rows"
            ),
        })
    };
    if u32::try_from(items.len()).is_err() {
        return too_many(format!("the epoch has {} units", items.len()));
    }
    for unit in 0..lengths.units() {
        let rows = lengths.unit_rows(unit);
        if u32::try_from(rows).is_err() {
            return too_many(format!("unit {unit} has {rows} rows"));
        }
    }
    Ok(())
}

/// The bytes a plan holds per batch of the epoch, at most, while it is made: the batch's
/// summary in its window and in the epoch's list, its parts, and the remainder's queue.
const BYTES_PER_BATCH: usize = 96;

/// Makes sure that the epoch's batches (at least its rows over `batch_size`) can be planned
/// before planning them: the memory is reserved, then freed for the plan to use. A plan larger
/// than the process may allocate (an address-space limit, or more than the machine has) is an
/// out-of-memory error, never an abort midway.
fn reserve_for_batches(context: &Context<'_>) -> Result<()> {
    let rows = (0..context.items.len())
        .map(|item| context.item_rows(item))
        .fold(0u64, u64::saturating_add);
    let batches = rows.div_ceil(context.options.cutting.batch_size.max(1) as u64);
    let bytes = usize::try_from(batches)
        .unwrap_or(usize::MAX)
        .saturating_mul(BYTES_PER_BATCH);
    ensure_available(bytes)
}

/// Cuts every window in turn, keeping what the second pass needs to cut one again alone.
fn first_pass(context: &Context<'_>) -> Result<Vec<Window>> {
    let options = context.options;
    let size = options.buffer_size.max(options.cutting.batch_size);
    let mut windows = Vec::new();
    let mut carried: Vec<Row> = Vec::new();
    let mut next = 0;
    // Shuffled as one loader shuffles: its generator, through every window.
    let mut loader = options
        .loader_stream
        .filter(|_| options.shuffle && by_rows(options))
        .map(|stream| Rng::new(options.seed, stream));
    loop {
        let start = next;
        let mut rows = carried.len();
        while (rows < size) && next < context.items.len() {
            rows += context.item_rows(next) as usize;
            next += 1;
        }
        if rows == 0 {
            break;
        }
        // A loader's window is its last when filling it found the end of the items.
        let last = match loader {
            Some(_) => rows < size,
            None => next == context.items.len(),
        };
        let rng = loader.as_ref().map(Rng::state);
        let mut batches = Vec::new();
        let leftover = if let Some(loader) = loader.as_mut() {
            let cut = cut_like_loader(context, &carried, start..next, last, loader)?;
            reserve(&mut batches, cut.batches.len())?;
            for (range, short) in &cut.batches {
                let rows = range.len() as u64;
                batches.push(Summary {
                    rows,
                    weight: rows,
                    short: *short,
                });
            }
            cut.leftover
        } else if by_rows(options) {
            // Cut by rows alone, a window's cut follows from its count of rows: its rows are
            // listed only when a shard takes its batches (the second pass).
            let (full, short, leftover) = count_by_rows(context, &carried, start..next, rows, last);
            let size = options.cutting.batch_size.max(1) as u64;
            reserve(&mut batches, full + usize::from(short.is_some()))?;
            let summary = |rows: u64, short: bool| Summary {
                rows,
                weight: rows,
                short,
            };
            batches.extend(std::iter::repeat_n(summary(size, false), full));
            batches.extend(short.map(|rows| summary(rows as u64, true)));
            leftover
        } else {
            let cut = cut_window(context, windows.len(), &carried, start..next, last)?;
            reserve(&mut batches, cut.batches.len())?;
            for (range, short) in &cut.batches {
                batches.push(Summary {
                    rows: range.len() as u64,
                    weight: weight(context, &cut.rows[range.clone()])?,
                    short: *short,
                });
            }
            cut.leftover
        };
        reserve(&mut windows, 1)?;
        windows.push(Window {
            items: start..next,
            carried: std::mem::replace(&mut carried, leftover),
            last,
            batches,
            rng,
        });
        if last {
            break;
        }
    }
    Ok(windows)
}

/// Lists the rows of the batches `wanted` (indices into the whole list, after the remainder)
/// from the windows that hold them, numbering the items as the batches first need them.
fn second_pass(
    context: &Context<'_>,
    windows: &[Window],
    parts: &[u32],
    wanted: Range<u64>,
) -> Result<ShardBatches> {
    let mut out = ShardBatches::default();
    let mut read_of: Vec<u32> = vec![u32::MAX; context.items.len()];
    let mut at: u64 = 0;
    let mut parts = parts.iter().copied();
    for (index, window) in windows.iter().enumerate() {
        let window_parts: Vec<u32> = parts.by_ref().take(window.batches.len()).collect();
        let count: u64 = window_parts.iter().map(|&p| u64::from(p)).sum();
        if at + count <= wanted.start || at >= wanted.end {
            at += count;
            continue;
        }
        let cut = window.cut(context, index)?;
        for ((range, _), &p) in cut.batches.iter().zip(&window_parts) {
            if p == 0 {
                continue;
            }
            let rows = &cut.rows[range.clone()];
            for part in split(context, rows, p as usize)? {
                if wanted.contains(&at) {
                    reserve(&mut out.rows, part.len())?;
                    for &row in &rows[part] {
                        out.push_row(&mut read_of, row);
                    }
                    out.ends.push(out.rows.len());
                }
                at += 1;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
