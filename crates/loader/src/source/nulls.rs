//! Where a plan writes nulls as NaN: [`NullToNan::Auto`] made explicit from the null counts
//! that a source's metadata declares (Parquet statistics, IPC record-batch headers, in-memory
//! record batches), summed by column name over every file; and the nulls that every batch
//! holding one would refuse, refused when the loader is made.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arrow_schema::{DataType, Schema};

use crate::columns::resolve_null_to_nan;
use crate::{BatchSpec, Error, NullToNan, Result};

/// The null count of each column, by name, over files each of which gives its full schema and
/// the count of each of its columns: a column's total where every file tells it, else `None`.
fn null_counts_by_name<'a>(
    files: impl Iterator<Item = (&'a Schema, &'a [Option<u64>])>,
) -> BTreeMap<String, Option<u64>> {
    let mut totals: BTreeMap<String, Option<u64>> = BTreeMap::new();
    let mut first = true;
    for (schema, counts) in files {
        let counts = counts.iter().copied();
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

/// One file as [`files_null_to_nan`] reads it: its path, full schema, and the null count of
/// each of its columns where its metadata tells it.
pub(super) type FileNulls<'a> = (&'a Path, &'a Schema, Vec<Option<u64>>);

/// The spec's [`NullToNan`] made explicit for `files` (the first file's schema decides the
/// columns); a column they say holds nulls that its batches would refuse is refused here
/// ([`refuse_declared_nulls`]), naming the first file that declares them.
pub(super) fn files_null_to_nan(spec: &BatchSpec, files: &[FileNulls<'_>]) -> Result<NullToNan> {
    let Some(&(_, schema, _)) = files.first() else {
        return Ok(spec.null_to_nan.clone());
    };
    let counts = null_counts_by_name(
        files
            .iter()
            .map(|(_, schema, counts)| (*schema, &counts[..])),
    );
    let declaring = |column: &str| -> Option<PathBuf> {
        files.iter().find_map(|(path, schema, counts)| {
            let index = schema.index_of(column).ok()?;
            counts
                .get(index)
                .copied()
                .flatten()
                .filter(|&count| count > 0)
                .map(|_| path.to_path_buf())
        })
    };
    let nulls = |name: &str| counts.get(name).copied().flatten();
    planned_null_to_nan(spec, schema, nulls).map_err(|error| {
        // The column that holds them: a group's, or the single column itself.
        let column = match &error {
            Error::Column {
                source: arrow_dlpack::Error::ColumnNulls { column, .. },
                ..
            }
            | Error::Column { column, .. } => column,
            _ => return error,
        };
        match declaring(column) {
            Some(path) => Error::DeclaredNulls {
                path,
                source: Box::new(error),
            },
            None => error,
        }
    })
}

/// The spec's [`NullToNan`] made explicit from `nulls`, the null count of each column where the
/// source (in memory) tells it, after [`refuse_declared_nulls`].
pub(super) fn planned_null_to_nan(
    spec: &BatchSpec,
    schema: &Schema,
    nulls: impl Fn(&str) -> Option<u64>,
) -> Result<NullToNan> {
    let resolved = resolve_null_to_nan(spec, schema, &nulls);
    refuse_declared_nulls(spec, &resolved, schema, &nulls)?;
    Ok(resolved)
}

/// Refuses, when the loader is made, a column whose nulls every batch holding one would refuse,
/// where `nulls` (the source's metadata) says it holds some: a primitive or boolean single
/// column without `allow_nulls` whose nulls are not written as NaN (`null_to_nan`, as
/// resolved), and a column of a group whose nulls are not. Without this, a run failed at the
/// batch that held the first null, hours in, on one rank of many while the others waited at a
/// collective; now every rank fails at once, with the error that batch would have given (its
/// count the source's). Lists, fixed-size lists and images are left to their batches: their
/// statistics count the nulls of their values too.
pub(super) fn refuse_declared_nulls(
    spec: &BatchSpec,
    null_to_nan: &NullToNan,
    schema: &Schema,
    nulls: impl Fn(&str) -> Option<u64>,
) -> Result<()> {
    let writes_nan = |name: &str| match null_to_nan {
        NullToNan::Off => false,
        NullToNan::Auto => true,
        NullToNan::Columns(names) => names.iter().any(|named| named == name),
    };
    let held = |column: &str| {
        nulls(column)
            .filter(|&count| count > 0)
            .map(|count| usize::try_from(count).unwrap_or(usize::MAX))
    };
    let source_names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    if !spec.allow_nulls {
        for column in spec.single_columns(&source_names) {
            let special = spec.sequence_of(column).is_some() || spec.image_of(column).is_some();
            let Ok(field) = schema.field_with_name(column) else {
                continue;
            };
            let scalar =
                field.data_type().is_primitive() || field.data_type() == &DataType::Boolean;
            if special || !scalar || writes_nan(column) {
                continue;
            }
            if let Some(null_count) = held(column) {
                let source = arrow_dlpack::Error::Nulls {
                    null_count,
                    location: arrow_dlpack::NullLocation::Array { depth: 0 },
                };
                return Err(Error::column(column, source));
            }
        }
    }
    for group in spec.groups.iter().filter(|group| !writes_nan(&group.name)) {
        for column in &group.columns {
            if let Some(null_count) = held(column) {
                let source = arrow_dlpack::Error::ColumnNulls {
                    column: column.clone(),
                    null_count,
                };
                return Err(Error::column(&group.name, source));
            }
        }
    }
    Ok(())
}
