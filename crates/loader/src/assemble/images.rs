//! The image columns of one batch decoded: the rows of the batch's runs gathered, their paths
//! resolved, each row keyed by where it lies, and `arrow_dlpack::images::decode_rows` run on
//! the loader's decoding threads; with `on_error="skip"`, the rows that did not become images
//! of every image column are dropped, and the runs of the rows kept say what the other outputs
//! read.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

use arrow_array::{Array, ArrayRef};
use arrow_dlpack::images::{
    DecodeOptions, ImageRow, ImageSource, decode_rows, image_sources, row_key,
};
use arrow_dlpack_tensor::Tensor;
use arrow_dlpack_tensor::alloc::PooledVec;
use bytes::Bytes;

use super::{Piece, Run};
use crate::columns::{Columns, Output};
use crate::images::{ImageColumn, RowPlace};
use crate::{BatchSpec, Error, Result, TensorBatch};

/// The images of one batch: for each image output, in the order of the outputs, its images and
/// sizes; and the rows kept, as runs of the batch's pieces.
#[derive(Debug)]
pub(crate) struct Decoded {
    pub(crate) tensors: Vec<(Tensor, Tensor)>,
    pub(crate) runs: Vec<Run>,
}

impl Decoded {
    /// The rows kept.
    pub(crate) fn num_rows(&self) -> usize {
        self.runs.iter().map(|run| run.len).sum()
    }

    /// Appends the rows of `other` (decoded from runs of the same pieces) after these.
    pub(crate) fn append(&mut self, other: Decoded) -> Result<()> {
        for ((images, sizes), (more_images, more_sizes)) in
            self.tensors.iter_mut().zip(other.tensors)
        {
            *images = concat(images, &more_images)?;
            *sizes = concat(sizes, &more_sizes)?;
        }
        for run in other.runs {
            match self.runs.last_mut() {
                Some(last) if last.piece == run.piece && last.start + last.len == run.start => {
                    last.len += run.len;
                }
                _ => self.runs.push(run),
            }
        }
        Ok(())
    }
}

/// Makes the batch of the rows that `decoded` kept, its images already decoded.
pub(crate) fn assemble_decoded(
    spec: &BatchSpec,
    columns: &Columns,
    pieces: &mut [Piece],
    decoded: Decoded,
) -> Result<TensorBatch> {
    let runs = decoded.runs;
    if runs.is_empty() {
        // Every row was skipped: the views of no rows, which have the dtypes and cell shapes.
        let empty = [Run {
            piece: 0,
            start: 0,
            len: 0,
        }];
        return super::assemble_rows(spec, columns, pieces, &empty, decoded.tensors);
    }
    super::assemble_rows(spec, columns, pieces, &runs, decoded.tensors)
}

/// What [`decode_filling`] asks for more rows: given how many rows are missing, it appends the
/// pieces and runs of at most that many more rows, in order, and says how many it appended.
pub(crate) type MoreRows<'a> =
    dyn FnMut(usize, &mut Vec<Piece>, &mut Vec<Run>) -> Result<usize> + 'a;

/// The hook of `on_error="skip"`: decodes the images of `runs`, and while rows were skipped,
/// asks `more` for as many more rows, in order (it appends their pieces and runs and says how
/// many it found, 0 at the end of the source), and decodes them, until the batch holds
/// `batch_size` rows or the source ends. A skip depends on a row's bytes only, so a resumed run
/// skips the same rows.
pub(crate) fn decode_filling(
    spec: &BatchSpec,
    columns: &Columns,
    pieces: &mut Vec<Piece>,
    runs: &mut Vec<Run>,
    more: &mut MoreRows<'_>,
) -> Result<Decoded> {
    let mut decoded = decode_runs(spec, columns, pieces, runs)?;
    loop {
        let missing = spec.batch_size - decoded.num_rows().min(spec.batch_size);
        if missing == 0 {
            return Ok(decoded);
        }
        let first = runs.len();
        if more(missing, pieces, runs)? == 0 {
            return Ok(decoded);
        }
        let extra = decode_runs(spec, columns, pieces, &runs[first..])?;
        decoded.append(extra)?;
    }
}

/// Where the rows of a batch are: each row's piece and row in the piece.
fn rows_of(runs: &[Run]) -> Vec<(usize, usize)> {
    runs.iter()
        .flat_map(|run| (run.start..run.start + run.len).map(move |row| (run.piece, row)))
        .collect()
}

/// Where one row of a batch lies, for its key and its messages.
struct Place {
    /// The unit in the shard's order, when the batch came from a loader.
    item: Option<u64>,
    /// The row in its unit (or in its record batch, without one).
    unit_row: u64,
    /// The file and the row in it, for a source of files.
    file: Option<RowPlace>,
}

impl Place {
    fn of(columns: &Columns, piece: &Piece, row: usize) -> Place {
        let origin = piece.origin();
        let item = origin.map(|(item, _)| item);
        let unit_row = origin.map_or(0, |(_, first)| first) + row as u64;
        let file = match (&columns.origins.locate, item) {
            (Some(locate), Some(item)) => locate.place(item, unit_row),
            _ => None,
        };
        Place {
            item,
            unit_row,
            file,
        }
    }

    /// The key of the row's random crop and flip.
    fn key(&self, epoch: u64, position: usize) -> u64 {
        match (&self.file, self.item) {
            (Some(file), _) => row_key(epoch, file.file, file.row),
            // A stream's unit, offset so that it never meets a file's index.
            (None, Some(item)) => row_key(epoch, item | (1 << 63), self.unit_row),
            // Rows collated on their own: their position in the batch.
            (None, None) => row_key(epoch, u64::MAX, position as u64),
        }
    }

    /// The row as a message names it, and the file or unit it is in.
    fn for_error(&self) -> (u64, Option<PathBuf>, Option<u64>) {
        match &self.file {
            Some(file) => (file.row, Some(file.name.to_path_buf()), self.item),
            None => (self.unit_row, None, self.item),
        }
    }
}

/// Decodes the image outputs of `columns` for the rows of `runs` of `pieces`.
pub(crate) fn decode_runs(
    spec: &BatchSpec,
    columns: &Columns,
    pieces: &[Piece],
    runs: &[Run],
) -> Result<Decoded> {
    let rows = rows_of(runs);
    let places: Vec<Place> = rows
        .iter()
        .map(|&(piece, row)| Place::of(columns, &pieces[piece], row))
        .collect();
    let threads = NonZeroUsize::new(spec.decode_thread_count()).unwrap_or(NonZeroUsize::MIN);
    let options = DecodeOptions::default().threads(threads).seed(spec.seed);
    let mut decoded = Vec::new();
    let mut kept: Option<Vec<usize>> = None;
    for output in &columns.outputs {
        let Output::Image { index, image, .. } = output else {
            continue;
        };
        let slices: Vec<ArrayRef> = runs
            .iter()
            .map(|run| {
                pieces[run.piece]
                    .batch()
                    .column(*index)
                    .slice(run.start, run.len)
            })
            .collect();
        let mut sources = Vec::with_capacity(rows.len());
        for slice in &slices {
            sources.extend(
                image_sources(slice.as_ref()).map_err(|e| Error::column(&image.column, e))?,
            );
        }
        let resolved = resolve_paths(spec, image, &sources, &places)?;
        let mut fetched = read_urls(columns, &resolved)?;
        let image_rows: Vec<ImageRow<'_>> = sources
            .iter()
            .zip(&resolved)
            .zip(&places)
            .enumerate()
            .map(|(position, ((source, resolved), place))| ImageRow {
                source: match resolved {
                    Resolved::File(path) => ImageSource::Path(path.as_str()),
                    // A URL whose read failed is no image: skipped with `on_error="skip"`,
                    // and otherwise reported with the read's error below.
                    Resolved::Url(_) => match &fetched[position] {
                        Some(Ok(bytes)) => ImageSource::Bytes(bytes),
                        _ => ImageSource::Bytes(&[]),
                    },
                    Resolved::Source => *source,
                },
                row: position as u64,
                key: place.key(spec.epoch, position),
            })
            .collect();
        let result = decode_rows(&image.column, &image_rows, &image.spec, &options);
        let images = result.map_err(|error| match error {
            arrow_dlpack::Error::ImageRow { row, source, .. } => {
                let read_failed = fetched
                    .get_mut(row as usize)
                    .and_then(Option::take)
                    .and_then(Result::err);
                let source = match (read_failed, &resolved[row as usize]) {
                    (Some(failed), Resolved::Url(url)) => Box::new(url_read_error(url, failed)),
                    _ => source,
                };
                let (row, file, item) = places[row as usize].for_error();
                Error::ImageRow {
                    column: image.column.clone(),
                    row,
                    file,
                    item,
                    source,
                }
            }
            other => Error::column(&image.column, other),
        })?;
        let rows_kept: Vec<usize> = images
            .rows
            .as_slice::<i64>()?
            .iter()
            .map(|&row| row as usize)
            .collect();
        kept = Some(match kept {
            None => rows_kept.clone(),
            Some(before) => before
                .into_iter()
                .filter(|row| rows_kept.binary_search(row).is_ok())
                .collect(),
        });
        decoded.push((images.images, images.sizes, rows_kept));
    }
    let kept = kept.unwrap_or_else(|| (0..rows.len()).collect());
    let mut tensors = Vec::with_capacity(decoded.len());
    for (images, sizes, rows_kept) in decoded {
        if rows_kept.len() == kept.len() {
            tensors.push((images, sizes));
            continue;
        }
        // Another image column dropped rows that this one kept: keep the rows of both.
        let picks: Vec<usize> = kept
            .iter()
            .map(|row| rows_kept.binary_search(row).unwrap_or_default())
            .collect();
        tensors.push((take(&images, &picks)?, take(&sizes, &picks)?));
    }
    let mut kept_runs: Vec<Run> = Vec::new();
    for &position in &kept {
        let (piece, row) = rows[position];
        match kept_runs.last_mut() {
            Some(last) if last.piece == piece && last.start + last.len == row => last.len += 1,
            _ => kept_runs.push(Run {
                piece,
                start: row,
                len: 1,
            }),
        }
    }
    Ok(Decoded {
        tensors,
        runs: kept_runs,
    })
}

/// What an image row is read from.
enum Resolved {
    /// Its own bytes (or its null).
    Source,
    /// A local file.
    File(String),
    /// An object named by URL.
    Url(String),
}

/// What each row is read from: its path resolved against [`BatchSpec::image_root`] or the
/// directory of the row's file, as a local file or an object's URL (an absolute path or a URL
/// as it is); rows with bytes are read from them.
fn resolve_paths(
    spec: &BatchSpec,
    image: &ImageColumn,
    sources: &[ImageSource<'_>],
    places: &[Place],
) -> Result<Vec<Resolved>> {
    let mut resolved = Vec::with_capacity(sources.len());
    for (source, place) in sources.iter().zip(places) {
        let ImageSource::Path(path) = source else {
            resolved.push(Resolved::Source);
            continue;
        };
        let root: Option<PathBuf> = match &spec.image_root {
            Some(root) => Some(PathBuf::from(root)),
            None => place
                .file
                .as_ref()
                .and_then(|file| file.name.parent().map(Path::to_path_buf)),
        };
        let joined = if is_url(path) || Path::new(path).is_absolute() {
            path.to_string()
        } else {
            match root {
                // The source's name shows its URL without its credentials: joined with it, the
                // images' URLs would carry the mask instead, and be refused (or skipped).
                Some(root) if spec.image_root.is_none() && has_userinfo(&root) => {
                    return Err(Error::InvalidSpec {
                        reason: format!(
                            "column {:?} holds image paths relative to {}, whose URL carries \
                             credentials, which are not passed on to other requests; pass \
                             image_root= with the URL of the images (credentials included)",
                            image.column,
                            root.display()
                        ),
                    });
                }
                Some(root) => join(&root, path),
                None => {
                    let (row, _, item) = place.for_error();
                    return Err(Error::RelativeImagePath {
                        column: image.column.clone(),
                        row,
                        item,
                        path: path.to_string(),
                    });
                }
            }
        };
        resolved.push(if is_url(&joined) {
            Resolved::Url(joined)
        } else {
            Resolved::File(joined)
        });
    }
    Ok(resolved)
}

/// The bytes of the rows that name a URL (`None` for the others), read by the loader's reader
/// of image URLs; each row's failure is its own.
fn read_urls(columns: &Columns, resolved: &[Resolved]) -> Result<Vec<Option<Result<Bytes>>>> {
    let mut fetched: Vec<Option<Result<Bytes>>> = resolved.iter().map(|_| None).collect();
    let urls: Vec<(usize, &str)> = resolved
        .iter()
        .enumerate()
        .filter_map(|(at, resolved)| match resolved {
            Resolved::Url(url) => Some((at, url.as_str())),
            _ => None,
        })
        .collect();
    if urls.is_empty() {
        return Ok(fetched);
    }
    #[cfg(feature = "object-store")]
    if let Some(reader) = &columns.origins.urls {
        let texts: Vec<&str> = urls.iter().map(|&(_, url)| url).collect();
        let results = reader.read_all(&texts, arrow_dlpack::images::MAX_IMAGE_FILE_BYTES)?;
        for ((at, _), result) in urls.into_iter().zip(results) {
            // Memory that could not be had is the loader's failure, not the row's: raised, never
            // skipped with `on_error="skip"`.
            if let Err(Error::Io { source, .. }) = &result
                && source.kind() == std::io::ErrorKind::OutOfMemory
            {
                return Err(result.expect_err("matched an error"));
            }
            fetched[at] = Some(result);
        }
        return Ok(fetched);
    }
    let _ = columns;
    for (at, _) in urls {
        fetched[at] = Some(Err(Error::Io {
            path: PathBuf::new(),
            source: std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "image paths in object storage need the object-store feature of \
                 arrow-dlpack-loader; expected a local file",
            ),
        }));
    }
    Ok(fetched)
}

/// The image error of a row whose object at `url` could not be read.
fn url_read_error(url: &str, failed: Error) -> arrow_dlpack::Error {
    let (path, source) = match failed {
        Error::Io { path, source } if !path.as_os_str().is_empty() => (path, source),
        Error::Io { source, .. } => (PathBuf::from(redacted_url(url)), source),
        other => (
            PathBuf::from(redacted_url(url)),
            std::io::Error::other(other.to_string()),
        ),
    };
    arrow_dlpack::Error::ImageFile { path, source }
}

/// `url` as errors show it: without its userinfo, where the object-store feature can tell it.
fn redacted_url(url: &str) -> String {
    #[cfg(feature = "object-store")]
    {
        crate::remote::redacted_text(url)
    }
    #[cfg(not(feature = "object-store"))]
    {
        url.to_string()
    }
}

/// Whether `root` is a URL with a user name or password (shown masked in a source's name).
fn has_userinfo(root: &Path) -> bool {
    let text = root.to_string_lossy();
    is_url(&text)
        && text.split_once("://").is_some_and(|(_, rest)| {
            rest.split('/')
                .next()
                .is_some_and(|host| host.contains('@'))
        })
}

/// Whether `text` is a URL (`s3://...`), which is joined as text rather than as a path.
fn is_url(text: &str) -> bool {
    text.split_once("://").is_some_and(|(scheme, _)| {
        !scheme.is_empty() && scheme.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// `path` under `root`: joined as a path, or as a URL's segments where `root` is a URL.
fn join(root: &Path, path: &str) -> String {
    let root = root.to_string_lossy();
    if is_url(&root) {
        // The path is a key's segments, as a local path is a file's: a `%`, `?` or `#` in it is
        // part of the name, not an escape, a query or a fragment of the URL.
        let mut joined = root.trim_end_matches('/').to_string();
        for segment in path.split('/') {
            joined.push('/');
            for byte in segment.bytes() {
                if byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&byte) {
                    joined.push(char::from(byte));
                } else {
                    joined.push_str(&format!("%{byte:02X}"));
                }
            }
        }
        joined
    } else {
        Path::new(root.as_ref())
            .join(path)
            .to_string_lossy()
            .into_owned()
    }
}

/// The bytes of `tensor`, a dense row-major tensor that owns its buffer from its offset on.
fn bytes_of(tensor: &Tensor) -> &[u8] {
    let start = tensor.offset() * tensor.dtype().size();
    let len = tensor.shape().iter().product::<usize>() * tensor.dtype().size();
    &tensor.buffer().as_slice()[start..start + len]
}

/// The bytes of one row (outermost index) of `tensor`.
fn row_len(tensor: &Tensor) -> usize {
    tensor.shape()[1..].iter().product::<usize>() * tensor.dtype().size()
}

/// The rows `picks` of `tensor`, in that order, in a fresh allocation.
fn take(tensor: &Tensor, picks: &[usize]) -> Result<Tensor> {
    let row = row_len(tensor);
    let bytes = bytes_of(tensor);
    let mut out = PooledVec::<u8>::try_with_capacity(picks.len() * row)?;
    for &pick in picks {
        out.extend_from_slice(&bytes[pick * row..(pick + 1) * row]);
    }
    let mut shape = tensor.shape().to_vec();
    shape[0] = picks.len();
    Ok(Tensor::try_new_row_major(
        out.into_buffer(),
        tensor.dtype(),
        shape,
    )?)
}

/// The rows of `a` then those of `b` (of one dtype and row shape), in a fresh allocation.
fn concat(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (a_bytes, b_bytes) = (bytes_of(a), bytes_of(b));
    let mut out = PooledVec::<u8>::try_with_capacity(a_bytes.len() + b_bytes.len())?;
    out.extend_from_slice(a_bytes);
    out.extend_from_slice(b_bytes);
    let mut shape = a.shape().to_vec();
    shape[0] = a.shape()[0] + b.shape()[0];
    Ok(Tensor::try_new_row_major(
        out.into_buffer(),
        a.dtype(),
        shape,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths_and_joined_as_text() {
        assert!(is_url("s3://bucket/key.jpg"));
        assert!(!is_url("a/b.jpg"));
        assert!(!is_url("://x"));
        assert_eq!(
            join(Path::new("s3://bucket/dir/"), "a.jpg"),
            "s3://bucket/dir/a.jpg"
        );
        // A key's `%`, `?`, `#` and spaces are its own, escaped in the URL.
        assert_eq!(
            join(Path::new("s3://bucket/dir"), "img/%41 b?.jpg#1"),
            "s3://bucket/dir/img/%2541%20b%3F.jpg%231"
        );
        assert_eq!(join(Path::new("/data"), "a/b.jpg"), "/data/a/b.jpg");
    }

    #[test]
    fn rows_are_taken_and_concatenated() {
        let tensor = Tensor::from_vec(vec![0u8, 1, 2, 3, 4, 5], vec![3, 2]).unwrap();
        let taken = take(&tensor, &[2, 0]).unwrap();
        assert_eq!(taken.shape(), &[2, 2]);
        assert_eq!(taken.as_slice::<u8>().unwrap(), &[4, 5, 0, 1]);
        let joined = concat(&taken, &tensor).unwrap();
        assert_eq!(joined.shape(), &[5, 2]);
        assert_eq!(
            joined.as_slice::<u8>().unwrap(),
            &[4, 5, 0, 1, 0, 1, 2, 3, 4, 5]
        );
    }
}
