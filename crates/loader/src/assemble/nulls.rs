//! The nulls of a batch's runs: the validity masks of `masks` columns, written in one pass
//! across record batches, the refusal of nulls in a single column, and where in its file a
//! refused null is.

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef};
use arrow_dlpack_tensor::alloc::PooledVec;
use arrow_dlpack_tensor::{DType, Tensor};

use super::{Piece, Run};
use crate::columns::Output;
use crate::images::Locate;
use crate::{Error, Result};

/// The validity of column `name` (at `index`) over `runs`, one byte (1 = valid) per row.
///
/// Written here rather than with `arrow_dlpack::validity_to_tensor` so that a mask over several
/// record batches is one pass too. A mask tells rows apart, so a column with nulls inside the
/// elements of these rows (a fixed-size list's or a list's values) is refused: its mask would
/// call such a row valid.
pub(super) fn copy_mask(
    pieces: &[Piece],
    runs: &[Run],
    (name, index): (&str, usize),
    num_rows: usize,
) -> Result<Tensor> {
    let mut out = PooledVec::<u8>::try_with_capacity(num_rows)?;
    for run in runs {
        let column = pieces[run.piece].batch.column(index);
        let inner = inner_nulls(column.as_ref(), run.start, run.len);
        if inner > 0 {
            return Err(Error::InvalidSpec {
                reason: format!(
                    "masks names {name:?}, whose rows hold {inner} null values inside their \
                     elements; a mask says which rows are null, not which values of a row: \
                     leave {name:?} out of masks, or fill its null values before loading"
                ),
            });
        }
        match column.logical_nulls() {
            None => out.extend(std::iter::repeat_n(1u8, run.len)),
            Some(nulls) => {
                out.extend((run.start..run.start + run.len).map(|i| u8::from(nulls.is_valid(i))))
            }
        }
    }
    let tensor = Tensor::try_new_row_major(out.into_buffer(), DType::Bool, vec![num_rows])?;
    Ok(tensor.with_read_only(false))
}

/// The values of a row of a list column, by the row.
type ValueRange<'a> = Box<dyn Fn(usize) -> (usize, usize) + 'a>;

/// The null values inside the elements of the valid rows among `start..start + len` of `array`:
/// its values' nulls (and theirs, for lists of lists); 0 for a column of scalars. The values
/// under a null row are not counted (they are that row's, which its mask shows).
fn inner_nulls(array: &dyn Array, start: usize, len: usize) -> usize {
    let (values, range): (&ArrayRef, ValueRange<'_>) =
        if let Some(list) = array.as_fixed_size_list_opt() {
            let size = list.value_length() as usize;
            (
                list.values(),
                Box::new(move |row| (row * size, row * size + size)),
            )
        } else if let Some(list) = array.as_list_opt::<i32>() {
            let offsets = list.value_offsets();
            let range = move |row: usize| (offsets[row] as usize, offsets[row + 1] as usize);
            (list.values(), Box::new(range))
        } else if let Some(list) = array.as_list_opt::<i64>() {
            let offsets = list.value_offsets();
            let range = move |row: usize| (offsets[row] as usize, offsets[row + 1] as usize);
            (list.values(), Box::new(range))
        } else {
            return 0;
        };
    if values.null_count() == 0 && inner_nulls(values.as_ref(), 0, values.len()) == 0 {
        return 0;
    }
    let nulls = array.logical_nulls();
    let mut count = 0;
    for row in start..start + len {
        if nulls.as_ref().is_some_and(|nulls| nulls.is_null(row)) {
            continue;
        }
        let (from, to) = range(row);
        let (from, to) = (from.min(values.len()), to.min(values.len()));
        count += (from..to).filter(|&value| values.is_null(value)).count();
        count += inner_nulls(values.as_ref(), from, to - from);
    }
    count
}

/// The nulls of `array` within `run`.
fn nulls_in(array: &ArrayRef, run: Run) -> usize {
    match array.nulls() {
        Some(nulls) if nulls.null_count() > 0 => nulls.slice(run.start, run.len).null_count(),
        _ => 0,
    }
}

/// Refuses nulls of a single column within `run`, as the Arrow layer words it.
pub(super) fn check_no_nulls(name: &str, array: &ArrayRef, run: Run) -> Result<()> {
    let null_count = nulls_in(array, run);
    if null_count == 0 {
        return Ok(());
    }
    let source = arrow_dlpack::Error::Nulls {
        null_count,
        location: arrow_dlpack::NullLocation::Array { depth: 0 },
    };
    Err(Error::column(name, source))
}

/// `error` placed in its file: where a column or group refused the nulls of a batch of a
/// source of files, the first null row of `output`'s columns among `runs`, in its file
/// ([`Error::NullInFile`]). Other errors, and rows `locate` cannot place (record batches in
/// memory, nulls inside a row's elements), are left as they are.
pub(super) fn place_nulls(
    error: Error,
    output: &Output,
    pieces: &[Piece],
    runs: &[Run],
    locate: Option<&Locate>,
) -> Error {
    let refused_nulls = matches!(
        &error,
        Error::Column {
            source: arrow_dlpack::Error::Nulls { .. } | arrow_dlpack::Error::ColumnNulls { .. },
            ..
        }
    );
    let indices: &[usize] = match output {
        Output::Values { index, .. } | Output::Bool { index, .. } => std::slice::from_ref(index),
        Output::Group { indices, .. } => indices,
        _ => &[],
    };
    let Some(locate) = locate.filter(|_| refused_nulls) else {
        return error;
    };
    let first_null = runs.iter().find_map(|run| {
        let piece = &pieces[run.piece];
        let (item, first) = piece.origin()?;
        let row = (run.start..run.start + run.len).find(|&row| {
            indices
                .iter()
                .any(|&index| piece.batch.column(index).is_null(row))
        })?;
        locate.place(item, first + row as u64)
    });
    match first_null {
        Some(place) => Error::NullInFile {
            path: place.name.to_path_buf(),
            row: place.row,
            source: Box::new(error),
        },
        None => error,
    }
}
