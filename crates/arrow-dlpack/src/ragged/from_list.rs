//! Arrow variable-length list arrays (`list`, `large_list`, `list_view`, `large_list_view`) to
//! ragged tensors: the values are a view of exactly the elements the array refers to, copied only
//! when the rows are not laid out one after another.

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, OffsetSizeTrait};
use arrow_buffer::NullBuffer;
use arrow_dlpack_tensor::{DType, Tensor};
use arrow_schema::{DataType, Field};

use super::RaggedTensor;
use super::gather::{element_bytes, gather, row_major_bytes};
use super::offsets::{self, Offsets};
use crate::{
    ArrayToTensorOptions, EXTENSION_NAME, Error, FixedShapeTensorArray, NullLocation, Result,
    array_to_tensor,
};

/// What [`list_to_ragged`] may do beyond sharing memory.
///
/// The default allows neither nulls nor copies.
///
/// ```
/// use arrow_dlpack::ListToRaggedOptions;
///
/// let options = ListToRaggedOptions { allow_nulls: true, ..Default::default() };
/// assert!(!options.allow_copy);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListToRaggedOptions {
    /// Accept nulls: a null row becomes an empty row, and null elements inside rows hold
    /// unspecified values (as [`ArrayToTensorOptions::allow_nulls`] does for fixed-size lists).
    /// Without it a null row is refused with [`Error::NullRow`] and a null element with
    /// [`Error::Nulls`]. Default `false`.
    pub allow_nulls: bool,
    /// Accept conversions that copy the values: rows that are not laid out one after another
    /// (a list view whose rows overlap or are out of order, a null row whose offsets still
    /// cover elements, which must be dropped), and booleans, unpacked to one byte each.
    /// Without it these are refused with [`Error::CopyRequired`]. Default `false`.
    pub allow_copy: bool,
}

/// Turns a variable-length list array into a [`RaggedTensor`].
///
/// - `list` gives int32 offsets and `large_list` int64; `list_view` and `large_list_view` give
///   int32 and int64 offsets computed from their sizes.
/// - The elements are anything that forms a tensor on its own (see [`array_to_tensor`]):
///   primitives, booleans (a copy), fixed-size lists nested to any depth, and
///   `arrow.fixed_shape_tensor` elements (recognised from the list's child field), giving
///   values of shape `(N, *inner)`.
/// - The values are a view of only the elements the rows refer to: for a sliced list array
///   (offsets not starting at 0), a view that starts at the first referenced element, with
///   offsets rebased to start at 0 (a copy of `B + 1` integers; a `list` or `large_list` whose
///   offsets start at 0 shares them too).
/// - A list view whose non-empty rows follow one another in the child array is zero-copy;
///   otherwise (rows out of order, overlapping, or with gaps between them) its rows are copied
///   into fresh values when [`allow_copy`](ListToRaggedOptions::allow_copy) is set and refused
///   with [`Error::CopyRequired`] when not.
/// - Null rows are refused with [`Error::NullRow`] naming the first one, unless
///   [`allow_nulls`](ListToRaggedOptions::allow_nulls) is set; then they are empty rows.
///   A null row of a `list` may still have offsets that cover elements: those elements are
///   dropped, which copies the values (refused without `allow_copy`).
/// - Offsets are checked (nondecreasing, inside the child array) before anything is read, so a
///   malformed array from foreign memory is [`Error::InvalidOffsets`], never a panic.
///
/// Any other type is [`Error::NotAList`]; an element type that does not form a tensor is
/// [`Error::UnsupportedType`].
///
/// ```
/// use arrow_array::{Array, ListArray, types::Int32Type};
/// use arrow_dlpack::{ListToRaggedOptions, list_to_ragged};
///
/// let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
///     Some(vec![Some(1), Some(2)]),
///     Some(vec![]),
///     Some(vec![Some(3), Some(4), Some(5)]),
/// ]);
/// let ragged = list_to_ragged(&list.slice(1, 2), ListToRaggedOptions::default())?;
/// assert_eq!(ragged.values().as_slice::<i32>()?, &[3, 4, 5]);
/// assert_eq!(ragged.offsets().as_slice::<i32>()?, &[0, 0, 3]);
/// // The values are the list's own memory.
/// let child = list.values().as_any().downcast_ref::<arrow_array::Int32Array>().unwrap();
/// assert_eq!(ragged.values().data_ptr(), child.values()[2..].as_ptr().cast());
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
pub fn list_to_ragged(array: &dyn Array, options: ListToRaggedOptions) -> Result<RaggedTensor> {
    let options = &options;
    match array.data_type() {
        DataType::List(field) => {
            let list = array.as_list::<i32>();
            from_list(field, list.values(), list.offsets(), list.nulls(), options)
        }
        DataType::LargeList(field) => {
            let list = array.as_list::<i64>();
            from_list(field, list.values(), list.offsets(), list.nulls(), options)
        }
        DataType::ListView(field) => {
            let view = array.as_list_view::<i32>();
            let (offsets, sizes) = (view.value_offsets(), view.value_sizes());
            from_view(field, view.values(), offsets, sizes, view.nulls(), options)
        }
        DataType::LargeListView(field) => {
            let view = array.as_list_view::<i64>();
            let (offsets, sizes) = (view.value_offsets(), view.value_sizes());
            from_view(field, view.values(), offsets, sizes, view.nulls(), options)
        }
        other => Err(Error::NotAList {
            data_type: other.clone(),
        }),
    }
}

/// The offsets dtype of a list with offsets of type `O`.
fn offsets_dtype<O: OffsetSizeTrait>() -> DType {
    if O::IS_LARGE {
        DType::Int64
    } else {
        DType::Int32
    }
}

/// Refuses null rows unless allowed; `Some(nulls)` when there are null rows to treat as empty.
fn null_rows<'a>(
    nulls: Option<&'a NullBuffer>,
    options: &ListToRaggedOptions,
) -> Result<Option<&'a NullBuffer>> {
    let Some(nulls) = nulls.filter(|nulls| nulls.null_count() > 0) else {
        return Ok(None);
    };
    if !options.allow_nulls {
        let first = nulls.iter().position(|valid| !valid).unwrap_or(0);
        return Err(Error::NullRow {
            row: first,
            null_count: nulls.null_count(),
        });
    }
    Ok(Some(nulls))
}

/// `list` and `large_list`.
fn from_list<O: OffsetSizeTrait>(
    field: &Field,
    child: &ArrayRef,
    offsets: &arrow_buffer::OffsetBuffer<O>,
    nulls: Option<&NullBuffer>,
    options: &ListToRaggedOptions,
) -> Result<RaggedTensor> {
    let dtype = offsets_dtype::<O>();
    let raw = offsets.inner();
    let view = match dtype {
        // `ScalarBuffer` checked the alignment for `O`, which has the width `dtype` names.
        DType::Int32 => Offsets::I32(raw.inner().typed_data::<i32>()),
        _ => Offsets::I64(raw.inner().typed_data::<i64>()),
    };
    // Arrays imported from foreign memory are not validated by arrow-rs: check before reading.
    offsets::check(view, child.len(), false)?;
    let rows = view.len() - 1;
    let (first, last) = (view.at(0), view.at(rows));
    let nulls = null_rows(nulls, options)?;
    let covered_null = nulls.and_then(|nulls| {
        (0..rows).find(|&row| nulls.is_null(row) && view.at(row) != view.at(row + 1))
    });
    let Some(_) = covered_null else {
        // Every row's elements are kept (null rows, if any, are already empty): the values are a
        // view of the referenced range, the offsets shared when they start at 0.
        let values = element_tensor(field, child.slice(first, last - first), options)?;
        let offsets = if first == 0 {
            Tensor::try_new_row_major(raw.inner().clone(), dtype, vec![rows + 1])?
        } else {
            offsets::from_lengths(
                (0..rows).map(|row| view.at(row + 1) - view.at(row)),
                dtype,
                "the list's rows",
            )?
        };
        return RaggedTensor::from_immutable(values, offsets);
    };
    let nulls = nulls.expect("a covered null row implies nulls");
    if !options.allow_copy {
        let dropped = (0..rows)
            .filter(|&row| nulls.is_null(row) && view.at(row) != view.at(row + 1))
            .count();
        return Err(Error::CopyRequired {
            reason: format!(
                "dropping the elements covered by {} of the list array",
                crate::error::plural(dropped, "null row", "null rows")
            ),
            options: "ListToRaggedOptions",
        });
    }
    let row_range = |row: usize| {
        if nulls.is_null(row) {
            (first, first)
        } else {
            (view.at(row), view.at(row + 1))
        }
    };
    compact(field, child, first, last, rows, dtype, row_range, options)
}

/// `list_view` and `large_list_view`.
fn from_view<O: OffsetSizeTrait>(
    field: &Field,
    child: &ArrayRef,
    view_offsets: &[O],
    sizes: &[O],
    nulls: Option<&NullBuffer>,
    options: &ListToRaggedOptions,
) -> Result<RaggedTensor> {
    let dtype = offsets_dtype::<O>();
    let rows = sizes.len();
    if view_offsets.len() != rows {
        return Err(Error::InvalidOffsets {
            reason: format!(
                "the list view has {} offsets and {rows} sizes; expected one of each per row",
                view_offsets.len()
            ),
        });
    }
    let nulls = null_rows(nulls, options)?;
    let is_null = |row: usize| nulls.is_some_and(|nulls| nulls.is_null(row));
    // Check every kept row against the child array, and see whether the non-empty rows follow
    // one another (then the values are one view).
    let child_len = child.len();
    let (mut low, mut high) = (usize::MAX, 0usize);
    let mut follows = true;
    let mut previous_end: Option<usize> = None;
    for row in (0..rows).filter(|&row| !is_null(row)) {
        let (offset, size) = (view_offsets[row].to_usize(), sizes[row].to_usize());
        let end = offset
            .zip(size)
            .and_then(|(offset, size)| offset.checked_add(size))
            .filter(|&end| end <= child_len);
        let (Some(offset), Some(end)) = (offset, end) else {
            return Err(Error::InvalidOffsets {
                reason: format!(
                    "row {row} of the list view has offset {:?} and size {:?}; expected a \
                     non-negative offset and size within the {child_len} child values",
                    view_offsets[row], sizes[row]
                ),
            });
        };
        if end == offset {
            continue;
        }
        if previous_end.is_some_and(|previous| previous != offset) {
            follows = false;
        }
        previous_end = Some(end);
        low = low.min(offset);
        high = high.max(end);
    }
    if low > high {
        (low, high) = (0, 0);
    }
    let length = |row: usize| {
        if is_null(row) {
            0
        } else {
            sizes[row].as_usize()
        }
    };
    if follows {
        let values = element_tensor(field, child.slice(low, high - low), options)?;
        let offsets = offsets::from_lengths((0..rows).map(length), dtype, "the list view's rows")?;
        return RaggedTensor::from_immutable(values, offsets);
    }
    if !options.allow_copy {
        return Err(Error::CopyRequired {
            reason: "reading a list view whose rows are out of order, overlap or leave gaps"
                .to_string(),
            options: "ListToRaggedOptions",
        });
    }
    // Null and empty rows may have any offset, also outside `low..high`: they copy nothing.
    let row_range = |row: usize| {
        let size = length(row);
        if size == 0 {
            (low, low)
        } else {
            let offset = view_offsets[row].as_usize();
            (offset, offset + size)
        }
    };
    compact(field, child, low, high, rows, dtype, row_range, options)
}

/// Copies the rows `row_range(0..rows)`, all inside `low..high` of `child`, one after another
/// into fresh values, with offsets of `dtype`.
#[allow(clippy::too_many_arguments)]
fn compact(
    field: &Field,
    child: &ArrayRef,
    low: usize,
    high: usize,
    rows: usize,
    dtype: DType,
    row_range: impl Fn(usize) -> (usize, usize),
    options: &ListToRaggedOptions,
) -> Result<RaggedTensor> {
    let base = element_tensor(field, child.slice(low, high - low), options)?;
    let inner = base.shape()[1..].to_vec();
    let element = element_bytes(base.dtype(), &inner)?;
    let source = row_major_bytes(&base)?;
    let source = source.as_slice();
    let total = (0..rows)
        .map(|row| {
            let (start, end) = row_range(row);
            end - start
        })
        .sum();
    let runs = (0..rows).map(|row| {
        let (start, end) = row_range(row);
        &source[(start - low) * element..(end - low) * element]
    });
    let values = gather(base.dtype(), &inner, total, runs)?;
    let offsets = offsets::from_lengths(
        (0..rows).map(|row| {
            let (start, end) = row_range(row);
            end - start
        }),
        dtype,
        "the list's rows",
    )?;
    RaggedTensor::from_immutable(values, offsets)
}

/// The elements `values` (a slice of the list's child array) as a tensor `(N, *inner)`:
/// `arrow.fixed_shape_tensor` elements with their cell shape, anything else through
/// [`array_to_tensor`]. Errors are restated for lists: null elements are one level down, and
/// copies are allowed by [`ListToRaggedOptions`].
fn element_tensor(
    field: &Field,
    values: ArrayRef,
    options: &ListToRaggedOptions,
) -> Result<Tensor> {
    let to_tensor = ArrayToTensorOptions {
        allow_nulls: options.allow_nulls,
        allow_copy: options.allow_copy,
    };
    let result = if field.extension_type_name() == Some(EXTENSION_NAME) {
        FixedShapeTensorArray::try_from_field_and_array(field, values)
            .and_then(|cells| cells.to_tensor(to_tensor))
    } else {
        array_to_tensor(values.as_ref(), to_tensor)
    };
    result.map_err(|error| match error {
        Error::Nulls {
            null_count,
            location: NullLocation::Array { depth },
        } => Error::Nulls {
            null_count,
            location: NullLocation::Array { depth: depth + 1 },
        },
        Error::CopyRequired { reason, .. } => Error::CopyRequired {
            reason,
            options: "ListToRaggedOptions",
        },
        other => other,
    })
}
