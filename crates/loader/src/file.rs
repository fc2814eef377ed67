//! What the file sources (Arrow IPC files and streams, Parquet files) share: opening a path with
//! an error that names it, files pinned when the loader is planned, and the projection of a
//! file's schema onto the requested columns.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use arrow_schema::Schema;
use bytes::Bytes;
use parquet::file::reader::{ChunkReader, Length};

use crate::{Error, Result};

/// Opens `path` for reading; a failure is [`Error::Io`] naming the path.
pub(crate) fn open(path: &Path) -> Result<File> {
    File::open(path).map_err(|error| Error::io(path, error))
}

/// A file opened once, when the loader is planned, and read through that handle only: a file
/// replaced at its path afterwards is never read, and one rewritten in place is an error.
///
/// Reads are positioned (`pread`), so that threads sharing the handle never share an offset.
#[derive(Debug, Clone)]
pub(crate) struct PinnedFile {
    path: PathBuf,
    file: Arc<File>,
    len: u64,
    modified: Option<SystemTime>,
}

impl PinnedFile {
    /// Opens `path` and records its length and modification time.
    pub(crate) fn open(path: &Path) -> Result<Self> {
        let file = open(path)?;
        let metadata = file.metadata().map_err(|error| Error::io(path, error))?;
        Ok(PinnedFile {
            path: path.to_path_buf(),
            file: Arc::new(file),
            len: metadata.len(),
            modified: metadata.modified().ok(),
        })
    }

    /// The path the file was opened at.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The handle.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Refuses a file whose length or modification time differ from those at opening.
    pub(crate) fn check_unchanged(&self) -> Result<()> {
        let metadata = self
            .file
            .metadata()
            .map_err(|error| Error::io(&self.path, error))?;
        let change = if metadata.len() != self.len {
            format!("its length is {} bytes, was {}", metadata.len(), self.len)
        } else if metadata.modified().ok() != self.modified {
            "its modification time differs".to_string()
        } else {
            return Ok(());
        };
        Err(Error::FileChanged {
            path: self.path.clone(),
            change,
        })
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
        self.len
    }
}

/// A reader from an offset of a [`PinnedFile`], with its own position.
pub(crate) struct PinnedRead {
    file: PinnedFile,
    offset: u64,
}

impl Read for PinnedRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.file.len.saturating_sub(self.offset);
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
        if end.is_none_or(|end| end > self.len) {
            return Err(parquet::errors::ParquetError::EOF(format!(
                "expected {length} bytes at offset {start}; the file has {} bytes",
                self.len
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
