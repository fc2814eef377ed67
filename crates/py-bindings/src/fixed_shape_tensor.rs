//! `arrow_dlpack.FixedShapeTensorArray`: an `arrow.fixed_shape_tensor` column whose DLPack export
//! is the whole `(len, *cell_shape)` tensor.

use std::borrow::Cow;
use std::sync::Arc;

use arrow_array::Array;
use arrow_dlpack::{
    ArrayToTensorOptions, FixedShapeTensorArray, FixedShapeTensorType, TensorToArrayOptions,
};
use arrow_dlpack_tensor::Tensor;
use arrow_schema::{DataType, FieldRef};
use pyo3::PyClassInitializer;
use pyo3::prelude::*;
use pyo3::types::PySlice;

use crate::array::{PyArray, wrap_column};
use crate::cache::Cache;
use crate::column::Column;
use crate::conveniences::{self, Selection};
use crate::dlpack_export::{self, DlpackSource};
use crate::dlpack_import::{Devices, import_tensor};
use crate::errors::{self, Operation};
use crate::numpy;
use crate::py_tensor::PyTensor;
use crate::type_names::data_type_name;

/// An array of tensors of one shape (the `arrow.fixed_shape_tensor` canonical extension type).
#[pyclass(
    name = "FixedShapeTensorArray",
    module = "arrow_dlpack",
    extends = PyArray,
    frozen
)]
pub(crate) struct PyFixedShapeTensorArray {
    tensor_type: FixedShapeTensorType,
    /// The base class's column, shared (cheaply) so that code holding only `&self`, such as the
    /// DLPack C exchange API, can export.
    column: Column,
}

impl PyFixedShapeTensorArray {
    /// Wraps the storage `chunks` of a column whose `field` carries `tensor_type`.
    pub(crate) fn create(
        py: Python<'_>,
        column: Column,
        tensor_type: FixedShapeTensorType,
    ) -> PyResult<Py<Self>> {
        let initializer = PyClassInitializer::from(PyArray::new(column.clone())).add_subclass(
            PyFixedShapeTensorArray {
                tensor_type,
                column,
            },
        );
        Py::new(py, initializer)
    }

    /// The array of an imported tensor; `copy` as in `from_dlpack`.
    pub(crate) fn from_imported(
        py: Python<'_>,
        tensor: &Tensor,
        copy: Option<bool>,
    ) -> PyResult<Py<Self>> {
        let array = FixedShapeTensorArray::from_tensor(
            tensor,
            TensorToArrayOptions {
                allow_copy: copy != Some(false),
            },
        )
        .map_err(|error| errors::arrow_error(error, Operation::Import))?;
        Self::from_array(py, array)
    }

    fn from_array(py: Python<'_>, array: FixedShapeTensorArray) -> PyResult<Py<Self>> {
        let field = field_of(py, &array);
        let (tensor_type, storage) = array.into_parts();
        Self::create(py, Column::new(field, vec![Arc::new(storage)]), tensor_type)
    }

    /// The chunks as one extension array, concatenated when there are several and `allow_copy`.
    pub(crate) fn combined(&self, allow_copy: bool) -> arrow_dlpack::Result<FixedShapeTensorArray> {
        let storage = self.column.combined(allow_copy)?;
        FixedShapeTensorArray::try_from_field_and_array(self.column.field(), storage)
    }
}

/// The field of an array made from a tensor (unnamed, nullable, the extension metadata in JSON),
/// made once per type and storage type: serialising the metadata and building its map was a
/// sixth of `FixedShapeTensorArray.from_dlpack(np_3d)` (perf).
fn field_of(py: Python<'_>, array: &FixedShapeTensorArray) -> FieldRef {
    static FIELDS: Cache<(FixedShapeTensorType, DataType), FieldRef, 16> = Cache::new();
    let storage_type = array.storage().data_type();
    let known = FIELDS.find(py, |(tensor_type, data_type), _| {
        tensor_type == array.extension_type() && data_type == storage_type
    });
    if let Some(field) = known {
        return field;
    }
    FIELDS.insert(
        py,
        (array.extension_type().clone(), storage_type.clone()),
        Arc::new(array.field("")),
    )
}

/// Exports the whole `(len, *cell_shape)` tensor, the permutation applied.
impl DlpackSource for PyFixedShapeTensorArray {
    fn dlpack_tensor(&self, allow_copy: bool) -> PyResult<(Cow<'_, Tensor>, bool)> {
        self.column
            .export_tensor(allow_copy, |allow_copy| {
                self.combined(allow_copy)
                    .and_then(|array| array.to_tensor(ArrayToTensorOptions::default()))
            })
            .map_err(|error| errors::arrow_error(error, Operation::Export))
    }

    fn shared_tensor(&self) -> Option<&Tensor> {
        self.column.shared_export()
    }
}

#[pymethods]
impl PyFixedShapeTensorArray {
    /// Imports a DLPack tensor whose outermost dimension (the largest stride) becomes the array
    /// length; the order of the other strides becomes the permutation.
    ///
    /// Gapped strides are copied unless `copy=False`; a tensor that is not first-major is
    /// refused unless `copy=True`.
    #[staticmethod]
    #[pyo3(signature = (x, /, *, device = None, copy = None))]
    fn from_dlpack(
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        device: Option<&Bound<'_, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Py<Self>> {
        let tensor = import_tensor(x, device, copy, Devices::Cpu)?;
        Self::from_imported(py, &tensor, copy)
    }

    /// Builds an array from a tensor (an `arrow_dlpack.Tensor` or any DLPack producer); the
    /// outermost dimension becomes the array length.
    #[staticmethod]
    fn from_tensor(py: Python<'_>, tensor: &Bound<'_, PyAny>) -> PyResult<Py<Self>> {
        let array = match tensor.cast::<PyTensor>() {
            Ok(ours) => FixedShapeTensorArray::from_tensor(
                ours.get().tensor(),
                TensorToArrayOptions { allow_copy: true },
            ),
            Err(_) => FixedShapeTensorArray::from_tensor(
                &import_tensor(tensor, None, None, Devices::Cpu)?,
                TensorToArrayOptions { allow_copy: true },
            ),
        }
        .map_err(|error| errors::arrow_error(error, Operation::Import))?;
        Self::from_array(py, array)
    }

    /// Exports the whole `(len, *cell_shape)` tensor as a DLPack capsule.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<&Bound<'_, PyAny>>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        dlpack_export::dlpack(py, self, stream, max_version, dl_device, copy)
    }

    /// The whole `(len, *cell_shape)` tensor, zero-copy.
    ///
    /// Nulls are refused with a ValueError unless `allow_nulls=True`.
    #[pyo3(signature = (*, allow_nulls = false))]
    fn to_tensor(&self, allow_nulls: bool) -> PyResult<PyTensor> {
        let tensor = self
            .combined(true)
            .and_then(|array| {
                array.to_tensor(ArrayToTensorOptions {
                    allow_nulls,
                    ..Default::default()
                })
            })
            .map_err(|error| errors::arrow_error(error, Operation::ToTensor))?;
        Ok(PyTensor::new(tensor))
    }

    /// The whole `(len, *cell_shape)` array as a numpy array (PyArrow's `to_numpy_ndarray`):
    /// zero-copy and read-only for one chunk, the permutation applied as in `to_tensor()`.
    ///
    /// Nulls raise ArrowDLPackValueError, as in PyArrow; numpy is imported here, not with the
    /// package.
    fn to_numpy_ndarray<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let tensor = self.to_tensor(false)?;
        let read_only = tensor.tensor().is_read_only();
        let tensor = Bound::new(py, tensor)?;
        numpy::from_dlpack(
            tensor.as_any(),
            read_only,
            "FixedShapeTensorArray.to_numpy_ndarray()",
        )
    }

    /// numpy's `__array__(dtype=None, copy=None)`: the whole `(len, *cell_shape)` array, as
    /// `to_numpy_ndarray()` gives it (zero-copy and read-only for one chunk, the permutation
    /// applied), cast to `dtype`; where PyArrow gives an `object` array of flat cells.
    /// `copy=True` always copies; `copy=False` raises ValueError where a copy is needed
    /// (several chunks). Null cells raise ArrowDLPackValueError: numpy has no nulls
    /// (`to_tensor(allow_nulls=True)` and `validity()` give values and mask).
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if copy == Some(false) && arrow_dlpack::chunks_need_copy(&self.column.chunks) {
            return Err(errors::value_error(
                "unable to avoid a copy while creating a numpy array of a FixedShapeTensorArray \
                 as requested (copy=False): its chunks must be joined; pass copy=None \
                 (np.asarray) to allow a copy when needed",
            ));
        }
        let tensor = self.to_tensor(false)?;
        let read_only = tensor.tensor().is_read_only();
        let tensor = Bound::new(py, tensor)?;
        let request = numpy::ArrayRequest { dtype, copy };
        numpy::tensor_dunder(
            tensor.as_any(),
            read_only,
            request,
            "FixedShapeTensorArray.__array__()",
        )
    }

    /// `array[i]` is cell `i` as a read-only zero-copy `Tensor` of the cell's shape, the
    /// permutation applied as strides (None for a null cell; negative indexes count from the
    /// end; IndexError past the end), as PyArrow's `array[i].to_tensor()`; `array[a:b]` (any
    /// step) is an array of this class. Nulls among a cell's elements raise
    /// ArrowDLPackValueError.
    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        if key.is_instance_of::<PySlice>() {
            return match conveniences::select(py, &self.column.chunks, key)? {
                Selection::Chunks(chunks) => wrap_column(py, self.column.field().clone(), chunks),
                Selection::Value(value) => Ok(value.unbind()),
            };
        }
        let position = conveniences::position(key, self.column.len())?;
        let cell = conveniences::slice_chunks(&self.column.chunks, position, 1);
        let [cell] = cell.as_slice() else {
            unreachable!("one element of a column holding it is one chunk");
        };
        if cell.is_null(0) {
            return Ok(py.None());
        }
        let tensor =
            FixedShapeTensorArray::try_from_field_and_array(self.column.field(), cell.clone())
                .and_then(|array| array.to_tensor(ArrayToTensorOptions::default()))
                .and_then(|tensor| {
                    // The one row of a (1, *cell_shape) tensor, without its first dimension.
                    Ok(Tensor::try_new(
                        tensor.buffer().clone(),
                        tensor.dtype(),
                        tensor.shape()[1..].to_vec(),
                        tensor.strides()[1..].to_vec(),
                        tensor.offset(),
                    )?
                    .with_dim_names(tensor.dim_names().map(|names| names[1..].to_vec()))?
                    .with_read_only(true))
                })
                .map_err(|error| errors::arrow_error(error, Operation::ToTensor))?;
        Ok(Py::new(py, PyTensor::new(tensor))?.into_any())
    }

    /// PyArrow's `from_numpy_ndarray(obj, dim_names=None)`: the first axis of `obj` (a numpy
    /// array or any DLPack producer of at least 2 dimensions) becomes the length, the others
    /// the cell shape; the order of their strides becomes the permutation.
    ///
    /// Zero-copy for densely packed data; gapped strides are copied. A first axis without the
    /// largest stride (Fortran order) raises ArrowDLPackValueError, as in PyArrow; so do fewer
    /// than 2 dimensions and `dim_names` of the wrong length.
    #[staticmethod]
    #[pyo3(signature = (obj, dim_names = None))]
    fn from_numpy_ndarray(
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        dim_names: Option<Vec<String>>,
    ) -> PyResult<Py<Self>> {
        let tensor = import_tensor(obj, None, None, Devices::Cpu)?;
        let ndim = tensor.ndim();
        if ndim < 2 {
            return Err(errors::value_error(format!(
                "cannot convert a 1-D array or a scalar to a fixed-shape tensor array: expected \
                 at least 2 dimensions, found {ndim}"
            )));
        }
        let tensor = match dim_names {
            None => tensor,
            Some(names) if names.len() == ndim - 1 => {
                let all = std::iter::once(String::new()).chain(names).collect();
                tensor
                    .with_dim_names(Some(all))
                    .map_err(errors::tensor_error)?
            }
            Some(names) => {
                return Err(errors::value_error(format!(
                    "expected one dimension name per tensor dimension ({}), found {}",
                    ndim - 1,
                    names.len()
                )));
            }
        };
        let array =
            FixedShapeTensorArray::from_tensor(&tensor, TensorToArrayOptions { allow_copy: true })
                .map_err(|error| errors::arrow_error(error, Operation::Import))?;
        Self::from_array(py, array)
    }

    /// The shape of each tensor, as stored (physical order).
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.tensor_type.shape().to_vec()
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

    /// The element type, named as PyArrow names it.
    #[getter]
    fn value_type(&self) -> String {
        data_type_name(self.tensor_type.value_type())
    }
}
