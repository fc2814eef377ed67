//! The loader's [`Source`] for a Python object: paths of Arrow IPC or Parquet files, URLs of
//! such objects in object storage (with `storage_options`), read by the loader's own threads, or
//! any object with `__arrow_c_stream__`, whose stream is moved out of its capsule and read on the
//! loader's thread through [`CheckedStream`], so that every chunk is checked as `ad.array`
//! checks it. `ad.batches` and `ad.tokenize` read their sources through [`source_of`].

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchReader, StructArray};
use arrow_dlpack_loader::Source;
use arrow_schema::{ArrowError, DataType, Schema, SchemaRef};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::arrow_ffi::CheckedStream;
use crate::errors;
use crate::type_names::type_name;

/// The record batches of a checked Arrow C stream whose type is a struct (a table).
pub(crate) struct StreamBatches {
    stream: CheckedStream,
    pub(crate) schema: SchemaRef,
}

impl StreamBatches {
    pub(crate) fn new(stream: CheckedStream) -> PyResult<Self> {
        let DataType::Struct(fields) = stream.field().data_type() else {
            return Err(errors::type_error(format!(
                "the Arrow stream holds {} values; expected record batches (a struct type), as a \
                 table, a record batch reader or a data frame gives",
                stream.field().data_type()
            )));
        };
        let schema = Arc::new(Schema::new_with_metadata(
            fields.clone(),
            stream.field().metadata().clone(),
        ));
        Ok(StreamBatches { stream, schema })
    }
}

impl Iterator for StreamBatches {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.stream.next_chunk() {
            Ok(Some(data)) => {
                let batch = RecordBatch::from(StructArray::from(data));
                Some(batch.with_schema(self.schema.clone()))
            }
            Ok(None) => None,
            Err(error) => Some(Err(ArrowError::CDataInterface(error.to_string()))),
        }
    }
}

impl RecordBatchReader for StreamBatches {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// The loader's source for a Python object: a path or a list of paths, a URL of object storage
/// or a list of them (read with `storage_options`), or an Arrow stream.
pub(crate) fn source_of(
    object: &Bound<'_, PyAny>,
    storage_options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Source> {
    if let Some(paths) = paths_of(object)? {
        let urls = paths
            .iter()
            .filter(|path| {
                path.to_str()
                    .is_some_and(arrow_dlpack_loader::is_object_url)
            })
            .count();
        if urls > 0 {
            if urls < paths.len() {
                return Err(errors::value_error(
                    "the list of sources mixes URLs of object storage and local paths; expected \
                     one or the other",
                ));
            }
            let urls: Vec<&str> = paths.iter().filter_map(|path| path.to_str()).collect();
            return Source::from_urls(urls, storage_options_of(storage_options)?)
                .map_err(errors::loader_error);
        }
        if storage_options.is_some_and(|options| !options.is_empty()) {
            return Err(errors::value_error(
                "storage_options apply to URLs of object storage (s3://, gs://, az://, \
                 http(s)://); the source is local paths",
            ));
        }
        return Source::from_paths(paths).map_err(errors::loader_error);
    }
    if storage_options.is_some_and(|options| !options.is_empty()) {
        return Err(errors::value_error(
            "storage_options apply to URLs of object storage (s3://, gs://, az://, http(s)://); \
             the source is an Arrow stream",
        ));
    }
    let Some(method) = crate::protocols::optional_attribute(object, "__arrow_c_stream__")? else {
        return Err(errors::type_error(format!(
            "{} is neither a path, a list of paths, nor an object with __arrow_c_stream__ (a \
             pyarrow Table or RecordBatchReader, a polars DataFrame, a DuckDB result, ...)",
            type_name(object)
        )));
    };
    let capsule = method.call0()?;
    let stream = CheckedStream::from_capsule(&capsule)?;
    Ok(Source::reader(StreamBatches::new(stream)?))
}

/// The entries of `storage_options`: str keys, and values that are str, int, float or bool (a
/// bool as `"true"`/`"false"`).
fn storage_options_of(options: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<(String, String)>> {
    let mut entries = Vec::new();
    for (key, value) in options.into_iter().flat_map(|options| options.iter()) {
        let Ok(key) = key.extract::<String>() else {
            return Err(errors::type_error(format!(
                "storage_options has a key of type {}; expected str",
                type_name(&key)
            )));
        };
        let value = if let Ok(flag) = value.cast::<pyo3::types::PyBool>() {
            if flag.is_true() { "true" } else { "false" }.to_string()
        } else if value.is_instance_of::<PyString>()
            || value.is_instance_of::<pyo3::types::PyInt>()
            || value.is_instance_of::<pyo3::types::PyFloat>()
        {
            value.str()?.to_string()
        } else {
            return Err(errors::type_error(format!(
                "storage_options[{key:?}] is {}; expected str, int, float or bool",
                type_name(&value)
            )));
        };
        entries.push((key, value));
    }
    Ok(entries)
}

/// The paths in `object`: one path (`str` or `os.PathLike`), or a list or tuple of them.
fn paths_of(object: &Bound<'_, PyAny>) -> PyResult<Option<Vec<PathBuf>>> {
    let one = |item: &Bound<'_, PyAny>| -> PyResult<Option<PathBuf>> {
        if item.is_instance_of::<PyString>() || item.hasattr("__fspath__")? {
            return Ok(Some(item.extract::<PathBuf>()?));
        }
        Ok(None)
    };
    if let Some(path) = one(object)? {
        return Ok(Some(vec![path]));
    }
    if object.is_instance_of::<PyList>() || object.is_instance_of::<PyTuple>() {
        let mut paths = Vec::new();
        for item in object.try_iter()? {
            let item = item?;
            match one(&item)? {
                Some(path) => paths.push(path),
                None => {
                    return Err(errors::type_error(format!(
                        "a list of sources holds {}; expected paths (str or os.PathLike)",
                        type_name(&item)
                    )));
                }
            }
        }
        if paths.is_empty() {
            return Err(errors::value_error("the list of paths is empty"));
        }
        return Ok(Some(paths));
    }
    Ok(None)
}
