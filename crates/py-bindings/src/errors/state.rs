//! The Python wording of a saved state that does not read as one: where in the dict (the keys
//! and indices, as Python subscripts) and what was found there against what was expected, in
//! Python's type names, where serde's message names Rust types (`u64`, `struct Settings`).

use std::fmt::Write;

use serde_path_to_error::Segment;

/// The message of `error` for the state given as `field`: `state['settings']['seed'] is 1.5
/// (a float); expected a non-negative int`.
pub(crate) fn state_message(
    field: &str,
    state: &serde_json::Value,
    error: &serde_path_to_error::Error<serde_json::Error>,
) -> String {
    let mut at = field.to_string();
    // The value the path leads to, followed alongside it.
    let mut reached = Some(state);
    for segment in error.path().iter() {
        match segment {
            Segment::Seq { index } => {
                let _ = write!(at, "[{index}]");
                reached = reached.and_then(|value| value.get(index));
            }
            Segment::Map { key } => {
                let _ = write!(at, "[{key:?}]");
                reached = reached.and_then(|value| value.get(key));
            }
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    let inner = error.inner().to_string();
    // A dict told apart by its "kind" (a position) is read whole before its fields, so the path
    // stops at it: the key whose value is the one serde found (where one key holds it) goes on.
    if let Some(serde_json::Value::Object(fields)) = reached
        && fields.contains_key("kind")
        && let Some(found) = found_of(&inner)
    {
        let mut holding = Vec::new();
        for (key, value) in fields.iter().filter(|(key, _)| key.as_str() != "kind") {
            holding_paths(found, value, format!("[{key:?}]"), 2, &mut holding);
        }
        if let [path] = holding.as_slice() {
            at.push_str(path);
        }
    }
    let at = at.replace('"', "'");
    let mut message = format!("{at} {}", python_words(&inner));
    // A dict that is no loader's state at all (a DataLoader's own state_dict(), a model's):
    // what a state is, and where the other one goes.
    if error.path().iter().next().is_none()
        && inner.starts_with("missing field")
        && state.get("version").is_none()
    {
        message.push_str(
            "; expected a loader's state: ad.batches(...).state_dict(), ad.merge_states(...), or \
             BatchDataset.state_dict() (a StatefulDataLoader's state_dict() goes back to its \
             own load_state_dict())",
        );
    }
    message
}

/// serde's message (`invalid type: floating point `1.5`, expected u64`, `missing field `x``) in
/// Python's words, following what the message names.
fn python_words(message: &str) -> String {
    if let Some(rest) = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))
        && let Some((found, expected)) = rest.split_once(", expected ")
    {
        return format!(
            "is {}; expected {}",
            found_words(found),
            expected_words(expected)
        );
    }
    if let Some(name) = message.strip_prefix("missing field ") {
        return format!("lacks the key {}", quoted(name));
    }
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let name = rest.split_once(',').map_or(rest, |(name, _)| name);
        return format!("has the unknown key {}", quoted(name));
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let name = rest.split_once(',').map_or(rest, |(name, _)| name);
        return format!("has the unknown kind {}", quoted(name));
    }
    if let Some(rest) = message.strip_prefix("invalid length ") {
        return match rest.split_once(", expected ") {
            Some((length, expected)) => {
                format!("has length {length}; expected {}", expected_words(expected))
            }
            None => format!("has length {rest}"),
        };
    }
    format!("is not a loader state: {message}")
}

/// What serde's message says it found: an invalid type or value (`string "3"`, `floating
/// point `1.5``, `integer `-1``) or a sequence of an invalid length (`length 3`).
fn found_of(message: &str) -> Option<&str> {
    if let Some(rest) = message.strip_prefix("invalid length ") {
        return rest.split_once(", expected ").map(|(length, _)| length);
    }
    let rest = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))?;
    rest.split_once(", expected ").map(|(found, _)| found)
}

/// The paths (as Python subscripts, after `at`) of the values in `value`, down to `depth`
/// levels of lists and dicts, that are what serde `found`.
fn holding_paths(
    found: &str,
    value: &serde_json::Value,
    at: String,
    depth: usize,
    paths: &mut Vec<String>,
) {
    if found_matches(found, value) {
        paths.push(at.clone());
    }
    if depth == 0 {
        return;
    }
    match value {
        serde_json::Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                holding_paths(found, item, format!("{at}[{index}]"), depth - 1, paths);
            }
        }
        serde_json::Value::Object(fields) => {
            for (key, item) in fields {
                holding_paths(found, item, format!("{at}[{key:?}]"), depth - 1, paths);
            }
        }
        _ => {}
    }
}

/// Whether `value` is what serde described as `found`.
fn found_matches(found: &str, value: &serde_json::Value) -> bool {
    use serde_json::Value;
    let shown = |prefix: &str| {
        found
            .strip_prefix(prefix)
            .map(|shown| shown.trim_matches('`'))
    };
    match value {
        Value::String(text) => shown("string ").is_some_and(|shown| {
            serde_json::from_str::<String>(shown).is_ok_and(|parsed| &parsed == text)
        }),
        Value::Bool(flag) => shown("boolean ") == Some(if *flag { "true" } else { "false" }),
        Value::Number(number) => shown("integer ")
            .or_else(|| shown("floating point "))
            .is_some_and(|shown| {
                number.to_string() == shown
                    || number
                        .as_f64()
                        .zip(shown.parse::<f64>().ok())
                        .is_some_and(|(a, b)| a == b)
            }),
        Value::Null => matches!(found, "null" | "unit value"),
        Value::Object(_) => found == "map",
        Value::Array(items) => {
            found == "sequence"
                || found
                    .parse::<usize>()
                    .is_ok_and(|length| length == items.len())
        }
    }
}

/// A name in serde's backquotes, in Python's quotes.
fn quoted(name: &str) -> String {
    format!("'{}'", name.trim_matches('`'))
}

/// What serde found (`floating point `1.5``, `string "3"`, `map`), as Python shows it.
fn found_words(found: &str) -> String {
    let value = |prefix: &str| {
        found
            .strip_prefix(prefix)
            .map(|value| value.trim_matches('`').to_string())
    };
    if let Some(value) = value("floating point ") {
        // JSON gives an int beyond 64 bits (a forged 2**64) as a float too: a state holds no
        // float, so a whole one that large is said to be too large.
        let whole_beyond_64_bits = value
            .parse::<f64>()
            .is_ok_and(|number| number.fract() == 0.0 && number.abs() >= 1.8e19);
        if whole_beyond_64_bits {
            return format!("{value} (an int beyond 64 bits, or a float)");
        }
        return format!("{value} (a float)");
    }
    if let Some(value) = value("integer ") {
        return format!("{value} (an int)");
    }
    if let Some(value) = value("boolean ") {
        let value = if value == "true" { "True" } else { "False" };
        return format!("{value} (a bool)");
    }
    if let Some(value) = value("string ") {
        return format!("'{}' (a str)", value.trim_matches('"'));
    }
    match found {
        "null" | "unit value" => "None".to_string(),
        "map" => "a dict".to_string(),
        "sequence" => "a list".to_string(),
        other => other.to_string(),
    }
}

/// What serde expected (`u64`, `struct Settings`, `a sequence`), as Python names it.
fn expected_words(expected: &str) -> String {
    let trimmed = expected.trim();
    match trimmed {
        "u8" | "u16" | "u32" | "u64" | "usize" => return "a non-negative int".to_string(),
        "i8" | "i16" | "i32" | "i64" | "isize" => return "an int".to_string(),
        "f32" | "f64" => return "a float".to_string(),
        "a boolean" | "bool" => return "a bool".to_string(),
        "a string" | "string" => return "a str".to_string(),
        "a sequence" => return "a list".to_string(),
        "a map" => return "a dict".to_string(),
        _ => {}
    }
    if trimmed == "variant identifier" {
        return "the name of a kind (a str)".to_string();
    }
    if trimmed.starts_with("struct ")
        || trimmed.starts_with("enum ")
        || trimmed.starts_with("internally tagged enum ")
    {
        return "a dict".to_string();
    }
    if let Some(rest) = trimmed.strip_prefix("an array of length ") {
        return format!("a list of {rest} items");
    }
    if let Some(count) = trimmed.strip_suffix(" elements in sequence") {
        return format!("a list of {count} items");
    }
    match trimmed {
        "fewer elements in array" => return "a list of fewer items".to_string(),
        "string or map" => return "a str or a dict".to_string(),
        _ => {}
    }
    if let Some(rest) = trimmed.strip_prefix("a tuple of size ") {
        return format!("a list of {rest} items");
    }
    trimmed.replace("u64", "int").replace('`', "'")
}
