//! The one conversion of a Python tokenizer to the loader's [`Tokenizer`]: a path to a
//! `tokenizer.json`, its JSON text (a `str` starting with `{`), a `tokenizers.Tokenizer` (its
//! `to_str()`), or a `transformers` fast tokenizer (its `backend_tokenizer.to_str()`), told
//! apart by their attributes; nothing here imports `tokenizers` or `transformers`. The JSON is
//! read without the GIL.

use std::path::PathBuf;

use arrow_dlpack_loader::Tokenizer;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::errors;
use crate::type_names::type_name;

/// The tokenizer `object` stands for: a tokenizer's JSON text (a `str` that starts with `{`), a
/// path (`str` or `os.PathLike`) to a `tokenizer.json`, an object with `backend_tokenizer` (a
/// `transformers` fast tokenizer), or an object with `to_str()` (a `tokenizers.Tokenizer`);
/// anything else is a `TypeError`.
pub(crate) fn tokenizer_from_python(object: &Bound<'_, PyAny>) -> PyResult<Tokenizer> {
    let py = object.py();
    // The JSON text itself, as `Tokenizer.to_str()` gives it (no file's path starts with `{`):
    // read as a path, it was an OSError of a file name too long, showing the whole text.
    if let Ok(text) = object.cast::<PyString>()
        && let Ok(text) = text.to_str()
        && text
            .trim_start_matches('\u{feff}')
            .trim_start()
            .starts_with('{')
    {
        let json = text.to_string();
        return py
            .detach(|| Tokenizer::from_json(&json))
            .map_err(errors::loader_error);
    }
    if object.is_instance_of::<PyString>() || object.hasattr("__fspath__")? {
        let path: PathBuf = object.extract()?;
        return py
            .detach(|| Tokenizer::from_file(&path))
            .map_err(errors::loader_error);
    }
    let backend = match crate::protocols::optional_attribute(object, "backend_tokenizer")? {
        Some(backend) => backend,
        None => object.clone(),
    };
    let Some(to_str) = crate::protocols::optional_attribute(&backend, "to_str")? else {
        return Err(errors::type_error(format!(
            "tokenizer is {}; expected a path to a tokenizer.json, its JSON text, a \
             tokenizers.Tokenizer or a transformers fast tokenizer (one with backend_tokenizer)",
            type_name(object)
        )));
    };
    let json = to_str.call0()?;
    let Ok(json) = json.extract::<String>() else {
        return Err(errors::type_error(format!(
            "{}.to_str() gave {}; expected the tokenizer's JSON as a str",
            type_name(&backend),
            type_name(&json)
        )));
    };
    let tokenizer = py
        .detach(|| Tokenizer::from_json(&json))
        .map_err(errors::loader_error)?;
    // The JSON must hold the vocabulary the object encodes with: `tokenizers` writes a
    // vocabulary holding the id 2^32 - 1 as an empty one, whose ids would all be lost.
    if let Some(size) = crate::protocols::optional_attribute(&backend, "get_vocab_size")? {
        let tokens = size.call1((true,))?;
        if tokens.extract::<usize>().ok() != Some(tokenizer.token_count()) {
            return Err(errors::value_error(format!(
                "cannot read the tokenizer: {}.to_str() holds {} tokens, and its \
                 get_vocab_size(True) gave {}; expected its JSON to hold its whole vocabulary \
                 (save it with a vocabulary of ids numbered from 0)",
                type_name(&backend),
                tokenizer.token_count(),
                tokens.repr()?
            )));
        }
    }
    Ok(tokenizer)
}
