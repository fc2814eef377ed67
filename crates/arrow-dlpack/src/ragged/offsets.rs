//! Reading, checking and building the offsets of a ragged tensor: `(B + 1,)` int32 or int64,
//! starting at 0, nondecreasing, ending at the number of values.

use arrow_dlpack_tensor::alloc::PooledVec;
use arrow_dlpack_tensor::{DType, Tensor};

use crate::{Error, Result};

/// Borrowed offsets of either width, read as `usize` row bounds.
///
/// Only built over offsets that [`check`] accepted (or that callers checked the same way), so
/// every entry is non-negative and fits `usize`.
#[derive(Clone, Copy)]
pub(crate) enum Offsets<'a> {
    /// `list` offsets.
    I32(&'a [i32]),
    /// `large_list` offsets.
    I64(&'a [i64]),
}

impl<'a> Offsets<'a> {
    /// The offsets of a 1-D row-major int32 or int64 tensor.
    pub(crate) fn of(tensor: &'a Tensor) -> Result<Self> {
        match tensor.dtype() {
            DType::Int32 => Ok(Offsets::I32(tensor.as_slice::<i32>()?)),
            DType::Int64 => Ok(Offsets::I64(tensor.as_slice::<i64>()?)),
            other => Err(Error::InvalidOffsets {
                reason: format!("offsets have dtype {other}; expected int32 or int64"),
            }),
        }
    }

    /// The number of offsets (rows + 1).
    pub(crate) fn len(&self) -> usize {
        match self {
            Offsets::I32(offsets) => offsets.len(),
            Offsets::I64(offsets) => offsets.len(),
        }
    }

    /// Offset `index` as a signed 64-bit value (foreign offsets may be negative).
    pub(crate) fn raw(&self, index: usize) -> i64 {
        match self {
            Offsets::I32(offsets) => i64::from(offsets[index]),
            Offsets::I64(offsets) => offsets[index],
        }
    }

    /// Offset `index` of checked offsets.
    pub(crate) fn at(&self, index: usize) -> usize {
        // Checked offsets are in 0..=len(values), so they fit `usize`.
        self.raw(index) as usize
    }

    /// The element range `start..end` of `row`.
    pub(crate) fn bounds(&self, row: usize) -> (usize, usize) {
        (self.at(row), self.at(row + 1))
    }

    /// The offsets' dtype.
    pub(crate) fn dtype(&self) -> DType {
        match self {
            Offsets::I32(_) => DType::Int32,
            Offsets::I64(_) => DType::Int64,
        }
    }
}

/// Checks that `offsets` delimit `values` rows: at least one entry, nondecreasing, the first
/// `first` and the last at most `limit` (or exactly `exact` when given).
///
/// `first` is 0 for a ragged tensor; a sliced Arrow list array starts anywhere.
/// Reports the first entry that breaks a rule, never panics and never overflows.
pub(crate) fn check(offsets: Offsets<'_>, limit: usize, exact: bool) -> Result<()> {
    let len = offsets.len();
    if len == 0 {
        return Err(Error::InvalidOffsets {
            reason: "no offsets; expected B + 1 offsets for B rows (one, 0, for no rows)"
                .to_string(),
        });
    }
    let first = offsets.raw(0);
    if first < 0 {
        return Err(Error::InvalidOffsets {
            reason: format!("offsets[0] is {first}; expected a non-negative offset"),
        });
    }
    let decreasing = match offsets {
        Offsets::I32(offsets) => offsets.windows(2).position(|pair| pair[1] < pair[0]),
        Offsets::I64(offsets) => offsets.windows(2).position(|pair| pair[1] < pair[0]),
    };
    if let Some(index) = decreasing {
        return Err(Error::InvalidOffsets {
            reason: format!(
                "offsets[{}] = {} is less than offsets[{index}] = {}; expected nondecreasing \
                 offsets (row {index} would have a negative length)",
                index + 1,
                offsets.raw(index + 1),
                offsets.raw(index),
            ),
        });
    }
    let last = offsets.raw(len - 1);
    let fits = u64::try_from(last).is_ok_and(|last| last <= limit as u64);
    if exact && (first != 0 || !fits || last as u64 != limit as u64) {
        return Err(Error::InvalidOffsets {
            reason: format!(
                "offsets run from {first} to {last}; expected them to run from 0 to {limit}, \
                 the number of values"
            ),
        });
    }
    if !fits {
        return Err(Error::InvalidOffsets {
            reason: format!(
                "offsets[{}] is {last}, past the end of the {limit} values",
                len - 1
            ),
        });
    }
    Ok(())
}

/// Offsets starting at 0 for rows of `lengths`, as int32 when `dtype` is [`DType::Int32`] and int64
/// otherwise; [`Error::OffsetOverflow`] (naming `what`) when the total does not fit.
pub(crate) fn from_lengths(
    lengths: impl ExactSizeIterator<Item = usize>,
    dtype: DType,
    what: &'static str,
) -> Result<Tensor> {
    let rows = lengths.len();
    let overflow = |total: u128| Error::OffsetOverflow { what, total, dtype };
    if dtype == DType::Int32 {
        let mut out = PooledVec::<i32>::try_with_capacity(rows + 1)?;
        out.push(0);
        let mut total = 0u64;
        for length in lengths {
            total += length as u64;
            let entry = i32::try_from(total).map_err(|_| overflow(u128::from(total)))?;
            out.push(entry);
        }
        Ok(
            Tensor::try_new_row_major(out.into_buffer(), DType::Int32, vec![rows + 1])?
                .with_read_only(false),
        )
    } else {
        let mut out = PooledVec::<i64>::try_with_capacity(rows + 1)?;
        out.push(0);
        let mut total = 0u128;
        for length in lengths {
            total += length as u128;
            let entry = i64::try_from(total).map_err(|_| overflow(total))?;
            out.push(entry);
        }
        Ok(
            Tensor::try_new_row_major(out.into_buffer(), DType::Int64, vec![rows + 1])?
                .with_read_only(false),
        )
    }
}

/// The offsets dtype for `total` values when the caller has no preference: int32 when it fits
/// (an Arrow `list`), int64 otherwise (a `large_list`).
pub(crate) fn narrowest(total: usize) -> DType {
    if i32::try_from(total).is_ok() {
        DType::Int32
    } else {
        DType::Int64
    }
}
