//! The row-copy kernel: runs of whole element rows, copied one after another into one new
//! buffer, and what is built on it (`take`, `concat`, `from_rows`, and the compaction of list
//! arrays whose rows are not laid out one after another).

use arrow_buffer::Buffer;
use arrow_dlpack_tensor::alloc::{UninitBuffer, copy_to_uninit};
use arrow_dlpack_tensor::{DType, Tensor};

use super::offsets::{self, narrowest};
use super::{RaggedTensor, common_layout};
use crate::{Error, Result};

/// The bytes of one element (one row of the values): the product of the element shape times the
/// dtype's size.
pub(crate) fn element_bytes(dtype: DType, inner: &[usize]) -> Result<usize> {
    inner
        .iter()
        .try_fold(dtype.size(), |bytes, &extent| bytes.checked_mul(extent))
        .ok_or_else(|| {
            arrow_dlpack_tensor::Error::Overflow {
                what: "the byte size of one element",
            }
            .into()
        })
}

/// The bytes of `values` in row-major order: shared when the layout is row-major, a contiguous
/// copy otherwise.
pub(crate) fn row_major_bytes(values: &Tensor) -> Result<Buffer> {
    if let Some(buffer) = values.row_major_buffer() {
        return Ok(buffer);
    }
    Ok(values
        .to_contiguous()?
        .row_major_buffer()
        .expect("a contiguous copy is row-major"))
}

/// Copies `runs` (byte slices of whole elements) one after another into a new, writable,
/// row-major tensor of `total` elements of `dtype` and shape `inner`.
///
/// The runs must add up to exactly `total` elements; the callers compute them from the same
/// offsets as `total`.
pub(crate) fn gather<'a>(
    dtype: DType,
    inner: &[usize],
    total: usize,
    runs: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Tensor> {
    let element = element_bytes(dtype, inner)?;
    let bytes = total
        .checked_mul(element)
        .ok_or(arrow_dlpack_tensor::Error::OutOfMemory { bytes: usize::MAX })?;
    let mut out = UninitBuffer::try_new(bytes)?;
    let dst = out.as_uninit_mut();
    let mut at = 0;
    for run in runs {
        let end = at + run.len();
        copy_to_uninit(run, &mut dst[at..end], bytes);
        at = end;
    }
    assert_eq!(at, bytes, "the runs fill the output exactly");
    // SAFETY: the loop wrote bytes `0..at` one run after another, and `at == bytes`, the length
    // of `out`.
    let buffer = unsafe { out.assume_init() };
    let mut shape = vec![total];
    shape.extend_from_slice(inner);
    Ok(Tensor::try_new_row_major(buffer, dtype, shape)?.with_read_only(false))
}

impl RaggedTensor {
    /// The rows at `rows`, in that order (repeats allowed), gathered into a new ragged tensor:
    /// one copy of their values, offsets of the same width as `self`'s.
    ///
    /// A row index out of range is [`Error::RowsOutOfRange`]; int32 offsets that cannot count
    /// the gathered values (rows repeated past `i32::MAX` elements) are [`Error::OffsetOverflow`].
    ///
    /// ```
    /// use arrow_dlpack::{RaggedTensor, Tensor};
    ///
    /// let ragged = RaggedTensor::from_rows(&[
    ///     Tensor::from_vec(vec![1.0f32, 2.0], vec![2])?,
    ///     Tensor::from_vec(vec![3.0f32], vec![1])?,
    /// ])?;
    /// let shuffled = ragged.take(&[1, 0, 1])?;
    /// assert_eq!(shuffled.values().as_slice::<f32>()?, &[3.0, 1.0, 2.0, 3.0]);
    /// assert_eq!(shuffled.offsets().as_slice::<i32>()?, &[0, 1, 3, 4]);
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn take(&self, rows: &[usize]) -> Result<RaggedTensor> {
        let count = self.len();
        if let Some(&row) = rows.iter().find(|&&row| row >= count) {
            return Err(Error::RowsOutOfRange {
                start: row,
                end: row.saturating_add(1),
                rows: count,
            });
        }
        let offsets = self.offsets_view();
        let lengths = rows.iter().map(|&row| {
            let (start, end) = offsets.bounds(row);
            end - start
        });
        let new_offsets =
            offsets::from_lengths(lengths.clone(), offsets.dtype(), "the taken rows")?;
        let total = lengths.sum();
        let element = element_bytes(self.dtype(), self.inner_shape())?;
        let source = row_major_bytes(&self.values)?;
        let source = source.as_slice();
        let runs = rows.iter().map(|&row| {
            let (start, end) = offsets.bounds(row);
            &source[start * element..end * element]
        });
        let values = gather(self.dtype(), self.inner_shape(), total, runs)?;
        Ok(RaggedTensor::from_checked(values, new_offsets))
    }

    /// The rows of all `pieces`, one piece after another, as one ragged tensor: a copy of the
    /// values (one piece alone is returned as it is, without a copy).
    ///
    /// This is how a chunked list column becomes one ragged tensor.
    /// The offsets are int64 when any piece has int64 offsets and int32 otherwise
    /// ([`Error::OffsetOverflow`] when int32 cannot count the values of all pieces).
    /// Pieces must share the dtype and element shape ([`Error::MixedRaggedPieces`]); no pieces
    /// is [`Error::NoPieces`].
    pub fn concat(pieces: &[RaggedTensor]) -> Result<RaggedTensor> {
        let (dtype, inner) = common_layout(pieces)?;
        if let [piece] = pieces {
            return Ok(piece.clone());
        }
        let offsets_dtype = if pieces.iter().any(|p| p.offsets.dtype() == DType::Int64) {
            DType::Int64
        } else {
            DType::Int32
        };
        let lengths = pieces.iter().flat_map(|piece| {
            let offsets = piece.offsets_view();
            (0..piece.len()).map(move |row| {
                let (start, end) = offsets.bounds(row);
                end - start
            })
        });
        let rows: usize = pieces.iter().map(RaggedTensor::len).sum();
        let offsets = offsets::from_lengths(
            ExactLen(lengths, rows),
            offsets_dtype,
            "the concatenated rows",
        )?;
        let total = pieces.iter().map(RaggedTensor::total_length).sum();
        let sources = pieces
            .iter()
            .map(|piece| row_major_bytes(&piece.values))
            .collect::<Result<Vec<_>>>()?;
        let values = gather(dtype, &inner, total, sources.iter().map(Buffer::as_slice))?;
        Ok(RaggedTensor::from_checked(values, offsets))
    }

    /// A ragged tensor of `rows`, each of shape `(length_i, *inner)` with one dtype and element
    /// shape: one copy of their values, int32 offsets when the total fits and int64 otherwise.
    ///
    /// No rows is [`Error::NoPieces`] (the dtype would be unknown), a 0-d row is
    /// [`Error::ZeroDimensional`], rows that differ in dtype or element shape are
    /// [`Error::MixedRaggedPieces`] (naming the row as the piece).
    pub fn from_rows(rows: &[Tensor]) -> Result<RaggedTensor> {
        let first = rows.first().ok_or(Error::NoPieces { what: "rows" })?;
        if rows.iter().any(|row| row.ndim() == 0) {
            return Err(Error::ZeroDimensional);
        }
        let (dtype, inner) = (first.dtype(), &first.shape()[1..]);
        for (index, row) in rows.iter().enumerate() {
            row.require_cpu("copy it into ragged values")?;
            if row.dtype() != dtype || &row.shape()[1..] != inner {
                return Err(Error::MixedRaggedPieces {
                    index,
                    expected_dtype: dtype,
                    expected_shape: inner.to_vec(),
                    found_dtype: row.dtype(),
                    found_shape: row.shape()[1..].to_vec(),
                });
            }
        }
        let total: usize = rows.iter().map(|row| row.shape()[0]).sum();
        let offsets = offsets::from_lengths(
            rows.iter().map(|row| row.shape()[0]),
            narrowest(total),
            "the rows",
        )?;
        let sources = rows
            .iter()
            .map(row_major_bytes)
            .collect::<Result<Vec<_>>>()?;
        let values = gather(dtype, inner, total, sources.iter().map(Buffer::as_slice))?;
        Ok(RaggedTensor::from_checked(values, offsets))
    }
}

/// An iterator of known length (a `flat_map` does not know its own).
#[derive(Clone)]
pub(crate) struct ExactLen<I>(pub(crate) I, pub(crate) usize);

impl<I: Iterator> Iterator for ExactLen<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        let item = self.0.next()?;
        self.1 -= 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.1, Some(self.1))
    }
}

impl<I: Iterator> ExactSizeIterator for ExactLen<I> {}
