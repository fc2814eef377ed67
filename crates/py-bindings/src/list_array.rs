//! `arrow_dlpack.ListArray`: a variable-length list column (`list`, `large_list`, `list_view`,
//! `large_list_view`) as a ragged tensor: values and offsets, padded, packed or jagged.
//!
//! The conversions are `arrow_dlpack`'s ragged module; this file parses arguments, keeps the
//! chunks apart where a kernel takes pieces (padding, packing) and concatenates them only where
//! one tensor is asked for (`values`, `offsets`, `to_jagged`), and runs large kernels without
//! the GIL.

use std::sync::{Arc, OnceLock};

use arrow_array::{Array, ArrayRef};
use arrow_dlpack::{
    Error, ListToRaggedOptions, PadOptions, PadValue, RaggedTensor, Side, list_to_ragged,
    pack_pieces, pad_pieces,
};
use arrow_dlpack_tensor::alloc::PooledVec;
use arrow_dlpack_tensor::{DType, Tensor};
use arrow_schema::Field;
use pyo3::PyClassInitializer;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PySlice, PyTuple};

use crate::array::PyArray;
use crate::column::Column;
use crate::copies::without_gil_if_large;
use crate::dlpack_import::{Devices, import_tensor};
use crate::errors::{self, Operation};
use crate::numpy;
use crate::py_tensor::PyTensor;

/// A variable-length list column as a ragged tensor.
#[pyclass(name = "ListArray", module = "arrow_dlpack", extends = PyArray, frozen)]
pub(crate) struct PyListArray {
    /// The base class's column, shared (cheaply).
    column: Column,
    /// The ragged tensor of the whole column, made on first use, without and with null rows
    /// allowed; read-only, since every caller shares it.
    ragged: [OnceLock<RaggedTensor>; 2],
}

impl PyListArray {
    /// Wraps a column whose type is a list, large list, list view or large list view.
    pub(crate) fn create(py: Python<'_>, column: Column) -> PyResult<Py<Self>> {
        let initializer =
            PyClassInitializer::from(PyArray::new(column.clone())).add_subclass(PyListArray {
                column,
                ragged: [OnceLock::new(), OnceLock::new()],
            });
        Py::new(py, initializer)
    }

    /// A list array of `ragged`'s rows (one chunk, sharing the tensors' buffers).
    fn from_ragged(py: Python<'_>, ragged: &RaggedTensor) -> PyResult<Py<Self>> {
        let array = ragged
            .to_list_array()
            .map_err(|error| errors::arrow_error(error, Operation::Import))?;
        let field = Arc::new(Field::new("", array.data_type().clone(), true));
        Self::create(py, Column::new(field, vec![array]))
    }

    /// The bytes the column references: decides whether a kernel runs without the GIL.
    fn bytes(&self) -> usize {
        self.column
            .chunks
            .iter()
            .map(|chunk| chunk.get_buffer_memory_size())
            .sum()
    }

    /// The whole column as one ragged tensor: the one chunk's view, or the chunks concatenated
    /// (a copy), remembered.
    fn ragged(&self, py: Python<'_>, allow_nulls: bool) -> PyResult<RaggedTensor> {
        let slot = &self.ragged[usize::from(allow_nulls)];
        if let Some(ragged) = slot.get() {
            return Ok(ragged.clone());
        }
        let chunks = &self.column.chunks;
        let field = &self.column.field;
        // Offsets come from foreign memory: they are checked, and a panic the checks missed is
        // still an exception, never pyo3's PanicException.
        let made = errors::no_panic("reading a list column", || {
            without_gil_if_large(py, self.bytes(), || {
                let pieces = pieces(field, chunks, allow_nulls)?;
                // Shared by every later call, so never writable (a concatenation is fresh
                // memory).
                Ok(RaggedTensor::concat(&pieces)?.into_read_only())
            })
            .map_err(|error| errors::arrow_error(error, Operation::ToTensor))
        })?;
        Ok(slot.get_or_init(|| made).clone())
    }

    /// Runs `kernel` over the column's pieces (one per chunk), without the GIL when large.
    fn with_pieces<T: Send>(
        &self,
        py: Python<'_>,
        allow_nulls: bool,
        kernel: impl FnOnce(&[RaggedTensor]) -> arrow_dlpack::Result<T> + Send,
    ) -> PyResult<T> {
        let chunks = &self.column.chunks;
        let field = &self.column.field;
        errors::no_panic("reading a list column", || {
            without_gil_if_large(py, self.bytes(), || {
                kernel(&pieces(field, chunks, allow_nulls)?)
            })
            .map_err(|error| errors::arrow_error(error, Operation::ToTensor))
        })
    }
}

/// One ragged tensor per chunk (one empty one for a column without chunks); copies allowed
/// (booleans, list views out of order, null rows that cover elements). A null row's position is
/// reported in the whole column.
fn pieces(
    field: &Arc<Field>,
    chunks: &[ArrayRef],
    allow_nulls: bool,
) -> arrow_dlpack::Result<Vec<RaggedTensor>> {
    let options = ListToRaggedOptions {
        allow_nulls,
        allow_copy: true,
    };
    if chunks.is_empty() {
        let empty = arrow_array::new_empty_array(field.data_type());
        return Ok(vec![list_to_ragged(empty.as_ref(), options)?]);
    }
    let mut start = 0;
    chunks
        .iter()
        .map(|chunk| {
            let piece = list_to_ragged(chunk.as_ref(), options).map_err(|error| match error {
                Error::NullRow { row, .. } => Error::NullRow {
                    row: start + row,
                    null_count: chunks.iter().map(|chunk| chunk.null_count()).sum(),
                },
                other => other,
            });
            start += chunk.len();
            piece
        })
        .collect()
}

/// A side named in Python: `"left"` or `"right"`.
fn side(name: &str, argument: &str) -> PyResult<Side> {
    match name {
        "left" => Ok(Side::Left),
        "right" => Ok(Side::Right),
        other => Err(errors::value_error(format!(
            "{argument} is {other:?}; expected \"left\" or \"right\""
        ))),
    }
}

/// A pad value from Python: a bool, an int (within 64 bits, signed or not) or a float.
fn pad_value(value: &Bound<'_, PyAny>) -> PyResult<PadValue> {
    if let Ok(flag) = value.cast::<PyBool>() {
        return Ok(PadValue::Bool(flag.is_true()));
    }
    if value.is_instance_of::<PyFloat>() {
        return Ok(PadValue::Float(value.extract::<f64>()?));
    }
    if let Ok(int) = value.extract::<i64>() {
        return Ok(PadValue::Int(int));
    }
    if let Ok(int) = value.extract::<u64>() {
        return Ok(PadValue::UInt(int));
    }
    if value.hasattr("__index__")? {
        return Err(errors::value_error(format!(
            "pad_value {value} does not fit 64 bits; expected an integer in \
             -9223372036854775808..=18446744073709551615"
        )));
    }
    if let Ok(float) = value.extract::<f64>() {
        return Ok(PadValue::Float(float));
    }
    Err(errors::type_error(format!(
        "pad_value must be a bool, an int or a float, not {}",
        value.get_type().name()?
    )))
}

/// A length argument that may be None: a non-negative int (ValueError for a negative one or one
/// beyond 64 bits, not OverflowError).
fn length(value: Option<&Bound<'_, PyAny>>, argument: &str) -> PyResult<Option<usize>> {
    let Some(value) = value else {
        return Ok(None);
    };
    let refuse = || {
        errors::value_error(format!(
            "{argument} is {value}; expected a non-negative integer or None"
        ))
    };
    match value.extract::<i64>() {
        Ok(int) => usize::try_from(int).map(Some).map_err(|_| refuse()),
        Err(_) if value.is_instance_of::<PyInt>() => Err(refuse()),
        Err(error) => Err(error),
    }
}

/// Imports a DLPack producer (any, or an `arrow_dlpack.Tensor`) as a host tensor.
fn tensor_of(object: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    match object.cast::<PyTensor>() {
        Ok(ours) => Ok(ours.get().tensor().clone()),
        Err(_) => import_tensor(object, None, None, Devices::Cpu),
    }
}

/// The offsets as int64, as `torch.nested.nested_tensor_from_jagged` takes them.
fn int64_offsets(ragged: &RaggedTensor) -> arrow_dlpack::Result<Tensor> {
    let offsets = ragged.offsets();
    if offsets.dtype() == DType::Int64 {
        return Ok(offsets.clone());
    }
    // Fallible: `B` comes from the input.
    let len = offsets.len();
    let mut widened = PooledVec::<i64>::try_with_capacity(len)?;
    widened.extend(offsets.iter::<i32>()?.map(i64::from));
    Ok(
        Tensor::try_new_row_major(widened.into_buffer(), DType::Int64, vec![len])?
            .with_read_only(false),
    )
}

#[pymethods]
impl PyListArray {
    /// The elements of all rows, one after another: shape `(N, *inner)`, a zero-copy view of
    /// the referenced elements for one chunk (a copy joins several). Null rows raise
    /// ValueError; the methods with `allow_nulls=True` read them as empty.
    #[getter]
    fn values(&self, py: Python<'_>) -> PyResult<PyTensor> {
        Ok(PyTensor::new(self.ragged(py, false)?.values().clone()))
    }

    /// The offsets `(B + 1,)`, int32 for `list` and `list_view`, int64 for the large types,
    /// starting at 0: row `i` is `values[offsets[i]:offsets[i + 1]]`.
    #[getter]
    fn offsets(&self, py: Python<'_>) -> PyResult<PyTensor> {
        Ok(PyTensor::new(self.ragged(py, false)?.offsets().clone()))
    }

    /// The length of every row, int64 `(B,)`; null rows are 0 with `allow_nulls=True`.
    #[pyo3(signature = (*, allow_nulls = false))]
    fn lengths(&self, py: Python<'_>, allow_nulls: bool) -> PyResult<PyTensor> {
        let lengths = self
            .ragged(py, allow_nulls)?
            .lengths()
            .map_err(|error| errors::arrow_error(error, Operation::ToTensor))?;
        Ok(PyTensor::new(lengths))
    }

    /// The rows padded into a fresh tensor `(B, L, *inner)`; L is the longest row after
    /// truncation to `max_length`, rounded up to `pad_to_multiple_of`.
    #[pyo3(signature = (
        pad_value = None,
        *,
        max_length = None,
        pad_to_multiple_of = None,
        padding_side = "right",
        truncation_side = "right",
        allow_nulls = false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn to_padded(
        &self,
        py: Python<'_>,
        pad_value: Option<&Bound<'_, PyAny>>,
        max_length: Option<&Bound<'_, PyAny>>,
        pad_to_multiple_of: Option<&Bound<'_, PyAny>>,
        padding_side: &str,
        truncation_side: &str,
        allow_nulls: bool,
    ) -> PyResult<PyTensor> {
        let options = PadOptions {
            pad_value: pad_value
                .map(self::pad_value)
                .transpose()?
                .unwrap_or_default(),
            max_length: length(max_length, "max_length")?,
            pad_to_multiple_of: length(pad_to_multiple_of, "pad_to_multiple_of")?,
            padding_side: side(padding_side, "padding_side")?,
            truncation_side: side(truncation_side, "truncation_side")?,
        };
        let padded = self.with_pieces(py, allow_nulls, |pieces| pad_pieces(pieces, &options))?;
        Ok(PyTensor::new(padded))
    }

    /// The rows packed for varlen attention: a dict with "values" `(N, *inner)`,
    /// "cu_seqlens" (int32, `(B + 1,)`), "position_ids" (int64, `(N,)`, restarting at 0 in every
    /// row) and "max_seqlen" (an int).
    #[pyo3(signature = (*, allow_nulls = false))]
    fn to_packed<'py>(&self, py: Python<'py>, allow_nulls: bool) -> PyResult<Bound<'py, PyDict>> {
        let packed = self.with_pieces(py, allow_nulls, pack_pieces)?;
        let dict = PyDict::new(py);
        dict.set_item("values", PyTensor::new(packed.values))?;
        dict.set_item("cu_seqlens", PyTensor::new(packed.cu_seqlens))?;
        dict.set_item("position_ids", PyTensor::new(packed.position_ids))?;
        dict.set_item("max_seqlen", packed.max_seqlen)?;
        Ok(dict)
    }

    /// `(values, offsets)` for `torch.nested.nested_tensor_from_jagged`: the values as
    /// `values`, the offsets as int64 (widened from int32, a copy of `B + 1` integers).
    #[pyo3(signature = (*, allow_nulls = false))]
    fn to_jagged<'py>(&self, py: Python<'py>, allow_nulls: bool) -> PyResult<Bound<'py, PyTuple>> {
        let ragged = self.ragged(py, allow_nulls)?;
        let offsets = int64_offsets(&ragged)
            .map_err(|error| errors::arrow_error(error, Operation::ToTensor))?;
        PyTuple::new(
            py,
            [
                Bound::new(py, PyTensor::new(ragged.values().clone()))?,
                Bound::new(py, PyTensor::new(offsets))?,
            ],
        )
    }

    /// numpy's `__array__(dtype=None, copy=None)`, as PyArrow's for list arrays: an `object`
    /// array of `B` rows, each a read-only numpy view of its elements `(length, *inner)`, None
    /// for a null row. `copy=False` raises ValueError: the rows are ragged, so no single numpy
    /// array shares the column's memory (`values`, `offsets` and `to_padded()` give tensors).
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = numpy::ArrayRequest { dtype, copy };
        if copy == Some(false) {
            return numpy::rows_dunder(py, Vec::new(), request, "a ListArray");
        }
        let ragged = self.ragged(py, true)?;
        let values = Bound::new(py, PyTensor::new(ragged.values().clone()))?;
        let values = numpy::from_dlpack(values.as_any(), true, "ListArray.__array__()")?;
        let bounds: Vec<usize> = match ragged.offsets().dtype() {
            DType::Int32 => ragged
                .offsets()
                .iter::<i32>()
                .map_err(errors::tensor_error)?
                .map(|offset| offset as usize)
                .collect(),
            _ => ragged
                .offsets()
                .iter::<i64>()
                .map_err(errors::tensor_error)?
                .map(|offset| offset as usize)
                .collect(),
        };
        let nulls = self
            .column
            .chunks
            .iter()
            .flat_map(|chunk| (0..chunk.len()).map(move |index| chunk.is_null(index)));
        let rows = bounds
            .windows(2)
            .zip(nulls)
            .map(|(bounds, null)| {
                if null {
                    return Ok(None);
                }
                let slice = PySlice::new(py, bounds[0] as isize, bounds[1] as isize, 1);
                values.get_item(slice).map(Some)
            })
            .collect::<PyResult<Vec<_>>>()?;
        numpy::rows_dunder(py, rows, request, "a ListArray")
    }

    /// A list array from values `(N, *inner)` and offsets `(B + 1,)` (int32 gives `list`, int64
    /// `large_list`), both DLPack producers; zero-copy for row-major values, while the offsets
    /// are copied (`B + 1` integers), so that writing into the caller's offsets afterwards
    /// changes nothing. Offsets that do not start at 0, decrease or do not end at N raise
    /// ValueError.
    #[staticmethod]
    fn from_offsets(
        py: Python<'_>,
        values: &Bound<'_, PyAny>,
        offsets: &Bound<'_, PyAny>,
    ) -> PyResult<Py<Self>> {
        let ragged = RaggedTensor::new(tensor_of(values)?, tensor_of(offsets)?)
            .map_err(|error| errors::arrow_error(error, Operation::Import))?;
        Self::from_ragged(py, &ragged)
    }

    /// A list array of the rows of a padded tensor `(B, L, *inner)`: row `b` is its first
    /// `lengths[b]` elements (`padding_side="right"`) or its last ones (`"left"`). A copy.
    #[staticmethod]
    #[pyo3(signature = (tensor, lengths, *, padding_side = "right"))]
    fn from_padded(
        py: Python<'_>,
        tensor: &Bound<'_, PyAny>,
        lengths: &Bound<'_, PyAny>,
        padding_side: &str,
    ) -> PyResult<Py<Self>> {
        let side = side(padding_side, "padding_side")?;
        let (padded, lengths) = (tensor_of(tensor)?, tensor_of(lengths)?);
        let bytes = crate::copies::tensor_bytes(&padded);
        let ragged = without_gil_if_large(py, bytes, || {
            RaggedTensor::from_padded(&padded, &lengths, side)
        })
        .map_err(|error| errors::arrow_error(error, Operation::Import))?;
        Self::from_ragged(py, &ragged)
    }

    /// A list array of `tensors` (DLPack producers of shape `(length_i, *inner)`, one dtype and
    /// element shape), one row each. A copy.
    #[staticmethod]
    fn from_tensors(py: Python<'_>, tensors: &Bound<'_, PyList>) -> PyResult<Py<Self>> {
        let rows = tensors
            .iter()
            .map(|row| tensor_of(&row))
            .collect::<PyResult<Vec<_>>>()?;
        let bytes = rows.iter().map(crate::copies::tensor_bytes).sum();
        let ragged = without_gil_if_large(py, bytes, || RaggedTensor::from_rows(&rows))
            .map_err(|error| errors::arrow_error(error, Operation::Import))?;
        Self::from_ragged(py, &ragged)
    }
}
