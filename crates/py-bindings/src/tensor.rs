//! `arrow_dlpack.Tensor`: an n-dimensional strided view, PyArrow's `pa.Tensor` with DLPack both
//! ways and any strides (zero and negative included).
//!
//! These are the class's Python methods; its Rust struct, `PyTensor`, is in `py_tensor.rs`, so
//! that the files which hand out tensors (arrays, tables, the loader) need not import this one,
//! which calls `tables` for `Tensor.from_arrow`.

use std::borrow::Cow;

use arrow_dlpack_tensor::{DType, Tensor};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::conveniences;
use crate::device_sync::SyncEvent;
use crate::dlpack_export::{self, DlpackSource};
use crate::dlpack_import::{Devices, import_device_tensor, import_tensor};
use crate::errors;
use crate::numpy;
use crate::pickling;
use crate::py_tensor::PyTensor;
use crate::tables;
use crate::type_names::pyarrow_dtype_name;

/// A tensor exports itself as it is: no copy is ever needed.
impl DlpackSource for PyTensor {
    fn dlpack_tensor(&self, _allow_copy: bool) -> PyResult<(Cow<'_, Tensor>, bool)> {
        Ok((Cow::Borrowed(&self.tensor), false))
    }

    fn shared_tensor(&self) -> Option<&Tensor> {
        Some(&self.tensor)
    }

    fn device(&self) -> arrow_dlpack_tensor::Device {
        self.tensor.device()
    }

    fn sync_event(&self) -> SyncEvent {
        self.sync_event
    }
}

#[pymethods]
impl PyTensor {
    /// Imports any DLPack producer (or capsule) without copying; any shape and strides.
    #[staticmethod]
    #[pyo3(signature = (x, /, *, device = None, copy = None))]
    fn from_dlpack(
        x: &Bound<'_, PyAny>,
        device: Option<&Bound<'_, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Self> {
        let (tensor, sync_event) = import_device_tensor(x, device, copy)?;
        Ok(PyTensor::with_sync_event(tensor, sync_event))
    }

    /// Copies every column of a table, record batch or struct array (anything with
    /// `__arrow_c_stream__` or `__arrow_c_array__` of struct type: pyarrow, polars, ...) into one
    /// writable 2-D tensor of shape `(num_rows, num_columns)`, as PyArrow's
    /// `RecordBatch.to_tensor` does (same type promotion; booleans, which PyArrow refuses, are 0
    /// and 1 of the promoted dtype, or a bool tensor alone).
    ///
    /// `row_major=False` lays the columns out one after another (Fortran order).
    /// Nulls are refused with a TypeError unless `null_to_nan=True` (the dtype is then a float
    /// type); so are non-numeric columns and tables without columns, as in PyArrow.
    #[staticmethod]
    #[pyo3(signature = (obj, /, *, row_major = true, null_to_nan = false))]
    fn from_arrow(obj: &Bound<'_, PyAny>, row_major: bool, null_to_nan: bool) -> PyResult<Self> {
        tables::table_to_tensor(obj, row_major, null_to_nan)
    }

    // `__dlpack__` is the raw method of `dlpack_method`, installed on the class at import.

    /// Pickles a copy of a host tensor: element type, shape, dimension names and the elements in
    /// row-major order, written once into the bytes pickle stores (with protocol 5, a
    /// `PickleBuffer` that may travel out of band); unpickled as a writable tensor that owns its
    /// memory. A device tensor is a `BufferError`.
    #[pyo3(signature = (protocol, /))]
    fn __reduce_ex__<'py>(
        &self,
        py: Python<'py>,
        protocol: i64,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let arguments = pickling::tensor_to_parts(py, &self.tensor, protocol)?;
        let rebuild = py
            .import("arrow_dlpack._arrow_dlpack")?
            .getattr("_tensor_from_parts")?;
        Ok((rebuild, arguments))
    }

    /// The DLPack device of the data: `(1, 0)` for the CPU, or the device a producer's tensor
    /// was on (a device tensor is kept, never read).
    fn __dlpack_device__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        dlpack_export::dlpack_device(py, self.tensor.device())
    }

    /// The tensor as (`arrow_schema`, `arrow_device_array`) capsules on its own device, zero-copy
    /// and never read: 1-D as a primitive array, n-D as `arrow.fixed_shape_tensor`, with the
    /// producer's sync event; row-major tensors only (BufferError otherwise).
    #[pyo3(signature = (requested_schema = None, **kwargs))]
    fn __arrow_c_device_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, pyo3::types::PyDict>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema;
        crate::arrow_device::check_kwargs(kwargs)?;
        crate::arrow_device::tensor_capsules(py, &self.tensor, self.sync_event)
    }

    /// The extent of each dimension.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.tensor.shape())
    }

    /// The stride of each dimension in bytes (as numpy and PyArrow report them).
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.tensor.byte_strides())
    }

    /// The number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.tensor.ndim()
    }

    /// The number of elements.
    #[getter]
    fn size(&self) -> usize {
        self.tensor.len()
    }

    /// The element type, named as PyArrow names it (`int32`, `float`, `double`, ...).
    #[getter]
    fn r#type(&self) -> &'static str {
        pyarrow_dtype_name(self.tensor.dtype())
    }

    /// The element type as a numpy dtype (`dtype('float32')`), as array libraries read it next
    /// to `__array__` (JAX's `jnp.asarray` does); `ml_dtypes`' for bfloat16 and the float8
    /// types where it is installed, else their name. numpy is imported here, not with the
    /// package; `str(t.dtype)` is the name torch uses too (`getattr(torch, str(t.dtype))`).
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let name = self.tensor.dtype().name();
        let numpy = py.import("numpy")?;
        if let Ok(dtype) = numpy.call_method1("dtype", (name,)) {
            return Ok(dtype);
        }
        // numpy has no bfloat16 or float8: ml_dtypes (which JAX brings) registers them.
        if let Ok(extra) = py.import("ml_dtypes")
            && let Ok(scalar) = extra.getattr(name)
        {
            return numpy.call_method1("dtype", (scalar,));
        }
        Ok(pyo3::types::PyString::new(py, name).into_any())
    }

    /// The extent of the first dimension, as `len()` of a numpy array or torch tensor; a 0-d
    /// tensor has none (TypeError, as numpy's).
    fn __len__(&self) -> PyResult<usize> {
        self.tensor
            .shape()
            .first()
            .copied()
            .ok_or_else(|| pyo3::exceptions::PyTypeError::new_err("len() of a 0-d tensor"))
    }

    /// `int(t)` of a tensor of one element (the `max_seqlen` of packed sequences), as numpy's.
    fn __int__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::to_numpy(slf)?.call_method0("__int__")
    }

    /// `float(t)` of a tensor of one element, as numpy's.
    fn __float__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::to_numpy(slf)?.call_method0("__float__")
    }

    /// `complex(t)` of a tensor of one element, as numpy's.
    fn __complex__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::to_numpy(slf)?.call_method0("__complex__")
    }

    /// `bool(t)` as numpy's: the value of a tensor of one element, else numpy's `ValueError`
    /// (the truth of several values is ambiguous), never the length.
    fn __bool__(slf: &Bound<'_, Self>) -> PyResult<bool> {
        Self::to_numpy(slf)?.is_truthy()
    }

    /// `operator.index(t)` of a 0-d integer tensor (`range(t)`), as numpy's.
    fn __index__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::to_numpy(slf)?.call_method0("__index__")
    }

    /// The elements as nested Python lists (numpy's `tolist()`), copied through a numpy view.
    fn tolist<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::to_numpy(slf)?.call_method0("tolist")
    }

    /// The dimension names, or `None`.
    #[getter]
    fn dim_names(&self) -> Option<Vec<String>> {
        self.tensor.dim_names().map(<[String]>::to_vec)
    }

    /// Whether the layout is row-major or column-major.
    #[getter]
    fn is_contiguous(&self) -> bool {
        self.tensor.is_contiguous()
    }

    /// Whether the layout is row-major (C order).
    #[getter]
    fn is_row_major(&self) -> bool {
        self.tensor.is_row_major()
    }

    /// Whether the layout is column-major (Fortran order).
    #[getter]
    fn is_column_major(&self) -> bool {
        self.tensor.is_column_major()
    }

    /// Whether DLPack consumers may write to the data (False for Arrow memory).
    #[getter]
    fn is_mutable(&self) -> bool {
        !self.tensor.is_read_only()
    }

    /// A numpy view of the tensor (PyArrow's `to_numpy`), zero-copy, read-only when the tensor
    /// is; numpy is imported here, not with the package.
    fn to_numpy<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        // numpy holds host memory only: say which device the data is on, rather than numpy's
        // bare "unsupported device".
        slf.get()
            .tensor
            .require_cpu("make a numpy array of it")
            .map_err(errors::tensor_error)?;
        numpy_has_dtype(&slf.get().tensor)?;
        let read_only = slf.get().tensor.is_read_only();
        numpy::from_dlpack(slf.as_any(), read_only, "Tensor.to_numpy()")
    }

    /// numpy's `__array__(dtype=None, copy=None)`: a zero-copy view (read-only when the tensor
    /// is), cast to `dtype`; `copy=True` always copies. `np.asarray(tensor)` and
    /// `jnp.asarray(tensor)` call it; a device tensor is a BufferError.
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        slf: &Bound<'py, Self>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let tensor = &slf.get().tensor;
        tensor
            .require_cpu("make a numpy array of it")
            .map_err(errors::tensor_error)?;
        numpy_has_dtype(tensor)?;
        let request = numpy::ArrayRequest { dtype, copy };
        numpy::tensor_dunder(
            slf.as_any(),
            tensor.is_read_only(),
            request,
            "Tensor.__array__()",
        )
    }

    /// `tensor == other` is `equals(other)` for another `Tensor` or a `pyarrow.Tensor` (a bool,
    /// as PyArrow's `Tensor.__eq__`); anything else, numpy arrays included, is NotImplemented,
    /// so that numpy compares element by element. Tensors are unhashable, as PyArrow's are.
    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.compare(py, other, false)
    }

    /// `tensor != other`: the negation of `==` (NotImplemented where `==` is).
    fn __ne__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.compare(py, other, true)
    }

    /// The bytes of the elements: `size` times the element size (numpy's `nbytes`).
    #[getter]
    fn nbytes(&self) -> PyResult<usize> {
        conveniences::tensor_nbytes(&self.tensor)
    }

    /// Whether `other` (a Tensor or any DLPack producer) has the same type, shape and values,
    /// whatever the strides and dimension names; NaN is unequal to itself, as in PyArrow.
    fn equals(&self, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        match other.cast::<PyTensor>() {
            Ok(ours) => conveniences::tensors_equal(&self.tensor, &ours.get().tensor),
            Err(_) => conveniences::tensors_equal(
                &self.tensor,
                &import_tensor(other, None, None, Devices::Cpu)?,
            ),
        }
    }

    /// The name of dimension `i`, `""` when the tensor has no names; IndexError out of range.
    fn dim_name(&self, i: isize) -> PyResult<String> {
        conveniences::dim_name(&self.tensor, i)
    }

    fn __repr__(&self) -> String {
        format!(
            "<arrow_dlpack.Tensor>\ntype: {}\nshape: {}\nstrides: {}",
            pyarrow_dtype_name(self.tensor.dtype()),
            python_tuple(self.tensor.shape()),
            python_tuple(&self.tensor.byte_strides()),
        )
    }

    /// `print(t)`: the `repr` (PyArrow's) and then the values as numpy prints them (summarised
    /// when long), for a tensor in host memory of a type numpy has; the `repr` alone otherwise
    /// (device memory is never read to print it).
    fn __str__(slf: &Bound<'_, Self>) -> String {
        let header = slf.get().__repr__();
        match Self::to_numpy(slf).and_then(|array| array.str()) {
            Ok(values) => format!("{header}\n{values}"),
            Err(_) => header,
        }
    }
}

impl PyTensor {
    /// `==` (or `!=` when `negate`) against a `Tensor` or a `pyarrow.Tensor`.
    fn compare(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        negate: bool,
    ) -> PyResult<Py<PyAny>> {
        let ours = other.cast::<PyTensor>().is_ok();
        if !ours && !is_pyarrow_tensor(other) {
            return Ok(py.NotImplemented());
        }
        let equal = self.equals(other)?;
        Ok(pyo3::types::PyBool::new(py, equal != negate)
            .to_owned()
            .into_any()
            .unbind())
    }
}

/// Whether `object` is a `pyarrow.Tensor` (pyarrow is not imported for the answer: an object of
/// its class means it already is).
fn is_pyarrow_tensor(object: &Bound<'_, PyAny>) -> bool {
    let class = object.get_type();
    let named = |attribute: &str, expected: &str| {
        class
            .getattr(attribute)
            .and_then(|name| name.extract::<String>())
            .is_ok_and(|name| name == expected)
    };
    named("__module__", "pyarrow.lib") && named("__qualname__", "Tensor")
}

/// `items` written as Python writes a tuple: `()`, `(3,)`, `(2, 2)`.
fn python_tuple<T: std::fmt::Display>(items: &[T]) -> String {
    match items {
        [] => "()".into(),
        [one] => format!("({one},)"),
        many => {
            let items: Vec<String> = many.iter().map(ToString::to_string).collect();
            format!("({})", items.join(", "))
        }
    }
}

/// The tensor that `Tensor.__reduce_ex__` pickled; every field is checked and a refusal names
/// it.
#[pyfunction]
#[pyo3(signature = (code, bits, shape, dim_names, data, /))]
pub(crate) fn _tensor_from_parts(
    code: &Bound<'_, PyAny>,
    bits: &Bound<'_, PyAny>,
    shape: &Bound<'_, PyAny>,
    dim_names: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    pickling::tensor_from_parts(code, bits, shape, dim_names, data).map(PyTensor::new)
}

/// Refuses, in the package's words, a tensor whose element type numpy does not have (bfloat16,
/// the float8 types, which numpy's DLPack import refuses with a bare `RuntimeError`).
fn numpy_has_dtype(tensor: &Tensor) -> PyResult<()> {
    let dtype = tensor.dtype();
    let numpy_knows = arrow_dlpack::ARROW_DTYPES.contains(&dtype)
        || matches!(dtype, DType::Bool | DType::Complex64 | DType::Complex128);
    if numpy_knows {
        return Ok(());
    }
    Err(errors::type_error(format!(
        "numpy has no {dtype} type, so a tensor of it has no numpy array; convert it first \
         (torch.from_dlpack(t).float())"
    )))
}
