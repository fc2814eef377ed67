//! The `sequences=` option from Python: a dict from column to a mode or to a dict of the
//! sequence's options (padding, truncation, tokenizer, concat packing), each checked by name.

use super::*;

/// The keys of a sequence given as a mapping.
const SEQUENCE_KEYS: [&str; 11] = [
    "mode",
    "pad_value",
    "max_length",
    "pad_to_multiple_of",
    "padding_side",
    "truncation_side",
    "tokenizer",
    "add_special_tokens",
    "bos_token_id",
    "eos_token_id",
    "split_documents",
];

/// Sequences: a mapping from column name to a mode (`"pad"`, `"pack"`, `"jagged"`) or to a
/// mapping of [`SEQUENCE_KEYS`] (`mode` defaulting to `"pad"`); `None` for none.
pub(super) fn sequences(name: &str, value: &Bound<'_, PyAny>) -> PyResult<Vec<Sequence>> {
    if value.is_none() {
        return Ok(Vec::new());
    }
    let modes = SequenceMode::names();
    let entries = mapping(
        name,
        value,
        &format!("a dict from column name to a mode ({modes}) or to a dict of options"),
    )?;
    let mut sequences = Vec::new();
    for item in entries.items()?.iter() {
        let (column, how): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let column = string(&format!("a key of {name}"), &column)?;
        let at = format!("{name}[{column:?}]");
        let mut sequence = Sequence::pad(column);
        if how.is_instance_of::<PyString>() {
            sequence.mode = mode(&at, &how)?;
            sequences.push(sequence);
            continue;
        }
        let options = mapping(
            &at,
            &how,
            &format!("a mode ({modes}) or a dict with keys {SEQUENCE_KEYS:?}"),
        )?;
        let mut add_special_tokens = None;
        // The padding keys given, even at their defaults: the modes that do not pad refuse them.
        let mut padding_keys = Vec::new();
        for item in options.items()?.iter() {
            let (key, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
            let key = string(&format!("a key of {at}"), &key)?;
            let here = format!("{at}[{key:?}]");
            if matches!(
                key.as_str(),
                "pad_value" | "pad_to_multiple_of" | "padding_side"
            ) {
                padding_keys.push(key.clone());
            }
            match key.as_str() {
                "tokenizer" if value.is_none() => sequence.tokenizer = None,
                "tokenizer" => {
                    let tokenizer = crate::tokenizer::tokenizer_from_python(&value)?;
                    sequence.tokenizer = Some(SequenceTokenizer::new(tokenizer));
                }
                "add_special_tokens" => add_special_tokens = Some(flag(&here, &value)?),
                "bos_token_id" => {
                    sequence.bos_token_id = optional(&value, |value| token_id(&here, value))?;
                }
                "eos_token_id" => {
                    sequence.eos_token_id = optional(&value, |value| token_id(&here, value))?;
                }
                "split_documents" => sequence.split_documents = flag(&here, &value)?,
                "mode" => sequence.mode = mode(&here, &value)?,
                "pad_value" => sequence.pad_value = pad_value(&here, &value)?,
                "max_length" => {
                    sequence.max_length = optional(&value, |value| count(&here, value))?;
                }
                "pad_to_multiple_of" => {
                    sequence.pad_to_multiple_of = optional(&value, |value| count(&here, value))?;
                }
                "padding_side" => sequence.padding_side = side(&here, &value)?,
                "truncation_side" => sequence.truncation_side = side(&here, &value)?,
                _ => {
                    // An unknown key is a `TypeError`, as an unknown keyword argument is (and
                    // an unknown key of an image spec).
                    return Err(errors::type_error(format!(
                        "{at}: unknown sequence key {key:?}; expected {}",
                        SEQUENCE_KEYS.join(", ")
                    )));
                }
            }
        }
        if let Some(add) = add_special_tokens {
            let Some(tokenizer) = sequence.tokenizer.take() else {
                return Err(errors::value_error(format!(
                    "{at} sets add_special_tokens without a tokenizer; expected it only beside \
                     \"tokenizer\""
                )));
            };
            sequence.tokenizer = Some(tokenizer.add_special_tokens(add));
        }
        if sequence.mode != SequenceMode::Pad
            && sequence.mode != SequenceMode::Concat
            && let Some(key) = padding_keys.first()
        {
            return Err(errors::value_error(format!(
                "{at} is in mode {:?} and sets {key}; pad_value, pad_to_multiple_of and \
                 padding_side apply to mode \"pad\" only (max_length and truncation_side cut \
                 the rows of every mode)",
                sequence.mode.as_str()
            )));
        }
        sequences.push(sequence);
    }
    Ok(sequences)
}

/// A token id: an int (or an integer with `__index__`) in the range of int64.
fn token_id(at: &str, value: &Bound<'_, PyAny>) -> PyResult<i64> {
    let value = integer(at, value)?;
    value.extract().map_err(|_| {
        errors::value_error(format!(
            "{at} is {value}; expected a token id in the range of int64"
        ))
    })
}

/// A sequence's mode from its name ([`SequenceMode`]'s `FromStr`).
fn mode(at: &str, value: &Bound<'_, PyAny>) -> PyResult<SequenceMode> {
    let name = string(at, value)?;
    name.parse().map_err(|_| {
        errors::value_error(format!(
            "{at} is {name:?}; expected {}",
            SequenceMode::names()
        ))
    })
}

/// A side from its name ([`Side`]'s `FromStr`).
fn side(at: &str, value: &Bound<'_, PyAny>) -> PyResult<Side> {
    let name = string(at, value)?;
    name.parse().map_err(|_| {
        errors::value_error(format!("{at} is {name:?}; expected \"left\" or \"right\""))
    })
}

/// A pad value: a bool, an integer (a Python `int` or anything with `__index__`, signed or
/// unsigned within 64 bits) or a float.
fn pad_value(at: &str, value: &Bound<'_, PyAny>) -> PyResult<PadValue> {
    if let Ok(flag) = value.cast::<PyBool>() {
        return Ok(PadValue::Bool(flag.is_true()));
    }
    if let Ok(float) = value.cast::<PyFloat>() {
        return Ok(PadValue::Float(float.value()));
    }
    if value.hasattr(pyo3::intern!(value.py(), "__index__"))? {
        let int = integer(at, value)?;
        if let Ok(int) = int.extract::<i64>() {
            return Ok(PadValue::Int(int));
        }
        return int.extract::<u64>().map(PadValue::UInt).map_err(|_| {
            errors::value_error(format!(
                "{at} is {int}; expected an int of at most 64 bits (signed or unsigned)"
            ))
        });
    }
    if let Ok(float) = value.extract::<f64>() {
        // A float of another library (numpy's float32).
        return Ok(PadValue::Float(float));
    }
    Err(errors::type_error(format!(
        "{at} is {}; expected int, float or bool",
        type_name(value)
    )))
}
