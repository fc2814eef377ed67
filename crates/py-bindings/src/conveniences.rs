//! The work behind PyArrow's conveniences on the Python classes: slices, indexing, `nbytes`,
//! `equals`, `is_null`/`is_valid`, over plain arrow-rs chunks and tensors.
//!
//! The `#[pymethods]` of `array`, `tensor` and `fixed_shape_tensor` call in here with their
//! chunks; this file knows none of the classes, so imports run one way.
//! Every length and offset is clamped or checked: no input reaches a panicking slice.

use std::sync::Arc;

use arrow_array::builder::BooleanBufferBuilder;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float16Type, Float32Type, Float64Type};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, BooleanArray, make_array};
use arrow_data::transform::MutableArrayData;
use arrow_dlpack_tensor::{DType, NativeDType, Tensor};
use arrow_schema::{DataType, Field, FieldRef};
use pyo3::exceptions::{PyIndexError, PyOverflowError};
use pyo3::prelude::*;
use pyo3::types::PySlice;

use crate::errors;
use crate::pretty;
use crate::type_names::field_type_name;

/// The elements `offset..offset + length` of a column of `chunks`, zero-copy, clamped to the
/// column as Python and PyArrow clamp slices.
///
/// The chunks are kept as PyArrow's `ChunkedArray.slice` keeps them: from the chunk that holds
/// the first element, every chunk until the range is used up (empty chunks inside it included),
/// each sliced; an empty range keeps one empty chunk, so that the type survives in every consumer.
pub(crate) fn slice_chunks(chunks: &[ArrayRef], offset: usize, length: usize) -> Vec<ArrayRef> {
    let mut offset = offset;
    let mut first = 0;
    while first < chunks.len() && offset >= chunks[first].len() {
        offset -= chunks[first].len();
        first += 1;
    }
    let mut remaining = length;
    let mut pieces = Vec::new();
    for chunk in &chunks[first..] {
        if remaining == 0 {
            break;
        }
        let take = remaining.min(chunk.len() - offset);
        pieces.push(chunk.slice(offset, take));
        remaining -= take;
        offset = 0;
    }
    if pieces.is_empty()
        && let Some(last) = chunks.last()
    {
        pieces.push(last.slice(0, 0));
    }
    pieces
}

/// `(offset, length)` of PyArrow's `slice(offset=0, length=None)`: a negative offset is an
/// `IndexError`, a negative length a `ValueError`, as in PyArrow; the rest is clamped later.
pub(crate) fn slice_arguments(offset: isize, length: Option<isize>) -> PyResult<(usize, usize)> {
    let offset = usize::try_from(offset).map_err(|_| {
        PyIndexError::new_err(format!(
            "offset must be non-negative, found offset={offset}"
        ))
    })?;
    let length = match length {
        None => usize::MAX,
        Some(length) => usize::try_from(length).map_err(|_| {
            errors::value_error(format!(
                "length must be non-negative, found length={length}"
            ))
        })?,
    };
    Ok((offset, length))
}

/// What `column[key]` selects.
pub(crate) enum Selection<'py> {
    /// A slice: the new chunks (zero-copy for step 1, one copied chunk otherwise).
    Chunks(Vec<ArrayRef>),
    /// An integer: the element as a Python value (`None` for a null).
    Value(Bound<'py, PyAny>),
}

/// `column[key]` for an integer (negative counts from the end) or a slice (any step).
///
/// Step 1 is a zero-copy slice; other steps gather the selected elements into one new chunk,
/// as PyArrow's `take` does. Anything else raises `TypeError`, as `operator.index` does.
pub(crate) fn select<'py>(
    py: Python<'py>,
    chunks: &[ArrayRef],
    key: &Bound<'py, PyAny>,
) -> PyResult<Selection<'py>> {
    let total = total_len(chunks);
    if let Ok(slice) = key.cast::<PySlice>() {
        let length = isize::try_from(total)
            .map_err(|_| errors::value_error("the array is longer than isize::MAX"))?;
        let indices = slice.indices(length)?;
        if indices.step == 1 {
            let start = usize::try_from(indices.start).unwrap_or(0);
            return Ok(Selection::Chunks(slice_chunks(
                chunks,
                start,
                indices.slicelength,
            )));
        }
        if indices.slicelength == 0 {
            return Ok(Selection::Chunks(slice_chunks(chunks, 0, 0)));
        }
        // At least one element is selected, so there is at least one chunk.
        return gather(chunks, indices.start, indices.step, indices.slicelength)
            .map(|chunk| Selection::Chunks(vec![chunk]));
    }
    let position = position(key, total)?;
    let element = slice_chunks(chunks, position, 1);
    let value = pretty::to_pylist(py, &element)?.get_item(0)?;
    Ok(Selection::Value(value))
}

/// The position of the integer `key` (negative counts from the end) in `total` elements.
///
/// Anything but an integer raises `TypeError`, as `operator.index` does; an integer out of range,
/// however large, raises `IndexError`, as a Python list does.
pub(crate) fn position(key: &Bound<'_, PyAny>, total: usize) -> PyResult<usize> {
    let out_of_bounds = || {
        PyIndexError::new_err(format!(
            "index {key} is out of bounds for an array of length {total}"
        ))
    };
    let index: isize = match key.extract() {
        Ok(index) => index,
        // An integer beyond isize: out of range of any array.
        Err(error) if error.is_instance_of::<PyOverflowError>(key.py()) => {
            return Err(out_of_bounds());
        }
        Err(error) => return Err(error),
    };
    let position = if index < 0 {
        total.checked_sub(index.unsigned_abs())
    } else {
        Some(index.unsigned_abs()).filter(|&position| position < total)
    };
    position.ok_or_else(out_of_bounds)
}

/// The elements `start, start + step, ...` (`count` of them, all in range) as one new chunk.
fn gather(chunks: &[ArrayRef], start: isize, step: isize, count: usize) -> PyResult<ArrayRef> {
    errors::no_panic("selecting elements", || {
        let data: Vec<_> = chunks.iter().map(|chunk| chunk.to_data()).collect();
        // The first element of each chunk, to find the chunk of an element by binary search.
        let starts: Vec<usize> = chunks
            .iter()
            .scan(0usize, |next, chunk| {
                let start = *next;
                *next += chunk.len();
                Some(start)
            })
            .collect();
        let mut gathered = MutableArrayData::new(data.iter().collect(), true, count);
        let mut index = start;
        for _ in 0..count {
            let position = usize::try_from(index)
                .map_err(|_| errors::value_error(format!("index {index} out of range")))?;
            let chunk = starts
                .partition_point(|&start| start <= position)
                .checked_sub(1)
                .ok_or_else(|| errors::value_error(format!("index {index} out of range")))?;
            let local = position - starts[chunk];
            gathered
                .try_extend(chunk, local, local + 1)
                .map_err(errors::arrow_rs_error)?;
            index = index.checked_add(step).unwrap_or(isize::MAX);
        }
        Ok(make_array(gathered.freeze()))
    })
}

/// The boolean chunks of `is_valid()` (`valid = true`) or `is_null()` (`valid = false`), one per
/// chunk, without nulls; `nan_is_null` also counts NaN as null, as PyArrow's option does.
pub(crate) fn validity_chunks(
    chunks: &[ArrayRef],
    valid: bool,
    nan_is_null: bool,
) -> PyResult<Vec<ArrayRef>> {
    chunks
        .iter()
        .map(|chunk| {
            let len = chunk.len();
            let mut is_valid = match chunk.logical_nulls() {
                Some(nulls) => nulls.inner().clone(),
                None => {
                    let mut all = BooleanBufferBuilder::new(len);
                    all.append_n(len, true);
                    all.finish()
                }
            };
            if nan_is_null {
                let nans = match chunk.data_type() {
                    DataType::Float16 => Some(nan_mask::<Float16Type>(chunk.as_ref())),
                    DataType::Float32 => Some(nan_mask::<Float32Type>(chunk.as_ref())),
                    DataType::Float64 => Some(nan_mask::<Float64Type>(chunk.as_ref())),
                    _ => None,
                };
                if let Some(nans) = nans {
                    is_valid = &is_valid & &!nans.values();
                }
            }
            let values = if valid { is_valid } else { !&is_valid };
            Ok(Arc::new(BooleanArray::new(values, None)) as ArrayRef)
        })
        .collect()
}

/// Where the float array `array` holds NaN (whatever its validity): the values unequal to
/// themselves.
fn nan_mask<T>(array: &dyn Array) -> BooleanArray
where
    T: ArrowPrimitiveType,
    T::Native: PartialEq,
{
    let values = array.as_primitive::<T>().values();
    #[allow(clippy::eq_op)] // NaN is the one value unequal to itself.
    values.iter().map(|value| Some(value != value)).collect()
}

/// The field of the chunks of `is_null()` and `is_valid()`.
pub(crate) fn boolean_field() -> FieldRef {
    Arc::new(Field::new("", DataType::Boolean, false))
}

/// The bytes the chunks reference, counted as PyArrow's `nbytes` counts them: the values and
/// validity bitmaps that the (sliced) elements span, children included.
pub(crate) fn referenced_bytes(chunks: &[ArrayRef]) -> PyResult<usize> {
    chunks.iter().try_fold(0usize, |total, chunk| {
        let bytes = array_bytes(chunk.as_ref())?;
        total
            .checked_add(bytes)
            .ok_or_else(|| errors::value_error("nbytes overflows usize"))
    })
}

fn array_bytes(array: &dyn Array) -> PyResult<usize> {
    let overflow = || errors::value_error("nbytes overflows usize");
    // The bytes that bits `offset..offset + len` span.
    let bitmap = |offset: usize, len: usize| -> PyResult<usize> {
        if len == 0 {
            return Ok(0);
        }
        let end = offset.checked_add(len).ok_or_else(overflow)?;
        Ok(end.div_ceil(8) - offset / 8)
    };
    let validity = match array.nulls() {
        Some(nulls) => bitmap(nulls.offset(), nulls.len())?,
        None => 0,
    };
    let values = match array.data_type() {
        DataType::Null => 0,
        DataType::Boolean => {
            let values = array.as_boolean().values();
            bitmap(values.offset(), values.len())?
        }
        DataType::FixedSizeList(..) => array_bytes(array.as_fixed_size_list().values().as_ref())?,
        data_type if data_type.is_primitive() => {
            let width = data_type.primitive_width().unwrap_or(0);
            array.len().checked_mul(width).ok_or_else(overflow)?
        }
        // Other layouts: arrow-rs's count of the sliced buffers (which counts a bitmap's bytes
        // from bit 0 of the slice, so it may differ from PyArrow's by a byte).
        _ => {
            return array
                .to_data()
                .get_slice_memory_size()
                .map_err(errors::arrow_rs_error);
        }
    };
    validity.checked_add(values).ok_or_else(overflow)
}

/// Whether two columns hold equal values of the same type, as PyArrow's `equals`: the chunk
/// layout does not matter, nulls must sit at the same places, and floats compare as numbers
/// (NaN unequal to itself, `0.0 == -0.0`).
pub(crate) fn columns_equal(
    field: &Field,
    chunks: &[ArrayRef],
    other_field: &Field,
    other_chunks: &[ArrayRef],
) -> PyResult<bool> {
    if !field.data_type().equals_datatype(other_field.data_type())
        || field_type_name(field) != field_type_name(other_field)
        || total_len(chunks) != total_len(other_chunks)
    {
        return Ok(false);
    }
    let combine = |chunks: &[ArrayRef]| -> PyResult<Option<ArrayRef>> {
        if chunks.is_empty() {
            return Ok(None);
        }
        arrow_dlpack::concat_chunks(chunks, arrow_dlpack::ConcatOptions { allow_copy: true })
            .map(Some)
            .map_err(|error| errors::arrow_error(error, errors::Operation::Import))
    };
    match (combine(chunks)?, combine(other_chunks)?) {
        (Some(left), Some(right)) => Ok(arrays_equal(left.as_ref(), right.as_ref())),
        // Both empty (lengths are equal).
        _ => Ok(true),
    }
}

fn arrays_equal(left: &dyn Array, right: &dyn Array) -> bool {
    if left.len() != right.len() || !same_validity(left, right) {
        return false;
    }
    match left.data_type() {
        DataType::Float16 => floats_equal::<Float16Type>(left, right),
        DataType::Float32 => floats_equal::<Float32Type>(left, right),
        DataType::Float64 => floats_equal::<Float64Type>(left, right),
        DataType::FixedSizeList(..) => {
            let (left, right) = (left.as_fixed_size_list(), right.as_fixed_size_list());
            if left.null_count() == 0 {
                arrays_equal(left.values().as_ref(), right.values().as_ref())
            } else {
                // The values under a null list are not compared.
                (0..left.len()).all(|row| {
                    left.is_null(row)
                        || arrays_equal(left.value(row).as_ref(), right.value(row).as_ref())
                })
            }
        }
        _ => left.to_data() == right.to_data(),
    }
}

/// Whether nulls sit at the same places (an all-valid bitmap counts as none).
fn same_validity(left: &dyn Array, right: &dyn Array) -> bool {
    let nulls = |array: &dyn Array| array.logical_nulls().filter(|nulls| nulls.null_count() > 0);
    match (nulls(left), nulls(right)) {
        (None, None) => true,
        (Some(left), Some(right)) => left.inner() == right.inner(),
        _ => false,
    }
}

fn floats_equal<T>(left: &dyn Array, right: &dyn Array) -> bool
where
    T: ArrowPrimitiveType,
    T::Native: PartialEq,
{
    let (left, right) = (left.as_primitive::<T>(), right.as_primitive::<T>());
    (0..left.len()).all(|index| left.is_null(index) || left.value(index) == right.value(index))
}

/// Whether two tensors hold the same dtype, shape and values, whatever their strides, as
/// PyArrow's `Tensor.equals`: dimension names do not count, and floats compare as numbers.
pub(crate) fn tensors_equal(left: &Tensor, right: &Tensor) -> PyResult<bool> {
    if left.dtype() != right.dtype() || left.shape() != right.shape() {
        return Ok(false);
    }
    match left.dtype() {
        DType::Float16 => typed_equal::<<Float16Type as ArrowPrimitiveType>::Native>(left, right),
        DType::Float32 => typed_equal::<f32>(left, right),
        DType::Float64 => typed_equal::<f64>(left, right),
        // Every other dtype compares its elements' bytes.
        _ => {
            let left = left.to_contiguous().map_err(errors::tensor_error)?;
            let right = right.to_contiguous().map_err(errors::tensor_error)?;
            Ok(match (left.row_major_buffer(), right.row_major_buffer()) {
                (Some(left), Some(right)) => left.as_slice() == right.as_slice(),
                _ => false,
            })
        }
    }
}

fn typed_equal<T: NativeDType + PartialEq>(left: &Tensor, right: &Tensor) -> PyResult<bool> {
    let left = left.iter::<T>().map_err(errors::tensor_error)?;
    let right = right.iter::<T>().map_err(errors::tensor_error)?;
    Ok(left.eq(right))
}

/// PyArrow's `Tensor.dim_name(i)`: the name of dimension `i`, `""` when the tensor has none.
/// An index out of range raises `IndexError` (PyArrow aborts the process).
pub(crate) fn dim_name(tensor: &Tensor, index: isize) -> PyResult<String> {
    let ndim = tensor.ndim();
    let Some(position) = usize::try_from(index).ok().filter(|&i| i < ndim) else {
        return Err(PyIndexError::new_err(format!(
            "dimension {index} is out of range for a tensor of {ndim} dimensions"
        )));
    };
    Ok(tensor
        .dim_names()
        .and_then(|names| names.get(position).cloned())
        .unwrap_or_default())
}

/// PyArrow-less `nbytes` of a tensor, numpy's: the number of elements times the element size.
pub(crate) fn tensor_nbytes(tensor: &Tensor) -> PyResult<usize> {
    tensor
        .len()
        .checked_mul(tensor.dtype().size())
        .ok_or_else(|| errors::value_error("nbytes overflows usize"))
}

fn total_len(chunks: &[ArrayRef]) -> usize {
    chunks.iter().map(|chunk| chunk.len()).sum()
}
