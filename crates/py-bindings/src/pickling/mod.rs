//! Pickling: the bytes that `Array.__reduce__` and `Tensor.__reduce_ex__` hand to `pickle`, and
//! the objects made back from them.
//!
//! An array travels as an Arrow IPC stream of one column (its field, extension metadata
//! included, and one record batch per chunk), so that the unpickled array has the same type,
//! chunks and nulls, and the class its field gives. A tensor travels as its DLPack type code and
//! bits, shape, dimension names and elements in row-major order: written once, straight into the
//! Python `bytes` that pickle stores (non-row-major tensors through a bounded staging copy), and
//! with protocol 5 as a `pickle.PickleBuffer`, so that a `buffer_callback` takes it out of band
//! without another copy. Both are copies, as every pickle is; the unpickled object owns its
//! memory. Every allocation is fallible (`MemoryError`), and whatever is not what these wrote
//! (cut short, overwritten, fields of the wrong type or range) is a `ValueError` or `TypeError`
//! naming the field, never a crash.

use std::io::Cursor;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_buffer::{Buffer, MutableBuffer};
use arrow_dlpack_tensor::{DType, Tensor};
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{FieldRef, Schema};
use dlpack_sys::{DLDataType, DLDataTypeCode};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyList, PyString, PyTuple};

mod ipc_check;

use crate::column::Column;
use crate::errors;
use crate::type_names::{pyarrow_dtype_name, type_name};

/// The bytes of one staging block when a tensor that is not row-major is written out: large
/// enough that the copy kernels run at speed, small enough to stay out of the memory budget
/// (the pool keeps one block warm across blocks).
const STAGING_BYTES: usize = 4 << 20;

/// The IPC stream of `column` (its field as the schema's one field, a record batch per chunk),
/// as the `bytes` that pickle stores.
pub(crate) fn column_to_ipc<'py>(
    py: Python<'py>,
    column: &Column,
) -> PyResult<Bound<'py, PyBytes>> {
    let data = errors::no_panic("pickling an array", || {
        let field = column.field().clone();
        let schema = Arc::new(Schema::new(vec![field.clone()]));
        let failed = |error: arrow_schema::ArrowError| {
            errors::type_error(format!(
                "cannot pickle an array of type {}: {error}",
                crate::type_names::field_type_name(&field)
            ))
        };
        let mut writer = StreamWriter::try_new(Vec::new(), &schema).map_err(failed)?;
        for chunk in &column.chunks {
            let options = RecordBatchOptions::new().with_row_count(Some(chunk.len()));
            let batch =
                RecordBatch::try_new_with_options(schema.clone(), vec![chunk.clone()], &options)
                    .map_err(failed)?;
            writer.write(&batch).map_err(failed)?;
        }
        writer.into_inner().map_err(failed)
    })?;
    // `PyBytes::new_with` reports a refused allocation as MemoryError (`PyBytes::new` aborts).
    PyBytes::new_with(py, data.len(), |out| {
        out.copy_from_slice(&data);
        Ok(())
    })
}

/// The names of `field` and of every field nested in its type, depth first.
fn field_names(field: &arrow_schema::Field) -> Box<dyn Iterator<Item = &str> + '_> {
    use arrow_schema::DataType as T;
    let children: Vec<&arrow_schema::Field> = match field.data_type() {
        T::List(child)
        | T::LargeList(child)
        | T::ListView(child)
        | T::LargeListView(child)
        | T::FixedSizeList(child, _)
        | T::Map(child, _) => vec![child.as_ref()],
        T::Struct(fields) => fields.iter().map(AsRef::as_ref).collect(),
        T::Union(fields, _) => fields.iter().map(|(_, field)| field.as_ref()).collect(),
        T::RunEndEncoded(run_ends, values) => vec![run_ends.as_ref(), values.as_ref()],
        _ => Vec::new(),
    };
    Box::new(
        std::iter::once(field.name().as_str()).chain(children.into_iter().flat_map(field_names)),
    )
}

/// The field and chunks of a pickled array: `data` is the IPC stream [`column_to_ipc`] wrote,
/// each record batch validated.
pub(crate) fn column_from_ipc(data: &Bound<'_, PyAny>) -> PyResult<(FieldRef, Vec<ArrayRef>)> {
    let Ok(bytes) = data.cast::<PyBytes>() else {
        return Err(errors::type_error(format!(
            "cannot unpickle Array: data is {}; expected bytes (an Arrow IPC stream of one \
             column)",
            type_name(data)
        )));
    };
    let data = bytes.as_bytes();
    ipc_check::check_ipc_stream(data).map_err(|reason| {
        errors::value_error(format!(
            "cannot unpickle Array: data is not an Arrow IPC stream of one column: {reason}"
        ))
    })?;
    // Malformed data that arrow's reader meets past the checks above (it asserts on some) is
    // refused as every other malformed pickle is.
    let malformed = |message: &str| {
        format!("cannot unpickle Array: data is not an Arrow IPC stream of one column: {message}")
    };
    errors::no_panic_saying(malformed, || {
        let bad = |error: arrow_schema::ArrowError| {
            errors::value_error(format!(
                "cannot unpickle Array: data is not an Arrow IPC stream of one column: {error}"
            ))
        };
        let reader = StreamReader::try_new(Cursor::new(data), None).map_err(bad)?;
        let schema = reader.schema();
        let [field] = schema.fields().as_ref() else {
            return Err(errors::value_error(format!(
                "cannot unpickle Array: data is an Arrow IPC stream of {} columns; expected 1",
                schema.fields().len()
            )));
        };
        let field = field.clone();
        // The C Data interface, every export of the array, refuses a name with a NUL in it
        // (the array would unpickle, and then fail at every use).
        if let Some(name) = field_names(&field).find(|name| name.contains('\0')) {
            return Err(errors::value_error(format!(
                "cannot unpickle Array: its field {name:?} holds a NUL character, which no \
                 Arrow field name may hold"
            )));
        }
        let mut chunks = Vec::new();
        for batch in reader {
            let batch = batch.map_err(bad)?;
            let chunk = batch.column(0).clone();
            chunk.to_data().validate_full().map_err(bad)?;
            chunks.push(chunk);
        }
        Ok((field, chunks))
    })
}

/// The arguments of `_tensor_from_parts` for a host tensor: `(code, bits, shape, dim_names,
/// data)`, `data` being the elements in row-major order, written once; with `protocol` 5 or
/// more, wrapped in a `pickle.PickleBuffer` so that it may travel out of band. A device tensor
/// cannot be read here and is a `BufferError`.
pub(crate) fn tensor_to_parts<'py>(
    py: Python<'py>,
    tensor: &Tensor,
    protocol: i64,
) -> PyResult<Bound<'py, PyTuple>> {
    tensor
        .require_cpu("pickling")
        .map_err(errors::tensor_error)?;
    let bytes = tensor
        .len()
        .checked_mul(tensor.dtype().size())
        .ok_or_else(|| {
            PyMemoryError::new_err(format!(
                "cannot pickle a tensor of shape {:?}: its bytes overflow the address space",
                tensor.shape()
            ))
        })?;
    let data = PyBytes::new_with(py, bytes, |out| {
        py.detach(|| write_row_major(tensor, out))
            .map_err(errors::tensor_error)
    })?;
    let data = if protocol >= 5 {
        py.import("pickle")?
            .getattr("PickleBuffer")?
            .call1((data,))?
    } else {
        data.into_any()
    };
    let dtype = tensor.dtype().to_dlpack();
    (
        dtype.code.0,
        dtype.bits,
        PyTuple::new(py, tensor.shape())?,
        tensor.dim_names().map(<[String]>::to_vec),
        data,
    )
        .into_pyobject(py)
}

/// Writes the elements of `tensor` in row-major order into `out`, which holds exactly their
/// bytes: one `memcpy` for a row-major tensor, otherwise blocks of at most about
/// [`STAGING_BYTES`] made contiguous one at a time by the tensor crate's copy kernel and copied
/// into place, so that no second full-size buffer is ever made.
fn write_row_major(tensor: &Tensor, out: &mut [u8]) -> arrow_dlpack_tensor::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    if let Some(buffer) = tensor.row_major_buffer() {
        out.copy_from_slice(buffer.as_slice());
        return Ok(());
    }
    let (shape, strides) = (tensor.shape(), tensor.strides());
    let size = tensor.dtype().size();
    // The blocks run along `split`, the first dimension whose trailing dimensions (after it)
    // fit a staging block; the dimensions before it are walked one index at a time.
    let trailing = |dim: usize| -> usize {
        shape[dim + 1..]
            .iter()
            .fold(size, |bytes, &extent| bytes.saturating_mul(extent))
    };
    let split = (0..shape.len())
        .find(|&dim| trailing(dim) <= STAGING_BYTES)
        .unwrap_or(shape.len() - 1);
    let per_block = (STAGING_BYTES / trailing(split).max(1)).max(1);
    let mut block_shape = shape[split..].to_vec();
    let block_strides = strides[split..].to_vec();
    let mut outer = vec![0usize; split];
    let mut written = 0;
    loop {
        // The element offset of the outer index; construction checks every block's bounds.
        let base = outer
            .iter()
            .zip(strides)
            .fold(tensor.offset() as i128, |at, (&index, &stride)| {
                at + index as i128 * stride as i128
            });
        let mut start = 0;
        while start < shape[split] {
            let count = per_block.min(shape[split] - start);
            block_shape[0] = count;
            let offset = base + start as i128 * strides[split] as i128;
            let offset =
                usize::try_from(offset).map_err(|_| arrow_dlpack_tensor::Error::Overflow {
                    what: "the offset of a block of the tensor",
                })?;
            let block = Tensor::try_new(
                tensor.buffer().clone(),
                tensor.dtype(),
                block_shape.clone(),
                block_strides.clone(),
                offset,
            )?;
            let contiguous = match block.row_major_buffer() {
                Some(buffer) => buffer,
                None => block
                    .to_contiguous()?
                    .row_major_buffer()
                    .expect("a contiguous copy is row-major"),
            };
            let bytes = contiguous.as_slice();
            out[written..written + bytes.len()].copy_from_slice(bytes);
            written += bytes.len();
            start += count;
        }
        // The next outer index, last dimension fastest; done after the last one.
        let Some(dim) = (0..split).rev().find(|&dim| outer[dim] + 1 < shape[dim]) else {
            break;
        };
        outer[dim] += 1;
        outer[dim + 1..].fill(0);
    }
    debug_assert_eq!(written, out.len());
    Ok(())
}

/// The tensor that `_tensor_from_parts` rebuilds from what [`tensor_to_parts`] gave pickle: a
/// fresh, aligned, writable allocation. Every field is checked, and a refusal names it.
pub(crate) fn tensor_from_parts(
    code: &Bound<'_, PyAny>,
    bits: &Bound<'_, PyAny>,
    shape: &Bound<'_, PyAny>,
    dim_names: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
) -> PyResult<Tensor> {
    let code = small_int(code, "code", 255)?;
    let bits = small_int(bits, "bits", 255)?;
    let dtype = DType::from_dlpack(DLDataType {
        code: DLDataTypeCode(code as u8),
        bits: bits as u8,
        lanes: 1,
    })
    .map_err(|error| {
        errors::value_error(format!(
            "cannot unpickle Tensor: code {code} with {bits} bits is not a dtype: {error}"
        ))
    })?;
    let py = data.py();
    let shape = extents(shape)?;
    let dim_names = names(dim_names, shape.len())?;
    let expected = shape
        .iter()
        .try_fold(dtype.size(), |total, &extent| total.checked_mul(extent));
    let data = bytes_of(data)?;
    let found = data.len_bytes();
    if expected != Some(found) {
        return Err(errors::value_error(format!(
            "cannot unpickle Tensor: data has {found} bytes; expected {} for shape {shape:?} of \
             {}",
            expected.map_or("more than the address space".to_string(), |bytes| bytes
                .to_string()),
            pyarrow_dtype_name(dtype)
        )));
    }
    // Arrow's allocation: 64-byte aligned for every dtype, and refused (not aborted) when the
    // memory is not there.
    let mut memory = MutableBuffer::try_from_len_zeroed(found).map_err(|error| {
        PyMemoryError::new_err(format!(
            "cannot unpickle Tensor: {found} bytes could not be allocated ({error})"
        ))
    })?;
    data.copy_to_slice(py, memory.as_slice_mut())?;
    let buffer = Buffer::from(memory);
    // The allocation is this tensor's alone, so consumers may write to it, as to other copies.
    Tensor::try_new_row_major(buffer, dtype, shape)
        .and_then(|tensor| tensor.with_dim_names(dim_names))
        .map(|tensor| tensor.with_read_only(false))
        .map_err(|error| errors::value_error(format!("cannot unpickle Tensor: {error}")))
}

/// An int field in `0..=max`: `TypeError` for another type, `ValueError` out of range (not the
/// `OverflowError` of a plain conversion), each naming the field.
fn small_int(value: &Bound<'_, PyAny>, field: &str, max: u64) -> PyResult<u64> {
    if !value.is_instance_of::<PyInt>() {
        return Err(errors::type_error(format!(
            "cannot unpickle Tensor: {field} is {}; expected an int",
            type_name(value)
        )));
    }
    value
        .extract::<u64>()
        .ok()
        .filter(|&int| int <= max)
        .ok_or_else(|| {
            errors::value_error(format!(
                "cannot unpickle Tensor: {field} is {value}; expected an integer from 0 to {max}"
            ))
        })
}

/// The shape: a tuple (or list) of non-negative ints, each refusal naming its entry.
fn extents(shape: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    let items = sequence(shape, "shape")?;
    items
        .iter()
        .enumerate()
        .map(|(dim, extent)| {
            if !extent.is_instance_of::<PyInt>() {
                return Err(errors::type_error(format!(
                    "cannot unpickle Tensor: shape[{dim}] is {}; expected an int",
                    type_name(extent)
                )));
            }
            extent.extract::<usize>().map_err(|_| {
                errors::value_error(format!(
                    "cannot unpickle Tensor: shape[{dim}] is {extent}; expected a non-negative \
                     integer below 2**64"
                ))
            })
        })
        .collect()
}

/// The dimension names: None, or one str per dimension.
fn names(dim_names: &Bound<'_, PyAny>, ndim: usize) -> PyResult<Option<Vec<String>>> {
    if dim_names.is_none() {
        return Ok(None);
    }
    let items = sequence(dim_names, "dim_names")?;
    if items.len() != ndim {
        return Err(errors::value_error(format!(
            "cannot unpickle Tensor: dim_names has {} names; expected {ndim}, one per dimension",
            items.len()
        )));
    }
    items
        .iter()
        .enumerate()
        .map(|(dim, name)| {
            name.cast::<PyString>()
                .map_err(|_| {
                    errors::type_error(format!(
                        "cannot unpickle Tensor: dim_names[{dim}] is {}; expected a str",
                        type_name(name)
                    ))
                })?
                .to_str()
                .map(str::to_owned)
                .map_err(|error| {
                    errors::value_error(format!(
                        "cannot unpickle Tensor: dim_names[{dim}] is not valid UTF-8: {error}"
                    ))
                })
        })
        .collect::<PyResult<Vec<_>>>()
        .map(Some)
}

/// The items of a tuple or list field.
fn sequence<'py>(value: &Bound<'py, PyAny>, field: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if let Ok(tuple) = value.cast::<PyTuple>() {
        return Ok(tuple.iter().collect());
    }
    if let Ok(list) = value.cast::<PyList>() {
        return Ok(list.iter().collect());
    }
    Err(errors::type_error(format!(
        "cannot unpickle Tensor: {field} is {}; expected a tuple",
        type_name(value)
    )))
}

/// The bytes of `data`, any C-contiguous buffer (bytes in band, or whatever buffer the caller
/// handed `pickle.loads(buffers=...)` out of band), read as bytes whatever its item format.
fn bytes_of(data: &Bound<'_, PyAny>) -> PyResult<PyBuffer<u8>> {
    let refuse = || {
        errors::type_error(format!(
            "cannot unpickle Tensor: data is {}; expected a C-contiguous bytes-like object \
             (bytes, bytearray, memoryview, pickle.PickleBuffer)",
            type_name(data)
        ))
    };
    let view = pyo3::types::PyMemoryView::from(data).map_err(|_| refuse())?;
    let bytes = view.call_method1("cast", ("B",)).map_err(|_| refuse())?;
    PyBuffer::<u8>::get(&bytes).map_err(|_| refuse())
}
