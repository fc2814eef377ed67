//! The rows of one call decoded in parallel, each written straight into its slot of one output
//! allocation: scoped threads (as many as the caller says, no global pool) take rows in order
//! from a shared cursor, so the slowest image holds up no other, and every row's crop and flip
//! come from its own generator, so the output never depends on which thread took it.

use std::fs::File;
use std::io::Read;
use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow_dlpack_tensor::alloc::PooledVec;
use arrow_dlpack_tensor::{DType, Tensor};

use super::decode::{DecodeBuffers, decode};
use super::geometry::plan;
use super::random::RowRng;
use super::resample::{Bytes, Normalised, OutputValues, ResampleBuffers, write_image};
use super::spec::{ImageDType, ImageSpec, OnError};
use super::{DecodeOptions, DecodedImages, ImageRow, ImageSource};
use crate::{Error, Result};

/// What happened to one row.
enum Outcome {
    /// Not reached: a row before it failed and errors are raised.
    Pending,
    /// Decoded: its height and width after the EXIF orientation.
    Decoded(u32, u32),
    /// Refused, with the reason.
    Failed(Error),
}

/// Everything one thread reuses from row to row.
#[derive(Default)]
struct ThreadBuffers {
    file: Vec<u8>,
    decode: DecodeBuffers,
    resample: ResampleBuffers,
}

/// Decodes `rows` by `spec` (already validated).
pub(crate) fn decode_all(
    column: &str,
    rows: &[ImageRow<'_>],
    spec: &ImageSpec,
    options: &DecodeOptions,
) -> Result<DecodedImages> {
    match spec.dtype {
        ImageDType::Uint8 => decode_typed::<u8>(column, rows, spec, options, &Bytes, DType::UInt8),
        ImageDType::Float32 => {
            let values = Normalised::new(spec);
            decode_typed::<f32>(column, rows, spec, options, &values, DType::Float32)
        }
    }
}

fn decode_typed<T: Copy + Default + Send + 'static>(
    column: &str,
    rows: &[ImageRow<'_>],
    spec: &ImageSpec,
    options: &DecodeOptions,
    values: &impl OutputValues<T>,
    dtype: DType,
) -> Result<DecodedImages> {
    let slot_len = spec.shape(1).iter().product::<usize>();
    let total = rows
        .len()
        .checked_mul(slot_len)
        .ok_or(arrow_dlpack_tensor::Error::OutOfMemory { bytes: usize::MAX })?;
    let mut out = PooledVec::<T>::try_with_capacity(total)?;
    let mut outcomes: Vec<Outcome> = rows.iter().map(|_| Outcome::Pending).collect();
    let raise = spec.on_error == OnError::Raise;
    {
        let slots = out.spare_capacity_mut()[..total].chunks_mut(slot_len.max(1));
        let work = Mutex::new(rows.iter().zip(slots).zip(outcomes.iter_mut()).enumerate());
        // The first row whose failure is raised (every failure with `OnError::Raise`; an
        // allocation that failed with either): later rows are not started.
        let first_failure = AtomicUsize::new(usize::MAX);
        let threads = options.threads.get().min(rows.len()).max(1);
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    let mut buffers = ThreadBuffers::default();
                    loop {
                        let next = work.lock().unwrap_or_else(|e| e.into_inner()).next();
                        let Some((index, ((row, slot), outcome))) = next else {
                            break;
                        };
                        if index > first_failure.load(Ordering::Relaxed) {
                            continue;
                        }
                        *outcome = decode_row(row, spec, options, values, &mut buffers, slot);
                        // A failed row's slot is left as it is: only decoded rows' slots are
                        // kept (a failure's zeros would cost a pass over the slot, 900 MB for a
                        // refused target of 300 million pixels, for nothing).
                        if let Outcome::Failed(error) = outcome
                            && (raise || error.is_out_of_memory())
                        {
                            first_failure.fetch_min(index, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
    }
    let mut kept = Vec::with_capacity(rows.len());
    let mut sizes = Vec::with_capacity(rows.len() * 2);
    for (index, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            Outcome::Decoded(height, width) => {
                kept.push(index);
                sizes.extend([height as i32, width as i32]);
            }
            // A row that failed for want of memory is raised with `OnError::Skip` too: which
            // rows then fail depends on the threads, not on the rows' bytes.
            Outcome::Failed(error) if raise || error.is_out_of_memory() => {
                return Err(Error::ImageRow {
                    row: rows[index].row,
                    column: column.to_string(),
                    source: Box::new(error),
                });
            }
            Outcome::Failed(_) | Outcome::Pending => {}
        }
    }
    let spare = &mut out.spare_capacity_mut()[..total];
    for (to, &from) in kept.iter().enumerate() {
        if to != from {
            spare.copy_within(from * slot_len..(from + 1) * slot_len, to * slot_len);
        }
    }
    // SAFETY: every kept slot (a decoded row's) was written in full by `write_image`, which
    // writes every element of its slot, and the kept slots were moved to the front within the
    // same `total` elements (a copy of initialised elements only), so the first
    // `kept * slot_len` are written; the other slots, never read, stay spare capacity.
    unsafe { out.set_len(kept.len() * slot_len) };
    let images = Tensor::try_new_row_major(out.into_buffer(), dtype, spec.shape(kept.len()))?;
    let sizes = Tensor::from_vec(sizes, vec![kept.len(), 2])?;
    let rows = Tensor::from_vec(
        kept.into_iter().map(|index| index as i64).collect(),
        vec![rows_len(&images)],
    )?;
    Ok(DecodedImages {
        images,
        sizes,
        rows,
    })
}

/// The number of images in `images`.
fn rows_len(images: &Tensor) -> usize {
    images.shape()[0]
}

/// Decodes one row into `slot`; a panic in a codec becomes [`Error::ImageCodecPanicked`].
fn decode_row<T: Copy + 'static>(
    row: &ImageRow<'_>,
    spec: &ImageSpec,
    options: &DecodeOptions,
    values: &impl OutputValues<T>,
    buffers: &mut ThreadBuffers,
    slot: &mut [MaybeUninit<T>],
) -> Outcome {
    let run = AssertUnwindSafe(|| -> Result<(u32, u32)> {
        let ThreadBuffers {
            file,
            decode: decode_buffers,
            resample,
        } = buffers;
        let bytes: &[u8] = match row.source {
            ImageSource::Bytes(bytes) => bytes,
            ImageSource::Null => return Err(Error::NullImage),
            ImageSource::Path(_) => {
                let path = row
                    .source
                    .resolve(options.image_root.as_deref())
                    .unwrap_or_default();
                read_file(&path, file)?;
                file
            }
        };
        let pixels = decode(bytes, spec, decode_buffers)?;
        let mut rng = RowRng::new(options.seed, row.key);
        let plan = plan(spec, pixels.width, pixels.height, &mut rng);
        write_image(pixels, &plan, spec, values, resample, slot)?;
        Ok((pixels.height, pixels.width))
    });
    match catch_unwind(run) {
        Ok(Ok((height, width))) => Outcome::Decoded(height, width),
        Ok(Err(error)) => Outcome::Failed(error),
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|message| message.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_string());
            Outcome::Failed(Error::ImageCodecPanicked { message })
        }
    }
}

/// Reads the file at `path` into `out`, replacing what it held.
fn read_file(path: &Path, out: &mut Vec<u8>) -> Result<()> {
    let file_error = |source| Error::ImageFile {
        path: path.to_path_buf(),
        source,
    };
    out.clear();
    // Only a regular file is opened: opening a FIFO blocks until a writer comes, and a device
    // (`/dev/zero`) never ends.
    let metadata = std::fs::metadata(path).map_err(file_error)?;
    if !metadata.is_file() {
        return Err(file_error(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        )));
    }
    let len = metadata.len();
    if len > MAX_IMAGE_FILE_BYTES {
        return Err(file_error(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("the file is {len} bytes; expected at most {MAX_IMAGE_FILE_BYTES}"),
        )));
    }
    // The size read above is reserved fallibly; a file that grew meanwhile is read up to it.
    out.try_reserve_exact(len as usize).map_err(|_| {
        file_error(std::io::Error::new(
            std::io::ErrorKind::OutOfMemory,
            format!("cannot allocate {len} bytes"),
        ))
    })?;
    File::open(path)
        .and_then(|file| file.take(len).read_to_end(out))
        .map_err(file_error)?;
    Ok(())
}

/// The largest image file read from a path (256 MiB): an encoded image is far smaller, and a
/// larger file is refused before it is read.
pub const MAX_IMAGE_FILE_BYTES: u64 = 256 << 20;
