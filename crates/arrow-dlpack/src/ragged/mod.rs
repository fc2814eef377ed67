//! Variable-length lists as ragged tensors: the values of all rows one after another, shape
//! `(N, *inner)`, and offsets `(B + 1,)` that delimit the rows.
//!
//! | item | what it does |
//! |---|---|
//! | [`RaggedTensor`] | values and offsets, checked; rows as zero-copy views; `slice`, `take`, `concat`, `from_rows` |
//! | [`list_to_ragged`], [`ListToRaggedOptions`] | `list`, `large_list`, `list_view`, `large_list_view` arrays -> [`RaggedTensor`], zero-copy where the layout allows |
//! | [`RaggedTensor::to_list_array`] | back to an Arrow `list` (int32 offsets) or `large_list` (int64) |
//! | [`RaggedTensor::to_padded`], [`pad_pieces`], [`PadOptions`], [`PadValue`], [`Side`] | `(B, L, *inner)` padded, truncated, one memory-speed kernel; [`RaggedTensor::from_padded`] back |
//! | [`RaggedTensor::to_packed`], [`pack_pieces`], [`PackedTensor`] | values with `cu_seqlens`, `position_ids` and `max_seqlen`, as varlen attention kernels take them |
//!
//! | module | what it holds |
//! |---|---|
//! | `offsets` | reading and checking offsets of either width, building them from lengths |
//! | `gather` | the row-copy kernel behind `take`, `concat`, `from_rows` and compaction |
//! | `from_list` | Arrow list arrays to ragged tensors |
//! | `to_list` | ragged tensors to Arrow list arrays |
//! | `pad` | padding, truncation (`truncate`, and inside the padding kernel) and unpadding |
//! | `pack` | packing for varlen attention |

mod from_list;
mod gather;
mod offsets;
mod pack;
mod pad;
mod pad_value;
mod to_list;

use arrow_dlpack_tensor::alloc::PooledVec;
use arrow_dlpack_tensor::{DType, Tensor};

pub use from_list::{ListToRaggedOptions, list_to_ragged};
pub use pack::{PackedTensor, pack_pieces};
pub use pad::{PadOptions, Side, pad_pieces};
pub use pad_value::PadValue;

use crate::{Error, Result};
use offsets::Offsets;

/// A batch of `B` rows of different lengths: `values` of shape `(N, *inner)` holding the rows one
/// after another, and `offsets` of shape `(B + 1,)`, row `i` being `values[offsets[i]..offsets[i + 1]]`.
///
/// Offsets are int32 (an Arrow `list`) or int64 (a `large_list`), start at 0, never decrease and
/// end at `N`: [`RaggedTensor::new`] checks all of it, so that every row is inside the values.
/// Cloning is cheap: both tensors share their buffers.
///
/// ```
/// use arrow_dlpack::{RaggedTensor, Tensor};
///
/// let values = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], vec![6])?;
/// let offsets = Tensor::from_vec(vec![0i32, 2, 2, 6], vec![4])?;
/// let ragged = RaggedTensor::new(values, offsets)?;
/// assert_eq!(ragged.len(), 3);
/// assert_eq!(ragged.row(2)?.as_slice::<i32>()?, &[3, 4, 5, 6]);
/// assert_eq!(ragged.lengths()?.as_slice::<i64>()?, &[2, 0, 4]);
/// assert_eq!(ragged.max_length(), 4);
///
/// // Offsets that decrease are refused, never read.
/// let values = Tensor::from_vec(vec![1i32, 2], vec![2])?;
/// let offsets = Tensor::from_vec(vec![0i32, 2, 1, 2], vec![4])?;
/// assert!(RaggedTensor::new(values, offsets).is_err());
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct RaggedTensor {
    values: Tensor,
    offsets: Tensor,
}

impl RaggedTensor {
    /// Builds a ragged tensor, checking that `offsets` is a 1-D int32 or int64 tensor of at least
    /// one entry that starts at 0, never decreases and ends at `values.shape()[0]`, and that
    /// `values` has at least one dimension.
    ///
    /// This is also the check for foreign input: offsets out of range, decreasing, or lengths
    /// that do not add up to the values are [`Error::InvalidOffsets`], never a panic.
    /// Both tensors must be in host memory (the offsets are read here, the rows later).
    ///
    /// The offsets are copied (`B + 1` integers, into read-only memory of the ragged tensor's
    /// own) and the copy is checked: offsets that came from memory someone else may still write
    /// (a numpy array, a foreign DLPack producer) cannot change the rows after the check. The
    /// values are shared: a change to them changes elements, never where a row lies.
    /// [`list_to_ragged`] shares the offsets of Arrow arrays instead, since Arrow buffers are
    /// immutable.
    pub fn new(values: Tensor, offsets: Tensor) -> Result<Self> {
        let offsets = Self::check_layout(&values, &offsets)?;
        // Copied first and checked after, so that nothing written into the caller's memory
        // between the check and a read can move a row outside the values.
        let offsets = offsets.to_contiguous()?.with_read_only(true);
        offsets::check(Offsets::of(&offsets)?, values.shape()[0], true)?;
        Ok(RaggedTensor { values, offsets })
    }

    /// Builds a ragged tensor over offsets in memory nobody writes (an Arrow array's offsets
    /// buffer, or offsets made here), checking them as [`RaggedTensor::new`] does but without
    /// copying them; offsets that are not row-major are still copied.
    pub(crate) fn from_immutable(values: Tensor, offsets: Tensor) -> Result<Self> {
        let offsets = Self::check_layout(&values, &offsets)?;
        let offsets = if offsets.is_row_major() {
            offsets.clone()
        } else {
            offsets.to_contiguous()?.with_read_only(true)
        };
        offsets::check(Offsets::of(&offsets)?, values.shape()[0], true)?;
        Ok(RaggedTensor { values, offsets })
    }

    /// The checks of the two tensors' devices and dimensions, before the offsets are read;
    /// gives the offsets back.
    fn check_layout<'a>(values: &Tensor, offsets: &'a Tensor) -> Result<&'a Tensor> {
        values.require_cpu("read it as ragged values")?;
        offsets.require_cpu("read it as offsets")?;
        if values.ndim() == 0 {
            return Err(Error::ZeroDimensional);
        }
        if offsets.ndim() != 1 {
            return Err(Error::InvalidOffsets {
                reason: format!(
                    "offsets have shape {:?}; expected 1 dimension, (B + 1,)",
                    offsets.shape()
                ),
            });
        }
        if !matches!(offsets.dtype(), DType::Int32 | DType::Int64) {
            return Err(Error::InvalidOffsets {
                reason: format!(
                    "offsets have dtype {}; expected int32 or int64",
                    offsets.dtype()
                ),
            });
        }
        Ok(offsets)
    }

    /// Builds a ragged tensor from parts the caller made and checked: row-major offsets of
    /// fresh memory, nobody else's.
    pub(crate) fn from_checked(values: Tensor, offsets: Tensor) -> Self {
        // The check alone, without the copy `new` makes, so that a debug build allocates
        // nothing more than a release build.
        debug_assert!(
            Offsets::of(&offsets)
                .and_then(|view| offsets::check(view, values.shape()[0], true))
                .is_ok()
        );
        RaggedTensor { values, offsets }
    }

    /// The values of all rows, one after another: shape `(N, *inner)`.
    pub fn values(&self) -> &Tensor {
        &self.values
    }

    /// The offsets, shape `(B + 1,)`, int32 or int64, starting at 0 and ending at `N`.
    pub fn offsets(&self) -> &Tensor {
        &self.offsets
    }

    /// Both parts, values first.
    pub fn into_parts(self) -> (Tensor, Tensor) {
        (self.values, self.offsets)
    }

    /// The same rows with both tensors marked read-only: for a ragged tensor that several
    /// owners share, whose DLPack exports must then say that nobody may write.
    pub fn into_read_only(self) -> Self {
        RaggedTensor {
            values: self.values.with_read_only(true),
            offsets: self.offsets.with_read_only(true),
        }
    }

    /// The offsets, read.
    pub(crate) fn offsets_view(&self) -> Offsets<'_> {
        Offsets::of(&self.offsets).expect("checked at construction")
    }

    /// The number of rows, `B`.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The dtype of the values.
    pub fn dtype(&self) -> DType {
        self.values.dtype()
    }

    /// The shape of one element: the values' shape after the first dimension (empty for rows of
    /// scalars).
    pub fn inner_shape(&self) -> &[usize] {
        &self.values.shape()[1..]
    }

    /// The length of every row, as a 1-D int64 tensor of `B` entries (a copy).
    pub fn lengths(&self) -> Result<Tensor> {
        let offsets = self.offsets_view();
        // Fallible: `B` comes from the input (a broadcast view may claim any number of rows).
        let mut lengths = PooledVec::<i64>::try_with_capacity(self.len())?;
        lengths.extend((0..self.len()).map(|row| {
            let (start, end) = offsets.bounds(row);
            (end - start) as i64
        }));
        Ok(
            Tensor::try_new_row_major(lengths.into_buffer(), DType::Int64, vec![self.len()])?
                .with_read_only(false),
        )
    }

    /// The length of the longest row (0 without rows).
    pub fn max_length(&self) -> usize {
        let offsets = self.offsets_view();
        (0..self.len())
            .map(|row| {
                let (start, end) = offsets.bounds(row);
                end - start
            })
            .max()
            .unwrap_or(0)
    }

    /// The number of elements in all rows, `N`.
    pub fn total_length(&self) -> usize {
        self.values.shape()[0]
    }

    /// Row `i`, shape `(length, *inner)`: a read-only view of the values, zero-copy.
    pub fn row(&self, i: usize) -> Result<Tensor> {
        if i >= self.len() {
            return Err(Error::RowsOutOfRange {
                start: i,
                end: i.saturating_add(1),
                rows: self.len(),
            });
        }
        let (start, end) = self.offsets_view().bounds(i);
        rows_view(&self.values, start, end - start)
    }

    /// Rows `start..start + len`: the values are a zero-copy view; the offsets too when `start`
    /// is 0, and otherwise a rebased copy of `len + 1` integers (offsets always start at 0).
    pub fn slice(&self, start: usize, len: usize) -> Result<RaggedTensor> {
        let end = start.checked_add(len).filter(|&end| end <= self.len());
        let Some(end) = end else {
            return Err(Error::RowsOutOfRange {
                start,
                end: start.saturating_add(len),
                rows: self.len(),
            });
        };
        let offsets = self.offsets_view();
        let (first, last) = (offsets.at(start), offsets.at(end));
        let values = rows_view(&self.values, first, last - first)?;
        let offsets = if start == 0 {
            rows_view(&self.offsets, 0, len + 1)?
        } else {
            offsets::from_lengths(
                (start..end).map(|row| {
                    let (a, b) = offsets.bounds(row);
                    b - a
                }),
                self.offsets.dtype(),
                "the sliced rows",
            )?
        };
        Ok(RaggedTensor::from_checked(values, offsets))
    }
}

/// Rows `start..start + count` of `tensor` along its first dimension: a read-only view.
pub(crate) fn rows_view(tensor: &Tensor, start: usize, count: usize) -> Result<Tensor> {
    let mut shape = tensor.shape().to_vec();
    shape[0] = count;
    // An empty view keeps the original start, which is always a valid offset; a non-empty one
    // moves it by `start` rows, which `Tensor::try_new` checks against the buffer.
    let offset = if count == 0 || start == 0 {
        tensor.offset()
    } else {
        let moved = tensor.offset() as i128 + start as i128 * tensor.strides()[0] as i128;
        usize::try_from(moved).map_err(|_| Error::RowsOutOfRange {
            start,
            end: start + count,
            rows: tensor.shape()[0],
        })?
    };
    Ok(Tensor::try_new(
        tensor.buffer().clone(),
        tensor.dtype(),
        shape,
        tensor.strides().to_vec(),
        offset,
    )?)
}

/// The dtype and element shape shared by every piece; [`Error::NoPieces`] without pieces and
/// [`Error::MixedRaggedPieces`] when one differs.
pub(crate) fn common_layout(pieces: &[RaggedTensor]) -> Result<(DType, Vec<usize>)> {
    let first = pieces.first().ok_or(Error::NoPieces { what: "pieces" })?;
    let (dtype, inner) = (first.dtype(), first.inner_shape());
    for (index, piece) in pieces.iter().enumerate().skip(1) {
        if piece.dtype() != dtype || piece.inner_shape() != inner {
            return Err(Error::MixedRaggedPieces {
                index,
                expected_dtype: dtype,
                expected_shape: inner.to_vec(),
                found_dtype: piece.dtype(),
                found_shape: piece.inner_shape().to_vec(),
            });
        }
    }
    Ok((dtype, inner.to_vec()))
}
