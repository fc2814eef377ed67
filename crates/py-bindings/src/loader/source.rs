//! The loader's source for a Python object: paths, URLs of object storage, or Arrow streams
//! (one object with `__arrow_c_stream__`, or a list of them such as record batches), with the
//! number of rows where the object says it.
//!
//! A stream is moved out of its capsule and read on the loader's thread through
//! [`CheckedStream`], so that every chunk is checked as `ad.array` checks it.

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchReader, StructArray};
use arrow_dlpack_loader::Source;
use arrow_schema::{ArrowError, DataType, Schema, SchemaRef};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::arrow_ffi::CheckedStream;
use crate::errors;
use crate::type_names::type_name;

/// A Python source as the loader reads it, with the rows its objects say they hold.
pub(crate) struct Input {
    pub(crate) source: Source,
    /// The rows of an in-memory source that tells them (`num_rows` of a pyarrow Table or
    /// record batch, `height` of a polars DataFrame), which the stream checks as it is read.
    pub(crate) rows: Option<u64>,
}

/// The loader's source for a Python object: a path or a list of paths, a URL of object storage
/// or a list of them (read with `storage_options`), an object with `__arrow_c_stream__`, or a
/// list of such objects (record batches, tables) read one after another.
pub(crate) fn source_of(
    object: &Bound<'_, PyAny>,
    storage_options: Option<&Bound<'_, PyAny>>,
) -> PyResult<Input> {
    let storage_options = match storage_options.filter(|options| !options.is_none()) {
        None => None,
        Some(options) => Some(options.cast::<pyo3::types::PyMapping>().map_err(|_| {
            errors::type_error(format!(
                "storage_options is {}; expected a dict from str to str",
                type_name(options)
            ))
        })?),
    };
    let has_options = storage_options.is_some_and(|options| options.len().unwrap_or(0) > 0);
    if let Some(paths) = paths_of(object)? {
        let urls = paths
            .iter()
            .filter(|path| {
                path.to_str()
                    .is_some_and(arrow_dlpack_loader::is_object_url)
            })
            .count();
        let source = if urls > 0 {
            if urls < paths.len() {
                return Err(errors::value_error(
                    "the list of sources mixes URLs of object storage and local paths; expected \
                     one or the other",
                ));
            }
            let urls: Vec<&str> = paths.iter().filter_map(|path| path.to_str()).collect();
            Source::from_urls(urls, storage_options_of(storage_options)?)
                .map_err(errors::loader_error)?
        } else {
            if has_options {
                return Err(errors::value_error(
                    "storage_options apply to URLs of object storage (s3://, gs://, az://, \
                     http(s)://); the source is local paths",
                ));
            }
            Source::from_paths(paths).map_err(errors::loader_error)?
        };
        return Ok(Input { source, rows: None });
    }
    if has_options {
        return Err(errors::value_error(
            "storage_options apply to URLs of object storage (s3://, gs://, az://, http(s)://); \
             the source is an Arrow stream",
        ));
    }
    let objects = stream_objects(object)?;
    let rows = stated_rows(&objects)?;
    let streams = objects
        .iter()
        .map(|(_, method)| CheckedStream::from_capsule(&method.call0()?))
        .collect::<PyResult<Vec<_>>>()?;
    let batches = StreamBatches::new(streams, rows)?;
    let source = match rows {
        // Objects that say their rows are in memory (tables, record batches, data frames):
        // their record batches are taken now, zero-copy, so that the loader is planned with
        // their null counts (`null_to_nan=True` promotes only the integer columns with nulls).
        Some(_) => {
            let schema = batches.schema();
            let batches = batches
                .collect::<Result<Vec<_>, ArrowError>>()
                .map_err(|error| errors::loader_error(arrow_dlpack_loader::Error::from(error)))?;
            Source::record_batches(schema, batches)
        }
        None => Source::reader(batches),
    };
    Ok(Input { source, rows })
}

/// For a source that is read as a stream (not paths or URLs), the rows it says it holds, or
/// `Some(None)` when it does not say; `None` for paths and URLs. Nothing is read.
pub(super) fn stream_rows(object: &Bound<'_, PyAny>) -> PyResult<Option<Option<u64>>> {
    if paths_of(object)?.is_some() {
        return Ok(None);
    }
    Ok(Some(stated_rows(&stream_objects(object)?)?))
}

/// The objects of a stream source (`object`, or the items of a list or tuple), each with its
/// `__arrow_c_stream__` method; a `TypeError` for an object without one.
fn stream_objects<'py>(
    object: &Bound<'py, PyAny>,
) -> PyResult<Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
    let items: Vec<Bound<'_, PyAny>> =
        if object.is_instance_of::<PyList>() || object.is_instance_of::<PyTuple>() {
            object.try_iter()?.collect::<PyResult<_>>()?
        } else {
            vec![object.clone()]
        };
    if items.is_empty() {
        return Err(errors::value_error("the list of sources is empty"));
    }
    let mut objects = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let Some(method) = crate::protocols::optional_attribute(&item, "__arrow_c_stream__")?
        else {
            let what = if item.is(object) {
                format!(
                    "{} is neither a path, a list of paths, nor",
                    type_name(&item)
                )
            } else {
                format!(
                    "a list of sources holds {} at {index}; expected",
                    type_name(&item)
                )
            };
            return Err(errors::type_error(format!(
                "{what} an object with __arrow_c_stream__ (a pyarrow Table, RecordBatch or \
                 RecordBatchReader, a polars DataFrame, a DuckDB result, ...)"
            )));
        };
        objects.push((item, method));
    }
    Ok(objects)
}

/// The schema that the first object of a stream source (`object`, or the first item of a list
/// or tuple) states without being read, through its `__arrow_c_schema__` or its `schema`'s (a
/// pyarrow Table, RecordBatch or RecordBatchReader); `None` for a source of paths, or an object
/// that states none (a polars DataFrame, whose schema is checked by its first pass) or whose
/// stated schema cannot be read. The schema is checked as every imported schema is.
pub(super) fn stated_schema(object: &Bound<'_, PyAny>) -> PyResult<Option<SchemaRef>> {
    if paths_of(object)?.is_some() {
        return Ok(None);
    }
    let Some((first, _)) = stream_objects(object)?.into_iter().next() else {
        return Ok(None);
    };
    // The object's own method, or its `schema`'s (pyarrow's Table, RecordBatch and
    // RecordBatchReader state theirs so: reading a reader's schema does not consume it).
    let stated = || -> PyResult<Option<SchemaRef>> {
        let mut method = crate::protocols::optional_attribute(&first, "__arrow_c_schema__")?;
        if method.is_none()
            && let Some(schema) = crate::protocols::optional_attribute(&first, "schema")?
        {
            method = crate::protocols::optional_attribute(&schema, "__arrow_c_schema__")?;
        }
        let Some(method) = method else {
            return Ok(None);
        };
        let field = crate::arrow_ffi::checked_field(&method.call0()?)?;
        Ok(match field.data_type() {
            DataType::Struct(fields) => Some(Arc::new(Schema::new_with_metadata(
                fields.clone(),
                field.metadata().clone(),
            ))),
            // Not a table's schema: the stream is refused when it is read, as before.
            _ => None,
        })
    };
    match stated() {
        Ok(schema) => Ok(schema),
        // Ctrl-C and exit requests go on.
        Err(error)
            if error.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(object.py())
                || error.is_instance_of::<pyo3::exceptions::PySystemExit>(object.py()) =>
        {
            Err(error)
        }
        // A schema that cannot be read (a `schema` that raises or is not one) is no reason to
        // refuse a source that may still read: its stream is checked when it is read.
        Err(_) => Ok(None),
    }
}

/// The rows that every one of `objects` says it holds, summed; `None` when one does not say.
fn stated_rows(objects: &[(Bound<'_, PyAny>, Bound<'_, PyAny>)]) -> PyResult<Option<u64>> {
    let mut total = Some(0u64);
    for (object, _) in objects {
        total = match (total, rows_of(object)?) {
            (Some(total), Some(rows)) => total.checked_add(rows),
            _ => None,
        };
    }
    Ok(total)
}

/// The rows an in-memory object says it holds: an int `num_rows` (pyarrow's Table and
/// RecordBatch, arro3's) or `height` (a polars DataFrame). `len()` is not asked: for a lazy
/// query (a DuckDB relation) it runs the query.
fn rows_of(object: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    for name in ["num_rows", "height"] {
        let Some(value) = crate::protocols::optional_attribute(object, name)? else {
            continue;
        };
        if value.is_instance_of::<PyInt>() && !value.is_instance_of::<PyBool>() {
            return Ok(value.extract().ok());
        }
    }
    Ok(None)
}

/// The record batches of checked Arrow C streams whose type is a struct (a table), one stream
/// after another, all with the first one's columns; when the objects said how many rows they
/// hold, a stream that gives another number is an error.
pub(super) struct StreamBatches {
    streams: std::vec::IntoIter<CheckedStream>,
    current: Option<CheckedStream>,
    schema: SchemaRef,
    /// The rows the objects said they hold, and those read so far.
    expected_rows: Option<u64>,
    rows: u64,
    index: usize,
    failed: bool,
}

impl StreamBatches {
    pub(super) fn new(streams: Vec<CheckedStream>, expected_rows: Option<u64>) -> PyResult<Self> {
        let mut streams = streams.into_iter();
        let first = streams
            .next()
            .ok_or_else(|| errors::value_error("the list of sources is empty"))?;
        let schema = struct_schema(&first)?;
        Ok(StreamBatches {
            streams,
            current: Some(first),
            schema,
            expected_rows,
            rows: 0,
            index: 0,
            failed: false,
        })
    }

    /// The next record batch of the current stream, or of the streams after it.
    fn next_batch(&mut self) -> Result<Option<RecordBatch>, ArrowError> {
        loop {
            let Some(stream) = self.current.as_mut() else {
                return Ok(None);
            };
            match stream.next_chunk() {
                Ok(Some(data)) => {
                    let batch = RecordBatch::from(StructArray::from(data));
                    return batch.with_schema(self.schema.clone()).map(Some);
                }
                Ok(None) => {
                    self.current = self.streams.next();
                    self.index += 1;
                    if let Some(next) = &self.current {
                        let schema = struct_schema(next)
                            .map_err(|error| ArrowError::CDataInterface(error.to_string()))?;
                        if schema.fields() != self.schema.fields() {
                            return Err(ArrowError::SchemaError(format!(
                                "source {} of the list has columns {}; expected those of \
                                 source 0, {}",
                                self.index,
                                typed_columns(&schema),
                                typed_columns(&self.schema)
                            )));
                        }
                    }
                }
                Err(error) => return Err(ArrowError::CDataInterface(error.to_string())),
            }
        }
    }
}

/// `schema`'s columns with their types, in PyArrow's names: `[x: double, y: int64]`.
fn typed_columns(schema: &Schema) -> String {
    let columns: Vec<String> = schema
        .fields()
        .iter()
        .map(|field| {
            format!(
                "{}: {}",
                field.name(),
                crate::type_names::field_type_name(field)
            )
        })
        .collect();
    format!("[{}]", columns.join(", "))
}

/// The schema of the record batches of `stream`, whose type must be a struct.
fn struct_schema(stream: &CheckedStream) -> PyResult<SchemaRef> {
    let DataType::Struct(fields) = stream.field().data_type() else {
        return Err(errors::type_error(format!(
            "the Arrow stream holds {} values; expected record batches (a struct type), as a \
             table, a record batch reader or a data frame gives",
            stream.field().data_type()
        )));
    };
    Ok(Arc::new(Schema::new_with_metadata(
        fields.clone(),
        stream.field().metadata().clone(),
    )))
}

impl Iterator for StreamBatches {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let checked = match self.next_batch() {
            Ok(Some(batch)) => {
                self.rows = self.rows.saturating_add(batch.num_rows() as u64);
                match self.expected_rows {
                    Some(expected) if self.rows > expected => {
                        Err(ArrowError::InvalidArgumentError(format!(
                            "the stream gave more than the {expected} rows its source said it \
                             holds (num_rows)"
                        )))
                    }
                    _ => Ok(Some(batch)),
                }
            }
            Ok(None) => match self.expected_rows {
                Some(expected) if self.rows != expected => {
                    Err(ArrowError::InvalidArgumentError(format!(
                        "the stream gave {} rows; its source said it holds {expected} (num_rows)",
                        self.rows
                    )))
                }
                _ => Ok(None),
            },
            Err(error) => Err(error),
        };
        match checked {
            Ok(batch) => batch.map(Ok),
            Err(error) => {
                self.failed = true;
                Some(Err(error))
            }
        }
    }
}

impl RecordBatchReader for StreamBatches {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// The entries of `storage_options`: str keys, and values that are str, int, float or bool (a
/// bool as `"true"`/`"false"`).
fn storage_options_of(
    options: Option<&Bound<'_, pyo3::types::PyMapping>>,
) -> PyResult<Vec<(String, String)>> {
    let mut entries = Vec::new();
    let Some(options) = options else {
        return Ok(entries);
    };
    for item in options.items()?.iter() {
        let (key, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let Ok(key) = key.extract::<String>() else {
            return Err(errors::type_error(format!(
                "storage_options has a key of type {}; expected str",
                type_name(&key)
            )));
        };
        let value = if let Ok(flag) = value.cast::<PyBool>() {
            if flag.is_true() { "true" } else { "false" }.to_string()
        } else if value.is_instance_of::<PyString>()
            || value.is_instance_of::<PyInt>()
            || value.is_instance_of::<PyFloat>()
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

/// The paths in `object`: one path (`str` or `os.PathLike`), or a non-empty list or tuple of
/// them; `None` when `object` is not a path and not a list whose first item is one.
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
    if !(object.is_instance_of::<PyList>() || object.is_instance_of::<PyTuple>()) {
        return Ok(None);
    }
    let items: Vec<Bound<'_, PyAny>> = object.try_iter()?.collect::<PyResult<_>>()?;
    let Some(first) = items.first() else {
        return Err(errors::value_error(
            "the source is an empty list; expected paths, record batches, tables or data frames \
             to read (a table of no rows, for a source of none)",
        ));
    };
    if one(first)?.is_none() {
        // A list of streams (record batches, tables), read by `source_of`.
        return Ok(None);
    }
    let mut paths = Vec::with_capacity(items.len());
    for item in &items {
        match one(item)? {
            Some(path) => paths.push(path),
            None => {
                return Err(errors::type_error(format!(
                    "a list of sources holds {}; expected paths (str or os.PathLike)",
                    type_name(item)
                )));
            }
        }
    }
    Ok(Some(paths))
}
