//! The nulls of a batch's runs: the validity masks of `masks` columns, written in one pass
//! across record batches, and the refusal of nulls in a single column.

use arrow_array::{Array, ArrayRef};
use arrow_dlpack_tensor::alloc::PooledVec;
use arrow_dlpack_tensor::{DType, Tensor};

use super::{Piece, Run};
use crate::{Error, Result};

/// The validity of column `index` over `runs`, one byte (1 = valid) per row.
///
/// Written here rather than with `arrow_dlpack::validity_to_tensor` so that a mask over several
/// record batches is one pass too.
pub(super) fn copy_mask(
    pieces: &[Piece],
    runs: &[Run],
    index: usize,
    num_rows: usize,
) -> Result<Tensor> {
    let mut out = PooledVec::<u8>::try_with_capacity(num_rows)?;
    for run in runs {
        match pieces[run.piece].batch.column(index).logical_nulls() {
            None => out.extend(std::iter::repeat_n(1u8, run.len)),
            Some(nulls) => {
                out.extend((run.start..run.start + run.len).map(|i| u8::from(nulls.is_valid(i))))
            }
        }
    }
    let tensor = Tensor::try_new_row_major(out.into_buffer(), DType::Bool, vec![num_rows])?;
    Ok(tensor.with_read_only(false))
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
