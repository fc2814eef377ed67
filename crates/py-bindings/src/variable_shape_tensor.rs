//! `arrow_dlpack.VariableShapeTensorArray`: an `arrow.variable_shape_tensor` column whose rows are
//! zero-copy tensors, each of its own shape.

use std::sync::Arc;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_dlpack::{
    ArrayToTensorOptions, PadValue, VariableShapePadOptions, VariableShapeTensorArray,
    VariableShapeTensorMetadata, VariableShapeTensorType,
};
use arrow_dlpack_tensor::Tensor;
use arrow_schema::extension::EXTENSION_TYPE_METADATA_KEY;
use pyo3::PyClassInitializer;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PySlice, PyTuple};

use crate::array::{PyArray, wrap_column};
use crate::column::Column;
use crate::conveniences::{self, Selection};
use crate::dlpack_import::{Devices, import_tensor};
use crate::errors::{self, Operation};
use crate::numpy;
use crate::pretty;
use crate::py_tensor::PyTensor;
use crate::type_names::{data_type_name, field_type_name};

/// What a `permutation` entry may be: an index of a dimension.
const PERMUTATION_ENTRIES: &str = "integers of 0 or more";

/// An array of tensors of one element type and rank, each of its own shape (the
/// `arrow.variable_shape_tensor` extension type).
#[pyclass(
    name = "VariableShapeTensorArray",
    module = "arrow_dlpack",
    extends = PyArray,
    frozen
)]
pub(crate) struct PyVariableShapeTensorArray {
    tensor_type: VariableShapeTensorType,
    /// Each chunk of the column, its rows checked when the array was made.
    chunks: Vec<VariableShapeTensorArray>,
    column: Column,
}

impl PyVariableShapeTensorArray {
    /// Wraps a column whose field says `arrow.variable_shape_tensor`, checking every chunk's
    /// rows (ArrowDLPackValueError for storage that does not hold what its shapes say).
    ///
    /// The field's metadata is rewritten in the specification's form when the producer wrote
    /// another (arrow-rs's key `permutations`, explicit nulls), so that an export hands PyArrow
    /// a permutation it reads.
    pub(crate) fn create(py: Python<'_>, column: Column) -> PyResult<Py<Self>> {
        let import_error = |error| errors::arrow_error(error, Operation::Import);
        let (tensor_type, chunks) = errors::no_panic("reading a variable-shape tensor", || {
            let tensor_type =
                VariableShapeTensorType::try_from_field(column.field()).map_err(import_error)?;
            let chunks = column
                .chunks
                .iter()
                .map(|chunk| match chunk.as_struct_opt() {
                    Some(storage) => {
                        VariableShapeTensorArray::try_new(tensor_type.clone(), storage.clone())
                            .map_err(import_error)
                    }
                    None => Err(errors::value_error(format!(
                        "invalid arrow.variable_shape_tensor: storage array has type {}; \
                         expected a struct array",
                        chunk.data_type()
                    ))),
                })
                .collect::<PyResult<Vec<_>>>()?;
            Ok((tensor_type, chunks))
        })?;
        let json = tensor_type.metadata_json();
        let column = if column.field().extension_type_metadata() == Some(json.as_str()) {
            column
        } else {
            let mut metadata = column.field().metadata().clone();
            metadata.insert(EXTENSION_TYPE_METADATA_KEY.to_string(), json);
            let field = column.field().as_ref().clone().with_metadata(metadata);
            Column::new(Arc::new(field), column.chunks)
        };
        let initializer = PyClassInitializer::from(PyArray::new(column.clone())).add_subclass(
            PyVariableShapeTensorArray {
                tensor_type,
                chunks,
                column,
            },
        );
        Py::new(py, initializer)
    }

    fn from_array(py: Python<'_>, array: VariableShapeTensorArray) -> PyResult<Py<Self>> {
        let (field, storage) = array.into_field_and_array("");
        Self::create(py, Column::new(Arc::new(field), vec![storage]))
    }

    /// The chunk that holds row `index` and the row's index inside it.
    fn locate(&self, index: usize) -> (&VariableShapeTensorArray, usize) {
        let mut index = index;
        for chunk in &self.chunks {
            if index < chunk.len() {
                return (chunk, index);
            }
            index -= chunk.len();
        }
        unreachable!("indexes are checked against the length first")
    }

    /// The tensor of row `position`, or None for a null row.
    fn row(&self, position: usize) -> PyResult<Option<Tensor>> {
        let (chunk, index) = self.locate(position);
        if chunk.is_null(index) {
            return Ok(None);
        }
        chunk
            .row_with(index, ArrayToTensorOptions::default())
            .map(Some)
            .map_err(|error| errors::arrow_error(error, Operation::ToTensor))
    }

    /// The chunks as one array (a copy when there are several).
    fn combined(&self) -> PyResult<VariableShapeTensorArray> {
        match self.chunks.as_slice() {
            [one] => Ok(one.clone()),
            _ => self
                .column
                .combined(true)
                .and_then(|storage| {
                    VariableShapeTensorArray::try_from_field_and_array(self.column.field(), storage)
                })
                .map_err(|error| errors::arrow_error(error, Operation::Import)),
        }
    }
}

#[pymethods]
impl PyVariableShapeTensorArray {
    /// The rows' shapes, as the class's repr shows them: `tensor of shape (2, 3)` or `null` per
    /// row (a row's elements are read with `array[i]`).
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let class = slf.get_type().qualname()?;
        let this = slf.get();
        let body = pretty::format_items(this.column.len(), |out, position| {
            let (chunk, index) = this.locate(position);
            if chunk.is_null(index) {
                out.push_str("null");
                return;
            }
            match chunk.logical_shape(index) {
                Ok(shape) => {
                    let extents: Vec<String> = shape.iter().map(usize::to_string).collect();
                    let comma = if extents.len() == 1 { "," } else { "" };
                    out.push_str(&format!("tensor of shape ({}{comma})", extents.join(", ")));
                }
                Err(error) => out.push_str(&format!("<{error}>")),
            }
        });
        Ok(format!(
            "<arrow_dlpack.{class} object at {:#x}>\ntype: {}\n{body}",
            slf.as_ptr() as usize,
            field_type_name(this.column.field())
        ))
    }

    /// `array[i]` is row `i` as a read-only zero-copy `Tensor` of its own shape (None for a null
    /// row; negative indexes count from the end; IndexError past the end); `array[a:b]` (any
    /// step) is an array of this class.
    ///
    /// Nulls among a row's elements raise ArrowDLPackValueError.
    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        if !key.is_instance_of::<PySlice>() {
            let position = conveniences::position(key, self.column.len())?;
            return match self.row(position)? {
                Some(tensor) => Ok(Py::new(py, PyTensor::new(tensor))?.into_any()),
                None => Ok(py.None()),
            };
        }
        match conveniences::select(py, &self.column.chunks, key)? {
            Selection::Chunks(chunks) => wrap_column(py, self.column.field().clone(), chunks),
            Selection::Value(value) => Ok(value.unbind()),
        }
    }

    /// Every row as a read-only zero-copy numpy array of its own shape (None for a null row).
    ///
    /// numpy is imported here, not with the package.
    fn to_numpy_ndarray<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let rows = (0..self.column.len())
            .map(|position| match self.row(position)? {
                None => Ok(py.None().into_bound(py)),
                Some(tensor) => {
                    let tensor = Bound::new(py, PyTensor::new(tensor))?;
                    numpy::from_dlpack(
                        tensor.as_any(),
                        true,
                        "VariableShapeTensorArray.to_numpy_ndarray()",
                    )
                }
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, rows)
    }

    /// numpy's `__array__(dtype=None, copy=None)`: an `object` array of one read-only numpy
    /// view per row, each of its own shape (None for a null row), as `to_numpy_ndarray()` lists
    /// them. `copy=False` raises ValueError: no single numpy array shares the rows' memory.
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = numpy::ArrayRequest { dtype, copy };
        let what = "a VariableShapeTensorArray";
        if copy == Some(false) {
            return numpy::rows_dunder(py, Vec::new(), request, what);
        }
        let rows = self
            .to_numpy_ndarray(py)?
            .iter()
            .map(|row| if row.is_none() { None } else { Some(row) })
            .collect();
        numpy::rows_dunder(py, rows, request, what)
    }

    /// Builds an array of `arrays` (numpy arrays or any DLPack producers of one dtype and
    /// rank; None for a null row), copying their elements into one buffer.
    ///
    /// With `permutation`, each array is the logical tensor and is stored in its physical
    /// order, so that `array[i]` gives it back; `dim_names` and `uniform_shape` describe the
    /// physical dimensions and are checked against every array (ArrowDLPackValueError).
    #[staticmethod]
    #[pyo3(signature = (arrays, *, dim_names = None, permutation = None, uniform_shape = None))]
    fn from_numpy_ndarray(
        py: Python<'_>,
        arrays: &Bound<'_, PyAny>,
        dim_names: Option<Vec<String>>,
        permutation: Option<Vec<Bound<'_, PyAny>>>,
        uniform_shape: Option<Vec<Option<Bound<'_, PyAny>>>>,
    ) -> PyResult<Py<Self>> {
        // Read as Python ints, so that a negative or huge entry (beyond any Rust integer) is a
        // ValueError naming the argument rather than an OverflowError.
        let out_of_range = |argument: &str, entry: &dyn std::fmt::Display, range: &str| {
            errors::value_error(format!("{argument} has entry {entry}; expected {range}"))
        };
        let wide = |argument: &str, entry: &Bound<'_, PyAny>, range: &str| -> PyResult<i64> {
            if entry.is_instance_of::<pyo3::types::PyBool>() {
                return Err(errors::type_error(format!(
                    "{argument} has entry {entry}, a bool; expected {range}"
                )));
            }
            match entry.extract::<i64>() {
                Ok(value) => Ok(value),
                Err(error) if error.is_instance_of::<pyo3::exceptions::PyOverflowError>(py) => {
                    Err(out_of_range(argument, entry, range))
                }
                Err(_) => Err(errors::type_error(format!(
                    "{argument} has an entry of type {}; expected {range}",
                    crate::type_names::type_name(entry)
                ))),
            }
        };
        let permutation = permutation
            .map(|entries| {
                entries
                    .into_iter()
                    .map(|entry| {
                        let value = wide("permutation", &entry, PERMUTATION_ENTRIES)?;
                        usize::try_from(value)
                            .map_err(|_| out_of_range("permutation", &value, PERMUTATION_ENTRIES))
                    })
                    .collect::<PyResult<Vec<usize>>>()
            })
            .transpose()?;
        let uniform_shape = uniform_shape
            .map(|entries| {
                entries
                    .into_iter()
                    .map(|entry| {
                        entry
                            .map(|extent| {
                                let range = "integers from 0 to 2147483647, or None";
                                let extent = wide("uniform_shape", &extent, range)?;
                                i32::try_from(extent)
                                    .map_err(|_| out_of_range("uniform_shape", &extent, range))
                            })
                            .transpose()
                    })
                    .collect::<PyResult<Vec<Option<i32>>>>()
            })
            .transpose()?;
        let tensors = arrays
            .try_iter()?
            .map(|item| {
                let item = item?;
                if item.is_none() {
                    Ok(None)
                } else {
                    import_tensor(&item, None, None, Devices::Cpu).map(Some)
                }
            })
            .collect::<PyResult<Vec<_>>>()?;
        let metadata = VariableShapeTensorMetadata {
            dim_names,
            permutation,
            uniform_shape,
        };
        let array = py
            .detach(|| VariableShapeTensorArray::from_optional_tensors(&tensors, metadata))
            .map_err(|error| errors::arrow_error(error, Operation::Import))?;
        Self::from_array(py, array)
    }

    /// Every row copied into one writable tensor of shape `(len, max_0, max_1, ...)` padded with
    /// `pad_value` (an int, float or bool; 0 when None), and the rows' shapes as a writable int32 tensor `(len, ndim)`.
    ///
    /// Null rows (all padding, shape zeros) and nulls among the elements raise
    /// ArrowDLPackValueError unless `allow_nulls=True`; a `pad_value` the dtype cannot hold
    /// exactly raises ArrowDLPackValueError.
    #[pyo3(signature = (pad_value = None, *, allow_nulls = false))]
    fn to_padded<'py>(
        &self,
        py: Python<'py>,
        pad_value: Option<&Bound<'py, PyAny>>,
        allow_nulls: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let array = self.combined()?;
        let options = VariableShapePadOptions {
            pad_value: pad_value
                .map(extract_pad_value)
                .transpose()?
                .unwrap_or_default(),
            allow_nulls,
        };
        let (padded, shapes) = py
            .detach(|| array.to_padded(options))
            .map_err(|error| errors::arrow_error(error, Operation::ToTensor))?;
        PyTuple::new(py, [PyTensor::new(padded), PyTensor::new(shapes)])
    }

    /// The rows as a ragged pair `(values, offsets)` when they differ only in their first
    /// dimension: values `(N, *inner)`, a zero-copy view of the data without a permutation, and
    /// offsets `(B + 1,)` (int32 when N fits); `torch.nested.nested_tensor_from_jagged(values,
    /// offsets)` takes them.
    ///
    /// Rows that differ beyond their first dimension, null rows, nulls among the elements
    /// (unless `allow_nulls=True`) and 0-d rows raise ArrowDLPackValueError; a permuted column
    /// is copied, or refused with ArrowDLPackBufferError when `copy=False`.
    #[pyo3(signature = (*, allow_nulls = false, copy = None))]
    fn to_ragged<'py>(
        &self,
        py: Python<'py>,
        allow_nulls: bool,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let array = self.combined()?;
        let options = ArrayToTensorOptions {
            allow_nulls,
            allow_copy: copy != Some(false),
        };
        let ragged = array
            .to_ragged(options)
            .map_err(|error| errors::arrow_error(error, Operation::ToTensor))?;
        let (values, offsets) = ragged.into_parts();
        PyTuple::new(py, [PyTensor::new(values), PyTensor::new(offsets)])
    }

    /// The shape of each row as `array[i].shape` gives it (the stored shape in logical order),
    /// None for a null row.
    #[getter]
    fn shapes(&self) -> PyResult<Vec<Option<Vec<usize>>>> {
        let mut shapes = Vec::with_capacity(self.column.len());
        for chunk in &self.chunks {
            for index in 0..chunk.len() {
                if chunk.is_null(index) {
                    shapes.push(None);
                } else {
                    let shape = chunk
                        .logical_shape(index)
                        .map_err(|error| errors::arrow_error(error, Operation::Import))?;
                    shapes.push(Some(shape));
                }
            }
        }
        Ok(shapes)
    }

    /// The number of dimensions of every tensor.
    #[getter]
    fn ndim(&self) -> usize {
        self.tensor_type.ndim()
    }

    /// The permutation from logical to physical dimensions, or None.
    #[getter]
    fn permutation(&self) -> Option<Vec<usize>> {
        self.tensor_type.permutation().map(<[usize]>::to_vec)
    }

    /// The names of the (physical) dimensions, or None.
    #[getter]
    fn dim_names(&self) -> Option<Vec<String>> {
        self.tensor_type.dim_names().map(<[String]>::to_vec)
    }

    /// Per physical dimension, the extent every row has, or None where it varies; None when the
    /// metadata has no uniform shape.
    #[getter]
    fn uniform_shape(&self) -> Option<Vec<Option<i32>>> {
        self.tensor_type
            .uniform_shape()
            .map(<[Option<i32>]>::to_vec)
    }

    /// The element type, named as PyArrow names it.
    #[getter]
    fn value_type(&self) -> String {
        data_type_name(self.tensor_type.value_type())
    }
}

/// A Python pad value: a bool, an int (in the range of int64 or uint64) or a float.
fn extract_pad_value(value: &Bound<'_, PyAny>) -> PyResult<PadValue> {
    if let Ok(flag) = value.cast::<PyBool>() {
        return Ok(PadValue::Bool(flag.is_true()));
    }
    // numpy's integer scalars are not `int`s but have `__index__`, as ListArray takes them.
    if value.is_instance_of::<PyInt>() || value.hasattr("__index__")? {
        if let Ok(signed) = value.extract::<i64>() {
            return Ok(PadValue::Int(signed));
        }
        if let Ok(unsigned) = value.extract::<u64>() {
            return Ok(PadValue::UInt(unsigned));
        }
        return Err(errors::value_error(format!(
            "pad value {value} is out of range; expected an integer that fits int64 or uint64"
        )));
    }
    if let Ok(float) = value.cast::<PyFloat>() {
        return Ok(PadValue::Float(float.value()));
    }
    // numpy's float32 and float16 scalars are not `float`s but convert like them.
    if value.hasattr("__float__")? {
        return Ok(PadValue::Float(value.extract::<f64>()?));
    }
    Err(PyTypeError::new_err(format!(
        "pad value {value:?} has type {}; expected an int, a float or a bool",
        value.get_type().name()?
    )))
}
