//! Where record batches come from ([`Source`]), and the plan that orders, shuffles and shards
//! them before any data is read.

use std::fmt;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_ipc::reader::StreamReader;

use crate::ipc::IpcFile;
use crate::parquet::{ParquetFile, ParquetPieces, RowGroup};
use crate::rng::Rng;
use crate::{BatchSpec, Error, Result, file};

/// The streams of the shuffle's generators, so that the unit order and the row order of one seed
/// are independent.
pub(crate) const UNIT_STREAM: u64 = 1;

/// A source of record batches.
///
/// Files are read on the loader's background threads; their metadata (IPC footers, Parquet
/// footers) is read when the loader is made, so that a missing or truncated file fails there.
pub enum Source {
    /// Arrow IPC files (`.arrow`, `.feather` v2), memory-mapped and decoded zero-copy; their
    /// record batches are the units of shuffling and sharding.
    IpcFiles(Vec<PathBuf>),
    /// Arrow IPC streams (`.arrows`), read in order; record batches are dealt to the shards
    /// round-robin and the file order is shuffled.
    IpcStreams(Vec<PathBuf>),
    /// Parquet files; row groups are the units of shuffling and sharding, decoded in parallel.
    ParquetFiles(Vec<PathBuf>),
    /// Any reader of record batches, read in order on the background thread; record batches
    /// are dealt to the shards round-robin.
    Reader(Box<dyn RecordBatchReader + Send>),
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::IpcFiles(paths) => f.debug_tuple("IpcFiles").field(paths).finish(),
            Source::IpcStreams(paths) => f.debug_tuple("IpcStreams").field(paths).finish(),
            Source::ParquetFiles(paths) => f.debug_tuple("ParquetFiles").field(paths).finish(),
            Source::Reader(reader) => f.debug_tuple("Reader").field(&reader.schema()).finish(),
        }
    }
}

impl Source {
    /// Files of one format, told from their extension: `.arrow`, `.feather` and `.ipc` are IPC
    /// files, `.arrows` IPC streams, `.parquet` and `.pq` Parquet.
    pub fn from_paths<P: AsRef<Path>>(paths: impl IntoIterator<Item = P>) -> Result<Self> {
        let paths: Vec<PathBuf> = paths
            .into_iter()
            .map(|p| p.as_ref().to_path_buf())
            .collect();
        let kind = |path: &Path| -> Result<u8> {
            match path
                .extension()
                .and_then(|e| e.to_str())
                .map(str::to_ascii_lowercase)
                .as_deref()
            {
                Some("arrow" | "feather" | "ipc") => Ok(0),
                Some("arrows") => Ok(1),
                Some("parquet" | "pq") => Ok(2),
                _ => Err(Error::UnknownFormat {
                    path: path.to_path_buf(),
                }),
            }
        };
        let Some(first) = paths.first() else {
            return Ok(Source::IpcFiles(paths));
        };
        let first_kind = kind(first)?;
        for path in &paths[1..] {
            if kind(path)? != first_kind {
                return Err(Error::InvalidSpec {
                    reason: format!(
                        "{} and {} are of different formats; expected files of one format",
                        first.display(),
                        path.display()
                    ),
                });
            }
        }
        Ok(match first_kind {
            0 => Source::IpcFiles(paths),
            1 => Source::IpcStreams(paths),
            _ => Source::ParquetFiles(paths),
        })
    }

    /// Any record-batch reader (an in-memory table, a stream from another library).
    pub fn reader(reader: impl RecordBatchReader + Send + 'static) -> Self {
        Source::Reader(Box::new(reader))
    }
}

/// Record batches, one after another, on the loader thread.
pub(crate) trait Pieces: Send {
    /// The next record batch; `None` at the end.
    fn next_piece(&mut self) -> Option<Result<RecordBatch>>;
}

/// A source made ready: its record batches and, when the metadata tells, this shard's rows.
pub(crate) struct Plan {
    pub(crate) pieces: Box<dyn Pieces>,
    pub(crate) num_rows: Option<u64>,
}

/// The columns the spec reads, or `None` for all.
fn needed_columns(spec: &BatchSpec) -> Option<Vec<String>> {
    if spec.columns.is_empty() && spec.groups.is_empty() {
        return None;
    }
    let mut names = spec.columns.clone();
    for group in &spec.groups {
        names.extend(group.columns.iter().cloned());
    }
    names.extend(spec.masks.iter().cloned());
    names.sort();
    names.dedup();
    Some(names)
}

/// Orders `units` (shuffled when the spec asks, with the same permutation in every shard) and
/// keeps this shard's: every `num_shards`-th from `shard_index`.
fn deal<T>(mut units: Vec<T>, spec: &BatchSpec) -> Vec<T> {
    if spec.shuffle {
        Rng::new(spec.seed, UNIT_STREAM).shuffle(&mut units);
    }
    units
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % spec.num_shards == spec.shard_index)
        .map(|(_, unit)| unit)
        .collect()
}

/// Reads the metadata of `source` and plans this shard's record batches.
pub(crate) fn plan(source: Source, spec: &BatchSpec) -> Result<Plan> {
    let columns = needed_columns(spec);
    match source {
        Source::IpcFiles(paths) => {
            let files = paths
                .iter()
                .map(|path| IpcFile::open(path, columns.as_deref()))
                .collect::<Result<Vec<_>>>()?;
            check_file_schemas(&paths, files.iter().map(|f| f.schema()))?;
            let units: Vec<(usize, usize, usize)> = files
                .iter()
                .enumerate()
                .flat_map(|(f, file)| {
                    file.rows()
                        .iter()
                        .enumerate()
                        .map(move |(b, &rows)| (f, b, rows))
                })
                .collect();
            let units = deal(units, spec);
            let num_rows = units.iter().map(|&(_, _, rows)| rows as u64).sum();
            let pieces = IpcPieces {
                files,
                units: units.into_iter(),
            };
            Ok(Plan {
                pieces: Box::new(pieces),
                num_rows: Some(num_rows),
            })
        }
        Source::ParquetFiles(paths) => {
            let files = paths
                .iter()
                .map(|path| ParquetFile::open(path, columns.as_deref()))
                .collect::<Result<Vec<_>>>()?;
            check_file_schemas(&paths, files.iter().map(|f| f.schema()))?;
            let units: Vec<RowGroup> = files
                .iter()
                .enumerate()
                .flat_map(|(file, parquet)| {
                    parquet.row_group_rows().into_iter().enumerate().map(
                        move |(row_group, rows)| RowGroup {
                            file,
                            row_group,
                            rows,
                        },
                    )
                })
                .collect();
            let units = deal(units, spec);
            let num_rows = units.iter().map(|unit| unit.rows as u64).sum();
            let pieces = ParquetPieces::start(files, units, spec.decode_threads())?;
            Ok(Plan {
                pieces: Box::new(pieces),
                num_rows: Some(num_rows),
            })
        }
        Source::IpcStreams(mut paths) => {
            if spec.shuffle {
                Rng::new(spec.seed, UNIT_STREAM).shuffle(&mut paths);
            }
            let pieces = Dealt::new(
                StreamPieces {
                    paths: paths.into_iter(),
                    current: None,
                },
                spec,
            );
            Ok(Plan {
                pieces: Box::new(pieces),
                num_rows: None,
            })
        }
        Source::Reader(reader) => Ok(Plan {
            pieces: Box::new(Dealt::new(ReaderPieces(reader), spec)),
            num_rows: None,
        }),
    }
}

/// Refuses files whose columns differ from the first file's.
fn check_file_schemas<'a>(
    paths: &[PathBuf],
    schemas: impl Iterator<Item = &'a arrow_schema::SchemaRef>,
) -> Result<()> {
    let mut first: Option<&arrow_schema::SchemaRef> = None;
    for (path, schema) in paths.iter().zip(schemas) {
        let Some(expected) = first else {
            first = Some(schema);
            continue;
        };
        let same = schema.fields().len() == expected.fields().len()
            && schema
                .fields()
                .iter()
                .zip(expected.fields())
                .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
        if !same {
            let describe = |s: &arrow_schema::Schema| {
                let fields: Vec<String> = s
                    .fields()
                    .iter()
                    .map(|f| format!("{}: {}", f.name(), f.data_type()))
                    .collect();
                format!("[{}]", fields.join(", "))
            };
            return Err(Error::SchemaMismatch {
                what: format!("file {}", path.display()),
                found: describe(schema),
                expected: describe(expected),
            });
        }
    }
    Ok(())
}

/// The planned record batches of memory-mapped IPC files.
struct IpcPieces {
    files: Vec<IpcFile>,
    units: std::vec::IntoIter<(usize, usize, usize)>,
}

impl Pieces for IpcPieces {
    fn next_piece(&mut self) -> Option<Result<RecordBatch>> {
        let (file, batch, _) = self.units.next()?;
        Some(self.files[file].read(batch))
    }
}

/// The record batches of IPC stream files, one file after another.
struct StreamPieces {
    paths: std::vec::IntoIter<PathBuf>,
    current: Option<(PathBuf, StreamReader<BufReader<File>>)>,
}

impl Pieces for StreamPieces {
    fn next_piece(&mut self) -> Option<Result<RecordBatch>> {
        loop {
            if let Some((path, reader)) = &mut self.current {
                match reader.next() {
                    Some(Ok(batch)) => return Some(Ok(batch)),
                    Some(Err(error)) => return Some(Err(Error::ipc(path, error.to_string()))),
                    None => self.current = None,
                }
            }
            let path = self.paths.next()?;
            let file = match file::open(&path) {
                Ok(file) => file,
                Err(error) => return Some(Err(error)),
            };
            match StreamReader::try_new(BufReader::new(file), None) {
                Ok(reader) => self.current = Some((path, reader)),
                Err(error) => return Some(Err(Error::ipc(&path, error.to_string()))),
            }
        }
    }
}

/// The record batches of a reader.
struct ReaderPieces(Box<dyn RecordBatchReader + Send>);

impl Pieces for ReaderPieces {
    fn next_piece(&mut self) -> Option<Result<RecordBatch>> {
        self.0.next().map(|batch| batch.map_err(Error::from))
    }
}

/// This shard's record batches of a sequential source: every `num_shards`-th from
/// `shard_index`.
struct Dealt<P> {
    inner: P,
    index: usize,
    shard_index: usize,
    num_shards: usize,
}

impl<P> Dealt<P> {
    fn new(inner: P, spec: &BatchSpec) -> Self {
        Dealt {
            inner,
            index: 0,
            shard_index: spec.shard_index,
            num_shards: spec.num_shards,
        }
    }
}

impl<P: Pieces> Pieces for Dealt<P> {
    fn next_piece(&mut self) -> Option<Result<RecordBatch>> {
        loop {
            let piece = self.inner.next_piece()?;
            let index = self.index;
            self.index += 1;
            if piece.is_err() || index % self.num_shards == self.shard_index {
                return Some(piece);
            }
        }
    }
}
