//! Packing: the rows of ragged tensors one after another with the metadata that varlen attention
//! kernels take (flash-attention's `cu_seqlens` and `max_seqlen`, and `position_ids` that restart
//! at 0 in every row).

use arrow_dlpack_tensor::alloc::PooledVec;
use arrow_dlpack_tensor::{DType, Tensor};

use super::offsets;
use super::{RaggedTensor, common_layout};
use crate::{Error, Result};

/// Rows packed one after another, as varlen attention takes them.
///
/// ```
/// use arrow_dlpack::{RaggedTensor, Tensor};
///
/// let ragged = RaggedTensor::new(
///     Tensor::from_vec(vec![5i64, 6, 7, 8, 9], vec![5])?,
///     Tensor::from_vec(vec![0i32, 3, 5], vec![3])?,
/// )?;
/// let packed = ragged.to_packed()?;
/// assert_eq!(packed.values.data_ptr(), ragged.values().data_ptr()); // zero-copy
/// assert_eq!(packed.cu_seqlens.as_slice::<i32>()?, &[0, 3, 5]);
/// assert_eq!(packed.position_ids.as_slice::<i64>()?, &[0, 1, 2, 0, 1]);
/// assert_eq!(packed.max_seqlen, 3);
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct PackedTensor {
    /// The elements of all rows, `(N, *inner)`.
    pub values: Tensor,
    /// Cumulative row lengths, int32 `(B + 1,)`, starting at 0 and ending at `N`.
    pub cu_seqlens: Tensor,
    /// Each element's position in its row, int64 `(N,)`, restarting at 0 in every row.
    pub position_ids: Tensor,
    /// The length of the longest row.
    pub max_seqlen: usize,
}

/// Packs the rows of all `pieces`, one piece after another.
///
/// With one piece the values are shared (zero-copy), and so are int32 offsets as `cu_seqlens`;
/// with several, the values are copied once. `position_ids` are always fresh.
/// More than `i32::MAX` elements in all is [`Error::OffsetOverflow`] (`cu_seqlens` are int32);
/// no pieces is [`Error::NoPieces`]; pieces differing in dtype or element shape are
/// [`Error::MixedRaggedPieces`].
pub fn pack_pieces(pieces: &[RaggedTensor]) -> Result<PackedTensor> {
    common_layout(pieces)?;
    let total: usize = pieces.iter().map(RaggedTensor::total_length).sum();
    if i32::try_from(total).is_err() {
        return Err(Error::OffsetOverflow {
            what: "cu_seqlens",
            total: total as u128,
            dtype: DType::Int32,
        });
    }
    let whole = RaggedTensor::concat(pieces)?;
    let offsets = whole.offsets_view();
    let rows = whole.len();
    let lengths = (0..rows).map(|row| {
        let (start, end) = offsets.bounds(row);
        end - start
    });
    let cu_seqlens = if whole.offsets.dtype() == DType::Int32 {
        whole.offsets.clone()
    } else {
        offsets::from_lengths(lengths.clone(), DType::Int32, "cu_seqlens")?
    };
    let mut positions = PooledVec::<i64>::try_with_capacity(total)?;
    for length in lengths.clone() {
        positions.extend(0..length as i64);
    }
    let position_ids =
        Tensor::try_new_row_major(positions.into_buffer(), DType::Int64, vec![total])?
            .with_read_only(false);
    Ok(PackedTensor {
        max_seqlen: lengths.max().unwrap_or(0),
        values: whole.values,
        cu_seqlens,
        position_ids,
    })
}

impl RaggedTensor {
    /// The rows packed for varlen attention: [`pack_pieces`] of this one piece, whose values are
    /// shared.
    pub fn to_packed(&self) -> Result<PackedTensor> {
        pack_pieces(std::slice::from_ref(self))
    }
}
