//! A saved state checked against the loader that resumes it, and where its shard starts.
//!
//! Every number of the state is compared with what backs it before anything is sized by it: the
//! settings and the source's identity with the loader's, the units and their rows with the
//! source's real counts (files tell them when the loader is planned), a shuffle window's rows
//! with the window's own rules (fewer than a batch carried, each row once, no item read after
//! the window was full). Streams, whose counts only reading tells, are read as far as the state
//! says and end where the stream ends; nothing is allocated by a stream position.

use super::ranges::item_len;
use super::{LoaderState, Position, Settings, bad, check_version};
use crate::Result;

/// Where a resumed shard starts.
#[derive(Debug, Clone)]
pub(crate) enum Start {
    /// Rows in order from `row` of item `item`.
    Rows { item: u64, row: u64 },
    /// Shuffle windows, from the window record.
    Window(WindowStart),
    /// The shard's planned batches from batch `batch` on.
    Plan { batch: u64 },
}

/// A shuffled stream's start: the generator, the rows carried over, the first item to read, and
/// the batches of the first window to pass over.
#[derive(Debug, Clone)]
pub(crate) struct WindowStart {
    pub(crate) rng: Option<u64>,
    pub(crate) carried: Vec<[u64; 2]>,
    pub(crate) start: u64,
    pub(crate) skip: u64,
}

impl Start {
    /// The start of the epoch: the first planned batch, the first row, or the first window.
    pub(crate) fn beginning(settings: &Settings, planned: bool) -> Start {
        if planned {
            Start::Plan { batch: 0 }
        } else if windowed(settings) {
            Start::Window(WindowStart {
                rng: None,
                carried: Vec::new(),
                start: 0,
                skip: 0,
            })
        } else {
            Start::Rows { item: 0, row: 0 }
        }
    }
}

/// Whether rows are drawn from windows (shuffled or sorted by length) rather than in order.
fn windowed(settings: &Settings) -> bool {
    settings.shuffle || settings.bucket_by_length
}

/// What a loader about to resume is: its settings, epoch and shard, and its source's units.
pub(crate) struct Resuming<'a> {
    /// The loader's settings, its source's identity among them.
    pub(crate) settings: &'a Settings,
    /// The epoch it reads.
    pub(crate) epoch: u64,
    /// `[shard_index, num_shards]`.
    pub(crate) shard: [u64; 2],
    /// The ranks among the shards.
    pub(crate) ranks: u64,
    /// The rows of each unit in the epoch's order when the source's metadata tells (files);
    /// `None` for streams.
    pub(crate) unit_rows: Option<&'a [u64]>,
    /// Whether the loader plans its batches from the rows' lengths.
    pub(crate) planned: bool,
}

impl LoaderState {
    /// The ranks among the shards of the loader that saved this state (one per shard where the
    /// state does not say, as format 3 did not); `None` for a merged state. A number that
    /// does not divide the shards is refused.
    pub(crate) fn layout_ranks(&self) -> Result<Option<u64>> {
        let Some([_, shards]) = self.shard else {
            return Ok(None);
        };
        let ranks = self.ranks.unwrap_or(shards);
        if ranks == 0 || ranks > shards || shards % ranks != 0 {
            return bad(format!(
                "the state's ranks is {ranks}; expected a divisor of its {shards} shards"
            ));
        }
        Ok(Some(ranks))
    }

    /// Checks this state against the loader about to resume it and returns where the shard
    /// starts.
    pub(crate) fn start_for(&self, loader: &Resuming<'_>) -> Result<Start> {
        if let Err(reason) = check_version(self.version, Some(&self.work)) {
            return bad(reason);
        }
        if let Some(difference) = self.settings.difference(loader.settings) {
            return bad(difference.to_string());
        }
        if self.epoch != loader.epoch {
            return bad(format!(
                "the state was saved in epoch {}; this loader reads epoch {}",
                self.epoch, loader.epoch
            ));
        }
        let [shard, num_shards] = loader.shard;
        if let Some([saved_shard, saved_shards]) = self.shard
            && (saved_shard, saved_shards) != (shard, num_shards)
        {
            // The same number of shards: another shard's state (rank 0's, saved on rank 0
            // alone), which no merge of it alone helps.
            let remedy = if saved_shards == num_shards {
                format!(
                    "each shard resumes from its own state: give shard {shard} the state it \
                     saved (under DDP, save the loader's state on every rank)"
                )
            } else {
                "to resume with another number of shards, merge the states of every shard with \
                 merge_states"
                    .to_string()
            };
            return bad(format!(
                "the state was saved by shard {saved_shard} of {saved_shards}; this loader is \
                 shard {shard} of {num_shards} ({remedy})"
            ));
        }
        if let Some(saved) = self.layout_ranks()?
            && saved != loader.ranks
        {
            // Format 3 recorded no ranks: its plans were of one rank per shard.
            let saved_in = match self.ranks {
                Some(_) => format!("in {saved} ranks"),
                None => format!("in format 3, which planned each of its {saved} shards as a rank"),
            };
            return bad(format!(
                "the state was saved by shard {shard} of {num_shards} {saved_in}; this loader is \
                 shard {shard} of {num_shards} in {} ranks (to resume with other ranks or \
                 DataLoader workers, merge the states of every shard with merge_states)",
                loader.ranks
            ));
        }
        let unit_rows = loader.unit_rows;
        self.work
            .check(unit_rows.map(|rows| rows.len() as u64), unit_rows)?;
        let windowed = windowed(loader.settings);
        match (&self.position, windowed) {
            (None, _) => Ok(Start::beginning(loader.settings, loader.planned)),
            // The planned count is checked when the plan is made.
            (Some(Position::Plan { batch }), _) if loader.planned => {
                Ok(Start::Plan { batch: *batch })
            }
            (Some(Position::Plan { .. }), _) => bad(
                "the state's position is in a planned epoch (several shards of files under a \
                 token budget or length buckets, or whose deal of units was uneven); this loader \
                 cuts its batches as it reads"
                    .to_string(),
            ),
            (Some(_), _) if loader.planned => bad(
                "the state's position is of a stream cut as it was read; this loader plans its \
                 epoch (several shards of files under a token budget or length buckets, or whose \
                 deal of units would leave their batch counts uneven): start the epoch again, \
                 or resume with the version that saved the state"
                    .to_string(),
            ),
            (Some(Position::Rows { item, row }), false) => {
                self.check_rows_position(loader, *item, *row)?;
                Ok(Start::Rows {
                    item: *item,
                    row: *row,
                })
            }
            (
                Some(Position::Window {
                    rng,
                    carried,
                    start,
                    sizes,
                    emitted,
                }),
                true,
            ) => {
                self.check_window(loader, carried, *start, sizes, *emitted)?;
                Ok(Start::Window(WindowStart {
                    rng: Some(*rng),
                    carried: carried.clone(),
                    start: *start,
                    skip: *emitted,
                }))
            }
            (Some(_), windowed) => bad(format!(
                "the state's position is of a stream {} rows by window; this loader {}",
                if windowed { "not drawing" } else { "drawing" },
                if windowed {
                    "shuffles or buckets"
                } else {
                    "reads in order"
                }
            )),
        }
    }

    /// The shard's number of items, when the units are known.
    fn shard_len(&self, loader: &Resuming<'_>) -> Option<u64> {
        let [shard, num_shards] = loader.shard;
        self.work.shard_len(shard, num_shards)
    }

    /// The rows of item `k` of the loader's shard: the real count for files (0 past the
    /// shard's last item), the count its ranges give for streams (`None` when they do not).
    fn rows_of(&self, loader: &Resuming<'_>, k: u64) -> Option<u64> {
        let [shard, num_shards] = loader.shard;
        let item = self.work.item(k, shard, num_shards);
        match loader.unit_rows {
            Some(unit_rows) => Some(item.map_or(0, |item| {
                let rows = usize::try_from(item.unit)
                    .ok()
                    .and_then(|unit| unit_rows.get(unit))
                    .copied()
                    .unwrap_or(0);
                item.row_count(rows)
            })),
            None => item.as_ref().and_then(item_len),
        }
    }

    /// Refuses an item index past the shard's items (files).
    fn check_item(&self, loader: &Resuming<'_>, k: u64, what: &str) -> Result<()> {
        match self.shard_len(loader) {
            Some(len) if k > len => bad(format!(
                "the state's {what} is item {k}; this shard has {len} items"
            )),
            _ => Ok(()),
        }
    }

    /// Checks a position in order: an item of the shard, a row inside it.
    fn check_rows_position(&self, loader: &Resuming<'_>, item: u64, row: u64) -> Result<()> {
        self.check_item(loader, item, "position")?;
        if let Some(rows) = self.rows_of(loader, item)
            && row > rows
        {
            return bad(format!(
                "the state's position is row {row} of item {item}, which has {rows} rows"
            ));
        }
        Ok(())
    }

    /// Checks a window: its items inside the shard, its carried rows (fewer than a batch, each
    /// once, of items before the window, inside them), the rows it read against the window's
    /// size and (files) the items' real rows, and the batches it gave against its rows.
    fn check_window(
        &self,
        loader: &Resuming<'_>,
        carried: &[[u64; 2]],
        start: u64,
        sizes: &[u64],
        emitted: u64,
    ) -> Result<()> {
        let settings = loader.settings;
        self.check_item(loader, start, "window start")?;
        if let Some(len) = self.shard_len(loader)
            && sizes.len() as u64 > len - start
        {
            return bad(format!(
                "the state's window reads {} items from item {start}; this shard has {len} items",
                sizes.len()
            ));
        }
        check_carried(carried, start, settings.batch_size)?;
        if loader.unit_rows.is_some() {
            for &[item, row] in carried {
                let rows = self.rows_of(loader, item).unwrap_or(0);
                if row >= rows {
                    return bad(format!(
                        "the state carries row {row} of item {item}, which has {rows} rows"
                    ));
                }
            }
        }
        check_window_size(carried.len(), sizes, settings)?;
        if loader.unit_rows.is_some() {
            for (offset, &size) in sizes.iter().enumerate() {
                let item = start + offset as u64;
                let rows = self.rows_of(loader, item).unwrap_or(0);
                if size != rows {
                    return bad(format!(
                        "the state's window read {size} rows of item {item}, which has {rows} \
                         rows"
                    ));
                }
            }
        }
        let total: u128 =
            sizes.iter().map(|&s| u128::from(s)).sum::<u128>() + carried.len() as u128;
        check_emitted(emitted, total, settings)
    }
}

/// Refuses carried rows that no window leaves over: a batch's worth or more, a row twice, or a
/// row of an item that is not before the window's start.
pub(super) fn check_carried(carried: &[[u64; 2]], start: u64, batch_size: u64) -> Result<()> {
    if carried.len() as u64 >= batch_size {
        return bad(format!(
            "the state carries {} rows into its window; a window leaves over fewer rows than a \
             batch ({batch_size})",
            carried.len()
        ));
    }
    if let Some(&[item, _]) = carried.iter().find(|[item, _]| *item >= start) {
        return bad(format!(
            "the state carries a row of item {item}, not before the window's start {start}"
        ));
    }
    let mut sorted = carried.to_vec();
    sorted.sort_unstable();
    if let Some(pair) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
        let [item, row] = pair[0];
        return bad(format!(
            "the state carries row {row} of item {item} more than once; expected each row once"
        ));
    }
    Ok(())
}

/// Refuses a window that read an item after it was full: a window reads whole items while it
/// holds fewer than `max(buffer_size, batch_size)` rows, so every row but those of its last item
/// (with the rows carried in) is fewer than that.
pub(super) fn check_window_size(carried: usize, sizes: &[u64], settings: &Settings) -> Result<()> {
    let window = u128::from(settings.buffer_size.max(settings.batch_size));
    let before_last: u128 = carried as u128
        + sizes
            .iter()
            .take(sizes.len().saturating_sub(1))
            .map(|&s| u128::from(s))
            .sum::<u128>();
    if !sizes.is_empty() && before_last >= window {
        return bad(format!(
            "the state's window holds {before_last} rows before its last item; a window of \
             {window} rows reads no item once it holds that many"
        ));
    }
    Ok(())
}

/// Refuses more batches given than the window's rows make: batches hold at least one row, and
/// exactly `batch_size` when they are cut by rows (the window's last batch is never recorded as
/// given: the state after it stands between windows).
pub(super) fn check_emitted(emitted: u64, total: u128, settings: &Settings) -> Result<()> {
    let most = if settings.max_tokens.is_none() {
        total.div_ceil(u128::from(settings.batch_size.max(1)))
    } else {
        total
    };
    if emitted > 0 && u128::from(emitted) >= most {
        return bad(format!(
            "the state's window gave {emitted} batches of a window of {total} rows; expected \
             fewer than {most}"
        ));
    }
    Ok(())
}
