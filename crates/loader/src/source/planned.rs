//! Planned epochs of files: when the epoch is planned, the one pass over the sequence columns
//! that reads every row's length (kept per process by the source's identity), and the shard's
//! batches cut from them (see [`crate::sequences::plan`]).
//!
//! Over several shards of files, the epoch is planned when a token budget or length buckets cut
//! the batches (their count depends on the rows' lengths), and, cut by rows, when the ranks
//! have DataLoader workers (each rank's batches are then dealt to its workers in runs) or the
//! deal of units would give the ranks uneven counts (a file of one row group gives all its
//! batches to one rank): then only the units' row counts are needed, which the metadata gives,
//! and no pass is made. One shard, and streams and readers (which cannot be read twice), cut
//! their batches as they read.
//!
//! The pass reads as little as each format allows. An IPC file's record batch is decoded as views
//! of its map, so the pass reads the list columns' offsets (and validity) and no values; an IPC
//! object's record batches are fetched whole. A Parquet file keeps a list's lengths only in its
//! repetition levels, which share pages with the values, so its row groups are decoded with a
//! projection onto the sequence columns alone (for an object, only those column chunks are
//! fetched).

use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;

use crate::ipc::{self, IpcFile, IpcRecordBatch, StreamInput};
use crate::parquet::{ParquetFile, ParquetPieces, RowGroup};
use crate::rng::row_stream;
use crate::sequences::plan::{
    PlanItem, PlanOptions, ShardBatches, SourceLengths, plan_shard, rank_items, uneven_ranks,
};
use crate::sequences::text::tokenize_texts;
use crate::sequences::tokens::raw_lengths;
use crate::state::{Item, SourceIdentity, Start, Work};
use crate::{BatchSpec, Error, Result};

/// The sources whose lengths a process keeps: a loader per epoch (and `BatchDataset`'s checks)
/// finds them again without a pass.
const CACHED_SOURCES: usize = 4;

/// What the lengths are kept by: the source, and its sequence columns with the tokenizer of
/// each text column, by its digest and whether it adds special tokens (another tokenizer gives
/// other lengths; the cache keeps no tokenizer alive).
#[derive(PartialEq)]
struct Key {
    source: SourceIdentity,
    columns: Vec<(String, Option<(String, bool)>)>,
}

/// The lengths kept, the latest last.
static CACHE: Mutex<Vec<(Key, Arc<SourceLengths>)>> = Mutex::new(Vec::new());

/// Whether `spec` plans the epoch whose `work` is dealt from units of files with `unit_rows`
/// rows (in the epoch's order): over several shards, under a token budget or buckets, when the
/// ranks have DataLoader workers, or when the deal would give the ranks different numbers of
/// batches.
pub(super) fn is_planned(spec: &BatchSpec, work: &Work, unit_rows: &[u64]) -> bool {
    spec.num_shards > 1
        && (by_lengths(spec) || dealt_to_workers(spec) || uneven_deal(spec, work, unit_rows))
}

/// Whether the plan is cut by the rows' lengths (a token budget or buckets), rather than by
/// rows alone.
pub(super) fn by_lengths(spec: &BatchSpec) -> bool {
    spec.max_tokens.is_some() || spec.bucket_by_length
}

/// Whether the ranks have DataLoader workers and the batches are cut by rows (their count
/// follows from the rows: not with documents packed whole, whose count only the data tells):
/// then the rank's batches are planned and dealt to its workers in runs, so that the
/// DataLoader gives the batches one loader of the rank would, and only the rank's last batch
/// is short, rather than each worker cutting (or, with `drop_last`, dropping) its own.
fn dealt_to_workers(spec: &BatchSpec) -> bool {
    spec.ranks() < spec.num_shards && spec.batches_for(0).is_some()
}

/// The element of `values` (one per unit of the source) at `unit`, a unit's ordinal from a
/// state's work; past the source's units, the error that says so.
pub(super) fn unit_of<T>(values: &[T], unit: u64) -> Result<&T> {
    usize::try_from(unit)
        .ok()
        .and_then(|index| values.get(index))
        .ok_or_else(|| Error::InvalidState {
            reason: format!("work item unit {unit} is past the source's units"),
        })
}

/// Whether dealing `work`'s items round-robin gives the ranks (see [`BatchSpec::num_ranks`])
/// different numbers of batches, when the batches are cut by rows (their count follows from the
/// rows: not with documents packed whole, whose count only the data tells).
fn uneven_deal(spec: &BatchSpec, work: &Work, unit_rows: &[u64]) -> bool {
    // A state of another source is refused when it is checked; its items are not counted.
    if spec.batches_for(0).is_none() || work.units != Some(unit_rows.len() as u64) {
        return false;
    }
    let item_rows = work_rows(work, |unit| unit_of(unit_rows, unit).copied().unwrap_or(0));
    uneven_ranks(&item_rows, spec.ranks(), |rows| {
        spec.batches_for(rows).unwrap_or(0)
    })
}

/// The rows of each of `work`'s items, in the epoch's order, whose units have `unit_rows(unit)`.
fn work_rows(work: &Work, unit_rows: impl Fn(u64) -> u64) -> Vec<u64> {
    (0..work.total().unwrap_or(0))
        .map_while(|w| work.global(w))
        .map(|item| item.row_count(unit_rows(item.unit)))
        .collect()
}

/// Whether a planned epoch of rows is planned per rank: the ranks' deal of units is even, so
/// each rank's batches are the ones it cuts from its own units (as without DataLoader workers),
/// planned from them alone and dealt to its workers in runs. Otherwise (an uneven deal, a
/// budget, buckets) one plan of the epoch gives every rank as many batches.
fn per_rank(spec: &BatchSpec, work: &Work, unit_rows: &[u64]) -> bool {
    !by_lengths(spec) && dealt_to_workers(spec) && !uneven_deal(spec, work, unit_rows)
}

/// `batches` with the items they read renumbered in the order of their units, and the items so
/// sorted, for a source read in order (a stream): a batch then waits for the units before its
/// own, which the window it is cut from holds anyway.
pub(super) fn reads_in_order(
    mut batches: ShardBatches,
    items: Vec<(u64, Item)>,
) -> (ShardBatches, Vec<(u64, Item)>) {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&read| items[read].1.unit);
    let mut renumbered = vec![0u32; items.len()];
    for (new, &old) in order.iter().enumerate() {
        renumbered[old] = new as u32;
    }
    batches.reads = order.iter().map(|&old| batches.reads[old]).collect();
    for row in &mut batches.rows {
        row.0 = renumbered[row.0 as usize];
    }
    let items = order
        .iter()
        .enumerate()
        .map(|(new, &old)| (new as u64, items[old].1.clone()))
        .collect();
    (batches, items)
}

/// The lengths a plan is cut by: from `pass` (the sequence columns read) under a token budget
/// or buckets, else only the rows of the source's units, `source_rows` in the source's order.
pub(super) fn lengths(
    spec: &BatchSpec,
    source_rows: impl Iterator<Item = u64>,
    pass: impl FnOnce() -> Result<Arc<SourceLengths>>,
) -> Result<Arc<SourceLengths>> {
    if by_lengths(spec) {
        pass()
    } else {
        row_lengths(source_rows)
    }
}

/// The units of `unit_rows` rows each, for a plan cut by rows alone.
pub(super) fn row_lengths(unit_rows: impl Iterator<Item = u64>) -> Result<Arc<SourceLengths>> {
    Ok(Arc::new(SourceLengths::of_rows(unit_rows)?))
}

/// The lengths of `source`'s sequence rows, from the cache or from `read`.
///
/// The cache is only tried (`try_lock`), never waited for: a lock held elsewhere (or inherited
/// locked by a forked child) means a pass of our own, never a wait.
fn lengths_of(
    source: &SourceIdentity,
    spec: &BatchSpec,
    read: impl FnOnce() -> Result<SourceLengths>,
) -> Result<Arc<SourceLengths>> {
    let key = Key {
        source: source.clone(),
        columns: (spec.sequences.iter())
            .map(|s| {
                let tokenizer = s.tokenizer.as_ref();
                let encoding = tokenizer.map(|t| (t.digest().to_string(), t.add_special_tokens));
                (s.column.clone(), encoding)
            })
            .collect(),
    };
    if let Ok(cache) = CACHE.try_lock()
        && let Some((_, lengths)) = cache.iter().find(|(k, _)| *k == key)
    {
        return Ok(lengths.clone());
    }
    let lengths = Arc::new(read()?);
    let mut evicted = None;
    if let Ok(mut cache) = CACHE.try_lock() {
        cache.retain(|(k, _)| *k != key);
        if cache.len() >= CACHED_SOURCES {
            evicted = Some(cache.remove(0));
        }
        cache.push((key, lengths.clone()));
    }
    // The evicted lengths are freed here, after the lock.
    drop(evicted);
    Ok(lengths)
}

/// The lengths of the sequence rows of `batch` (a part of a unit), per sequence column: a text
/// column that a sequence tokenizes is tokenized first, so that a budget or buckets plan by the
/// ids' lengths, as the loader cuts them.
fn batch_lengths(spec: &BatchSpec, batch: &RecordBatch) -> Result<Vec<Vec<usize>>> {
    let threads = spec.decode_thread_count().max(1);
    let batch = &tokenize_texts(&spec.sequences, spec.allow_nulls, threads, batch.clone(), 0)?;
    spec.sequences
        .iter()
        .map(|sequence| {
            let column =
                batch
                    .column_by_name(&sequence.column)
                    .ok_or_else(|| Error::MissingColumn {
                        column: sequence.column.clone(),
                        available: batch
                            .schema()
                            .fields()
                            .iter()
                            .map(|field| field.name().clone())
                            .collect(),
                    })?;
            raw_lengths(sequence, column.as_ref())
        })
        .collect()
}

/// Gathers units' lengths from record batches tagged with their unit, in order; a unit that
/// gave no record batch has no rows.
struct Gather<'a> {
    spec: &'a BatchSpec,
    lengths: SourceLengths,
    unit: usize,
    pending: Vec<Vec<usize>>,
}

impl<'a> Gather<'a> {
    fn new(spec: &'a BatchSpec) -> Self {
        Gather {
            spec,
            lengths: SourceLengths::new(spec.sequences.len()),
            unit: 0,
            pending: vec![Vec::new(); spec.sequences.len()],
        }
    }

    /// Ends the units before `unit`.
    fn reach(&mut self, unit: usize) -> Result<()> {
        while self.unit < unit {
            self.lengths.push_unit(&self.pending)?;
            self.pending.iter_mut().for_each(Vec::clear);
            self.unit += 1;
        }
        Ok(())
    }

    fn add(&mut self, unit: usize, batch: &RecordBatch) -> Result<()> {
        self.reach(unit)?;
        for (pending, lengths) in self
            .pending
            .iter_mut()
            .zip(batch_lengths(self.spec, batch)?)
        {
            pending.extend(lengths);
        }
        Ok(())
    }

    fn finish(mut self, units: usize) -> Result<SourceLengths> {
        self.reach(units)?;
        Ok(self.lengths)
    }
}

/// The lengths of every row group of `files`, decoded projected onto the sequence columns.
pub(super) fn parquet_lengths(
    files: &[ParquetFile],
    source: &SourceIdentity,
    spec: &BatchSpec,
) -> Result<Arc<SourceLengths>> {
    lengths_of(source, spec, || {
        let columns: Vec<String> = spec.sequences.iter().map(|s| s.column.clone()).collect();
        let mut units = Vec::new();
        let mut projected = Vec::with_capacity(files.len());
        for (file, parquet) in files.iter().enumerate() {
            for (row_group, rows) in parquet.row_group_rows()?.into_iter().enumerate() {
                units.push(RowGroup {
                    file,
                    row_group,
                    rows,
                    skip: 0,
                });
            }
            projected.push(parquet.projected(&columns)?);
        }
        let count = units.len();
        let mut gather = Gather::new(spec);
        for piece in ParquetPieces::start(projected, units, spec.decode_thread_count())? {
            let (unit, batch, _) = piece?;
            gather.add(unit, &batch)?;
        }
        gather.finish(count)
    })
}

/// The lengths of record batches read in order, each a unit of its own: record batches in
/// memory, or local IPC streams read once more for them.
pub(super) fn units_lengths(
    spec: &BatchSpec,
    batches: impl Iterator<Item = Result<RecordBatch>>,
) -> Result<SourceLengths> {
    let mut gather = Gather::new(spec);
    let mut count = 0;
    for (unit, batch) in batches.enumerate() {
        gather.add(unit, &batch?)?;
        count = unit + 1;
    }
    gather.finish(count)
}

/// The lengths of every record batch of the local IPC streams `inputs` (in the source's order),
/// read once for them (and kept for the source's next plans, as files' are).
pub(super) fn stream_lengths(
    inputs: Vec<StreamInput>,
    source: &SourceIdentity,
    spec: &BatchSpec,
) -> Result<Arc<SourceLengths>> {
    lengths_of(source, spec, || {
        units_lengths(spec, ipc::read_streams(inputs))
    })
}

/// The lengths of every record batch of `files`.
pub(super) fn ipc_lengths(
    files: &Arc<Vec<IpcFile>>,
    source: &SourceIdentity,
    spec: &BatchSpec,
) -> Result<Arc<SourceLengths>> {
    lengths_of(source, spec, || {
        let units: Vec<IpcRecordBatch> = files
            .iter()
            .enumerate()
            .flat_map(|(file, ipc)| {
                ipc.rows()
                    .iter()
                    .enumerate()
                    .map(move |(index, &rows)| IpcRecordBatch { file, index, rows })
            })
            .collect();
        let count = units.len();
        let mut gather = Gather::new(spec);
        for (unit, batch) in ipc::read_planned(files.clone(), units).enumerate() {
            gather.add(unit, &batch?)?;
        }
        gather.finish(count)
    })
}

/// The shard's planned batches of the epoch's `work`, from where `start` says, and the items it
/// reads for them (each numbered by its place in the list, its unit whole); `source_unit` gives
/// the index among the source's units (the lengths' order) of each unit of the epoch's order.
pub(super) fn shard_batches(
    spec: &BatchSpec,
    work: &Work,
    start: &Start,
    source_unit: &[usize],
    lengths: &SourceLengths,
) -> Result<(ShardBatches, Vec<(u64, Item)>)> {
    let from = match start {
        Start::Plan { batch } => *batch,
        _ => 0,
    };
    let unit_rows: Vec<u64> = source_unit
        .iter()
        .map(|&unit| lengths.unit_rows(unit))
        .collect();
    let by_rank = per_rank(spec, work, &unit_rows);
    let ranks = spec.ranks();
    let mut work_items = Vec::new();
    for w in 0..work.total().unwrap_or(0) {
        let Some(item) = work.global(w) else { break };
        work_items.push(item);
    }
    // Planned per rank, the plan is of the rank's items, over its workers.
    // Shuffled, the rank's windows are cut as the rank's loader without workers cuts them.
    let rank = spec.shard_index % ranks;
    let (shard, num_shards, num_ranks, loader_stream) = if by_rank {
        work_items = rank_items(&work_items, rank, ranks);
        let stream = spec.shuffle.then(|| row_stream(rank as u64));
        (spec.shard_index / ranks, spec.num_shards / ranks, 1, stream)
    } else {
        (spec.shard_index, spec.num_shards, ranks, None)
    };
    let items = work_items
        .iter()
        .map(|item| {
            Ok(PlanItem {
                unit: *unit_of(source_unit, item.unit)?,
                rows: item.rows.clone(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    // Cut by rows alone, the lengths hold no column (see `lengths`).
    let sequences: Vec<_> = if by_lengths(spec) {
        spec.sequences.iter().cloned().enumerate().collect()
    } else {
        Vec::new()
    };
    let options = PlanOptions {
        cutting: spec.cutting(),
        sequences: &sequences,
        shuffle: spec.shuffle,
        seed: spec.epoch_seed(),
        buffer_size: spec.buffer_size,
        drop_last: spec.drop_last,
        num_shards,
        loader_stream,
        num_ranks,
    };
    let (batches, _) = plan_shard(&options, lengths, &items, shard, from)?;
    let reads = batches
        .reads
        .iter()
        .enumerate()
        .map(|(k, &item)| {
            let unit = work_items[item as usize].unit;
            (k as u64, Item { unit, rows: None })
        })
        .collect();
    Ok((batches, reads))
}
