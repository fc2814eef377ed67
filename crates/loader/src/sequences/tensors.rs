//! The tensors of a sequence column in one batch, made by the ragged kernels of
//! [`arrow_dlpack`]: padded, packed or jagged, from the runs of rows that make the batch.
//!
//! Each run of rows is a slice of a record batch's list column, and becomes a
//! [`RaggedTensor`] whose values are a view of the list's elements. One run (a batch inside one
//! record batch) is handed out as those views where the mode allows (packed and jagged values);
//! several runs (a batch across record batches, or shuffled rows) are written by the kernels in
//! one pass into fresh tensors, without concatenating the runs first.

use arrow_array::Array;
use arrow_dlpack::{
    ListToRaggedOptions, PackedTensor, PadOptions, PadValue, RaggedTensor, list_to_ragged,
    pack_pieces, pad_pieces,
};
use arrow_dlpack_tensor::Tensor;

use super::{Sequence, SequenceMode};
use crate::images::Locate;
use crate::{Error, Result};

/// Checks that `empty` (zero rows of a sequence column) forms a ragged tensor: its element type
/// is one the kernels take, and one that `pad` (of a padded sequence) fits.
pub(crate) fn probe(name: &str, empty: &dyn Array, pad: Option<PadValue>) -> Result<()> {
    let options = ListToRaggedOptions {
        allow_nulls: true,
        allow_copy: true,
    };
    let ragged = list_to_ragged(empty, options).map_err(|error| Error::column(name, error))?;
    // A pad value the values' dtype cannot hold, refused when the loader is made rather than at
    // its first batch.
    if let Some(pad) = pad {
        pad.to_element_bytes(ragged.dtype())
            .map_err(|error| Error::column(name, error))?;
    }
    Ok(())
}

/// The rows `start..start + len` of the list array `column` as a ragged tensor; `origin` is
/// where the record batch's rows are (the shard's item and the index of its first row among the
/// item's), so that a null row is reported where it is: in its file, where `locate` finds it,
/// else in its unit.
pub(crate) fn run_of(
    name: &str,
    column: &dyn Array,
    (start, len): (usize, usize),
    allow_nulls: bool,
    origin: Option<(u64, u64)>,
    locate: Option<&Locate>,
) -> Result<RaggedTensor> {
    let options = ListToRaggedOptions {
        allow_nulls,
        // A null row whose offsets still cover elements drops them, which copies.
        allow_copy: true,
    };
    list_to_ragged(column.slice(start, len).as_ref(), options).map_err(|error| match error {
        // The kernel counts the row in the run it was given; the loader's option allows it.
        arrow_dlpack::Error::NullRow { row, .. } => {
            let item = origin.map(|(item, _)| item);
            let row = origin.map_or(0, |(_, first)| first) + (start + row) as u64;
            let place = item.zip(locate).and_then(|(item, at)| at.place(item, row));
            Error::NullSequenceRow {
                column: name.to_string(),
                file: place.as_ref().map(|place| place.name.to_path_buf()),
                item,
                row: place.map_or(row, |place| place.row),
            }
        }
        other => Error::column(name, other),
    })
}

/// The named tensors of `sequence` for a batch made of `runs`, in order: the column's own, then
/// those its mode adds.
pub(crate) fn sequence_tensors(
    sequence: &Sequence,
    runs: &[RaggedTensor],
) -> Result<Vec<(String, Tensor)>> {
    let name = &sequence.column;
    let named = |suffix: &str, tensor: Tensor| (format!("{name}{suffix}"), tensor);
    let in_column = |error: arrow_dlpack::Error| Error::column(name, error);
    // Packed and jagged rows are cut to `max_length` before they are joined (padding cuts its
    // own; a concat sequence's `max_length` is the length of its packed rows instead).
    let truncated;
    let runs = match (sequence.mode, sequence.max_length) {
        (SequenceMode::Pack | SequenceMode::Jagged, Some(max_length)) => {
            truncated = runs
                .iter()
                .map(|run| run.truncate(max_length, sequence.truncation_side))
                .collect::<arrow_dlpack::Result<Vec<_>>>()
                .map_err(in_column)?;
            truncated.as_slice()
        }
        _ => runs,
    };
    match sequence.mode {
        SequenceMode::Pad => {
            let padded = pad_pieces(runs, &pad_options(sequence)).map_err(in_column)?;
            let lengths = kept_lengths(sequence, runs).map_err(in_column)?;
            Ok(vec![named("", padded), named("_lengths", lengths)])
        }
        SequenceMode::Pack => {
            let packed = match runs {
                [run] => run.to_packed(),
                _ => pack_pieces(runs),
            }
            .map_err(in_column)?;
            let PackedTensor {
                values,
                cu_seqlens,
                position_ids,
                max_seqlen,
            } = packed;
            let max_seqlen = i64::try_from(max_seqlen).unwrap_or(i64::MAX);
            let max_seqlen = Tensor::from_vec(vec![max_seqlen], vec![])?.with_read_only(false);
            Ok(vec![
                named("", values),
                named("_cu_seqlens", cu_seqlens),
                named("_position_ids", position_ids),
                named("_max_seqlen", max_seqlen),
            ])
        }
        // A concat sequence is read as a jagged one, whose rows the concat stage packs.
        SequenceMode::Jagged | SequenceMode::Concat => {
            let ragged = RaggedTensor::concat(runs).map_err(in_column)?;
            let (values, offsets) = ragged.into_parts();
            Ok(vec![named("", values), named("_offsets", offsets)])
        }
    }
}

/// The lengths of the rows of `runs` as they are in the padded tensor (cut to `max_length`):
/// `(B,)` int64.
fn kept_lengths(sequence: &Sequence, runs: &[RaggedTensor]) -> arrow_dlpack::Result<Tensor> {
    let mut lengths = Vec::with_capacity(runs.iter().map(RaggedTensor::len).sum());
    for run in runs {
        let of_run = run.lengths()?;
        let of_run = of_run.as_slice::<i64>()?;
        lengths.extend(of_run.iter().map(|&length| {
            let kept = sequence.kept(usize::try_from(length).unwrap_or(0));
            i64::try_from(kept).unwrap_or(i64::MAX)
        }));
    }
    let count = lengths.len();
    Ok(Tensor::from_vec(lengths, vec![count])?.with_read_only(false))
}

/// The kernels' padding options for `sequence`.
fn pad_options(sequence: &Sequence) -> PadOptions {
    PadOptions {
        pad_value: sequence.pad_value,
        max_length: sequence.max_length,
        pad_to_multiple_of: sequence.pad_to_multiple_of,
        padding_side: sequence.padding_side,
        truncation_side: sequence.truncation_side,
    }
}
