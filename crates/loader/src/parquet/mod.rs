//! Parquet files: metadata read once when the file is opened, row groups decoded in parallel by
//! worker threads and handed back in their planned order.
//!
//! Worker `w` of `n` decodes the units `w, w + n, w + 2n, ...` of the plan and sends each unit's
//! record batches, then an end marker, into its own channel of depth 1; the consumer reads the
//! channels round-robin, unit by unit, so that the order never depends on thread timing.
//! A worker holds at most one decoded record batch waiting in its channel and one being decoded.
//!
//! A Parquet object in object storage is read the same way: its footer is fetched once when it
//! is planned; a worker fetches the projected column chunks of a row group (ranges less than
//! a megabyte apart coalesced into one request) ahead of the one it decodes, by a budget of
//! bytes (`fetch_ahead.rs`), so that a server's latency is hidden whatever the row groups' size.

#[cfg(feature = "object-store")]
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};

use parquet::errors::ParquetError;
use parquet::file::reader::ChunkReader;

use crate::digest;
use crate::file::{self, PinnedFile, PlannedFile};
use crate::quiet_panic::catch_quietly;
#[cfg(feature = "object-store")]
use crate::remote::{self, Fetched, RemoteObject};
use crate::{Error, Result};
use codecs::check_codecs;
#[cfg(feature = "object-store")]
use fetch_ahead::FetchesAhead;

mod bounds;
mod codecs;
#[cfg(feature = "object-store")]
mod fetch_ahead;
mod thrift;

/// The most rows decoded into one record batch: a whole row group up to this size, so that most
/// batches lie inside one record batch and are views.
const MAX_DECODE_ROWS: usize = 1 << 20;

/// The fewest rows asked of the decoder at once, whatever a row group declares.
const MIN_DECODE_ROWS: usize = 1 << 13;

/// Where a Parquet file's bytes are.
#[derive(Clone)]
enum Location {
    /// A local file, reopened by path and checked against its plan.
    Local(PlannedFile),
    /// An object in object storage, pinned by its ETag, size and last-modified time.
    #[cfg(feature = "object-store")]
    Remote(RemoteObject),
}

/// One Parquet file, opened and its metadata read when the loader is planned.
#[derive(Clone)]
pub(crate) struct ParquetFile {
    location: Location,
    metadata: ArrowReaderMetadata,
    mask: ProjectionMask,
    schema: SchemaRef,
    full_schema: SchemaRef,
    /// The digest of the footer, which identifies the file in a saved state.
    footer_digest: String,
}

impl ParquetFile {
    /// Opens `path` and reads its footer; `columns`, when given, projects the decoding onto those
    /// top-level columns (names absent from the file are left for the column resolution to
    /// report).
    pub(crate) fn open(path: &Path, columns: Option<&[String]>) -> Result<Self> {
        let file = PinnedFile::open(path)?;
        Self::from_reader(Location::Local(file.planned().clone()), &file, columns)
    }

    /// Opens the Parquet object `object`, whose last bytes `tail` were fetched when it was
    /// listed; the rest of a footer longer than the tail is fetched here.
    #[cfg(feature = "object-store")]
    pub(crate) fn open_remote(
        object: RemoteObject,
        tail: Fetched,
        columns: Option<&[String]>,
    ) -> Result<Self> {
        let size = object.size();
        let footer_len = size
            .checked_sub(8)
            .and_then(|start| tail.slice(start, 4))
            .map(|bytes| u64::from(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])));
        let needed = footer_len
            .map(|len| len + 8)
            .filter(|&needed| needed <= size);
        let tail = match needed {
            Some(needed) if tail.slice(size - needed, needed).is_none() => {
                object.fetch_now(std::iter::once(size - needed..size))?
            }
            _ => tail,
        };
        Self::from_reader(Location::Remote(object), &tail, columns)
    }

    /// Reads the footer from `reader` (the file, or the fetched tail of an object), checked
    /// first by [`bounds::check_footer`].
    fn from_reader(
        location: Location,
        reader: &impl ChunkReader,
        columns: Option<&[String]>,
    ) -> Result<Self> {
        let path = match &location {
            Location::Local(planned) => planned.path().to_path_buf(),
            #[cfg(feature = "object-store")]
            Location::Remote(object) => object.name().to_path_buf(),
        };
        let path = path.as_path();
        let footer = bounds::check_footer(path, reader)?;
        let metadata =
            catch_quietly(|| ArrowReaderMetadata::load(reader, ArrowReaderOptions::new()))
                .map_err(|payload| Error::decode_panic(path, "the footer".to_string(), payload))?
                .map_err(|error| Error::parquet(path, error))?;
        let arrow_schema = metadata.schema().clone();
        let (mask, schema) = match columns {
            Some(columns) => {
                let indices = file::projection(&arrow_schema, columns);
                let mask =
                    ProjectionMask::roots(metadata.parquet_schema(), indices.iter().copied());
                (mask, Arc::new(arrow_schema.project(&indices)?))
            }
            None => (ProjectionMask::all(), arrow_schema.clone()),
        };
        check_codecs(path, metadata.metadata(), &mask)?;
        Ok(ParquetFile {
            location,
            metadata,
            mask,
            schema,
            full_schema: arrow_schema,
            // A file without a footer of its own was refused by the crate above.
            footer_digest: digest::of_bytes(footer.as_deref().unwrap_or_default()),
        })
    }

    /// The byte ranges of the projected column chunks of `row_group` that lie inside the
    /// object; a chunk that does not is left for [`bounds::check_row_group`] to report.
    #[cfg(feature = "object-store")]
    fn chunk_ranges(&self, row_group: usize, size: u64) -> Vec<Range<u64>> {
        let group = self.metadata.metadata().row_group(row_group);
        group
            .columns()
            .iter()
            .enumerate()
            .filter(|(leaf, _)| self.mask.leaf_included(*leaf))
            .filter_map(|(_, column)| bounds::chunk_range(column).filter(|range| range.end <= size))
            .collect()
    }

    /// The ranges a fetch of the projected column chunks of `row_group` of the object `object`
    /// asks for: the chunks, those less than a megabyte apart coalesced.
    #[cfg(feature = "object-store")]
    fn row_group_ranges(&self, object: &RemoteObject, row_group: usize) -> Vec<Range<u64>> {
        remote::coalesce(self.chunk_ranges(row_group, object.size()))
    }

    /// The same file with its decoding projected onto `columns` instead (names absent from the
    /// file are left out).
    pub(crate) fn projected(&self, columns: &[String]) -> Result<Self> {
        let indices = file::projection(&self.full_schema, columns);
        let mask = ProjectionMask::roots(self.metadata.parquet_schema(), indices.iter().copied());
        Ok(ParquetFile {
            mask,
            schema: Arc::new(self.full_schema.project(&indices)?),
            ..self.clone()
        })
    }

    /// The path the file was opened at (the URL of an object).
    pub(crate) fn path(&self) -> &Path {
        match &self.location {
            Location::Local(planned) => planned.path(),
            #[cfg(feature = "object-store")]
            Location::Remote(object) => object.name(),
        }
    }

    /// The digest of the file's footer.
    pub(crate) fn footer_digest(&self) -> &str {
        &self.footer_digest
    }

    /// The local file as planned, or `None` for an object.
    pub(crate) fn planned(&self) -> Option<&PlannedFile> {
        match &self.location {
            Location::Local(planned) => Some(planned),
            #[cfg(feature = "object-store")]
            Location::Remote(_) => None,
        }
    }

    /// The object, or `None` for a local file.
    #[cfg(feature = "object-store")]
    pub(crate) fn object(&self) -> Option<&RemoteObject> {
        match &self.location {
            Location::Local(_) => None,
            Location::Remote(object) => Some(object),
        }
    }

    /// The number of rows of each row group; a negative count is an error naming the file.
    pub(crate) fn row_group_rows(&self) -> Result<Vec<u64>> {
        self.metadata
            .metadata()
            .row_groups()
            .iter()
            .enumerate()
            .map(|(index, group)| {
                u64::try_from(group.num_rows()).map_err(|_| {
                    Error::parquet(
                        self.path(),
                        ParquetError::General(format!(
                            "row group {index} declares {} rows",
                            group.num_rows()
                        )),
                    )
                })
            })
            .collect()
    }

    /// The nulls of each top-level column of the full schema over every row group, as the
    /// column chunks' statistics declare them; `None` for a column whose statistics (in some row
    /// group) do not say, and for a nested column (which has no one leaf to count).
    pub(crate) fn null_counts(&self) -> Vec<Option<u64>> {
        let metadata = self.metadata.metadata();
        let leaves = metadata.file_metadata().schema_descr();
        self.full_schema
            .fields()
            .iter()
            .map(|field| {
                let leaf = (0..leaves.num_columns()).find(|&leaf| {
                    let column = leaves.column(leaf);
                    let path = column.path().parts();
                    path.len() == 1 && path[0] == *field.name()
                })?;
                metadata.row_groups().iter().try_fold(0u64, |total, group| {
                    let nulls = group.column(leaf).statistics()?.null_count_opt()?;
                    total.checked_add(nulls)
                })
            })
            .collect()
    }

    /// The (projected) schema.
    pub(crate) fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The schema of every column of the file, before projection: what the spec is checked
    /// against, so that an error names every column the file has.
    pub(crate) fn full_schema(&self) -> &SchemaRef {
        &self.full_schema
    }

    /// Decodes row group `row_group` of `rows` rows from row `skip` on (a resumed loader passes
    /// over the rows it gave, without decoding whole pages of them) from `file` (the open file,
    /// or the fetched column chunks of an object), handing each record batch to `emit`, which
    /// returns `false` to stop; checks the row group's page headers first, and the rows decoded
    /// against `rows - skip` at the end.
    fn decode<R: ChunkReader + Clone + 'static>(
        &self,
        file: &R,
        row_group: usize,
        rows: u64,
        skip: u64,
        emit: &mut dyn FnMut(RecordBatch) -> bool,
    ) -> Result<()> {
        let path = self.path();
        // The batch size is not taken from the declared rows alone, so that a row group that
        // declares few rows and holds many is still decoded in large batches (and refused by the
        // count below).
        let batch_size = usize::try_from(rows)
            .unwrap_or(MAX_DECODE_ROWS)
            .clamp(MIN_DECODE_ROWS, MAX_DECODE_ROWS);
        let mask = &self.mask;
        bounds::check_row_group(
            path,
            file,
            self.metadata.metadata(),
            row_group,
            mask,
            batch_size,
        )?;
        let skip = skip.min(rows);
        let mut builder =
            ParquetRecordBatchReaderBuilder::new_with_metadata(file.clone(), self.metadata.clone())
                .with_projection(self.mask.clone())
                .with_row_groups(vec![row_group])
                .with_batch_size(batch_size);
        if skip > 0 {
            let (skip, keep) = (skip as usize, (rows - skip) as usize);
            builder = builder.with_row_selection(RowSelection::from(vec![
                RowSelector::skip(skip),
                RowSelector::select(keep),
            ]));
        }
        let rows = rows - skip;
        let reader = builder
            .build()
            .map_err(|error| Error::parquet(path, error))?;
        let mut decoded: u64 = 0;
        for batch in reader {
            let batch = batch.map_err(|source| Error::Decode {
                path: path.to_path_buf(),
                row_group,
                source,
            })?;
            decoded += batch.num_rows() as u64;
            if decoded > rows {
                break;
            }
            if !emit(batch) {
                return Ok(());
            }
        }
        if decoded != rows {
            return Err(Error::RowCount {
                path: path.to_path_buf(),
                unit: format!("row group {row_group}"),
                found: decoded,
                expected: rows,
            });
        }
        Ok(())
    }
}

/// What a worker sends for its units.
enum Message {
    Batch(RecordBatch),
    UnitEnd,
    Failed(Error),
}

/// A unit of Parquet work: a row group of a file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowGroup {
    pub(crate) file: usize,
    pub(crate) row_group: usize,
    pub(crate) rows: u64,
    /// Rows at the start not to decode: those a resumed loader gave before it stopped.
    pub(crate) skip: u64,
}

/// The record batches of planned row groups, decoded by worker threads.
pub(crate) struct ParquetPieces {
    receivers: Vec<Receiver<Message>>,
    workers: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    next_unit: usize,
    units: usize,
    done: bool,
    /// A message received ahead, to tell whether the batch before it ended its unit.
    peeked: Option<Message>,
}

impl ParquetPieces {
    /// Starts `threads` workers over `units` of `files`.
    pub(crate) fn start(
        files: Vec<ParquetFile>,
        units: Vec<RowGroup>,
        threads: usize,
    ) -> Result<Self> {
        let threads = threads.clamp(1, units.len().max(1));
        let files = Arc::new(files);
        let units = Arc::new(units);
        let stop = Arc::new(AtomicBool::new(false));
        let mut receivers = Vec::with_capacity(threads);
        let mut workers = Vec::with_capacity(threads);
        for worker in 0..threads {
            let (sender, receiver) = sync_channel(1);
            let (files, units, stop) = (files.clone(), units.clone(), stop.clone());
            let handle = std::thread::Builder::new()
                .name(format!("arrow-dlpack-parquet-{worker}"))
                .spawn(move || {
                    yield_to_the_consumer();
                    decode_units(&files, &units, worker, threads, &stop, &sender)
                })
                .map_err(|source| Error::Thread { source })?;
            receivers.push(receiver);
            workers.push(handle);
        }
        Ok(ParquetPieces {
            receivers,
            workers,
            stop,
            next_unit: 0,
            units: units.len(),
            done: false,
            peeked: None,
        })
    }
}

/// How much the decoding threads lower their scheduling priority (a nice increment).
///
/// Decoding works ahead of the training loop: it should take the cores the loop leaves idle, not
/// a core the loop (or the loader thread that hands it batches) is waiting for. With the same
/// priority, two decoders on two cores made the loop wait for the CPU during each row group's
/// decoding; at a lower priority the scheduler runs the loop first and the decoders in its gaps.
/// Throughput on idle cores is unchanged: niceness only orders threads that compete.
#[cfg(target_os = "linux")]
const DECODE_NICENESS: libc::c_int = 5;

/// Lowers the calling thread's priority by [`DECODE_NICENESS`]; a hint whose failure changes
/// nothing but the order in which threads run.
fn yield_to_the_consumer() {
    #[cfg(target_os = "linux")]
    // SAFETY: `nice` takes an integer and changes only the scheduling priority of the calling
    // thread (on Linux the nice value is per thread; see setpriority(2), "BUGS"); it touches no
    // memory of ours, and its result is ignored because the call is only a hint.
    unsafe {
        libc::nice(DECODE_NICENESS);
    }
}

/// The body of worker `worker` of `threads`.
fn decode_units(
    files: &[ParquetFile],
    units: &[RowGroup],
    worker: usize,
    threads: usize,
    stop: &AtomicBool,
    sender: &SyncSender<Message>,
) {
    // The file this worker has open: a worker holds one descriptor at a time.
    let mut open: Option<(usize, PinnedFile)> = None;
    let mine: Vec<&RowGroup> = units.iter().skip(worker).step_by(threads).collect();
    #[cfg(feature = "object-store")]
    let mut fetches = FetchesAhead::default();
    for (position, unit) in mine.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        #[cfg(feature = "object-store")]
        fetches.start(files, &mine, position);
        #[cfg(not(feature = "object-store"))]
        let _ = position;
        let file = &files[unit.file];
        let mut alive = true;
        let result = catch_quietly(|| {
            let mut emit = |batch| {
                alive = !stop.load(Ordering::Relaxed) && sender.send(Message::Batch(batch)).is_ok();
                alive
            };
            match &file.location {
                Location::Local(planned) => {
                    if open.as_ref().is_none_or(|(index, _)| *index != unit.file) {
                        open = Some((unit.file, planned.reopen()?));
                    }
                    let (_, handle) = open.as_ref().expect("opened above");
                    handle.check_unchanged()?;
                    let decoded =
                        file.decode(handle, unit.row_group, unit.rows, unit.skip, &mut emit);
                    // A file rewritten in place while it was decoded reads as corrupt: where it
                    // changed, the change is the error.
                    decoded.map_err(|error| handle.check_unchanged().err().unwrap_or(error))
                }
                #[cfg(feature = "object-store")]
                Location::Remote(_) => {
                    let fetched = fetches.take(position)?;
                    file.decode(&fetched, unit.row_group, unit.rows, unit.skip, &mut emit)
                }
            }
        })
        .unwrap_or_else(|payload| {
            Err(Error::decode_panic(
                file.path(),
                format!("row group {}", unit.row_group),
                payload,
            ))
        })
        .map(|()| alive);
        match result {
            Ok(true) => {
                if sender.send(Message::UnitEnd).is_err() {
                    return;
                }
            }
            Ok(false) => return,
            Err(error) => {
                let _ = sender.send(Message::Failed(error));
                return;
            }
        }
    }
}

impl ParquetPieces {
    /// The next message of the worker of the current unit.
    fn receive(&mut self) -> Message {
        if let Some(message) = self.peeked.take() {
            return message;
        }
        let worker = self.next_unit % self.receivers.len();
        self.receivers[worker].recv().unwrap_or_else(|_| {
            Message::Failed(Error::Panicked {
                message: "a parquet decoding thread ended without finishing its row groups"
                    .to_string(),
            })
        })
    }
}

/// Each record batch with the index of its unit (in the planned order) and whether it is the
/// unit's last.
impl Iterator for ParquetPieces {
    type Item = Result<(usize, RecordBatch, bool)>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done && self.next_unit < self.units {
            match self.receive() {
                Message::Batch(batch) => {
                    let unit = self.next_unit;
                    let next = self.receive();
                    let last = matches!(next, Message::UnitEnd);
                    if last {
                        self.next_unit += 1;
                    } else {
                        self.peeked = Some(next);
                    }
                    return Some(Ok((unit, batch, last)));
                }
                Message::UnitEnd => self.next_unit += 1,
                Message::Failed(error) => {
                    self.done = true;
                    return Some(Err(error));
                }
            }
        }
        None
    }
}

impl Drop for ParquetPieces {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Dropping the receivers wakes every worker blocked on a full channel.
        self.receivers.clear();
        for worker in self.workers.drain(..) {
            // A worker's panics are caught and sent as errors; a join error cannot carry more.
            let _ = worker.join();
        }
    }
}
