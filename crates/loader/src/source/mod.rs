//! Where record batches come from ([`Source`]), and the plan that orders, shuffles and shards
//! them before any data is read.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::SchemaRef;

use crate::columns::{check_same_columns, needs_null_counts, resolve_null_to_nan};
use crate::file::{Format, format_of_file};
use crate::images::Locate;
use crate::ipc::{self, IpcFile, IpcRecordBatch, StreamInput};
use crate::parquet::{ParquetFile, ParquetPieces, RowGroup};
use crate::rng::Rng;
use crate::sequences::plan::ShardBatches;
use crate::state::{Item, Settings, Start, Work};
use crate::{BatchSpec, Error, NullToNan, Result};

mod checks;
mod identity;
mod nulls;
mod paths;
mod planned;
mod saved_dataset;
mod start;
mod streams;

use checks::{check_file_schemas, check_spec, total_rows};
pub(crate) use identity::sequence_settings;
use nulls::{files_null_to_nan, planned_null_to_nan};
use start::{file_items, in_stream, never_planned, resume, rows_left, select};
use streams::{plan_in_memory, plan_record_batches, plan_streams};

/// The streams of the shuffle's generators, so that the unit order and the row order of one seed
/// are independent.
pub(crate) const UNIT_STREAM: u64 = 1;

/// A source of record batches.
///
/// Files are read on the loader's background threads; their metadata (IPC footers, Parquet
/// footers) is read when the loader is made, so that a missing or truncated file fails there.
pub enum Source {
    /// Arrow IPC files (`.arrow`, `.feather` v2: files that start with `ARROW1`),
    /// memory-mapped and decoded zero-copy (record batches with compressed buffers, LZ4 or
    /// ZSTD, are decompressed into fresh memory); their record batches are the units of
    /// shuffling and sharding.
    IpcFiles(Vec<PathBuf>),
    /// Arrow IPC streams (`.arrows`, and the `.arrow` files of Hugging Face `datasets`), read in
    /// order; record batches are dealt to the shards round-robin and the file order is
    /// shuffled.
    IpcStreams(Vec<PathBuf>),
    /// Parquet files; row groups are the units of shuffling and sharding, decoded in parallel.
    ParquetFiles(Vec<PathBuf>),
    /// Any reader of record batches, read in order on the background thread; record batches
    /// are dealt to the shards round-robin.
    Reader(Box<dyn RecordBatchReader + Send>),
    /// Record batches in memory, all of `schema`, read in order as a reader's are; unlike a
    /// reader's, their rows and null counts are known when the loader is planned (so that
    /// [`NullToNan::Auto`] promotes only the integer columns that hold nulls).
    RecordBatches {
        /// The schema of every record batch.
        schema: SchemaRef,
        /// The record batches, in order.
        batches: Vec<RecordBatch>,
    },
    /// Objects in object storage (`s3://`, `gs://`, `az://`, `http(s)://`), of one of the
    /// formats above, read as the local files of that format are (feature `object-store`).
    #[cfg(feature = "object-store")]
    Objects(crate::ObjectSource),
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::IpcFiles(paths) => f.debug_tuple("IpcFiles").field(paths).finish(),
            Source::IpcStreams(paths) => f.debug_tuple("IpcStreams").field(paths).finish(),
            Source::ParquetFiles(paths) => f.debug_tuple("ParquetFiles").field(paths).finish(),
            Source::Reader(reader) => f.debug_tuple("Reader").field(&reader.schema()).finish(),
            Source::RecordBatches { schema, batches } => f
                .debug_struct("RecordBatches")
                .field("schema", schema)
                .field("batches", &batches.len())
                .finish(),
            #[cfg(feature = "object-store")]
            Source::Objects(objects) => f.debug_tuple("Objects").field(objects).finish(),
        }
    }
}

impl Source {
    /// Local files of one format, named by their paths, by directories (every file under one)
    /// or by globs (`data/part-*.parquet`, `data/**/*.parquet`).
    ///
    /// A directory names every Parquet or Arrow file under it, at any depth, and a glob the
    /// files it matches (`*`, `?` and `[a-z]` within a segment, `**` across segments); both are
    /// sorted by path, and leave out hidden names, names starting with `_` (`_SUCCESS`) and
    /// files of other extensions, as `pyarrow.dataset` does and as prefixes and globs in object
    /// storage do. A path that exists is read as it is, glob characters and all.
    ///
    /// The extension tells Parquet (`.parquet`, `.pq`) from Arrow (`.arrow`, `.feather`,
    /// `.ipc`, `.arrows`); an Arrow file's first bytes tell an IPC file (which starts with
    /// `ARROW1`: [`Source::IpcFiles`]) from an IPC stream ([`Source::IpcStreams`]), so that the
    /// `.arrow` streams that Hugging Face `datasets` writes are read as streams. A file named
    /// without a known extension is told by its first bytes alone (`PAR1`, `ARROW1`, or a
    /// stream's continuation marker); listings keep only files of a known extension.
    ///
    /// # Errors
    ///
    /// An empty list; a path, directory or glob that names no file ([`Error::Io`] of kind
    /// `NotFound`, naming it); a file that neither its extension nor its first bytes name a format
    /// of; files of different formats.
    pub fn from_paths<P: AsRef<Path>>(paths: impl IntoIterator<Item = P>) -> Result<Self> {
        let given: Vec<PathBuf> = paths
            .into_iter()
            .map(|p| p.as_ref().to_path_buf())
            .collect();
        let files = paths::expand(&given)?;
        let mut first: Option<(Format, &Path)> = None;
        for path in &files {
            let format = format_of_file(path)?;
            match first {
                None => first = Some((format, path)),
                Some((expected, first_path)) if expected != format => {
                    return Err(Error::InvalidSpec {
                        reason: format!(
                            "{} is {} and {} is {}; expected files of one format",
                            first_path.display(),
                            expected.describe(),
                            path.display(),
                            format.describe()
                        ),
                    });
                }
                Some(_) => {}
            }
        }
        Ok(match first.map(|(format, _)| format) {
            Some(Format::IpcStream) => Source::IpcStreams(files),
            Some(Format::Parquet) => Source::ParquetFiles(files),
            Some(Format::IpcFile) | None => Source::IpcFiles(files),
        })
    }

    /// The objects at `urls` (see [`ObjectSource`](crate::ObjectSource): objects, prefixes,
    /// globs), read with the storage `options` over the environment's settings; nothing is
    /// fetched until the loader is made.
    #[cfg(feature = "object-store")]
    pub fn from_urls<U: AsRef<str>, K: AsRef<str>, V: Into<String>>(
        urls: impl IntoIterator<Item = U>,
        options: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self> {
        Ok(Source::Objects(crate::ObjectSource::new(urls, options)?))
    }

    /// Any record-batch reader (an in-memory table, a stream from another library).
    pub fn reader(reader: impl RecordBatchReader + Send + 'static) -> Self {
        Source::Reader(Box::new(reader))
    }

    /// Record batches in memory, all of `schema` ([`Source::RecordBatches`]).
    pub fn record_batches(
        schema: SchemaRef,
        batches: impl IntoIterator<Item = RecordBatch>,
    ) -> Self {
        Source::RecordBatches {
            schema,
            batches: batches.into_iter().collect(),
        }
    }
}

/// A record batch of the loader's input, with where its rows are in the shard's items: `item`
/// (the shard's own numbering), the index among the item's rows of its first row, and whether
/// it is the item's last.
pub(crate) struct Tagged {
    pub(crate) batch: RecordBatch,
    pub(crate) item: u64,
    pub(crate) first: u64,
    pub(crate) last: bool,
}

/// Record batches, one after another, read on the loader thread.
pub(crate) type Pieces = Box<dyn Iterator<Item = Result<Tagged>> + Send>;

/// A unit's record batches as read: the item, its unit and rows, the batch, and whether it is
/// the unit's last.
type Raw = Box<dyn Iterator<Item = Result<(u64, Item, RecordBatch, bool)>> + Send>;

/// A source made ready: its record batches from where the shard starts, the rows it has left
/// when the metadata tells, the work of the epoch and the start.
pub(crate) struct Plan {
    pub(crate) pieces: Pieces,
    pub(crate) num_rows: Option<u64>,
    pub(crate) work: Work,
    pub(crate) settings: Settings,
    pub(crate) start: Start,
    /// A flag that the source's background work (fetches from object storage) watches, set
    /// when the loader is stopped so that a wait for a slow server ends at once.
    pub(crate) stop: Option<Arc<AtomicBool>>,
    /// The shard's planned batches, when the epoch is planned (its pieces are then the whole
    /// units of the items these batches read, in the order they first need them).
    pub(crate) planned: Option<ShardBatches>,
    /// The spec's [`NullToNan`] made explicit from the source's metadata
    /// ([`resolve_null_to_nan`]), which the loader thread uses in its place.
    pub(crate) null_to_nan: NullToNan,
    /// Where each item's rows lie in the files, for a source of files (image rows are keyed,
    /// named and resolved by it).
    pub(crate) locate: Option<Locate>,
    /// Whether the pieces are decoded on decoding threads of their own (Parquet's row groups).
    pub(crate) decoded: bool,
}

/// The columns the spec reads, or `None` for all.
fn needed_columns(spec: &BatchSpec) -> Option<Vec<String>> {
    let mut names = spec.columns.clone()?;
    for group in &spec.groups {
        names.extend(group.columns.iter().cloned());
    }
    names.extend(spec.masks.iter().cloned());
    names.extend(spec.images.iter().map(|image| image.column.clone()));
    names.extend(
        spec.sequences
            .iter()
            .map(|sequence| sequence.column.clone()),
    );
    names.sort();
    names.dedup();
    Some(names)
}

/// The epoch's order of `units`: shuffled when the spec asks, with the same permutation in
/// every shard (the seed plus the epoch).
fn epoch_order<T>(mut units: Vec<T>, spec: &BatchSpec) -> Vec<T> {
    if spec.shuffle {
        Rng::new(spec.epoch_seed(), UNIT_STREAM).shuffle(&mut units);
    }
    units
}

/// The epoch's order of `units` ([`epoch_order`]) and, for each unit of that order, its index
/// in `units`.
fn epoch_order_indexed<T: Copy>(units: &[T], spec: &BatchSpec) -> (Vec<T>, Vec<usize>) {
    let indices = epoch_order((0..units.len()).collect::<Vec<usize>>(), spec);
    (indices.iter().map(|&index| units[index]).collect(), indices)
}

/// Reads the metadata of `source` and plans this shard's record batches from where it starts.
pub(crate) fn plan(source: Source, spec: &BatchSpec) -> Result<Plan> {
    let columns = needed_columns(spec);
    match source {
        Source::IpcFiles(paths) => {
            let files = paths
                .iter()
                .map(|path| IpcFile::open(path, columns.as_deref()))
                .collect::<Result<Vec<_>>>()?;
            plan_ipc_files(&paths, files, spec)
        }
        Source::ParquetFiles(paths) => {
            let files = paths
                .iter()
                .map(|path| ParquetFile::open(path, columns.as_deref()))
                .collect::<Result<Vec<_>>>()?;
            plan_parquet_files(&paths, files, spec)
        }
        Source::IpcStreams(paths) => {
            plan_streams(paths.into_iter().map(StreamInput::Path).collect(), spec)
        }
        #[cfg(feature = "object-store")]
        Source::Objects(objects) => {
            use crate::file::Format;
            let cache = cache_settings(spec);
            let opened = crate::remote::open(objects, cache.as_ref())?;
            let stop = opened.stop.clone();
            let names: Vec<PathBuf> = opened
                .objects
                .iter()
                .map(|(object, _)| object.name().to_path_buf())
                .collect();
            let plan = match opened.format {
                Format::Parquet => {
                    let files = opened
                        .objects
                        .into_iter()
                        .map(|(object, tail)| {
                            ParquetFile::open_remote(object, tail, columns.as_deref())
                        })
                        .collect::<Result<Vec<_>>>()?;
                    plan_parquet_files(&names, files, spec)
                }
                Format::IpcFile => {
                    let files = opened
                        .objects
                        .into_iter()
                        .map(|(object, tail)| {
                            IpcFile::open_remote(object, tail, columns.as_deref())
                        })
                        .collect::<Result<Vec<_>>>()?;
                    plan_ipc_files(&names, files, spec)
                }
                Format::IpcStream => plan_streams(
                    opened
                        .objects
                        .into_iter()
                        .map(|(object, _)| StreamInput::Remote(object))
                        .collect(),
                    spec,
                ),
            };
            plan.map(|plan| Plan {
                stop: Some(stop),
                ..plan
            })
        }
        Source::Reader(reader) => {
            let schema = reader.schema();
            let batches = reader.map(|batch| batch.map_err(Error::from));
            plan_in_memory(schema, batches, (None, None), |_| None, spec)
        }
        Source::RecordBatches { schema, batches } => {
            // Record batches in memory are units as a file's are: shuffled, they are read in the
            // epoch's order of units, so that a table's rows are not mixed only within windows.
            let batches = epoch_order(batches, spec);
            let mut nulls: BTreeMap<&str, u64> = BTreeMap::new();
            for batch in &batches {
                for (field, column) in batch.schema_ref().fields().iter().zip(batch.columns()) {
                    *nulls.entry(field.name().as_str()).or_default() += column.null_count() as u64;
                }
            }
            let nulls: BTreeMap<String, u64> = nulls
                .into_iter()
                .map(|(name, count)| (name.to_string(), count))
                .collect();
            let nulls = |name: &str| nulls.get(name).copied();
            plan_record_batches(schema, batches, &nulls, spec)
        }
    }
}

/// Plans the record batches of the opened IPC files `files`, named `paths`.
fn plan_ipc_files(paths: &[PathBuf], files: Vec<IpcFile>, spec: &BatchSpec) -> Result<Plan> {
    check_file_schemas(
        paths,
        files.iter().map(|file| (file.full_schema(), file.schema())),
        spec,
    )?;
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
    let settings = identity::settings(spec, identity::ipc_files(&files));
    let file_nulls: Vec<nulls::FileNulls<'_>> = files
        .iter()
        .map(|file| {
            (
                file.path(),
                file.full_schema().as_ref(),
                file.null_counts().to_vec(),
            )
        })
        .collect();
    let null_to_nan = files_null_to_nan(spec, &file_nulls)?;
    let (order, source_unit) = epoch_order_indexed(&units, spec);
    let unit_rows: Vec<u64> = order.iter().map(|unit| unit.rows as u64).collect();
    let (work, start) = resume(spec, &settings, Some(&unit_rows), planned::is_planned)?;
    let files = Arc::new(files);
    let (items, num_rows, batches) = if let Start::Plan { .. } = start {
        let source_rows = units.iter().map(|unit| unit.rows as u64);
        let lengths = planned::lengths(spec, source_rows, || {
            planned::ipc_lengths(&files, &settings.source, spec)
        })?;
        let (batches, items) = planned::shard_batches(spec, &work, &start, &source_unit, &lengths)?;
        (items, batches.rows.len() as u64, Some(batches))
    } else {
        let items = file_items(&work, spec, &start);
        let unit_rows = |unit: u64| order[unit as usize].rows as u64;
        let num_rows = rows_left(&items, unit_rows, &start, spec)?;
        (items, num_rows, None)
    };
    // The record batches are read in the items' order (the blocks of objects fetched ahead).
    let planned: Vec<IpcRecordBatch> = items
        .iter()
        .map(|(_, item)| order[item.unit as usize])
        .collect();
    // Where each row is in its file, for the messages of rows that are refused.
    let locate = {
        let mut unit_rows: Vec<Vec<u64>> = vec![Vec::new(); paths.len()];
        for (file, ipc) in files.iter().enumerate() {
            unit_rows[file] = ipc.rows().iter().map(|&rows| rows as u64).collect();
        }
        let located = items.iter().map(|(k, item)| {
            let unit = order[item.unit as usize];
            (*k, (unit.file, unit.index), item.rows.clone())
        });
        Some(Locate::new(paths, &unit_rows, located))
    };
    let reads = ipc::read_planned(files, planned);
    let raw: Raw = Box::new(
        items
            .into_iter()
            .zip(reads)
            .map(|((k, item), read)| read.map(|batch| (k, item, batch, true))),
    );
    Ok(Plan {
        pieces: select(raw, &start, None),
        num_rows: Some(num_rows),
        work,
        settings,
        start,
        stop: None,
        planned: batches,
        null_to_nan,
        locate,
        decoded: false,
    })
}

/// Plans the row groups of the opened Parquet files `files`, named `paths`.
fn plan_parquet_files(
    paths: &[PathBuf],
    files: Vec<ParquetFile>,
    spec: &BatchSpec,
) -> Result<Plan> {
    check_file_schemas(
        paths,
        files.iter().map(|file| (file.full_schema(), file.schema())),
        spec,
    )?;
    let mut units: Vec<RowGroup> = Vec::new();
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
    let settings = identity::settings(spec, identity::parquet_files(&files));
    let file_nulls: Vec<nulls::FileNulls<'_>> = files
        .iter()
        .map(|file| (file.path(), file.full_schema().as_ref(), file.null_counts()))
        .collect();
    let null_to_nan = files_null_to_nan(spec, &file_nulls)?;
    let (order, source_unit) = epoch_order_indexed(&units, spec);
    let unit_rows: Vec<u64> = order.iter().map(|unit| unit.rows).collect();
    let (work, start) = resume(spec, &settings, Some(&unit_rows), planned::is_planned)?;
    let (items, num_rows, batches) = if let Start::Plan { .. } = start {
        let source_rows = units.iter().map(|unit| unit.rows);
        let lengths = planned::lengths(spec, source_rows, || {
            planned::parquet_lengths(&files, &settings.source, spec)
        })?;
        let (batches, items) = planned::shard_batches(spec, &work, &start, &source_unit, &lengths)?;
        (items, batches.rows.len() as u64, Some(batches))
    } else {
        let items = file_items(&work, spec, &start);
        let num_rows = rows_left(&items, |unit| order[unit as usize].rows, &start, spec)?;
        (items, num_rows, None)
    };
    // Where each row is in its file, for the messages of rows that are refused.
    let locate = {
        let mut unit_rows: Vec<Vec<u64>> = Vec::with_capacity(files.len());
        for parquet in &files {
            unit_rows.push(parquet.row_group_rows()?);
        }
        let located = items.iter().map(|(k, item)| {
            let unit = order[item.unit as usize];
            (*k, (unit.file, unit.row_group), item.rows.clone())
        });
        Some(Locate::new(paths, &unit_rows, located))
    };
    let mut planned: Vec<RowGroup> = items
        .iter()
        .map(|(_, item)| order[item.unit as usize])
        .collect();
    // Resumed inside a whole row group: its rows before the position are not decoded.
    let mut offset = None;
    if let (Start::Rows { item, row }, Some((k, first)), Some(unit)) =
        (&start, items.first(), planned.first_mut())
        && k == item
        && first.rows.is_none()
        && *row > 0
    {
        unit.skip = *row;
        offset = Some((*item, *row));
    }
    // The decoding threads start at the first pull, on the loader thread, so that a plan that
    // is only checked (`outline`) starts none.
    let threads = spec.decode_thread_count();
    let mut unstarted = Some((files, planned));
    let mut started: Option<ParquetPieces> = None;
    let pieces = std::iter::from_fn(move || {
        if let Some((files, planned)) = unstarted.take() {
            match ParquetPieces::start(files, planned, threads) {
                Ok(pieces) => started = Some(pieces),
                Err(error) => return Some(Err(error)),
            }
        }
        started.as_mut()?.next()
    });
    let raw: Raw = Box::new(pieces.map(move |piece| {
        piece.map(|(index, batch, last)| {
            let (k, item) = items[index].clone();
            (k, item, batch, last)
        })
    }));
    Ok(Plan {
        pieces: select(raw, &start, offset),
        num_rows: Some(num_rows),
        work,
        settings,
        start,
        stop: None,
        planned: batches,
        null_to_nan,
        locate,
        decoded: true,
    })
}

/// The cache of `spec`'s `cache_dir` and `cache_size`, when it has a `cache_dir`: the ranges of
/// objects a source opens, and the objects image rows name by URL.
#[cfg(feature = "object-store")]
pub(crate) fn cache_settings(spec: &BatchSpec) -> Option<crate::remote::CacheSettings> {
    spec.cache_dir
        .as_ref()
        .map(|dir| crate::remote::CacheSettings {
            dir: dir.into(),
            limit: spec.cache_size as u64,
        })
}
