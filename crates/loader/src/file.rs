//! What the file sources (Arrow IPC files and streams, Parquet files) share: opening a path with
//! an error that names it, and the projection of a file's schema onto the requested columns.

use std::fs::File;
use std::path::Path;

use arrow_schema::Schema;

use crate::{Error, Result};

/// Opens `path` for reading; a failure is [`Error::Io`] naming the path.
pub(crate) fn open(path: &Path) -> Result<File> {
    File::open(path).map_err(|error| Error::io(path, error))
}

/// The indices of the top-level fields of `schema` named in `columns`, in the file's order.
///
/// Names absent from the file are skipped here and left for the column resolution to report
/// with the batch's column names.
pub(crate) fn projection(schema: &Schema, columns: &[String]) -> Vec<usize> {
    schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, field)| columns.iter().any(|column| column == field.name()))
        .map(|(index, _)| index)
        .collect()
}
