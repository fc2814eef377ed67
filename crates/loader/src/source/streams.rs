//! The plans of sources read in order, as they come: readers and record batches in memory, and
//! IPC streams (the streams shuffled, their record batches dealt round-robin as they are read).

use super::*;

/// Plans a reader's record batches, or record batches in memory (of `rows` rows in all, and
/// `nulls` in each column): read in order, dealt round-robin.
pub(super) fn plan_in_memory(
    schema: SchemaRef,
    batches: impl Iterator<Item = Result<RecordBatch>> + Send + 'static,
    rows: Option<u64>,
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
    let (work, start) = resume(spec, &settings, None)?;
    let raw = in_stream(batches, &work, spec, &start);
    Ok(Plan {
        pieces: select(raw, &start, None),
        num_rows: rows.and_then(|rows| spec.rows_of_stream(rows)),
        work,
        settings,
        start,
        stop: None,
        null_to_nan: resolve_null_to_nan(spec, &schema, nulls),
        planned: None,
        plan_rows: None,
        locate: None,
    })
}

/// Plans record batches in memory whose deal over the shards would give the ranks different
/// numbers of batches (see [`planned::is_planned`]) as an epoch planned by rows, as files are: their
/// rows are known, and any of them can be read in any order. `None` when the deal is even (or
/// batches are cut by a budget or buckets, or a state saved by a deal is resumed): the record
/// batches are then dealt as they come ([`plan_in_memory`]).
pub(super) fn plan_batches_by_rows(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    nulls: &dyn Fn(&str) -> Option<u64>,
    spec: &BatchSpec,
) -> Result<Option<Plan>> {
    let unit_rows: Vec<u64> = batches
        .iter()
        .map(|batch| batch.num_rows() as u64)
        .collect();
    let dealt = Work::all(Some(unit_rows.len() as u64));
    let work = match &spec.state {
        // A state of a deal (saved without the units' count) resumes as dealt.
        Some(state) if state.work.units.is_none() => return Ok(None),
        Some(state) => &state.work,
        None => &dealt,
    };
    if spec.max_tokens.is_some()
        || spec.bucket_by_length
        || !planned::is_planned(spec, work, &unit_rows)
    {
        return Ok(None);
    }
    check_spec(spec, schema, || "the record batches".to_string())?;
    let settings = identity::settings(spec, identity::reader(schema));
    let (work, start) = resume(spec, &settings, Some(&unit_rows))?;
    let lengths = planned::row_lengths(unit_rows.iter().copied())?;
    let source_unit: Vec<usize> = (0..unit_rows.len()).collect();
    let (shard_batches, items) =
        planned::shard_batches(spec, &work, &start, &source_unit, &lengths)?;
    let units: Vec<RecordBatch> = items
        .iter()
        .map(|(_, item)| batches[item.unit as usize].clone())
        .collect();
    let raw: Raw = Box::new(
        items
            .into_iter()
            .zip(units)
            .map(|((k, item), batch)| Ok((k, item, batch, true))),
    );
    Ok(Some(Plan {
        pieces: select(raw, &start, None),
        num_rows: Some(shard_batches.rows.len() as u64),
        work,
        plan_rows: planned::rows_plan(spec, &start, &unit_rows),
        settings,
        start,
        stop: None,
        null_to_nan: resolve_null_to_nan(spec, schema, nulls),
        planned: Some(shard_batches),
        locate: None,
    }))
}

/// Plans the IPC streams `inputs`: read in order (the streams shuffled), record batches dealt
/// round-robin.
pub(super) fn plan_streams(mut inputs: Vec<StreamInput>, spec: &BatchSpec) -> Result<Plan> {
    let mut schema = None;
    let mut null_to_nan = spec.null_to_nan.clone();
    let mut rows = None;
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
            // Read later as they were when their headers were read: a stream replaced since
            // (its rows counted above) is refused, as a replaced IPC file is.
            for (input, summary) in inputs.iter_mut().zip(&summaries) {
                if let Some(planned) = &summary.planned {
                    *input = StreamInput::Planned(planned.clone());
                }
            }
            rows = summaries
                .iter()
                .try_fold(0u64, |total, summary| total.checked_add(summary.rows?));
            if needs_null_counts(spec, &summary.schema) {
                null_to_nan = files_null_to_nan(
                    spec,
                    summaries.iter().map(|summary| {
                        let counts = summary.null_counts.clone().unwrap_or_default();
                        (summary.schema.as_ref(), counts)
                    }),
                );
            }
        }
        schema = Some(summary.schema);
    }
    let source = identity::ipc_streams(&inputs, schema.as_deref())?;
    let settings = identity::settings(spec, source);
    inputs = epoch_order(inputs, spec);
    let (work, start) = resume(spec, &settings, None)?;
    let raw = in_stream(ipc::read_streams(inputs), &work, spec, &start);
    Ok(Plan {
        pieces: select(raw, &start, None),
        num_rows: rows.and_then(|rows| spec.rows_of_stream(rows)),
        work,
        settings,
        start,
        stop: None,
        planned: None,
        plan_rows: None,
        null_to_nan,
        locate: None,
    })
}
