//! Every record batch of a [`Source`], every column, in the source's order: what
//! [`tokenize_to_file`](super::tokenize_to_file) reads, through the loader's own readers (memory-mapped IPC
//! files, Parquet row groups decoded on worker threads, IPC streams, objects in object storage)
//! but without a [`BatchSpec`](crate::BatchSpec), whose columns must all become tensors.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::columns::check_same_columns;
use crate::ipc::{self, IpcFile, IpcRecordBatch, StreamInput};
use crate::parquet::{ParquetFile, ParquetPieces, RowGroup};
use crate::{Error, Result, Source};

/// The record batches of a source, in order.
pub(crate) struct SourceBatches {
    /// The columns of every record batch.
    pub(crate) schema: SchemaRef,
    /// The rows in all, when the files' metadata tells.
    pub(crate) num_rows: Option<u64>,
    pub(crate) batches: Box<dyn Iterator<Item = Result<RecordBatch>> + Send>,
    /// Set when reading ends, so that fetches from object storage waiting on a server stop.
    stop: Option<Arc<AtomicBool>>,
}

impl Drop for SourceBatches {
    fn drop(&mut self) {
        if let Some(stop) = &self.stop {
            stop.store(true, Ordering::Relaxed);
        }
    }
}

/// Opens `source` (the metadata of its files is read here) for reading every record batch;
/// Parquet row groups are decoded on `threads` worker threads.
pub(crate) fn read_source(source: Source, threads: usize) -> Result<SourceBatches> {
    match source {
        Source::IpcFiles(paths) => {
            let files = paths
                .iter()
                .map(|path| IpcFile::open(path, None))
                .collect::<Result<Vec<_>>>()?;
            ipc_files(&paths, files)
        }
        Source::ParquetFiles(paths) => {
            let files = paths
                .iter()
                .map(|path| ParquetFile::open(path, None))
                .collect::<Result<Vec<_>>>()?;
            parquet_files(&paths, files, threads)
        }
        Source::IpcStreams(paths) => streams(paths.into_iter().map(StreamInput::Path).collect()),
        Source::RecordBatches { schema, batches } => Ok(SourceBatches {
            schema,
            num_rows: Some(batches.iter().map(|batch| batch.num_rows() as u64).sum()),
            batches: Box::new(batches.into_iter().map(Ok)),
            stop: None,
        }),
        Source::Reader(reader) => Ok(SourceBatches {
            schema: reader.schema(),
            num_rows: None,
            batches: Box::new(reader.map(|batch| batch.map_err(Error::from))),
            stop: None,
        }),
        #[cfg(feature = "object-store")]
        Source::Objects(objects) => {
            use crate::file::Format;
            let opened = crate::remote::open(objects, None)?;
            let stop = opened.stop.clone();
            let names: Vec<PathBuf> = opened
                .objects
                .iter()
                .map(|(object, _)| object.name().to_path_buf())
                .collect();
            let read = match opened.format {
                Format::Parquet => {
                    let files = opened
                        .objects
                        .into_iter()
                        .map(|(object, tail)| ParquetFile::open_remote(object, tail, None))
                        .collect::<Result<Vec<_>>>()?;
                    parquet_files(&names, files, threads)
                }
                Format::IpcFile => {
                    let files = opened
                        .objects
                        .into_iter()
                        .map(|(object, tail)| IpcFile::open_remote(object, tail, None))
                        .collect::<Result<Vec<_>>>()?;
                    ipc_files(&names, files)
                }
                Format::IpcStream => streams(
                    opened
                        .objects
                        .into_iter()
                        .map(|(object, _)| StreamInput::Remote(object))
                        .collect(),
                ),
            };
            read.map(|mut read| {
                read.stop = Some(stop);
                read
            })
        }
    }
}

/// The schema of the first of `schemas`, after checking that the others have the same columns.
fn common_schema<'a>(
    paths: &[PathBuf],
    mut schemas: impl Iterator<Item = &'a SchemaRef>,
) -> Result<Option<SchemaRef>> {
    let Some(first) = schemas.next() else {
        return Ok(None);
    };
    for (path, schema) in paths.iter().skip(1).zip(schemas) {
        check_same_columns(schema, first, || format!("file {}", path.display()))?;
    }
    Ok(Some(first.clone()))
}

/// No files: nothing to read.
fn no_files() -> Result<SourceBatches> {
    Err(Error::InvalidSpec {
        reason: "the source names no files; expected at least one".to_string(),
    })
}

fn ipc_files(paths: &[PathBuf], files: Vec<IpcFile>) -> Result<SourceBatches> {
    let Some(schema) = common_schema(paths, files.iter().map(IpcFile::schema))? else {
        return no_files();
    };
    let units: Vec<IpcRecordBatch> = files
        .iter()
        .enumerate()
        .flat_map(|(file, ipc)| {
            ipc.rows()
                .iter()
                .enumerate()
                .map(move |(index, &rows)| IpcRecordBatch { file, index, rows })
        })
        .collect();
    let num_rows = units.iter().map(|unit| unit.rows as u64).sum();
    Ok(SourceBatches {
        schema,
        num_rows: Some(num_rows),
        batches: Box::new(ipc::read_planned(std::sync::Arc::new(files), units)),
        stop: None,
    })
}

fn parquet_files(
    paths: &[PathBuf],
    files: Vec<ParquetFile>,
    threads: usize,
) -> Result<SourceBatches> {
    let Some(schema) = common_schema(paths, files.iter().map(ParquetFile::schema))? else {
        return no_files();
    };
    let mut units = Vec::new();
    for (file, parquet) in files.iter().enumerate() {
        for (row_group, rows) in parquet.row_group_rows()?.into_iter().enumerate() {
            units.push(RowGroup {
                file,
                row_group,
                rows,
                skip: 0,
            });
        }
    }
    let num_rows = units.iter().map(|unit| unit.rows).sum();
    let pieces = ParquetPieces::start(files, units, threads)?;
    Ok(SourceBatches {
        schema,
        num_rows: Some(num_rows),
        batches: Box::new(pieces.map(|piece| piece.map(|(_, batch, _)| batch))),
        stop: None,
    })
}

fn streams(inputs: Vec<StreamInput>) -> Result<SourceBatches> {
    let Some(first) = inputs.first() else {
        return no_files();
    };
    let schema = ipc::stream_summary(first, false)?.schema;
    Ok(SourceBatches {
        schema,
        num_rows: None,
        batches: Box::new(ipc::read_streams(inputs)),
        stop: None,
    })
}
