//! The plans of sources read in order, as they come: readers and record batches in memory, and
//! IPC streams (the streams shuffled, their record batches dealt round-robin as they are read).

use super::*;
use crate::sequences::plan::SourceLengths;

/// Plans a reader's record batches, or record batches in memory (of `rows` rows in all, each
/// of `unit_rows`, and `nulls` in each column): read in order, dealt round-robin.
pub(super) fn plan_in_memory(
    schema: SchemaRef,
    batches: impl Iterator<Item = Result<RecordBatch>> + Send + 'static,
    (rows, unit_rows): (Option<u64>, Option<&[u64]>),
    nulls: impl Fn(&str) -> Option<u64>,
    spec: &BatchSpec,
) -> Result<Plan> {
    let described = if rows.is_some() {
        "the record batches"
    } else {
        "the reader"
    };
    check_spec(spec, &schema, || described.to_string())?;
    let settings = identity::settings(spec, identity::reader(&schema));
    let (work, start) = resume(spec, &settings, counted(spec, unit_rows), never_planned)?;
    let raw = in_stream(batches, &work, spec, &start);
    let num_rows = dealt_rows(spec, unit_rows, rows, (&work, &start));
    let null_to_nan = planned_null_to_nan(spec, &schema, nulls)?;
    Ok(Plan::dealt(
        raw,
        (work, settings, start),
        num_rows,
        null_to_nan,
    ))
}

impl Plan {
    /// The plan of a source read in order from `raw` and dealt to the shards as it comes (no
    /// background work to stop, no files to locate rows in): this shard's rows are `num_rows`.
    fn dealt(
        raw: Raw,
        (work, settings, start): (Work, Settings, Start),
        num_rows: Option<u64>,
        null_to_nan: NullToNan,
    ) -> Plan {
        Plan {
            pieces: select(raw, &start, None),
            num_rows,
            work,
            settings,
            start,
            stop: None,
            planned: None,
            null_to_nan,
            locate: None,
            decoded: false,
        }
    }

    /// The plan of a source read in order from `raw` whose epoch is planned by rows: this
    /// shard's batches are `shard_batches`, and its rows theirs.
    fn by_rows(
        raw: Raw,
        (work, settings, start): (Work, Settings, Start),
        shard_batches: ShardBatches,
        null_to_nan: NullToNan,
    ) -> Plan {
        Plan {
            num_rows: Some(shard_batches.rows.len() as u64),
            planned: Some(shard_batches),
            ..Plan::dealt(raw, (work, settings, start), None, null_to_nan)
        }
    }
}

/// Plans record batches in memory (their rows known, their null counts `nulls`): as a planned
/// epoch, as files are, over several shards under a token budget or length buckets, or where
/// their deal would give the ranks different numbers of batches (see [`planned::is_planned`]),
/// any of them being readable in any order and their lengths at hand; else dealt as they come
/// ([`plan_in_memory`]).
pub(super) fn plan_record_batches(
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    nulls: &dyn Fn(&str) -> Option<u64>,
    spec: &BatchSpec,
) -> Result<Plan> {
    let unit_rows: Vec<u64> = batches
        .iter()
        .map(|batch| batch.num_rows() as u64)
        .collect();
    // A state of a dealt stream does not count its units; in memory they are known.
    let counted = with_counted_units(spec, &unit_rows)?;
    let spec = counted.as_ref().unwrap_or(spec);
    if !planned_epoch(spec, &unit_rows) {
        let rows = unit_rows
            .iter()
            .fold(0u64, |sum, &rows| sum.saturating_add(rows));
        let batches = batches.into_iter().map(Ok);
        return plan_in_memory(schema, batches, (Some(rows), Some(&unit_rows)), nulls, spec);
    }
    check_spec(spec, &schema, || "the record batches".to_string())?;
    let settings = identity::settings(spec, identity::reader(&schema));
    let source_unit: Vec<usize> = (0..unit_rows.len()).collect();
    let (work, start, shard_batches, items) =
        epoch_plan(spec, &settings, &unit_rows, &source_unit, || {
            let lengths = planned::units_lengths(spec, batches.iter().cloned().map(Ok))?;
            Ok(Arc::new(lengths))
        })?;
    // The items' units were checked against the record batches when the work was.
    let units: Vec<RecordBatch> = items
        .iter()
        .map(|(_, item)| planned::unit_of(&batches, item.unit).cloned())
        .collect::<Result<_>>()?;
    let raw: Raw = Box::new(
        items
            .into_iter()
            .zip(units)
            .map(|((k, item), batch)| Ok((k, item, batch, true))),
    );
    let null_to_nan = planned_null_to_nan(spec, &schema, nulls)?;
    Ok(Plan::by_rows(
        raw,
        (work, settings, start),
        shard_batches,
        null_to_nan,
    ))
}

/// `spec` resuming a state (a shard's own, or merged) of record batches in memory or of local
/// streams whose work does not count its units (a dealt stream's does not know them), with the
/// units of `unit_rows` counted: their count is known in memory and from the streams' headers,
/// so that a merged work can be planned by rows when its deal over the new ranks would be
/// uneven, and a position is checked against the units. `None` for any other spec.
fn with_counted_units(spec: &BatchSpec, unit_rows: &[u64]) -> Result<Option<BatchSpec>> {
    let Some(state) = spec.state.as_ref() else {
        return Ok(None);
    };
    if state.work.units.is_some() {
        return Ok(None);
    }
    let merged = state.shard.is_none();
    let mut spec = spec.clone();
    let Some(state) = spec.state.as_mut() else {
        return Ok(None);
    };
    let work = &mut state.work;
    let units = unit_rows.len() as u64;
    if merged {
        // A merge that did not know the count lists the units a shard would have reached past
        // the end (a shard that ended names the next one of its deal): they hold no rows. A
        // unit past the end that the state read part of is an edited state's, whose rows
        // would be lost.
        if let Some(item) = work.items.iter().find(|item| {
            item.unit >= units
                && item
                    .rows
                    .as_ref()
                    .is_some_and(|rows| rows != &[[0, u64::MAX]])
        }) {
            return Err(Error::InvalidState {
                reason: format!(
                    "the merged state reads part of unit {}; the source has {units} units",
                    item.unit
                ),
            });
        }
        work.items.retain(|item| item.unit < units);
        work.rest_from = work.rest_from.min(units);
    }
    // A shard's own state is then checked against the units, as a file's is: a position past
    // them is refused rather than read as an empty epoch.
    work.units = Some(units);
    Ok(Some(spec))
}

/// The rows that the deal gives this shard of a stream of `rows` rows in all, of units of
/// `unit_rows` rows (in the order they are read): from the units, at the epoch's start, resumed
/// from a merged state (the rows its work left) or from a shard's own state (from the position,
/// `start` in the resumed `work`, it stands at), else what [`BatchSpec::rows_of_stream`] makes
/// of the total; `None` where neither is known.
fn dealt_rows(
    spec: &BatchSpec,
    unit_rows: Option<&[u64]>,
    rows: Option<u64>,
    (resumed, start): (&Work, &Start),
) -> Option<u64> {
    let from_units = unit_rows.and_then(|unit_rows| {
        let shards = spec.num_shards.max(1) as u64;
        let fresh = Work::all(Some(unit_rows.len() as u64));
        let work = match &spec.state {
            None => &fresh,
            // A merged state starts each shard at the start of its items: its work's rows.
            Some(state) if state.shard.is_none() => &state.work,
            Some(_) => return shard_rows_left(spec, unit_rows, resumed, start),
        };
        (spec.shard_index as u64..work.total()?)
            .step_by(shards as usize)
            .try_fold(0u64, |total, w| {
                let item = work.global(w)?;
                let all = planned::unit_of(unit_rows, item.unit).ok()?;
                total.checked_add(item.row_count(*all))
            })
    });
    from_units.or_else(|| rows.and_then(|rows| spec.rows_of_stream(rows)))
}

/// The rows a shard resuming its own state has left, from its position (`start`) in `work`,
/// whose units have `unit_rows` rows.
fn shard_rows_left(spec: &BatchSpec, unit_rows: &[u64], work: &Work, start: &Start) -> Option<u64> {
    // The work counts the units (`with_counted_units`), as many as the rows tell.
    if work.units != Some(unit_rows.len() as u64) {
        return None;
    }
    let items = file_items(work, spec, start);
    let rows = |unit: u64| planned::unit_of(unit_rows, unit).copied().unwrap_or(0);
    rows_left(&items, rows, start, spec).ok()
}

/// The rows of the units (`unit_rows`) that a source read in order resumes with: a dealt
/// stream's state counts no units, but the state of a planned epoch does, and so does a merge of
/// such states, which may resume as dealt.
fn counted<'a>(spec: &BatchSpec, unit_rows: Option<&'a [u64]>) -> Option<&'a [u64]> {
    unit_rows.filter(|_| {
        spec.state
            .as_ref()
            .is_some_and(|state| state.work.units.is_some())
    })
}

/// Whether record batches read in order (in memory, or local streams, whose lengths can be
/// read once more), of `unit_rows` rows each in the epoch's order, are a planned epoch, as files
/// are (see [`planned::is_planned`]): over several shards, under a token budget or length
/// buckets, with DataLoader workers, or where their deal would give the ranks different batch
/// counts (judged on the resumed state's work, where one is given).
fn planned_epoch(spec: &BatchSpec, unit_rows: &[u64]) -> bool {
    let fresh = Work::all(Some(unit_rows.len() as u64));
    let work = spec.state.as_ref().map_or(&fresh, |state| &state.work);
    planned::is_planned(spec, work, unit_rows)
}

/// The work, the start, the shard's planned batches and the items they read.
type EpochPlan = (Work, Start, ShardBatches, Vec<(u64, Item)>);

/// The [`EpochPlan`] of a planned epoch over units of `unit_rows` rows in the epoch's order,
/// `source_unit` giving each one's index in the source's order, in which `pass` gives the
/// units' lengths (called only for a plan cut by a budget or buckets).
fn epoch_plan(
    spec: &BatchSpec,
    settings: &Settings,
    unit_rows: &[u64],
    source_unit: &[usize],
    pass: impl FnOnce() -> Result<Arc<SourceLengths>>,
) -> Result<EpochPlan> {
    let (work, start) = resume(spec, settings, Some(unit_rows), planned::is_planned)?;
    let mut source_rows = vec![0; unit_rows.len()];
    for (&rows, &unit) in unit_rows.iter().zip(source_unit) {
        source_rows[unit] = rows;
    }
    let lengths = planned::lengths(spec, source_rows.into_iter(), pass)?;
    let (batches, items) = planned::shard_batches(spec, &work, &start, source_unit, &lengths)?;
    Ok((work, start, batches, items))
}

/// Plans the IPC streams `inputs`: read in order (the streams shuffled), record batches dealt
/// round-robin.
pub(super) fn plan_streams(mut inputs: Vec<StreamInput>, spec: &BatchSpec) -> Result<Plan> {
    let mut schema = None;
    let mut null_to_nan = spec.null_to_nan.clone();
    let mut rows = None;
    // The rows of each stream's record batches, where their headers were read.
    let mut batch_rows: Vec<Option<Vec<u64>>> = vec![None; inputs.len()];
    if let Some(first) = inputs.first() {
        let summary = ipc::stream_summary(first, false)?;
        check_spec(spec, &summary.schema, || first.name().display().to_string())?;
        null_to_nan = resolve_null_to_nan(spec, &summary.schema, |_| None);
        // Local streams' record-batch headers tell their rows (so that the number of batches
        // is known, as for files) and their nulls; their bodies are skipped. Objects are not
        // read twice: their rows stay unknown, and the schema's nullability decides for them.
        if inputs
            .iter()
            .all(|input| matches!(input, StreamInput::Path(_)))
        {
            let summaries = inputs
                .iter()
                .map(|input| ipc::stream_summary(input, true))
                .collect::<Result<Vec<_>>>()?;
            // Every stream of the columns of the first, as every IPC file is: a rank that reads
            // only another stream would otherwise give other dtypes than its peers.
            for (input, other) in inputs.iter().zip(&summaries).skip(1) {
                check_same_columns(&other.schema, &summary.schema, || {
                    format!("stream {}", input.name().display())
                })?;
            }
            // Read later as they were when their headers were read: a stream replaced since
            // (its rows counted above) is refused, as a replaced IPC file is.
            for (input, summary) in inputs.iter_mut().zip(&summaries) {
                if let Some(planned) = &summary.planned {
                    *input = StreamInput::Planned(planned.clone());
                }
            }
            rows = Some(total_stream_rows(&inputs, &summaries)?);
            batch_rows = summaries
                .iter()
                .map(|summary| summary.batch_rows.clone())
                .collect();
            if needs_null_counts(spec, &summary.schema) {
                let file_nulls: Vec<nulls::FileNulls<'_>> = inputs
                    .iter()
                    .zip(&summaries)
                    .map(|(input, summary)| {
                        let counts = summary.null_counts.clone().unwrap_or_default();
                        (input.name(), summary.schema.as_ref(), counts)
                    })
                    .collect();
                null_to_nan = files_null_to_nan(spec, &file_nulls)?;
            }
        }
        schema = Some(summary.schema);
    }
    let source = identity::ipc_streams(&inputs, schema.as_deref())?;
    let settings = identity::settings(spec, source);
    // Second readers of the streams in the source's order, for a pass over their lengths, and
    // where each stream's record batches start among the source's (where the headers tell).
    let again: Vec<StreamInput> = inputs.iter().filter_map(StreamInput::local_copy).collect();
    let mut first_unit = Vec::with_capacity(batch_rows.len());
    let mut units = 0;
    for rows in &batch_rows {
        first_unit.push(units);
        units += rows.as_ref().map_or(0, Vec::len);
    }
    let ordered = epoch_order(
        inputs.into_iter().zip(batch_rows).enumerate().collect(),
        spec,
    );
    let mut order = Vec::with_capacity(ordered.len());
    let (inputs, batch_rows): (Vec<StreamInput>, Vec<Option<Vec<u64>>>) = ordered
        .into_iter()
        .map(|(stream, input)| {
            order.push(stream);
            input
        })
        .unzip();
    // The record batches in the epoch's order, when every stream's headers tell them, and the
    // index of each among the source's.
    let source_unit: Vec<usize> = order
        .iter()
        .zip(&batch_rows)
        .flat_map(|(&stream, rows)| {
            let start = first_unit[stream];
            start..start + rows.as_ref().map_or(0, Vec::len)
        })
        .collect();
    let unit_rows: Option<Vec<u64>> = batch_rows
        .into_iter()
        .collect::<Option<Vec<Vec<u64>>>>()
        .map(|rows| rows.concat());
    // A merged state of a dealt stream does not count its units; the headers do.
    let with_units = match unit_rows.as_deref() {
        Some(unit_rows) => with_counted_units(spec, unit_rows)?,
        None => None,
    };
    let spec = with_units.as_ref().unwrap_or(spec);
    if let Some(unit_rows) = unit_rows
        .as_deref()
        .filter(|unit_rows| planned_epoch(spec, unit_rows))
    {
        let epoch = (unit_rows, source_unit.as_slice(), again);
        return plan_streams_planned(inputs, epoch, settings, null_to_nan, spec);
    }
    let (work, start) = resume(
        spec,
        &settings,
        counted(spec, unit_rows.as_deref()),
        never_planned,
    )?;
    let raw = in_stream(ipc::read_streams(inputs), &work, spec, &start);
    let num_rows = dealt_rows(spec, unit_rows.as_deref(), rows, (&work, &start));
    Ok(Plan::dealt(
        raw,
        (work, settings, start),
        num_rows,
        null_to_nan,
    ))
}

/// Plans local IPC streams (`inputs`, in the epoch's order, of record batches of `unit_rows`
/// rows, the `source_unit`-th of the source's) as a planned epoch (see [`planned_epoch`]): the
/// lengths of a budget or buckets are read from `again`, the streams in the source's order; then
/// the streams are read in order, and the record batches the shard's batches draw from are kept
/// (the planned batches read their units in the order of the streams).
fn plan_streams_planned(
    inputs: Vec<StreamInput>,
    (unit_rows, source_unit, again): (&[u64], &[usize], Vec<StreamInput>),
    settings: Settings,
    null_to_nan: NullToNan,
    spec: &BatchSpec,
) -> Result<Plan> {
    let (work, start, shard_batches, items) =
        epoch_plan(spec, &settings, unit_rows, source_unit, || {
            planned::stream_lengths(again, &settings.source, spec)
        })?;
    let (shard_batches, items) = planned::reads_in_order(shard_batches, items);
    let mut stream = ipc::read_streams(inputs).zip(0u64..);
    let mut wanted = items.into_iter();
    let raw: Raw = Box::new(std::iter::from_fn(move || {
        let (k, item) = wanted.next()?;
        loop {
            match stream.next()? {
                (Ok(batch), unit) if unit == item.unit => return Some(Ok((k, item, batch, true))),
                (Ok(_), _) => {}
                (Err(error), _) => return Some(Err(error)),
            }
        }
    }));
    Ok(Plan::by_rows(
        raw,
        (work, settings, start),
        shard_batches,
        null_to_nan,
    ))
}

/// The rows that the record-batch headers of the local streams `inputs` declare in all, refused
/// past 2^63 - 1 (Arrow's lengths are signed 64-bit), naming the stream that passes it.
fn total_stream_rows(inputs: &[StreamInput], summaries: &[ipc::StreamSummary]) -> Result<u64> {
    let mut total: u64 = 0;
    for (input, summary) in inputs.iter().zip(summaries) {
        let rows = summary.rows.unwrap_or(u64::MAX);
        total = total
            .checked_add(rows)
            .filter(|&total| i64::try_from(total).is_ok())
            .ok_or_else(|| {
                Error::ipc(
                    input.name(),
                    "its record batches and those of the streams before it declare more than \
                     2**63 - 1 rows in all; expected a row count that fits in 64 bits",
                )
            })?;
    }
    Ok(total)
}
