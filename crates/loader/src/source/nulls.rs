//! Where a plan writes nulls as NaN: [`NullToNan::Auto`] made explicit from the null counts
//! that files' metadata declares (Parquet statistics, IPC record-batch headers), summed by column
//! name over every file.

use std::collections::BTreeMap;

use arrow_schema::Schema;

use crate::columns::resolve_null_to_nan;
use crate::{BatchSpec, NullToNan};

/// The null count of each column, by name, over files each of which gives its full schema and
/// the count of each of its columns: a column's total where every file tells it, else `None`.
fn null_counts_by_name<'a>(
    files: impl Iterator<Item = (&'a Schema, Vec<Option<u64>>)>,
) -> BTreeMap<String, Option<u64>> {
    let mut totals: BTreeMap<String, Option<u64>> = BTreeMap::new();
    let mut first = true;
    for (schema, counts) in files {
        let mut seen: BTreeMap<&str, Option<u64>> = BTreeMap::new();
        for (field, count) in schema.fields().iter().zip(counts) {
            seen.insert(field.name().as_str(), count);
        }
        if first {
            totals = seen
                .iter()
                .map(|(name, count)| (name.to_string(), *count))
                .collect();
            first = false;
            continue;
        }
        for (name, total) in totals.iter_mut() {
            *total = match (*total, seen.get(name.as_str()).copied().flatten()) {
                (Some(total), Some(count)) => total.checked_add(count),
                _ => None,
            };
        }
    }
    totals
}

/// The spec's [`NullToNan`] made explicit for files whose full schemas and per-column null counts
/// are `files` (the first file's schema decides the columns).
pub(super) fn files_null_to_nan<'a>(
    spec: &BatchSpec,
    mut files: impl Iterator<Item = (&'a Schema, Vec<Option<u64>>)>,
) -> NullToNan {
    if spec.null_to_nan != NullToNan::Auto {
        return spec.null_to_nan.clone();
    }
    let Some(first) = files.next() else {
        return spec.null_to_nan.clone();
    };
    let schema = first.0;
    let counts = null_counts_by_name(std::iter::once(first).chain(files));
    resolve_null_to_nan(spec, schema, |name| counts.get(name).copied().flatten())
}
