//! Pickling: the bytes that `Array.__reduce__` and `Tensor.__reduce__` hand to `pickle`, and the
//! objects made back from them.
//!
//! An array travels as an Arrow IPC stream of one column (its field, extension metadata
//! included, and one record batch per chunk), so that the unpickled array has the same type, chunks
//! and nulls, and the class its field gives. A tensor travels as its element type, shape, dimension
//! names and elements in row-major order. Both are copies, as every pickle is; the unpickled object
//! owns its memory. Bytes that are not such a stream, or do not match the declared shape, are a
//! `ValueError`, never a panic.

use std::io::Cursor;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_buffer::Buffer;
use arrow_dlpack_tensor::{DType, Tensor};
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{FieldRef, Schema};
use dlpack_sys::{DLDataType, DLDataTypeCode};
use pyo3::prelude::*;

use crate::column::Column;
use crate::errors;

/// The IPC stream of `column`: its field as the schema's one field, a record batch per chunk.
pub(crate) fn column_to_ipc(column: &Column) -> PyResult<Vec<u8>> {
    errors::no_panic("pickling an array", || {
        let field = column.field().clone();
        let schema = Arc::new(Schema::new(vec![field.clone()]));
        let failed = |error: arrow_schema::ArrowError| {
            errors::type_error(format!(
                "cannot pickle an array of type {}: {error}",
                field.data_type()
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
    })
}

/// The field and chunks of an IPC stream written by [`column_to_ipc`], each record batch validated.
pub(crate) fn column_from_ipc(data: &[u8]) -> PyResult<(FieldRef, Vec<ArrayRef>)> {
    errors::no_panic("unpickling an array", || {
        let bad = |error: arrow_schema::ArrowError| {
            errors::value_error(format!(
                "not a pickled arrow_dlpack array (an Arrow IPC stream of one column): {error}"
            ))
        };
        let reader = StreamReader::try_new(Cursor::new(data), None).map_err(bad)?;
        let schema = reader.schema();
        let [field] = schema.fields().as_ref() else {
            return Err(errors::value_error(format!(
                "not a pickled arrow_dlpack array: the stream has {} columns, expected 1",
                schema.fields().len()
            )));
        };
        let field = field.clone();
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

/// What a tensor is pickled as: the DLPack type code and bits of its elements, its shape, its
/// dimension names, and its elements in row-major order.
pub(crate) struct TensorParts {
    pub(crate) code: u8,
    pub(crate) bits: u8,
    pub(crate) shape: Vec<usize>,
    pub(crate) dim_names: Option<Vec<String>>,
    pub(crate) bytes: Vec<u8>,
}

/// The parts of a host tensor; a device tensor cannot be read here and is a `BufferError`.
pub(crate) fn tensor_to_parts(tensor: &Tensor) -> PyResult<TensorParts> {
    tensor
        .require_cpu("pickling")
        .map_err(errors::tensor_error)?;
    let contiguous = tensor.to_contiguous().map_err(errors::tensor_error)?;
    let bytes = contiguous
        .row_major_buffer()
        .map(|buffer| buffer.as_slice().to_vec())
        .ok_or_else(|| errors::value_error("a contiguous copy of the tensor is not row-major"))?;
    let dtype = tensor.dtype().to_dlpack();
    Ok(TensorParts {
        code: dtype.code.0,
        bits: dtype.bits,
        shape: tensor.shape().to_vec(),
        dim_names: tensor.dim_names().map(<[String]>::to_vec),
        bytes,
    })
}

/// The tensor of [`tensor_to_parts`]: a fresh, aligned, writable allocation.
pub(crate) fn tensor_from_parts(
    code: u8,
    bits: u8,
    shape: Vec<usize>,
    dim_names: Option<Vec<String>>,
    bytes: &[u8],
) -> PyResult<Tensor> {
    let dtype = DType::from_dlpack(DLDataType {
        code: DLDataTypeCode(code),
        bits,
        lanes: 1,
    })
    .map_err(errors::tensor_error)?;
    let expected = shape
        .iter()
        .try_fold(dtype.size(), |total, &extent| total.checked_mul(extent));
    if expected != Some(bytes.len()) {
        return Err(errors::value_error(format!(
            "not a pickled arrow_dlpack tensor: {} bytes of data for shape {shape:?} of {}",
            bytes.len(),
            dtype.name()
        )));
    }
    // `from_slice_ref` copies into Arrow's aligned allocation.
    let buffer = Buffer::from_slice_ref(bytes);
    // The allocation is this tensor's alone, so consumers may write to it, as to other copies.
    Tensor::try_new_row_major(buffer, dtype, shape)
        .and_then(|tensor| tensor.with_dim_names(dim_names))
        .map(|tensor| tensor.with_read_only(false))
        .map_err(errors::tensor_error)
}
