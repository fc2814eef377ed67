//! Encoded bytes to upright 8-bit pixels of the spec's colour mode: the format told from its
//! first bytes, the size read from the header and held against `max_pixels` before any pixel is
//! allocated, the pixels decoded into a buffer the thread reuses, then converted as PIL's
//! `Image.convert` converts them and turned by the EXIF orientation.
//!
//! JPEG goes to zune-jpeg directly: through the `image` crate its headers would be parsed three
//! times (size, EXIF, pixels) and its bytes copied once more. PNG, WebP, GIF (first frame) and
//! BMP go through the `image` crate's decoders, with its [`Limits`] on every one.

use std::io::Cursor;

use image::metadata::Orientation;
use image::{ColorType, ImageDecoder, ImageFormat, ImageReader, Limits};
use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;

use super::convert::{Pixels, convert_mode, reduce_to_8_bits};
use super::spec::{ImageSpec, Mode};
use crate::{Error, Result};

/// The buffers one thread decodes into, kept from row to row so that a batch allocates them
/// once per thread rather than once per image.
#[derive(Debug, Default)]
pub(crate) struct DecodeBuffers {
    decoded: Vec<u8>,
    converted: Vec<u8>,
    oriented: Vec<u8>,
}

/// The formats read, as `image` names them.
const FORMATS: [ImageFormat; 5] = [
    ImageFormat::Jpeg,
    ImageFormat::Png,
    ImageFormat::WebP,
    ImageFormat::Gif,
    ImageFormat::Bmp,
];

/// Decodes `bytes` into upright pixels of `spec.mode`, in `buffers`.
pub(crate) fn decode<'b>(
    bytes: &[u8],
    spec: &ImageSpec,
    buffers: &'b mut DecodeBuffers,
) -> Result<Pixels<'b>> {
    let format = image::guess_format(bytes)
        .ok()
        .filter(|format| FORMATS.contains(format))
        .ok_or_else(|| Error::UnknownImageFormat {
            start: bytes.iter().take(8).copied().collect(),
        })?;
    let gif = if format == ImageFormat::Gif {
        decode_gif(bytes, spec, &mut buffers.decoded)?
    } else {
        None
    };
    let (width, height, channels, orientation) = if let Some(decoded) = gif {
        decoded
    } else if format == ImageFormat::Jpeg {
        decode_jpeg(bytes, spec, &mut buffers.decoded)?
    } else {
        decode_other(bytes, format, spec, &mut buffers.decoded)?
    };
    let target = spec.mode.channels();
    let mut pixels = Pixels {
        data: &buffers.decoded,
        width,
        height,
        channels,
    };
    if channels != target {
        resize_buffer(&mut buffers.converted, pixel_bytes(width, height, target)?)?;
        convert_mode(pixels, spec.mode, &mut buffers.converted);
        pixels = Pixels {
            data: &buffers.converted,
            channels: target,
            ..pixels
        };
    }
    if !spec.exif_transpose || orientation == Orientation::NoTransforms {
        return Ok(pixels);
    }
    resize_buffer(&mut buffers.oriented, pixels.data.len())?;
    Ok(orient(pixels, orientation, &mut buffers.oriented))
}

/// Refuses an image whose header claims no pixels or more than `spec.max_pixels`.
fn check_size(width: u32, height: u32, spec: &ImageSpec) -> Result<()> {
    let pixels = u64::from(width) * u64::from(height);
    if pixels == 0 || pixels > spec.max_pixels {
        return Err(Error::ImageSize {
            width,
            height,
            max_pixels: spec.max_pixels,
        });
    }
    Ok(())
}

/// The bytes of `width` x `height` pixels of `channels` bytes, or `OutOfMemory`.
fn pixel_bytes(width: u32, height: u32, channels: usize) -> Result<usize> {
    (width as usize)
        .checked_mul(height as usize)
        .and_then(|pixels| pixels.checked_mul(channels))
        .ok_or(Error::Tensor(arrow_dlpack_tensor::Error::OutOfMemory {
            bytes: usize::MAX,
        }))
}

/// Sets `buffer` to `len` bytes, growing it fallibly (`OutOfMemory` rather than an abort).
fn resize_buffer(buffer: &mut Vec<u8>, len: usize) -> Result<()> {
    if len > buffer.len() {
        buffer
            .try_reserve_exact(len - buffer.len())
            .map_err(|_| arrow_dlpack_tensor::Error::OutOfMemory { bytes: len })?;
    }
    buffer.resize(len, 0);
    Ok(())
}

/// JPEG: `(width, height, channels, orientation)` with the pixels in `out`, 1 channel for
/// greyscale input or output, 3 otherwise (CMYK and YCCK converted to RGB by zune-jpeg).
fn decode_jpeg(
    bytes: &[u8],
    spec: &ImageSpec,
    out: &mut Vec<u8>,
) -> Result<(u32, u32, usize, Orientation)> {
    let codec = |source| Error::ImageCodec {
        format: "JPEG",
        source: Box::new(source),
    };
    // The size limits are ours (`max_pixels`, checked below), not zune-jpeg's defaults.
    let options = DecoderOptions::default()
        .set_strict_mode(false)
        .set_max_width(usize::MAX)
        .set_max_height(usize::MAX);
    let mut decoder = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(bytes), options);
    decoder.decode_headers().map_err(codec)?;
    let (width, height) = decoder.dimensions().unwrap_or((0, 0));
    let (width, height) = (width as u32, height as u32);
    check_size(width, height, spec)?;
    let input = decoder.input_colorspace().unwrap_or(ColorSpace::RGB);
    // Mode L reads the luma plane of YCbCr directly; CMYK and YCCK go through RGB, which
    // zune-jpeg converts them to.
    let grey = matches!(input, ColorSpace::Luma | ColorSpace::LumaA)
        || (spec.mode == Mode::L && input == ColorSpace::YCbCr);
    let (colorspace, channels) = if grey {
        (ColorSpace::Luma, 1)
    } else {
        (ColorSpace::RGB, 3)
    };
    decoder.set_options(
        options
            .set_strict_mode(true)
            .jpeg_set_out_colorspace(colorspace),
    );
    let orientation = decoder
        .exif()
        .and_then(|exif| Orientation::from_exif_chunk(exif))
        .unwrap_or(Orientation::NoTransforms);
    let len = pixel_bytes(width, height, channels)?;
    if decoder.output_buffer_size() != Some(len) {
        return Err(Error::ImageCodec {
            format: "JPEG",
            source: format!(
                "the decoder would write {:?} bytes for {width} x {height} pixels of {channels} \
                 channels; expected {len}",
                decoder.output_buffer_size()
            )
            .into(),
        });
    }
    resize_buffer(out, len)?;
    // Strict first: zune-jpeg's lenient mode fills what a truncated file lacks with grey, where
    // PIL refuses the file ("image file is truncated"). A file refused for its structure only
    // (stray bytes between markers, an unexpected marker) is decoded again leniently, as
    // libjpeg (and so PIL) reads it with a warning; one whose data ends early stays refused.
    let Err(strict) = decoder.decode_into(out) else {
        return Ok((width, height, channels, orientation));
    };
    if is_truncated(&strict) {
        return Err(Error::ImageCodec {
            format: "JPEG",
            source: format!("the data ends before the image does (truncated file): {strict}")
                .into(),
        });
    }
    let mut decoder = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(bytes), options);
    decoder.decode_headers().map_err(codec)?;
    decoder.set_options(options.jpeg_set_out_colorspace(colorspace));
    if decoder.output_buffer_size() != Some(len) {
        return Err(codec(strict));
    }
    decoder.decode_into(out).map_err(codec)?;
    Ok((width, height, channels, orientation))
}

/// Whether zune-jpeg's strict error says that the data ended before the image.
fn is_truncated(error: &zune_jpeg::errors::DecodeErrors) -> bool {
    use zune_jpeg::errors::DecodeErrors;
    match error {
        DecodeErrors::ExhaustedData | DecodeErrors::IoErrors(_) => true,
        DecodeErrors::FormatStatic(message) => message.starts_with("Premature end"),
        other => {
            let message = other.to_string().to_ascii_lowercase();
            message.contains("premature end") || message.contains("no more bytes")
        }
    }
}

/// GIF whose first frame covers its logical screen: `(width, height, 4, no orientation)` with
/// RGBA pixels in `out`, each the colour of its palette index, and alpha 0 for the transparent
/// index, as PIL converts a palette image (`P` with `transparency`) to RGBA; `None` for a first
/// frame that covers part of the screen, which the `image` crate composes.
fn decode_gif(
    bytes: &[u8],
    spec: &ImageSpec,
    out: &mut Vec<u8>,
) -> Result<Option<(u32, u32, usize, Orientation)>> {
    let codec = |source| Error::ImageCodec {
        format: "GIF",
        source: Box::new(source),
    };
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::Indexed);
    // The frame's indices, one byte a pixel, bounded by the largest image allowed.
    let limit =
        std::num::NonZeroU64::new(spec.max_pixels.max(1)).unwrap_or(std::num::NonZeroU64::MIN);
    options.set_memory_limit(gif::MemoryLimit::Bytes(limit));
    let mut decoder = options.read_info(Cursor::new(bytes)).map_err(codec)?;
    let (width, height) = (u32::from(decoder.width()), u32::from(decoder.height()));
    check_size(width, height, spec)?;
    let global: Option<Vec<u8>> = decoder.global_palette().map(<[u8]>::to_vec);
    let Some(frame) = decoder.read_next_frame().map_err(codec)? else {
        return Err(Error::ImageCodec {
            format: "GIF",
            source: "the file holds no frame".into(),
        });
    };
    let covers = frame.left == 0
        && frame.top == 0
        && u32::from(frame.width) == width
        && u32::from(frame.height) == height;
    let Some(palette) = frame.palette.as_deref().or(global.as_deref()) else {
        return Ok(None);
    };
    if !covers || frame.buffer.len() != pixel_bytes(width, height, 1)? {
        return Ok(None);
    }
    resize_buffer(out, pixel_bytes(width, height, 4)?)?;
    for (pixel, &index) in out.chunks_exact_mut(4).zip(frame.buffer.iter()) {
        let at = usize::from(index) * 3;
        // An index past the palette's end is black, as PIL's palette (padded with zeros) maps it.
        let colour = palette.get(at..at + 3).unwrap_or(&[0, 0, 0]);
        pixel[..3].copy_from_slice(colour);
        pixel[3] = if frame.transparent == Some(index) {
            0
        } else {
            255
        };
    }
    Ok(Some((width, height, 4, Orientation::NoTransforms)))
}

/// PNG, WebP, GIF, BMP: `(width, height, channels, orientation)` with 8-bit pixels in `out`.
fn decode_other(
    bytes: &[u8],
    format: ImageFormat,
    spec: &ImageSpec,
    out: &mut Vec<u8>,
) -> Result<(u32, u32, usize, Orientation)> {
    let name = match format {
        ImageFormat::Png => "PNG",
        ImageFormat::WebP => "WebP",
        ImageFormat::Gif => "GIF",
        _ => "BMP",
    };
    let codec = |source| Error::ImageCodec {
        format: name,
        source: Box::new(source),
    };
    // Every decoder's own allocations are bounded by what the largest allowed image needs in
    // 16-bit RGBA, plus room for metadata chunks.
    let mut limits = Limits::default();
    limits.max_alloc = Some(spec.max_pixels.saturating_mul(8).saturating_add(64 << 20));
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    reader.limits(limits);
    let mut decoder = reader.into_decoder().map_err(codec)?;
    let (width, height) = decoder.dimensions();
    check_size(width, height, spec)?;
    let orientation = if spec.exif_transpose {
        // A malformed EXIF block is ignored, as PIL's `exif_transpose` ignores it.
        decoder.orientation().unwrap_or(Orientation::NoTransforms)
    } else {
        Orientation::NoTransforms
    };
    let color = decoder.color_type();
    let (channels, wide) = match color {
        ColorType::L8 => (1, false),
        ColorType::La8 => (2, false),
        ColorType::Rgb8 => (3, false),
        ColorType::Rgba8 => (4, false),
        ColorType::L16 => (1, true),
        ColorType::La16 => (2, true),
        ColorType::Rgb16 => (3, true),
        ColorType::Rgba16 => (4, true),
        other => {
            return Err(Error::ImageCodec {
                format: name,
                source: format!("pixels of {other:?} are not read; expected 8 or 16 bits").into(),
            });
        }
    };
    let len = usize::try_from(decoder.total_bytes()).unwrap_or(usize::MAX);
    if len != pixel_bytes(width, height, channels * if wide { 2 } else { 1 })? {
        return Err(Error::ImageCodec {
            format: name,
            source: format!("the decoder would write {len} bytes, not whole pixels").into(),
        });
    }
    resize_buffer(out, len)?;
    decoder.read_image(out).map_err(codec)?;
    if wide {
        // PIL keeps the high byte of 16-bit colour and clips 16-bit grey (`I;16`) to 255.
        reduce_to_8_bits(out, color == ColorType::L16);
    }
    Ok((width, height, channels, orientation))
}

/// `pixels` turned by `orientation` into `out` (as long as `pixels.data`).
fn orient<'b>(pixels: Pixels<'_>, orientation: Orientation, out: &'b mut [u8]) -> Pixels<'b> {
    let (width, height) = (pixels.width as usize, pixels.height as usize);
    let channels = pixels.channels;
    let transposed = matches!(
        orientation,
        Orientation::Rotate90
            | Orientation::Rotate270
            | Orientation::Rotate90FlipH
            | Orientation::Rotate270FlipH
    );
    let (out_width, out_height) = if transposed {
        (height, width)
    } else {
        (width, height)
    };
    // For each output pixel (x, y), the source pixel it shows.
    let source = |x: usize, y: usize| -> (usize, usize) {
        match orientation {
            Orientation::FlipHorizontal => (width - 1 - x, y),
            Orientation::Rotate180 => (width - 1 - x, height - 1 - y),
            Orientation::FlipVertical => (x, height - 1 - y),
            // Clockwise: the output's first row is the source's first column, read upwards.
            Orientation::Rotate90 => (y, height - 1 - x),
            Orientation::Rotate270 => (width - 1 - y, x),
            // EXIF 5, the transpose.
            Orientation::Rotate90FlipH => (y, x),
            // EXIF 7, the transverse.
            Orientation::Rotate270FlipH => (width - 1 - y, height - 1 - x),
            _ => (x, y),
        }
    };
    for (y, row) in out.chunks_exact_mut(out_width * channels).enumerate() {
        for (x, pixel) in row.chunks_exact_mut(channels).enumerate() {
            let (sx, sy) = source(x, y);
            let start = (sy * width + sx) * channels;
            pixel.copy_from_slice(&pixels.data[start..start + channels]);
        }
    }
    Pixels {
        data: out,
        width: out_width as u32,
        height: out_height as u32,
        channels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3 x 2 image of one channel whose pixel values are their positions: 0 1 2 / 3 4 5.
    fn oriented(orientation: Orientation) -> (Vec<u8>, u32, u32) {
        let data = [0u8, 1, 2, 3, 4, 5];
        let pixels = Pixels {
            data: &data,
            width: 3,
            height: 2,
            channels: 1,
        };
        let mut out = vec![0; 6];
        let turned = orient(pixels, orientation, &mut out);
        let (width, height) = (turned.width, turned.height);
        (out, width, height)
    }

    #[test]
    fn orientations_turn_as_exif_says() {
        assert_eq!(
            oriented(Orientation::FlipHorizontal),
            (vec![2, 1, 0, 5, 4, 3], 3, 2)
        );
        assert_eq!(
            oriented(Orientation::Rotate180),
            (vec![5, 4, 3, 2, 1, 0], 3, 2)
        );
        assert_eq!(
            oriented(Orientation::FlipVertical),
            (vec![3, 4, 5, 0, 1, 2], 3, 2)
        );
        // 90 degrees clockwise: the left column, bottom to top, becomes the first row.
        assert_eq!(
            oriented(Orientation::Rotate90),
            (vec![3, 0, 4, 1, 5, 2], 2, 3)
        );
        assert_eq!(
            oriented(Orientation::Rotate270),
            (vec![2, 5, 1, 4, 0, 3], 2, 3)
        );
        assert_eq!(
            oriented(Orientation::Rotate90FlipH),
            (vec![0, 3, 1, 4, 2, 5], 2, 3)
        );
        assert_eq!(
            oriented(Orientation::Rotate270FlipH),
            (vec![5, 2, 4, 1, 3, 0], 2, 3)
        );
    }

    #[test]
    fn unknown_formats_name_their_first_bytes() {
        let spec = ImageSpec::new(super::super::spec::ImageSize::square(4));
        let error = decode(b"GIF7not an image", &spec, &mut DecodeBuffers::default()).unwrap_err();
        assert!(matches!(error, Error::UnknownImageFormat { ref start } if start == b"GIF7not "));
    }
}
