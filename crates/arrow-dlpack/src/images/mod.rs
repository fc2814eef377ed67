//! Encoded image columns to one tensor of decoded, resized and cropped images (feature
//! `images`).
//!
//! | item | what it does |
//! |---|---|
//! | [`decode_images`] | the chunks of an Arrow column of encoded images -> [`DecodedImages`] |
//! | [`decode_rows`], [`ImageRow`], [`ImageSource`] | the same from rows the caller gathered (bytes it fetched itself, paths, keys of its own) |
//! | [`image_sources`], [`is_image_column_type`] | the source of each row of a column, and the column types accepted |
//! | [`ImageSpec`], [`ImageSize`], [`Crop`], [`Mode`], [`Layout`], [`ImageDType`], [`Interpolation`], [`OnError`] | what the images become; every choice parses from and prints as its name |
//! | [`DecodeOptions`] | threads, seed and the directory relative paths are read from |
//! | [`row_key`] | the key of a row from its epoch, unit and row, for reproducible random crops |
//!
//! A column is `binary`, `large_binary`, `binary_view`, or a struct with a `bytes` field of one
//! of these and an optional `path` string field (Hugging Face's `Image` feature); a struct row
//! whose bytes are null is read from its path. The formats are JPEG (baseline, progressive,
//! greyscale, CMYK and YCCK), PNG (palette, greyscale, 16-bit, alpha), WebP (lossy and
//! lossless), and the first frame of GIF and BMP, all decoded by pure-Rust codecs.
//!
//! Each image is decoded, converted to the spec's colour mode as PIL's `Image.convert` does,
//! turned upright by its EXIF orientation, and resampled from the source region that its output
//! window covers (antialiased when shrinking, as PIL's `resize`), straight into its slot of one
//! output allocation. An image whose header claims more than [`ImageSpec::max_pixels`] pixels is
//! refused before any of its pixels is allocated.
//!
//! Random crops and flips draw from a generator of the row's own, made from
//! [`DecodeOptions::seed`] and the row's [`ImageRow::key`]: the same seed and keys give the same
//! images whatever the threads do.
//!
//! ```
//! use std::sync::Arc;
//!
//! use arrow_array::BinaryArray;
//! use arrow_dlpack::images::{DecodeOptions, ImageSize, ImageSpec, decode_images};
//!
//! // A 2 x 2 greyscale PNG (made here with the `image` crate's encoder, as a file would hold it).
//! # let png = {
//! #     let mut png = Vec::new();
//! #     image::GrayImage::from_raw(2, 2, vec![0, 85, 170, 255])
//! #         .unwrap()
//! #         .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
//! #         .unwrap();
//! #     png
//! # };
//! let column = BinaryArray::from_vec(vec![png.as_slice(), png.as_slice()]);
//! let spec = ImageSpec::new(ImageSize::square(2));
//! let decoded = decode_images("image", &[&column], &spec, &DecodeOptions::default())?;
//! assert_eq!(decoded.images.shape(), &[2, 3, 2, 2]); // (B, C, H, W), uint8
//! assert_eq!(decoded.images.as_slice::<u8>()?[..4], [0, 85, 170, 255]); // red channel
//! assert_eq!(decoded.sizes.as_slice::<i32>()?, &[2, 2, 2, 2]); // height, width as decoded
//! assert_eq!(decoded.rows.as_slice::<i64>()?, &[0, 1]);
//! # Ok::<(), arrow_dlpack::Error>(())
//! ```

mod batch;
mod column;
mod convert;
mod decode;
mod geometry;
mod random;
mod resample;
mod spec;

use std::num::NonZeroUsize;
use std::path::PathBuf;

use arrow_array::Array;

pub use batch::MAX_IMAGE_FILE_BYTES;
pub use column::{ImageSource, image_sources, is_image_column_type};
pub use random::row_key;
pub use spec::{
    Crop, DEFAULT_MAX_PIXELS, IMAGE_SPEC_FIELDS, ImageDType, ImageSize, ImageSpec, Interpolation,
    Layout, Mode, OnError,
};

use crate::{Result, Tensor};

/// How one call decodes: on how many threads, with which seed, and where relative paths lie.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecodeOptions {
    /// The threads that decode, the calling thread's scope spawning them for the call (no pool
    /// outlives it); defaults to the machine's available parallelism.
    pub threads: NonZeroUsize,
    /// The seed of random crops and flips; with the rows' keys it fixes every draw.
    pub seed: u64,
    /// The directory that relative paths of [`ImageSource::Path`] rows are read from; `None`
    /// reads them from the current directory.
    pub image_root: Option<PathBuf>,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            threads: crate::available_cores(),
            seed: 0,
            image_root: None,
        }
    }
}

impl DecodeOptions {
    /// Sets [`threads`](Self::threads).
    #[must_use]
    pub fn threads(mut self, threads: NonZeroUsize) -> Self {
        self.threads = threads;
        self
    }

    /// Sets [`seed`](Self::seed).
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets [`image_root`](Self::image_root).
    #[must_use]
    pub fn image_root(mut self, image_root: impl Into<PathBuf>) -> Self {
        self.image_root = Some(image_root.into());
        self
    }
}

/// One row to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageRow<'a> {
    /// Where its encoded image is.
    pub source: ImageSource<'a>,
    /// Its row number, as errors name it (a row of a file, or of a column).
    pub row: u64,
    /// The key its random crop and flip are drawn with ([`row_key`]); rows with the same key and
    /// seed draw the same.
    pub key: u64,
}

/// The images of one call.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DecodedImages {
    /// `(B, C, H, W)` or `(B, H, W, C)` by [`ImageSpec::layout`], of [`ImageSpec::dtype`]; one
    /// image per kept row, row-major, writable.
    pub images: Tensor,
    /// `(B, 2)` int32: each kept image's height and width as decoded, after its EXIF
    /// orientation.
    pub sizes: Tensor,
    /// `(B,)` int64: the position of each kept row among the rows given, increasing. Every
    /// position unless [`OnError::Skip`] dropped rows.
    pub rows: Tensor,
}

/// Decodes `rows` into one tensor by `spec`; `column` names the column in errors.
///
/// With [`OnError::Raise`], the first row (in order) that cannot become an image fails the call
/// with [`Error::ImageRow`](crate::Error::ImageRow), naming its [`ImageRow::row`] and `column`,
/// the cause as its source; with [`OnError::Skip`], such rows are left out of every output.
pub fn decode_rows(
    column: &str,
    rows: &[ImageRow<'_>],
    spec: &ImageSpec,
    options: &DecodeOptions,
) -> Result<DecodedImages> {
    spec.validate()?;
    batch::decode_all(column, rows, spec, options)
}

/// Decodes every row of a column given as its chunks, rows numbered from 0 across the chunks,
/// each keyed by [`row_key`]`(0, 0, row)`.
pub fn decode_images(
    column: &str,
    chunks: &[&dyn Array],
    spec: &ImageSpec,
    options: &DecodeOptions,
) -> Result<DecodedImages> {
    spec.validate()?;
    let mut rows = Vec::new();
    for chunk in chunks {
        for source in image_sources(*chunk)? {
            let row = rows.len() as u64;
            rows.push(ImageRow {
                source,
                row,
                key: row_key(0, 0, row),
            });
        }
    }
    batch::decode_all(column, &rows, spec, options)
}
