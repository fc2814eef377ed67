//! The checks of a source before any data is read: the spec against its schema, files of one
//! schema, and row counts that fit in 64 bits.

use std::path::PathBuf;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::columns::{Columns, check_same_columns};
use crate::{BatchSpec, Error, Result};

/// The sum of `rows`, refused when it does not fit in 64 bits.
pub(super) fn total_rows(rows: impl Iterator<Item = u64>) -> Result<u64> {
    let mut total: u64 = 0;
    for count in rows {
        total = total.checked_add(count).ok_or_else(|| Error::InvalidSpec {
            reason: "the files declare more than 2**64 rows in all; expected a row count that \
                     fits in 64 bits"
                .to_string(),
        })?;
    }
    Ok(total)
}

/// Checks the spec against a source's full schema (every column it has, before projection):
/// names, duplicates, types and at least one column to load, before any data is read or any
/// thread starts; `what` names the source for the message.
pub(super) fn check_spec(
    spec: &BatchSpec,
    schema: &SchemaRef,
    what: impl FnOnce() -> String,
) -> Result<()> {
    // Text columns that a sequence tokenizes are checked as the token ids they become.
    let empty = crate::sequences::text::tokenize_texts(
        &spec.sequences,
        spec.allow_nulls,
        1,
        RecordBatch::new_empty(schema.clone()),
        0,
    )?;
    let columns = Columns::resolve(spec, &empty)?;
    if columns.outputs.is_empty() && columns.masks.is_empty() {
        let reason = if spec.columns.as_ref().is_some_and(Vec::is_empty) {
            // Nothing selected, rather than nothing in the source.
            "columns is empty and no group, mask, sequence or image column names a column of \
             the source; expected at least one column to load"
                .to_string()
        } else {
            format!(
                "{} has no columns to load; expected at least one column",
                what()
            )
        };
        return Err(Error::InvalidSpec { reason });
    }
    Ok(())
}

/// Refuses files whose (projected) columns differ from the first file's, and checks the spec
/// against the first file's full schema (names, types, at least one column) before any data is
/// decoded. `schemas` holds each file's full and projected schema.
pub(super) fn check_file_schemas<'a>(
    paths: &[PathBuf],
    schemas: impl Iterator<Item = (&'a SchemaRef, &'a SchemaRef)>,
    spec: &BatchSpec,
) -> Result<()> {
    let mut files = paths.iter().zip(schemas);
    let Some((first, (full, expected))) = files.next() else {
        return Ok(());
    };
    check_spec(spec, full, || first.display().to_string())?;
    for (path, (_, schema)) in files {
        check_same_columns(schema, expected, || format!("file {}", path.display()))?;
    }
    Ok(())
}
