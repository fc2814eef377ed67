//! [`ConcatBatch`]: the tensors of a batch of packed rows, written in one pass over the rows.

use arrow_dlpack_tensor::{DType, Tensor};

use super::{CarriedRow, ConcatPackOptions, Token};
use crate::memory::reserve;
use crate::{Error, Result};

/// A batch of packed rows (see [`ConcatPacker`](crate::ConcatPacker) for what each tensor
/// holds).
#[derive(Debug)]
pub struct ConcatBatch {
    /// `(B, max_length)`, the documents' element type.
    pub ids: Tensor,
    /// `(B, max_length)` int64: 0 at every segment start.
    pub position_ids: Tensor,
    /// `(S + 1,)` int32: the segments' boundaries over the flattened rows.
    pub cu_seqlens: Tensor,
    /// The longest segment.
    pub max_seqlen: usize,
}

impl ConcatBatch {
    /// The number of rows, `B`.
    pub fn num_rows(&self) -> usize {
        self.ids.shape()[0]
    }
}

/// The batch of `rows`, each padded to `max_length` with `pad_value`.
pub(super) fn build(
    rows: &[CarriedRow],
    options: &ConcatPackOptions,
    dtype: DType,
) -> Result<ConcatBatch> {
    let ids = match dtype {
        DType::Int8 => ids::<i8>(rows, options)?,
        DType::Int16 => ids::<i16>(rows, options)?,
        DType::Int32 => ids::<i32>(rows, options)?,
        DType::Int64 => ids::<i64>(rows, options)?,
        DType::UInt8 => ids::<u8>(rows, options)?,
        DType::UInt16 => ids::<u16>(rows, options)?,
        DType::UInt32 => ids::<u32>(rows, options)?,
        DType::UInt64 => ids::<u64>(rows, options)?,
        other => {
            return Err(Error::InvalidSpec {
                reason: format!("concat packing takes integer tokens; the rows hold {other}"),
            });
        }
    };
    let max = options.max_length;
    let mut position_ids: Vec<i64> = Vec::new();
    reserve(&mut position_ids, rows.len() * max)?;
    let segments: usize = rows.iter().map(|row| row.segments.len() + 1).sum();
    let mut cu_seqlens: Vec<i32> = Vec::new();
    reserve(&mut cu_seqlens, segments + 1)?;
    cu_seqlens.push(0);
    let mut end: usize = 0;
    let mut max_seqlen = 0;
    for row in rows {
        let padding = max - row.tokens.len();
        let pieces = row.segments.iter().map(|&length| length as usize);
        for length in pieces.chain((padding > 0).then_some(padding)) {
            position_ids.extend(0..length as i64);
            end += length;
            // `new` checked that `batch_size * max_length` fits in an i32.
            cu_seqlens.push(end as i32);
            max_seqlen = max_seqlen.max(length);
        }
    }
    let shape = vec![rows.len(), max];
    Ok(ConcatBatch {
        ids: ids.with_read_only(false),
        position_ids: Tensor::from_vec(position_ids, shape)?.with_read_only(false),
        cu_seqlens: {
            let count = cu_seqlens.len();
            Tensor::from_vec(cu_seqlens, vec![count])?.with_read_only(false)
        },
        max_seqlen,
    })
}

/// The `(B, max_length)` ids of `rows`, padded.
fn ids<T: Token>(rows: &[CarriedRow], options: &ConcatPackOptions) -> Result<Tensor> {
    let max = options.max_length;
    let pad = T::from_i64(options.pad_value);
    let mut ids: Vec<T> = Vec::new();
    reserve(&mut ids, rows.len() * max)?;
    for row in rows {
        ids.extend(row.tokens.iter().map(|&token| T::from_i64(token)));
        ids.extend(std::iter::repeat_n(pad, max - row.tokens.len()));
    }
    Ok(Tensor::from_vec(ids, vec![rows.len(), max])?)
}
