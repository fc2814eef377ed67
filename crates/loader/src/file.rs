//! What the file sources (Arrow IPC files and streams, Parquet files) share: their formats (the
//! extension tells Parquet from Arrow, an Arrow file's first bytes tell an IPC file from a
//! stream, and a file of no known extension is told by its first bytes alone), which names a listing keeps, opening a path with an error that names it, files
//! pinned when the loader is planned, and the projection of a file's schema onto the requested
//! columns.

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use arrow_schema::Schema;
use bytes::Bytes;
use parquet::file::reader::{ChunkReader, Length};

use crate::{Error, Result};

/// The formats of the file sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// Arrow IPC files, which start with the magic bytes `ARROW1`.
    IpcFile,
    /// Arrow IPC streams: Arrow files that do not start with `ARROW1`.
    IpcStream,
    /// Parquet: `.parquet`, `.pq`.
    Parquet,
}

impl Format {
    /// The format in words, for messages.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Format::IpcFile => "an arrow ipc file",
            Format::IpcStream => "an arrow ipc stream",
            Format::Parquet => "a parquet file",
        }
    }
}

/// What a file's extension says it holds: Parquet, or Arrow IPC (a file or a stream, which only
/// the file's first bytes tell apart: [`arrow_format_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extension {
    /// `.parquet`, `.pq`.
    Parquet,
    /// `.arrow`, `.feather`, `.ipc`, `.arrows`.
    Arrow,
}

/// The extensions the loader reads, for messages.
pub(crate) const KNOWN_EXTENSIONS: &str = ".parquet, .pq, .arrow, .feather, .ipc, .arrows";

/// What the extension of a file or object named `name` says it holds (case-insensitive).
pub(crate) fn extension_of(name: &str) -> Option<Extension> {
    let (stem, extension) = name.rsplit_once('.')?;
    if stem.is_empty() {
        return None;
    }
    match extension.to_ascii_lowercase().as_str() {
        "arrow" | "feather" | "ipc" | "arrows" => Some(Extension::Arrow),
        "parquet" | "pq" => Some(Extension::Parquet),
        _ => None,
    }
}

/// Whether a name is left out of listings (directories, globs, prefixes in object storage), as
/// `pyarrow.dataset` leaves it out: hidden files (`.crc`) and names starting with `_`
/// (`_SUCCESS`, `_metadata`), files and folders alike.
pub(crate) fn is_hidden(name: &str) -> bool {
    name.starts_with(['_', '.'])
}

/// Whether a listing keeps the file `name`: not hidden, and of a known extension.
pub(crate) fn is_listed(name: &str) -> bool {
    !is_hidden(name) && extension_of(name).is_some()
}

/// The magic bytes that open (and close) an Arrow IPC file; a stream starts with a message.
pub(crate) const IPC_FILE_MAGIC: &[u8; 6] = b"ARROW1";

/// The magic bytes of the Feather version 1 format, which predates Arrow IPC files.
const FEATHER_V1_MAGIC: &[u8; 4] = b"FEA1";

/// The first and last bytes of a Parquet file.
const PARQUET_MAGIC: &[u8; 4] = b"PAR1";

/// The format of an Arrow file (of extension [`Extension::Arrow`]) whose first bytes are
/// `head`: an IPC file when it starts with `ARROW1`, else an IPC stream (which starts with a
/// message: a continuation marker and a length). Feather version 1 is refused here, naming it.
pub(crate) fn arrow_format_of(path: &Path, head: &[u8]) -> Result<Format> {
    if head.starts_with(IPC_FILE_MAGIC) {
        return Ok(Format::IpcFile);
    }
    if head.starts_with(FEATHER_V1_MAGIC) {
        return Err(Error::ipc(
            path,
            "it is a feather version 1 file; expected an arrow ipc file or stream (feather \
             version 2, what pyarrow.feather.write_feather writes by default)",
        ));
    }
    Ok(Format::IpcStream)
}

/// The format of an Arrow object whose last bytes are `tail`, when its first bytes are not at
/// hand: an IPC file ends with `ARROW1` as it starts with it, a stream does not.
#[cfg(feature = "object-store")]
pub(crate) fn arrow_format_of_tail(path: &Path, tail: &[u8]) -> Result<Format> {
    if tail.ends_with(IPC_FILE_MAGIC) {
        return Ok(Format::IpcFile);
    }
    if tail.ends_with(FEATHER_V1_MAGIC) {
        return arrow_format_of(path, FEATHER_V1_MAGIC);
    }
    Ok(Format::IpcStream)
}

/// The format of the local file `path`: its extension tells Parquet from Arrow, and an Arrow
/// file's first bytes tell an IPC file from a stream (so a stream named `.arrow`, as
/// `datasets.Dataset.save_to_disk` writes them, is read as a stream) or from a Parquet file.
pub(crate) fn format_of_file(path: &Path) -> Result<Format> {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy())
        .unwrap_or_default();
    match extension_of(&name) {
        Some(Extension::Parquet) => Ok(Format::Parquet),
        Some(Extension::Arrow) => {
            let mut head = [0u8; IPC_FILE_MAGIC.len()];
            let mut file = open(path)?;
            let read = read_up_to(&mut file, &mut head).map_err(|error| Error::io(path, error))?;
            // A Parquet file named as an Arrow one: its first bytes say what it is.
            if head[..read].starts_with(PARQUET_MAGIC) {
                return Ok(Format::Parquet);
            }
            arrow_format_of(path, &head[..read])
        }
        None => format_of_unnamed(path),
    }
}

/// The continuation marker that opens every message of an Arrow IPC stream (since format
/// version 0.15).
const IPC_CONTINUATION: &[u8; 4] = &[0xFF; 4];

/// The format of a local file given by a name of no known extension (`data`, `part-0.bin`), as
/// its first bytes tell it: `PAR1` opens a Parquet file, `ARROW1` an Arrow IPC file, a
/// continuation marker an Arrow IPC stream. Anything else is [`Error::UnknownFormat`].
fn format_of_unnamed(path: &Path) -> Result<Format> {
    let mut head = [0u8; IPC_FILE_MAGIC.len()];
    let mut file = open(path)?;
    let read = read_up_to(&mut file, &mut head).map_err(|error| Error::io(path, error))?;
    let head = &head[..read];
    if head.starts_with(PARQUET_MAGIC) {
        Ok(Format::Parquet)
    } else if head.starts_with(IPC_FILE_MAGIC)
        || head.starts_with(FEATHER_V1_MAGIC)
        || head.starts_with(IPC_CONTINUATION)
    {
        arrow_format_of(path, head)
    } else {
        Err(Error::UnknownFormat {
            path: path.to_path_buf(),
            read: true,
        })
    }
}

/// Reads into `buf` until it is full or the reader ends; the bytes read.
fn read_up_to(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match reader.read(&mut buf[done..]) {
            Ok(0) => break,
            Ok(read) => done += read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(done)
}

/// Opens `path` for reading; a failure is [`Error::Io`] naming the path.
pub(crate) fn open(path: &Path) -> Result<File> {
    File::open(path).map_err(|error| Error::io(path, error))
}

/// What a file was when the loader was planned: its identity on disk, length and modification
/// time.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    /// The device and inode, where the platform has them.
    identity: Option<(u64, u64)>,
}

impl Stamp {
    fn of(metadata: &Metadata) -> Self {
        #[cfg(unix)]
        let identity = {
            use std::os::unix::fs::MetadataExt;
            Some((metadata.dev(), metadata.ino()))
        };
        #[cfg(not(unix))]
        let identity = None;
        Stamp {
            len: metadata.len(),
            modified: metadata.modified().ok(),
            identity,
        }
    }
}

/// A file as the loader planned it. Files are reopened by path when their data is read (holding
/// thousands of planned files open would exhaust the descriptors a process may have), and a file
/// that is then another file, or the same file with another length or modification time, is an
/// error naming it instead of data other than planned.
#[derive(Debug, Clone)]
pub(crate) struct PlannedFile {
    path: PathBuf,
    stamp: Stamp,
}

impl PlannedFile {
    /// The path the file was planned at.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file's length when it was planned.
    pub(crate) fn size(&self) -> u64 {
        self.stamp.len
    }

    /// The file's modification time when it was planned, where the platform tells it.
    pub(crate) fn modified(&self) -> Option<SystemTime> {
        self.stamp.modified
    }

    /// Refuses `metadata` when it describes a file other than the planned one.
    pub(crate) fn check(&self, metadata: &Metadata) -> Result<()> {
        let now = Stamp::of(metadata);
        let change = if now.identity != self.stamp.identity {
            "another file has replaced it".to_string()
        } else if now.len != self.stamp.len {
            format!("its length is {} bytes, was {}", now.len, self.stamp.len)
        } else if now.modified != self.stamp.modified {
            "its modification time differs".to_string()
        } else {
            return Ok(());
        };
        Err(Error::FileChanged {
            path: self.path.clone(),
            change,
        })
    }

    /// Refuses the file now at the planned path when it is not the planned file.
    pub(crate) fn check_path(&self) -> Result<()> {
        let metadata =
            std::fs::metadata(&self.path).map_err(|error| Error::io(&self.path, error))?;
        self.check(&metadata)
    }

    /// Opens the planned path again, refusing a file other than the planned one.
    pub(crate) fn reopen(&self) -> Result<PinnedFile> {
        let file = open(&self.path)?;
        let metadata = file
            .metadata()
            .map_err(|error| Error::io(&self.path, error))?;
        self.check(&metadata)?;
        Ok(PinnedFile {
            planned: self.clone(),
            file: Arc::new(file),
        })
    }
}

/// An open file, checked against its plan, read with positioned reads (`pread`) so that threads
/// sharing the handle never share an offset.
#[derive(Debug, Clone)]
pub(crate) struct PinnedFile {
    planned: PlannedFile,
    file: Arc<File>,
}

impl PinnedFile {
    /// Opens `path` and records what it is, for later reads to check against.
    pub(crate) fn open(path: &Path) -> Result<Self> {
        let file = open(path)?;
        let metadata = file.metadata().map_err(|error| Error::io(path, error))?;
        Ok(PinnedFile {
            planned: PlannedFile {
                path: path.to_path_buf(),
                stamp: Stamp::of(&metadata),
            },
            file: Arc::new(file),
        })
    }

    /// The path the file was opened at.
    pub(crate) fn path(&self) -> &Path {
        &self.planned.path
    }

    /// What the file was when it was opened.
    pub(crate) fn planned(&self) -> &PlannedFile {
        &self.planned
    }

    /// The handle.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Refuses an open file whose length or modification time changed since it was planned.
    pub(crate) fn check_unchanged(&self) -> Result<()> {
        let metadata = self
            .file
            .metadata()
            .map_err(|error| Error::io(self.path(), error))?;
        self.planned.check(&metadata)
    }

    /// Reads `buf.len()` bytes at `offset`.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        #[cfg(unix)]
        {
            std::os::unix::fs::FileExt::read_exact_at(&*self.file, buf, offset)
        }
        #[cfg(windows)]
        {
            let mut done = 0;
            while done < buf.len() {
                let read = std::os::windows::fs::FileExt::seek_read(
                    &*self.file,
                    &mut buf[done..],
                    offset + done as u64,
                )?;
                if read == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                done += read;
            }
            Ok(())
        }
    }
}

impl Length for PinnedFile {
    fn len(&self) -> u64 {
        self.planned.stamp.len
    }
}

/// A reader from an offset of a [`PinnedFile`], with its own position.
pub(crate) struct PinnedRead {
    file: PinnedFile,
    offset: u64,
}

impl Read for PinnedRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.file.planned.stamp.len.saturating_sub(self.offset);
        let count = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        self.file.read_exact_at(&mut buf[..count], self.offset)?;
        self.offset += count as u64;
        Ok(count)
    }
}

impl ChunkReader for PinnedFile {
    type T = PinnedRead;

    fn get_read(&self, start: u64) -> parquet::errors::Result<PinnedRead> {
        Ok(PinnedRead {
            file: self.clone(),
            offset: start,
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let end = start.checked_add(length as u64);
        if end.is_none_or(|end| end > self.len()) {
            return Err(parquet::errors::ParquetError::EOF(format!(
                "expected {length} bytes at offset {start}; the file has {} bytes",
                self.len()
            )));
        }
        // The range is checked against the file's length above, so the allocation is backed by
        // the file.
        let mut buffer = vec![0; length];
        self.read_exact_at(&mut buffer, start)
            .map_err(|error| parquet::errors::ParquetError::External(Box::new(error)))?;
        Ok(Bytes::from(buffer))
    }
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
