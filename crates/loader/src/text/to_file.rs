//! [`tokenize_to_file`]: a text column of a [`Source`] tokenized once, written with the other
//! columns to an Arrow IPC or Parquet file that the loader's `sequences` read at the speed of any
//! list column.
//!
//! The record batches are read by the loader's readers (Parquet row groups decoded ahead on
//! worker threads), tokenized on every core by [`tokenize_column`](super::tokenize_column)'s
//! kernel, and written by a writer thread while the next record batch is tokenized. The file is
//! written under a temporary name in the destination's folder and renamed at the end, so that a
//! run that fails or is interrupted never leaves a partial file under the name asked for.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};
use std::time::{Duration, Instant};

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::column::{TEXT_TYPES, tokenize_rows};
use super::read::read_source;
use super::{TokenizeOptions, Tokenizer};
use crate::columns::check_same_columns;
use crate::file::{Extension, Format, extension_of};
use crate::{Error, Result, Source};

/// The Parquet row groups written are closed once their buffered data reaches this size: small
/// enough to bound the writer's memory, large enough for the loader's reads.
const ROW_GROUP_BYTES: usize = 128 << 20;

/// How [`tokenize_to_file`] reads, tokenizes and writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenizeToFileOptions {
    /// The text column. Default `"text"`.
    pub column: String,
    /// The name of the token-id column written. Default `"input_ids"`, the name Hugging Face
    /// tokenizers give their ids.
    pub output_column: String,
    /// The columns of the source written beside the ids, in the source's order: `None` (the
    /// default) for every column, the text included; `Some(vec![])` for the ids alone.
    pub keep_columns: Option<Vec<String>>,
    /// How the texts are tokenized (special tokens, nulls, threads, offsets' width).
    pub tokenize: TokenizeOptions,
    /// Draws a progress line on standard error while it is a terminal. Default `true`.
    pub progress: bool,
}

impl Default for TokenizeToFileOptions {
    fn default() -> Self {
        TokenizeToFileOptions {
            column: "text".to_string(),
            output_column: "input_ids".to_string(),
            keep_columns: None,
            tokenize: TokenizeOptions::default(),
            progress: true,
        }
    }
}

/// What [`tokenize_to_file`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenizeSummary {
    /// The rows written.
    pub rows: u64,
    /// The token ids written.
    pub tokens: u64,
}

/// Tokenizes the text column of `source` and writes the token ids, with the columns kept, to
/// `out_path`: an Arrow IPC file (`.arrow`, `.feather`, `.ipc`), an Arrow IPC stream
/// (`.arrows`) or Parquet (`.parquet`, `.pq`; Snappy-compressed when this crate has the `snappy`
/// feature), told from its extension.
///
/// The ids column is a `list<int32>` (`list<int64>` for a vocabulary past `i32::MAX`; a
/// `large_list` with [`TokenizeOptions::large_offsets`]) named
/// [`TokenizeToFileOptions::output_column`], last; its rows are
/// [`tokenize_column`](super::tokenize_column)'s, and errors name rows counted from the start of
/// the source. The schema's metadata (which describes the source's columns) is not carried;
/// the fields' own metadata is.
pub fn tokenize_to_file(
    source: Source,
    tokenizer: &Tokenizer,
    out_path: impl AsRef<Path>,
    options: &TokenizeToFileOptions,
) -> Result<TokenizeSummary> {
    let out_path = out_path.as_ref();
    let format = out_path
        .file_name()
        .and_then(|name| name.to_str())
        .and_then(output_format)
        .ok_or_else(|| Error::UnknownFormat {
            path: out_path.to_path_buf(),
            read: false,
        })?;
    let threads = options.tokenize.thread_count();
    let mut read = read_source(source, threads)?;
    let layout = Layout::new(&read.schema, tokenizer, options)?;
    let temporary = Temporary::create(out_path)?;
    let file = BufWriter::new(temporary.file.try_clone().map_err(|e| temporary.error(e))?);
    let mut progress = Progress::new(options.progress, read.num_rows);
    let (sender, receiver) = sync_channel::<RecordBatch>(2);
    let schema = layout.output.clone();
    let summary = std::thread::scope(|scope| -> Result<TokenizeSummary> {
        let writer = std::thread::Builder::new()
            .name("arrow-dlpack-tokenize-writer".to_string())
            .spawn_scoped(scope, || write_all(format, file, &schema, receiver))
            .map_err(|source| Error::Thread { source })?;
        let mut summary = TokenizeSummary { rows: 0, tokens: 0 };
        let mut failure = None;
        for batch in &mut read.batches {
            let made = batch.and_then(|batch| {
                check_same_columns(&batch.schema(), &read.schema, || {
                    format!("record batch at row {}", summary.rows)
                })?;
                layout.output_batch(&batch, tokenizer, &options.tokenize, summary.rows)
            });
            match made {
                Ok((batch, tokens)) => {
                    summary.rows += batch.num_rows() as u64;
                    summary.tokens += tokens;
                    progress.update(summary);
                    // A closed channel means the writer failed; its error is reported below.
                    if sender.send(batch).is_err() {
                        break;
                    }
                }
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            }
        }
        drop(sender);
        let written = writer.join().map_err(Error::from_panic)?;
        match failure {
            Some(error) => Err(error),
            None => written
                .map_err(|source| temporary.write_error(source))
                .map(|()| summary),
        }
    });
    progress.finish(summary.as_ref().ok().copied());
    let summary = summary?;
    temporary.persist(out_path)?;
    Ok(summary)
}

/// Which columns go into the output, and its schema.
struct Layout {
    /// The index of the text column in the source.
    text: usize,
    /// The indices of the columns kept.
    kept: Vec<usize>,
    output: SchemaRef,
}

impl Layout {
    fn new(
        schema: &SchemaRef,
        tokenizer: &Tokenizer,
        options: &TokenizeToFileOptions,
    ) -> Result<Self> {
        let index_of = |name: &str| {
            schema.index_of(name).map_err(|_| Error::MissingColumn {
                column: name.to_string(),
                available: schema.fields().iter().map(|f| f.name().clone()).collect(),
            })
        };
        let text = index_of(&options.column)?;
        let data_type = schema.field(text).data_type();
        if !matches!(
            data_type,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ) {
            return Err(Error::UnsupportedColumn {
                column: options.column.clone(),
                data_type: data_type.clone(),
                metadata: schema.field(text).metadata().clone(),
                as_sequence: false,
                expected: TEXT_TYPES,
                every_column: false,
            });
        }
        let kept = match &options.keep_columns {
            None => (0..schema.fields().len()).collect(),
            Some(names) => {
                let mut kept = names
                    .iter()
                    .map(|name| index_of(name))
                    .collect::<Result<Vec<_>>>()?;
                kept.sort_unstable();
                kept.dedup();
                kept
            }
        };
        if let Some(&clash) = kept
            .iter()
            .find(|&&i| schema.field(i).name() == &options.output_column)
        {
            return Err(Error::InvalidSpec {
                reason: format!(
                    "the output column {:?} is also column {clash} of the source; expected \
                     another output column name, or the column left out of keep_columns",
                    options.output_column
                ),
            });
        }
        let item = Arc::new(Field::new_list_field(tokenizer.id_type(), true));
        let ids_type = if options.tokenize.large_offsets {
            DataType::LargeList(item)
        } else {
            DataType::List(item)
        };
        let mut fields: Vec<Arc<Field>> =
            kept.iter().map(|&i| schema.fields()[i].clone()).collect();
        fields.push(Arc::new(Field::new(&options.output_column, ids_type, true)));
        Ok(Layout {
            text,
            kept,
            output: Arc::new(Schema::new(fields)),
        })
    }

    /// The output record batch of `batch`, whose first row is row `first_row` of the source,
    /// and its count of ids.
    fn output_batch(
        &self,
        batch: &RecordBatch,
        tokenizer: &Tokenizer,
        options: &TokenizeOptions,
        first_row: u64,
    ) -> Result<(RecordBatch, u64)> {
        let ids = tokenize_rows(
            batch.column(self.text).as_ref(),
            tokenizer,
            options,
            first_row,
        )?;
        let tokens = ids.to_data().child_data()[0].len() as u64;
        let mut columns: Vec<ArrayRef> =
            self.kept.iter().map(|&i| batch.column(i).clone()).collect();
        columns.push(ids);
        Ok((RecordBatch::try_new(self.output.clone(), columns)?, tokens))
    }
}

/// Writes every record batch of `batches` to `file` in `format`.
fn write_all(
    format: Format,
    file: BufWriter<File>,
    schema: &SchemaRef,
    batches: Receiver<RecordBatch>,
) -> std::result::Result<(), Box<dyn std::error::Error + Send + Sync>> {
    match format {
        Format::IpcFile => {
            let mut writer = arrow_ipc::writer::FileWriter::try_new(file, schema)?;
            for batch in batches {
                writer.write(&batch)?;
            }
            writer.finish()?;
            writer.into_inner()?.flush()?;
        }
        Format::IpcStream => {
            let mut writer = arrow_ipc::writer::StreamWriter::try_new(file, schema)?;
            for batch in batches {
                writer.write(&batch)?;
            }
            writer.finish()?;
            writer.into_inner()?.flush()?;
        }
        Format::Parquet => {
            let properties = parquet::file::properties::WriterProperties::builder()
                .set_compression(parquet_compression())
                .build();
            let mut writer =
                parquet::arrow::ArrowWriter::try_new(file, schema.clone(), Some(properties))?;
            for batch in batches {
                writer.write(&batch)?;
                if writer.in_progress_size() >= ROW_GROUP_BYTES {
                    writer.flush()?;
                }
            }
            writer.into_inner()?.flush()?;
        }
    }
    Ok(())
}

/// Snappy when this build reads it, as PyArrow writes by default; no compression otherwise.
fn parquet_compression() -> parquet::basic::Compression {
    if cfg!(feature = "snappy") {
        parquet::basic::Compression::SNAPPY
    } else {
        parquet::basic::Compression::UNCOMPRESSED
    }
}

/// The file being written, under a temporary name beside the destination; removed when dropped
/// before [`persist`](Self::persist).
struct Temporary {
    path: PathBuf,
    file: File,
    kept: bool,
}

impl Temporary {
    fn create(destination: &Path) -> Result<Self> {
        let name = destination
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let path = destination.with_file_name(format!(".{name}.{}.partial", std::process::id()));
        // Said of the file asked for: the temporary name is ours (a missing folder is the
        // caller's path's).
        let file = File::create(&path).map_err(|source| Error::Write {
            path: destination.to_path_buf(),
            source: Box::new(source),
        })?;
        Ok(Temporary {
            path,
            file,
            kept: false,
        })
    }

    fn error(&self, source: std::io::Error) -> Error {
        Error::io(&self.path, source)
    }

    fn write_error(&self, source: Box<dyn std::error::Error + Send + Sync>) -> Error {
        Error::Write {
            path: self.path.clone(),
            source,
        }
    }

    /// Moves the finished file to `destination`.
    fn persist(mut self, destination: &Path) -> Result<()> {
        self.file.sync_all().map_err(|source| self.error(source))?;
        std::fs::rename(&self.path, destination).map_err(|source| Error::Write {
            path: destination.to_path_buf(),
            source: Box::new(source),
        })?;
        self.kept = true;
        Ok(())
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A progress line on standard error, redrawn at most ten times a second, while standard error
/// is a terminal.
struct Progress {
    enabled: bool,
    total: Option<u64>,
    start: Instant,
    drawn: Option<Instant>,
}

impl Progress {
    fn new(wanted: bool, total: Option<u64>) -> Self {
        Progress {
            enabled: wanted && std::io::stderr().is_terminal(),
            total,
            start: Instant::now(),
            drawn: None,
        }
    }

    fn update(&mut self, summary: TokenizeSummary) {
        if !self.enabled
            || self
                .drawn
                .is_some_and(|drawn| drawn.elapsed() < Duration::from_millis(100))
        {
            return;
        }
        self.drawn = Some(Instant::now());
        self.draw(summary, "");
    }

    fn finish(&mut self, summary: Option<TokenizeSummary>) {
        if !self.enabled || self.drawn.is_none() && summary.is_none() {
            return;
        }
        match summary {
            Some(summary) => self.draw(summary, "\n"),
            None => eprintln!(),
        }
    }

    fn draw(&self, summary: TokenizeSummary, end: &str) {
        let seconds = self.start.elapsed().as_secs_f64().max(1e-9);
        let rows = match self.total {
            Some(total) if total > 0 => format!(
                "{}/{total} rows ({:.0}%)",
                summary.rows,
                100.0 * summary.rows as f64 / total as f64
            ),
            _ => format!("{} rows", summary.rows),
        };
        let rate = summary.tokens as f64 / seconds;
        let mut stderr = std::io::stderr().lock();
        let _ = write!(
            stderr,
            "\rtokenizing: {rows}, {} tokens, {:.2}M tokens/s, {seconds:.0} s{end}",
            summary.tokens,
            rate / 1e6
        );
        let _ = stderr.flush();
    }
}

/// The format an output file is written in, by its extension: an Arrow IPC stream for
/// `.arrows`, an IPC file for the other Arrow extensions, Parquet for `.parquet` and `.pq`.
fn output_format(name: &str) -> Option<Format> {
    match extension_of(name)? {
        Extension::Parquet => Some(Format::Parquet),
        Extension::Arrow if name.to_ascii_lowercase().ends_with(".arrows") => {
            Some(Format::IpcStream)
        }
        Extension::Arrow => Some(Format::IpcFile),
    }
}
