//! `arrow_dlpack.Array` and `arrow_dlpack.array()`: an Arrow column from any Arrow PyCapsule
//! producer, exchanged through DLPack and the Arrow PyCapsule interface without copying.

use std::borrow::Cow;
use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_dlpack::{
    ArrayToTensorOptions, EXTENSION_NAME, TensorToArrayOptions, VARIABLE_SHAPE_TENSOR_NAME,
    chunks_need_copy, tensor_to_array,
};
use arrow_dlpack_tensor::{DType, Tensor};
use arrow_schema::{DataType, Field, FieldRef};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyDict, PyList, PyTuple};

use crate::cache::Cache;
use crate::column::Column;
use crate::conveniences::{self, Selection};
use crate::dlpack_export::{DlpackSource, cpu_device};
use crate::dlpack_import::{Devices, import_tensor};
use crate::errors::{self, Operation};
use crate::fixed_shape_tensor::PyFixedShapeTensorArray;
use crate::list_array::PyListArray;
use crate::numpy::{self, ArrayFacts, ArrayRequest};
use crate::pickling;
use crate::pretty;
use crate::py_tensor::PyTensor;
use crate::type_names::field_type_name;
use crate::variable_shape_tensor::PyVariableShapeTensorArray;
use crate::{arrow_device, arrow_ffi};

/// An Arrow array (one column, possibly in several chunks) that speaks DLPack.
#[pyclass(name = "Array", module = "arrow_dlpack", subclass, frozen)]
pub(crate) struct PyArray {
    column: Column,
}

impl PyArray {
    pub(crate) fn new(column: Column) -> Self {
        PyArray { column }
    }

    pub(crate) fn column(&self) -> &Column {
        &self.column
    }

    /// What numpy's conversions need to know of the array.
    fn facts(&self) -> ArrayFacts<'_> {
        ArrayFacts {
            data_type: self.column.field.data_type(),
            len: self.column.len(),
            null_count: self.null_count(),
            needs_concat: chunks_need_copy(&self.column.chunks),
            chunks: &self.column.chunks,
        }
    }

    /// The array of an imported 1-D tensor, shared; `copy` as in `from_dlpack`.
    pub(crate) fn from_tensor(
        py: Python<'_>,
        tensor: &Tensor,
        copy: Option<bool>,
    ) -> PyResult<Self> {
        // Packing a bool tensor into Arrow's bits is the one copy `copy=None` needs; a strided
        // tensor is refused unless `copy=True` (which has already compacted it).
        let allow_copy = match copy {
            Some(allow) => allow,
            None => tensor.dtype() == DType::Bool,
        };
        let array = tensor_to_array(tensor, TensorToArrayOptions { allow_copy })
            .map_err(|error| errors::arrow_error(error, Operation::Import))?;
        let field = unnamed_field(py, array.data_type());
        Ok(PyArray::new(Column::new(field, vec![array])))
    }
}

/// The unnamed, nullable field of an imported tensor's type, shared for the few types a tensor
/// gives: a field and its `Arc` made on every import were a tenth of the array's part of
/// `Array.from_dlpack(np_array)` (perf).
fn unnamed_field(py: Python<'_>, data_type: &DataType) -> FieldRef {
    /// A tensor gives one of about a dozen types.
    static FIELDS: Cache<DataType, FieldRef, 32> = Cache::new();
    if let Some(field) = FIELDS.get(py, data_type) {
        return field;
    }
    FIELDS.insert(
        py,
        data_type.clone(),
        Arc::new(Field::new("", data_type.clone(), true)),
    )
}

/// Wraps an imported column: an `arrow.fixed_shape_tensor` field gives a `FixedShapeTensorArray`,
/// an `arrow.variable_shape_tensor` field a `VariableShapeTensorArray`, a variable-length list
/// (`list`, `large_list` and their views) a `ListArray`.
pub(crate) fn wrap_column(
    py: Python<'_>,
    field: FieldRef,
    chunks: Vec<ArrayRef>,
) -> PyResult<Py<PyAny>> {
    if field.extension_type_name() == Some(EXTENSION_NAME) {
        let tensor_type = arrow_ffi::tensor_type(py, &field)
            .map_err(|error| errors::arrow_error(error, Operation::Import))?;
        let column = Column::new(field, chunks);
        return Ok(PyFixedShapeTensorArray::create(py, column, tensor_type)?.into_any());
    }
    if field.extension_type_name() == Some(VARIABLE_SHAPE_TENSOR_NAME) {
        let column = Column::new(field, chunks);
        return Ok(PyVariableShapeTensorArray::create(py, column)?.into_any());
    }
    if matches!(
        field.data_type(),
        DataType::List(_)
            | DataType::LargeList(_)
            | DataType::ListView(_)
            | DataType::LargeListView(_)
    ) {
        return Ok(PyListArray::create(py, Column::new(field, chunks))?.into_any());
    }
    Ok(Py::new(py, PyArray::new(Column::new(field, chunks)))?.into_any())
}

/// The array that `Array.__reduce__` pickled: the class its field gives.
#[pyfunction]
#[pyo3(signature = (data, /))]
pub(crate) fn _array_from_ipc(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let (field, chunks) = pickling::column_from_ipc(data)?;
    // The stream's field may carry extension metadata that does not describe its storage.
    wrap_column(py, field, chunks)
        .map_err(|error| errors::with_context(py, error, "cannot unpickle Array"))
}

/// Imports any object with `__arrow_c_array__` or `__arrow_c_stream__` (pyarrow Array and
/// ChunkedArray, polars Series, nanoarrow, arro3, ...) without copying.
///
/// An `arrow.fixed_shape_tensor` column gives a `FixedShapeTensorArray`, an
/// `arrow.variable_shape_tensor` column a `VariableShapeTensorArray`, a variable-length list
/// column a `ListArray`.
///
/// An `arrow_dlpack` array is taken as it is (its chunks shared, without the C interfaces).
#[pyfunction]
pub(crate) fn array(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    if let Ok(ours) = obj.cast::<PyArray>() {
        let column = ours.get().column();
        return wrap_column(py, column.field.clone(), column.chunks.clone());
    }
    let methods = arrow_ffi::Methods::of(obj);
    let imported = match arrow_device::import_with(&methods)? {
        Some(arrow_device::DeviceImported::Device(tensor, event)) => {
            return Ok(Py::new(py, PyTensor::with_sync_event(tensor, event))?.into_any());
        }
        Some(arrow_device::DeviceImported::Host(imported)) => imported,
        None => arrow_ffi::import_cpu_with(&methods)?,
    };
    wrap_column(py, imported.field, imported.chunks)
}

/// Whether `==` compares with `other` by content: an array of this package, or any producer of
/// Arrow arrays or streams (pyarrow, polars, nanoarrow, arro3).
fn is_arrow_array(other: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(other.cast::<PyArray>().is_ok()
        || other.hasattr("__arrow_c_array__")?
        || other.hasattr("__arrow_c_stream__")?)
}

impl DlpackSource for PyArray {
    fn dlpack_tensor(&self, allow_copy: bool) -> PyResult<(Cow<'_, Tensor>, bool)> {
        self.column
            .export_tensor(allow_copy, |allow_copy| {
                self.column.tensor_with(ArrayToTensorOptions {
                    allow_nulls: false,
                    allow_copy,
                })
            })
            .map_err(|error| errors::arrow_error(error, Operation::Export))
    }

    fn shared_tensor(&self) -> Option<&Tensor> {
        self.column.shared_export()
    }
}

#[pymethods]
impl PyArray {
    /// Imports a 1-D contiguous DLPack tensor without copying.
    #[staticmethod]
    #[pyo3(signature = (x, /, *, device = None, copy = None))]
    fn from_dlpack(
        x: &Bound<'_, PyAny>,
        device: Option<&Bound<'_, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Self> {
        let tensor = import_tensor(x, device, copy, Devices::Cpu)?;
        PyArray::from_tensor(x.py(), &tensor, copy)
    }

    // `__dlpack__` is the raw method of `dlpack_method`, installed on the class at import.

    /// Pickles a copy: the column as an Arrow IPC stream (type, chunks, nulls and extension
    /// metadata kept), unpickled as the same class. Shared by every subclass.
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let data = pickling::column_to_ipc(py, &self.column)?;
        let rebuild = py
            .import("arrow_dlpack._arrow_dlpack")?
            .getattr("_array_from_ipc")?;
        Ok((rebuild, (data,)))
    }

    /// The DLPack device of the data: always `(1, 0)`, the CPU.
    fn __dlpack_device__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        cpu_device(py)
    }

    /// The Arrow schema of the array as an `arrow_schema` capsule (extension metadata included).
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        arrow_ffi::schema_capsule(py, &self.column.field)
    }

    /// The array as (`arrow_schema`, `arrow_array`) capsules, zero-copy for one chunk.
    ///
    /// `requested_schema` is accepted and ignored, as the interface allows: the array is given in
    /// its own type.
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema;
        let array = self
            .column
            .combined(true)
            .map_err(|error| errors::arrow_error(error, Operation::Import))?;
        let schema = arrow_ffi::schema_capsule(py, &self.column.field)?;
        let array = arrow_ffi::array_capsule(py, array.as_ref())?;
        PyTuple::new(py, [schema, array])
    }

    /// The array as an `arrow_array_stream` capsule that hands out its chunks one by one,
    /// zero-copy (extension metadata included), so that `pa.chunked_array(obj)`, polars and other
    /// stream consumers keep the chunks.
    ///
    /// `requested_schema` is accepted and ignored, as the interface allows.
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        arrow_ffi::stream_capsule(py, &self.column.field, &self.column.chunks)
    }

    /// The array as (`arrow_schema`, `arrow_device_array`) capsules of CPU data (device id -1, no
    /// sync event, as in PyArrow), zero-copy for one chunk; keywords other than None are refused.
    #[pyo3(signature = (requested_schema = None, **kwargs))]
    fn __arrow_c_device_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema;
        crate::arrow_device::check_kwargs(kwargs)?;
        let array = self
            .column
            .combined(true)
            .map_err(|error| errors::arrow_error(error, Operation::Import))?;
        let schema = arrow_ffi::schema_capsule(py, &self.column.field)?;
        let array = crate::arrow_device::cpu_array_capsule(py, array.as_ref())?;
        PyTuple::new(py, [schema, array])
    }

    /// The chunks as an `arrow_device_array_stream` capsule of CPU data, zero-copy.
    #[pyo3(signature = (requested_schema = None, **kwargs))]
    fn __arrow_c_device_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        crate::arrow_device::check_kwargs(kwargs)?;
        crate::arrow_device::cpu_stream_capsule(py, &self.column.field, &self.column.chunks)
    }

    /// The number of chunks (0 for an empty stream).
    #[getter]
    fn num_chunks(&self) -> usize {
        self.column.chunks.len()
    }

    /// The chunks, each an array of this class sharing its memory.
    #[getter]
    fn chunks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let chunks = self
            .column
            .chunks
            .iter()
            .map(|chunk| wrap_column(py, self.column.field.clone(), vec![chunk.clone()]))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, chunks)
    }

    /// The validity of each element as a 1-D `bool` tensor: true where the element is valid,
    /// false where it is null (all true without nulls).
    ///
    /// A copy (Arrow validity is bit-packed), writable, beside the values of
    /// `to_tensor(allow_nulls=True)`; several chunks give one tensor.
    fn validity(&self) -> PyResult<PyTensor> {
        self.column
            .validity()
            .map(PyTensor::new)
            .map_err(|error| errors::arrow_error(error, Operation::ToTensor))
    }

    /// A tensor view of the array: 1-D for primitive arrays, n-D for (nested) fixed-size lists.
    ///
    /// Nulls are refused with a ValueError unless `allow_nulls=True`; null slots then hold
    /// unspecified values.
    #[pyo3(signature = (*, allow_nulls = false))]
    fn to_tensor(&self, allow_nulls: bool) -> PyResult<PyTensor> {
        let tensor = self
            .column
            .tensor_with(ArrayToTensorOptions {
                allow_nulls,
                allow_copy: true,
            })
            .map_err(|error| errors::arrow_error(error, Operation::ToTensor))?;
        Ok(PyTensor::new(tensor))
    }

    /// The Arrow type, named as PyArrow names it (`int64`, `float`,
    /// `fixed_size_list<item: int32>[2]`, ...).
    #[getter]
    fn r#type(&self) -> String {
        field_type_name(&self.column.field)
    }

    /// The number of null elements.
    #[getter]
    fn null_count(&self) -> usize {
        self.column
            .chunks
            .iter()
            .map(|chunk| chunk.null_count())
            .sum()
    }

    fn __len__(&self) -> usize {
        self.column.len()
    }

    /// PyArrow's `to_numpy`: a read-only zero-copy view of a numeric array without nulls in one
    /// chunk; what needs a copy is refused with a ValueError unless `zero_copy_only=False`
    /// (see `numpy::array_to_numpy`). numpy is imported here, not with the package.
    #[pyo3(signature = (zero_copy_only = true, writable = false))]
    fn to_numpy<'py>(
        slf: &Bound<'py, Self>,
        zero_copy_only: bool,
        writable: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let facts = slf.get().facts();
        numpy::array_to_numpy(slf.as_any(), facts, zero_copy_only, writable)
    }

    /// numpy's `__array__(dtype=None, copy=None)`, as PyArrow's: `to_numpy(zero_copy_only=False)`
    /// (a read-only view of a numeric array without nulls in one chunk; nulls as NaN, booleans
    /// as `bool`, other types as `object` arrays), cast to `dtype`; `copy=True` always copies
    /// and `copy=False` raises ValueError where a copy is needed. `np.asarray(array)` and
    /// `jnp.asarray(array)` call it.
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        slf: &Bound<'py, Self>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let facts = slf.get().facts();
        numpy::array_dunder(slf.as_any(), facts, ArrayRequest { dtype, copy })
    }

    /// `array == other` is `equals(other)` for another array of this package or any Arrow
    /// producer (a bool, as PyArrow's `Array.__eq__`); anything else is NotImplemented, so that
    /// numpy compares element by element. Arrays are unhashable, as PyArrow's are.
    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        if !is_arrow_array(other)? {
            return Ok(py.NotImplemented());
        }
        Ok(pyo3::types::PyBool::new(py, self.equals(other)?)
            .to_owned()
            .into_any()
            .unbind())
    }

    /// `array != other`: the negation of `==` (NotImplemented where `==` is).
    fn __ne__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        if !is_arrow_array(other)? {
            return Ok(py.NotImplemented());
        }
        Ok(pyo3::types::PyBool::new(py, !self.equals(other)?)
            .to_owned()
            .into_any()
            .unbind())
    }

    /// The elements `offset..offset + length` (to the end when `length` is None), zero-copy
    /// across chunks, as an array of this class; a range past the end is clamped.
    ///
    /// A negative offset raises IndexError and a negative length ValueError, as in PyArrow.
    #[pyo3(signature = (offset = 0, length = None))]
    fn slice(&self, py: Python<'_>, offset: isize, length: Option<isize>) -> PyResult<Py<PyAny>> {
        let (offset, length) = conveniences::slice_arguments(offset, length)?;
        let chunks = conveniences::slice_chunks(&self.column.chunks, offset, length);
        wrap_column(py, self.column.field.clone(), chunks)
    }

    /// `array[i]` is the element as a Python value (None for a null); `array[a:b]` a zero-copy
    /// slice, and `array[a:b:step]` a copy of the selected elements, as arrays of this class.
    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        match conveniences::select(py, &self.column.chunks, key)? {
            Selection::Chunks(chunks) => wrap_column(py, self.column.field.clone(), chunks),
            Selection::Value(value) => Ok(value.unbind()),
        }
    }

    /// The bytes that the elements reference (values, validity, children), counted as PyArrow
    /// counts them for sliced arrays.
    #[getter]
    fn nbytes(&self) -> PyResult<usize> {
        conveniences::referenced_bytes(&self.column.chunks)
    }

    /// Whether `other` (an array of this package or any Arrow producer) has the same type and
    /// values; the chunk layout does not matter, NaN is unequal to itself, as in PyArrow.
    fn equals(&self, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let other = match other.cast::<PyArray>() {
            Ok(ours) => ours.get().column.clone(),
            Err(_) => {
                let imported = arrow_device::import_readable(other)?;
                Column::new(imported.field, imported.chunks)
            }
        };
        conveniences::columns_equal(
            &self.column.field,
            &self.column.chunks,
            &other.field,
            &other.chunks,
        )
    }

    /// A boolean array, True where the element is null (or NaN, with `nan_is_null=True`).
    #[pyo3(signature = (*, nan_is_null = false))]
    fn is_null(&self, nan_is_null: bool) -> PyResult<PyArray> {
        let chunks = conveniences::validity_chunks(&self.column.chunks, false, nan_is_null)?;
        Ok(PyArray::new(Column::new(
            conveniences::boolean_field(),
            chunks,
        )))
    }

    /// A boolean array, True where the element is valid (not null).
    fn is_valid(&self) -> PyResult<PyArray> {
        let chunks = conveniences::validity_chunks(&self.column.chunks, true, false)?;
        Ok(PyArray::new(Column::new(
            conveniences::boolean_field(),
            chunks,
        )))
    }

    /// The elements as Python objects; nulls are None.
    fn to_pylist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        pretty::to_pylist(py, &self.column.chunks)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let class = slf.get_type().qualname()?;
        Ok(format!(
            "<arrow_dlpack.{class} object at {:#x}>\n{}",
            slf.as_ptr() as usize,
            pretty::format_chunks(&slf.get().column.chunks)
        ))
    }
}
