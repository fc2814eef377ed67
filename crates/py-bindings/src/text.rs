//! Text: `ad.tokenize` (a source's text column tokenized once into an Arrow IPC or Parquet
//! file) and `_tokenize_column` (one column in memory), over the loader's
//! [`arrow_dlpack_loader::Tokenizer`], made by the one conversion of a Python tokenizer that
//! every option taking a tokenizer goes through ([`tokenizer_from_python`]).
//!
//! A tokenizer is a path to a `tokenizer.json`, a `tokenizers.Tokenizer` (its `to_str()`), or a
//! `transformers` fast tokenizer (its `backend_tokenizer.to_str()`), told apart by their
//! attributes: nothing here imports `tokenizers` or `transformers`. Reading the JSON and
//! tokenizing run without the GIL.
//!
//! The conversion is `tokenizer.rs`'s, which the loader's options (`sequences=`) use too.

use std::path::PathBuf;

use arrow_dlpack_loader::{
    TokenizeOptions, TokenizeToFileOptions, tokenize_column, tokenize_to_file,
};
use arrow_schema::{DataType, Field};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::array::{PyArray, array, wrap_column};
use crate::errors;
use crate::loader::source_of;
use crate::type_names::type_name;

use crate::tokenizer::tokenizer_from_python;

/// The number of threads for `threads=`: `None` for one per core, else at least 1.
fn thread_count(threads: Option<usize>) -> PyResult<usize> {
    match threads {
        None => Ok(0),
        Some(0) => Err(errors::value_error(
            "threads is 0; expected at least 1, or None for one per core",
        )),
        Some(count) => Ok(count),
    }
}

/// `ad.tokenize`: the text column of `source` tokenized on every core and written, with the
/// columns kept, to `out_path` (Arrow IPC or Parquet by its extension); returns
/// `{"rows": ..., "tokens": ...}`.
#[pyfunction]
#[pyo3(
    name = "tokenize",
    signature = (
        source,
        tokenizer,
        out_path,
        *,
        column = "text",
        output_column = "input_ids",
        keep_columns = None,
        add_special_tokens = true,
        allow_nulls = false,
        threads = None,
        progress = true,
        storage_options = None,
    )
)]
#[allow(clippy::too_many_arguments)] // Python's keywords, each named once.
pub(crate) fn tokenize<'py>(
    py: Python<'py>,
    source: &Bound<'py, PyAny>,
    tokenizer: &Bound<'py, PyAny>,
    out_path: PathBuf,
    column: &str,
    output_column: &str,
    keep_columns: Option<Vec<String>>,
    add_special_tokens: bool,
    allow_nulls: bool,
    threads: Option<usize>,
    progress: bool,
    storage_options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let tokenizer = tokenizer_from_python(tokenizer)?;
    let options = TokenizeToFileOptions {
        column: column.to_string(),
        output_column: output_column.to_string(),
        keep_columns,
        tokenize: TokenizeOptions {
            add_special_tokens,
            allow_nulls,
            threads: thread_count(threads)?,
            large_offsets: false,
        },
        progress,
    };
    let source = errors::no_panic("reading an Arrow source", || {
        source_of(source, storage_options.map(|options| options.as_any())).map(|input| input.source)
    })?;
    let summary = errors::no_panic("tokenizing a source", || {
        py.detach(|| tokenize_to_file(source, &tokenizer, &out_path, &options))
            .map_err(errors::loader_error)
    })?;
    let out = PyDict::new(py);
    out.set_item("rows", summary.rows)?;
    out.set_item("tokens", summary.tokens)?;
    Ok(out)
}

/// `_tokenize_column`: the token ids of every text of `column` (any Arrow array or chunked
/// array of strings) as a `ListArray`, chunk by chunk.
#[pyfunction]
#[pyo3(
    name = "_tokenize_column",
    signature = (column, tokenizer, *, add_special_tokens = true, allow_nulls = false, threads = None)
)]
pub(crate) fn tokenize_column_py(
    py: Python<'_>,
    column: &Bound<'_, PyAny>,
    tokenizer: &Bound<'_, PyAny>,
    add_special_tokens: bool,
    allow_nulls: bool,
    threads: Option<usize>,
) -> PyResult<Py<PyAny>> {
    let tokenizer = tokenizer_from_python(tokenizer)?;
    let options = TokenizeOptions {
        add_special_tokens,
        allow_nulls,
        threads: thread_count(threads)?,
        large_offsets: false,
    };
    let imported = array(py, column)?;
    let Ok(imported) = imported.bind(py).cast::<PyArray>() else {
        return Err(errors::type_error(format!(
            "column is {}; expected a column of text",
            type_name(column)
        )));
    };
    let chunks = imported.get().column().chunks.clone();
    let ids = errors::no_panic("tokenizing a column", || {
        py.detach(|| {
            let mut first_row = 0u64;
            let mut out = Vec::with_capacity(chunks.len());
            for chunk in &chunks {
                let ids =
                    tokenize_column(chunk.as_ref(), &tokenizer, &options).map_err(|error| {
                        match error {
                            arrow_dlpack_loader::Error::NullText { row } => {
                                arrow_dlpack_loader::Error::NullText {
                                    row: row + first_row,
                                }
                            }
                            arrow_dlpack_loader::Error::Tokenize { row, source } => {
                                arrow_dlpack_loader::Error::Tokenize {
                                    row: row + first_row,
                                    source,
                                }
                            }
                            other => other,
                        }
                    })?;
                first_row += chunk.len() as u64;
                out.push(ids);
            }
            Ok(out)
        })
        .map_err(errors::loader_error)
    })?;
    let item = std::sync::Arc::new(Field::new_list_field(tokenizer.id_type(), true));
    let field = std::sync::Arc::new(Field::new("ids", DataType::List(item), true));
    wrap_column(py, field, ids)
}
