//! Padding: ragged rows written into a `(B, L, *inner)` tensor, truncated to a maximum length
//! and filled with a pad value, by one kernel that copies each row's bytes and fills the rest by
//! a byte pattern; and the way back, from a padded tensor and lengths.

use std::mem::MaybeUninit;

use arrow_dlpack_tensor::alloc::{PooledVec, UninitBuffer, copy_to_uninit};
use arrow_dlpack_tensor::{DType, Tensor};

use super::gather::{element_bytes, gather, row_major_bytes};
use super::offsets::{self, narrowest};
use super::pad_value::PadValue;
use super::{RaggedTensor, common_layout};
use crate::{Error, Result};

/// A side of a row: where padding goes, or where truncation cuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Side {
    /// The start of the row.
    Left,
    /// The end of the row.
    #[default]
    Right,
}

impl Side {
    /// The side's name, `"left"` or `"right"` (what Hugging Face's `padding_side` takes).
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Left => "left",
            Side::Right => "right",
        }
    }
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A side from its name ([`Side::as_str`]).
///
/// ```
/// use arrow_dlpack::Side;
///
/// assert_eq!("left".parse::<Side>()?, Side::Left);
/// assert!("top".parse::<Side>().is_err());
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
impl std::str::FromStr for Side {
    type Err = Error;

    fn from_str(name: &str) -> Result<Self> {
        match name {
            "left" => Ok(Side::Left),
            "right" => Ok(Side::Right),
            _ => Err(Error::InvalidPadding {
                reason: format!("unknown side {name:?}; expected \"left\" or \"right\""),
            }),
        }
    }
}

/// How [`RaggedTensor::to_padded`] and [`pad_pieces`] pad and truncate.
///
/// The default pads with 0 on the right, to the longest row, without truncation.
///
/// ```
/// use arrow_dlpack::{PadOptions, PadValue, Side};
///
/// let options = PadOptions {
///     pad_value: PadValue::Int(-100),
///     max_length: Some(512),
///     pad_to_multiple_of: Some(8),
///     padding_side: Side::Left,
///     ..Default::default()
/// };
/// assert_eq!(options.truncation_side, Side::Right);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PadOptions {
    /// The value of the padding, checked against the dtype ([`Error::PadValue`]).
    /// Default [`PadValue::Int`]`(0)`.
    pub pad_value: PadValue,
    /// Rows longer than this are truncated to it; `None` keeps every row whole. Default `None`.
    pub max_length: Option<usize>,
    /// The padded length is rounded up to a multiple of this (at least 1); `None` is 1.
    /// Default `None`.
    pub pad_to_multiple_of: Option<usize>,
    /// Where the padding goes: after the row's elements ([`Side::Right`]) or before them.
    /// Default [`Side::Right`].
    pub padding_side: Side,
    /// Which elements truncation drops: the last ones ([`Side::Right`]) or the first ones.
    /// Default [`Side::Right`].
    pub truncation_side: Side,
}

/// The bytes that fill padding: one element of the pad value, repeated over a block that every
/// element size divides, or one byte when all bytes of the element are equal (a plain `memset`).
struct Fill {
    uniform: Option<u8>,
    block: [u8; Fill::BLOCK],
}

impl Fill {
    /// A multiple of every dtype size (1, 2, 4, 8, 16), so that a run of whole elements that
    /// starts at an element boundary is filled by whole blocks and a prefix of one.
    const BLOCK: usize = 64;

    fn new(element: &[u8]) -> Fill {
        let uniform = element
            .iter()
            .all(|&byte| byte == element[0])
            .then(|| element[0]);
        let mut block = [0u8; Fill::BLOCK];
        for (index, byte) in block.iter_mut().enumerate() {
            *byte = element[index % element.len()];
        }
        Fill { uniform, block }
    }

    /// Fills `dst`, which starts at an element boundary and holds whole elements.
    fn write(&self, dst: &mut [MaybeUninit<u8>]) {
        if let Some(byte) = self.uniform {
            dst.fill(MaybeUninit::new(byte));
            return;
        }
        let mut blocks = dst.chunks_exact_mut(Fill::BLOCK);
        for block in &mut blocks {
            copy_to_uninit(&self.block, block, 0);
        }
        let rest = blocks.into_remainder();
        copy_to_uninit(&self.block[..rest.len()], rest, 0);
    }
}

/// Pads the rows of all `pieces`, one piece after another, into one tensor `(B, L, *inner)`
/// without concatenating them first: `B` is the number of rows of all pieces and `L` the length
/// of the longest row after truncation to [`max_length`](PadOptions::max_length), rounded up to
/// [`pad_to_multiple_of`](PadOptions::pad_to_multiple_of).
///
/// One pass writes each output byte once: per row, a copy of the kept elements' bytes and a fill
/// of the padding by the pad value's byte pattern (no per-element work). The tensor is fresh and
/// writable. Values that are not row-major are made contiguous first.
///
/// Errors: [`Error::NoPieces`] without pieces, [`Error::MixedRaggedPieces`] when the pieces
/// differ in dtype or element shape, [`Error::PadValue`] for a pad value the dtype cannot hold,
/// [`Error::InvalidPadding`] for `pad_to_multiple_of` 0, and
/// [`OutOfMemory`](arrow_dlpack_tensor::Error::OutOfMemory) when the output cannot be allocated.
///
/// ```
/// use arrow_dlpack::{PadOptions, PadValue, RaggedTensor, Side, Tensor, pad_pieces};
///
/// let a = RaggedTensor::from_rows(&[Tensor::from_vec(vec![1i64, 2, 3], vec![3])?])?;
/// let b = RaggedTensor::from_rows(&[Tensor::from_vec(vec![4i64], vec![1])?])?;
/// let options = PadOptions { pad_value: PadValue::Int(-1), padding_side: Side::Left, ..Default::default() };
/// let padded = pad_pieces(&[a, b], &options)?;
/// assert_eq!(padded.shape(), &[2, 3]);
/// assert_eq!(padded.as_slice::<i64>()?, &[1, 2, 3, -1, -1, 4]);
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
pub fn pad_pieces(pieces: &[RaggedTensor], options: &PadOptions) -> Result<Tensor> {
    let (dtype, inner) = common_layout(pieces)?;
    let fill = Fill::new(&options.pad_value.to_element_bytes(dtype)?);
    let multiple = match options.pad_to_multiple_of {
        Some(0) => {
            return Err(Error::InvalidPadding {
                reason: "pad_to_multiple_of is 0; expected at least 1".to_string(),
            });
        }
        Some(multiple) => multiple,
        None => 1,
    };
    let cap = options.max_length.unwrap_or(usize::MAX);
    let longest = pieces
        .iter()
        .map(RaggedTensor::max_length)
        .max()
        .unwrap_or(0)
        .min(cap);
    let overflow = arrow_dlpack_tensor::Error::OutOfMemory { bytes: usize::MAX };
    let width = longest
        .div_ceil(multiple)
        .checked_mul(multiple)
        .ok_or(overflow.clone())?;
    let rows: usize = pieces.iter().map(RaggedTensor::len).sum();
    let element = element_bytes(dtype, &inner)?;
    let row_bytes = width.checked_mul(element).ok_or(overflow.clone())?;
    let bytes = rows.checked_mul(row_bytes).ok_or(overflow)?;
    let mut out = UninitBuffer::try_new(bytes)?;
    if bytes > 0 {
        let mut out_rows = out.as_uninit_mut().chunks_exact_mut(row_bytes);
        for piece in pieces {
            let source = row_major_bytes(&piece.values)?;
            let source = source.as_slice();
            let offsets = piece.offsets_view();
            for row in 0..piece.len() {
                let out_row = out_rows.next().expect("one output row per input row");
                let (start, end) = offsets.bounds(row);
                let keep = (end - start).min(cap);
                let (start, end) = match options.truncation_side {
                    Side::Right => (start, start + keep),
                    Side::Left => (end - keep, end),
                };
                let (data, pad) = match options.padding_side {
                    Side::Right => out_row.split_at_mut(keep * element),
                    Side::Left => {
                        let (pad, data) = out_row.split_at_mut(row_bytes - keep * element);
                        (data, pad)
                    }
                };
                copy_to_uninit(&source[start * element..end * element], data, bytes);
                fill.write(pad);
            }
        }
    }
    // SAFETY: `out` is `rows` rows of `row_bytes` bytes (`bytes == rows * row_bytes`), and the
    // loop wrote every row whole, its kept elements and its padding together covering it; with
    // no bytes there is nothing to write.
    let buffer = unsafe { out.assume_init() };
    let mut shape = vec![rows, width];
    shape.extend_from_slice(&inner);
    Ok(Tensor::try_new_row_major(buffer, dtype, shape)?.with_read_only(false))
}

impl RaggedTensor {
    /// Every row cut to at most `max_length` elements, keeping its start
    /// ([`Side::Right`] cuts the end off, as padding's truncation does) or its end
    /// ([`Side::Left`]): the same rows, shared, when none is longer; otherwise one copy of the
    /// kept values, with offsets of the same width as `self`'s.
    ///
    /// ```
    /// use arrow_dlpack::{RaggedTensor, Side, Tensor};
    ///
    /// let ragged = RaggedTensor::from_rows(&[
    ///     Tensor::from_vec(vec![1i64, 2, 3, 4], vec![4])?,
    ///     Tensor::from_vec(vec![5i64], vec![1])?,
    /// ])?;
    /// let cut = ragged.truncate(2, Side::Right)?;
    /// assert_eq!(cut.values().as_slice::<i64>()?, &[1, 2, 5]);
    /// let cut = ragged.truncate(2, Side::Left)?;
    /// assert_eq!(cut.values().as_slice::<i64>()?, &[3, 4, 5]);
    /// assert_eq!(cut.offsets().as_slice::<i32>()?, &[0, 2, 3]);
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn truncate(&self, max_length: usize, side: Side) -> Result<RaggedTensor> {
        if self.max_length() <= max_length {
            return Ok(self.clone());
        }
        let offsets = self.offsets_view();
        // The kept elements of each row: its first or its last `max_length`.
        let kept = |row: usize| {
            let (start, end) = offsets.bounds(row);
            let length = (end - start).min(max_length);
            match side {
                Side::Right => (start, start + length),
                Side::Left => (end - length, end),
            }
        };
        let lengths = (0..self.len()).map(|row| {
            let (start, end) = kept(row);
            end - start
        });
        let new_offsets =
            offsets::from_lengths(lengths.clone(), offsets.dtype(), "the truncated rows")?;
        let total = lengths.sum();
        let element = element_bytes(self.dtype(), self.inner_shape())?;
        let source = row_major_bytes(&self.values)?;
        let source = source.as_slice();
        let runs = (0..self.len()).map(|row| {
            let (start, end) = kept(row);
            &source[start * element..end * element]
        });
        let values = gather(self.dtype(), self.inner_shape(), total, runs)?;
        Ok(RaggedTensor::from_checked(values, new_offsets))
    }

    /// The rows padded into one tensor `(B, L, *inner)`, fresh and writable: [`pad_pieces`] of
    /// this one piece.
    ///
    /// ```
    /// use arrow_dlpack::{PadOptions, RaggedTensor, Side, Tensor};
    ///
    /// let ragged = RaggedTensor::new(
    ///     Tensor::from_vec(vec![1u8, 2, 3, 4, 5], vec![5])?,
    ///     Tensor::from_vec(vec![0i32, 4, 5], vec![3])?,
    /// )?;
    /// let options = PadOptions { max_length: Some(3), truncation_side: Side::Left, ..Default::default() };
    /// let padded = ragged.to_padded(&options)?;
    /// assert_eq!(padded.shape(), &[2, 3]);
    /// assert_eq!(padded.as_slice::<u8>()?, &[2, 3, 4, 5, 0, 0]);
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn to_padded(&self, options: &PadOptions) -> Result<Tensor> {
        pad_pieces(std::slice::from_ref(self), options)
    }

    /// The rows of a padded tensor `(B, L, *inner)`, row `b` being its first `lengths[b]`
    /// elements ([`Side::Right`]) or its last ones ([`Side::Left`]): one copy, int32 offsets when
    /// the total fits and int64 otherwise.
    ///
    /// `lengths` is a 1-D integer tensor of `B` entries, each in `0..=L`
    /// ([`Error::InvalidPadding`] otherwise); `padded` needs at least 2 dimensions
    /// ([`Error::TooFewDimensions`]).
    ///
    /// ```
    /// use arrow_dlpack::{RaggedTensor, Side, Tensor};
    ///
    /// let padded = Tensor::from_vec(vec![1.0f32, 2.0, 0.0, 3.0, 0.0, 0.0], vec![2, 3])?;
    /// let lengths = Tensor::from_vec(vec![2i64, 1], vec![2])?;
    /// let ragged = RaggedTensor::from_padded(&padded, &lengths, Side::Right)?;
    /// assert_eq!(ragged.values().as_slice::<f32>()?, &[1.0, 2.0, 3.0]);
    /// assert_eq!(ragged.offsets().as_slice::<i32>()?, &[0, 2, 3]);
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn from_padded(padded: &Tensor, lengths: &Tensor, padding_side: Side) -> Result<Self> {
        padded.require_cpu("unpad it")?;
        if padded.ndim() < 2 {
            return Err(Error::TooFewDimensions {
                ndim: padded.ndim(),
                min: 2,
            });
        }
        let (rows, width) = (padded.shape()[0], padded.shape()[1]);
        // Read once into memory of our own: the caller's lengths may be written while we copy,
        // and every row below is cut by the checked copy, never by the caller's memory again.
        let ends = row_ends(lengths, rows, width)?;
        let ends = ends.as_slice();
        let dtype = padded.dtype();
        let inner = &padded.shape()[2..];
        let element = element_bytes(dtype, inner)?;
        let source = row_major_bytes(padded)?;
        let source = source.as_slice();
        let total = ends.last().copied().unwrap_or(0);
        let length = |row: usize| ends[row] - if row == 0 { 0 } else { ends[row - 1] };
        let runs = (0..rows).map(|row| {
            let (base, length) = (row * width * element, length(row));
            match padding_side {
                Side::Right => &source[base..base + length * element],
                Side::Left => &source[base + (width - length) * element..base + width * element],
            }
        });
        let values = gather(dtype, inner, total, runs)?;
        let offsets = offsets::from_lengths((0..rows).map(length), narrowest(total), "the rows")?;
        Ok(RaggedTensor::from_checked(values, offsets))
    }
}

/// The end of every row (the running sum of the lengths) of a 1-D integer tensor of `rows`
/// lengths, each checked to be in `0..=width`: `rows` integers in fresh memory, allocated
/// fallibly (the lengths of a broadcast view may claim any number of rows).
fn row_ends(lengths: &Tensor, rows: usize, width: usize) -> Result<PooledVec<usize>> {
    lengths.require_cpu("read it as lengths")?;
    if lengths.shape() != [rows] {
        return Err(Error::InvalidPadding {
            reason: format!(
                "lengths have shape {:?}; expected [{rows}], one length per row of the padded \
                 tensor",
                lengths.shape()
            ),
        });
    }
    let mut ends = PooledVec::<usize>::try_with_capacity(rows)?;
    let mut total = 0usize;
    let mut push = |row: usize, length: i128| {
        let length = usize::try_from(length)
            .ok()
            .filter(|&length| length <= width)
            .ok_or_else(|| Error::InvalidPadding {
                reason: format!(
                    "row {row} has length {length}; expected a length from 0 to {width}, \
                     the padded length"
                ),
            })?;
        // At most `rows * width`, the elements of the padded tensor, which fit `usize`.
        total += length;
        ends.push(total);
        Ok::<(), Error>(())
    };
    macro_rules! read {
        ($t:ty) => {
            for (row, length) in lengths.iter::<$t>()?.enumerate() {
                push(row, i128::from(length))?;
            }
        };
    }
    match lengths.dtype() {
        DType::Int8 => read!(i8),
        DType::Int16 => read!(i16),
        DType::Int32 => read!(i32),
        DType::Int64 => read!(i64),
        DType::UInt8 => read!(u8),
        DType::UInt16 => read!(u16),
        DType::UInt32 => read!(u32),
        DType::UInt64 => read!(u64),
        other => {
            return Err(Error::InvalidPadding {
                reason: format!("lengths have dtype {other}; expected an integer dtype"),
            });
        }
    }
    Ok(ends)
}
