//! What the file sources (Arrow IPC files and streams, Parquet files) share: opening a path with
//! an error that names it, files pinned when the loader is planned, and the projection of a
//! file's schema onto the requested columns.

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use arrow_schema::Schema;
use bytes::Bytes;
use parquet::file::reader::{ChunkReader, Length};

use crate::{Error, Result};

/// The formats of the file sources, told from a file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// Arrow IPC files: `.arrow`, `.feather`, `.ipc`.
    IpcFile,
    /// Arrow IPC streams: `.arrows`.
    IpcStream,
    /// Parquet: `.parquet`, `.pq`.
    Parquet,
}

/// The format of a file or object named `name`, from its extension (case-insensitive).
pub(crate) fn format_of(name: &str) -> Option<Format> {
    let (stem, extension) = name.rsplit_once('.')?;
    if stem.is_empty() {
        return None;
    }
    match extension.to_ascii_lowercase().as_str() {
        "arrow" | "feather" | "ipc" => Some(Format::IpcFile),
        "arrows" => Some(Format::IpcStream),
        "parquet" | "pq" => Some(Format::Parquet),
        _ => None,
    }
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
    fn check(&self, metadata: &Metadata) -> Result<()> {
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
