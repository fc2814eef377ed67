//! One image into its slot of the output: the plan's source region resampled (or copied, when it
//! is whole pixels of the target's size) with `fast_image_resize`'s convolutions, which widen the
//! filter's support by the scale when shrinking as PIL does, then written into the slot in the
//! spec's layout and element type, mirrored when the plan flips, around the pad value where the
//! plan leaves room.

use std::mem::MaybeUninit;

use fast_image_resize::images::{TypedImage, TypedImageRef};
use fast_image_resize::pixels::{U8, U8x3, U8x4};
use fast_image_resize::{FilterType, PixelTrait, ResizeAlg, ResizeOptions, Resizer};

use super::convert::Pixels;
use super::geometry::Plan;
use super::spec::{ImageSpec, Interpolation, Layout};
use crate::{Error, Result};

/// What a thread keeps from one image to the next: the resampled region and the resizer's own
/// buffers.
#[derive(Default)]
pub(crate) struct ResampleBuffers {
    region: Vec<u8>,
    resizer: Resizer,
}

impl std::fmt::Debug for ResampleBuffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResampleBuffers")
            .field("region", &self.region.len())
            .finish_non_exhaustive()
    }
}

/// How 8-bit channel values become output elements: the identity for `uint8`, a table per
/// channel for `float32` (`v / 255`, then `(x - mean) / std`).
pub(crate) trait OutputValues<T>: Sync {
    /// The element of `value` in `channel`.
    fn element(&self, channel: usize, value: u8) -> T;
}

/// `uint8` output.
pub(crate) struct Bytes;

impl OutputValues<u8> for Bytes {
    fn element(&self, _channel: usize, value: u8) -> u8 {
        value
    }
}

/// `float32` output: 256 values per channel, worked out once per call.
pub(crate) struct Normalised {
    tables: Vec<[f32; 256]>,
}

impl Normalised {
    /// The tables of `spec`'s channels.
    pub(crate) fn new(spec: &ImageSpec) -> Self {
        let channels = spec.channels();
        let tables = (0..channels)
            .map(|channel| {
                let mean = spec.mean.as_ref().map_or(0.0, |mean| mean[channel]);
                let std = spec.std.as_ref().map_or(1.0, |std| std[channel]);
                std::array::from_fn(|value| (value as f32 / 255.0 - mean) / std)
            })
            .collect();
        Normalised { tables }
    }
}

impl OutputValues<f32> for Normalised {
    fn element(&self, channel: usize, value: u8) -> f32 {
        self.tables[channel][usize::from(value)]
    }
}

/// The filter of `interpolation`.
fn algorithm(interpolation: Interpolation) -> ResizeAlg {
    match interpolation {
        Interpolation::Bilinear => ResizeAlg::Convolution(FilterType::Bilinear),
        Interpolation::Bicubic => ResizeAlg::Convolution(FilterType::CatmullRom),
        Interpolation::Lanczos => ResizeAlg::Convolution(FilterType::Lanczos3),
        Interpolation::Nearest => ResizeAlg::Nearest,
    }
}

/// Resamples `pixels` by `plan` and writes the result into `slot` (every element of it).
pub(crate) fn write_image<T: Copy + 'static>(
    pixels: Pixels<'_>,
    plan: &Plan,
    spec: &ImageSpec,
    values: &impl OutputValues<T>,
    buffers: &mut ResampleBuffers,
    slot: &mut [MaybeUninit<T>],
) -> Result<()> {
    let region = resample(pixels, plan, spec, buffers)?;
    let (height, width) = (spec.size.height as usize, spec.size.width as usize);
    let channels = pixels.channels;
    if plan.pads(spec.size.height, spec.size.width) {
        fill(slot, spec, values);
    }
    let target = plan.target;
    let (top, left) = (target.top as usize, target.left as usize);
    let region_width = target.width as usize;
    let column = |x: usize| {
        let x = left + x;
        if plan.flip { width - 1 - x } else { x }
    };
    for (y, row) in region.chunks_exact(region_width * channels).enumerate() {
        let out_row = top + y;
        match spec.layout {
            Layout::Nhwc => {
                let line = &mut slot[out_row * width * channels..(out_row + 1) * width * channels];
                if !plan.flip && channels_are_bytes::<T>() {
                    // The common case, uint8 channels last unflipped: one copy per row.
                    let start = left * channels;
                    for (out, &value) in line[start..start + row.len()].iter_mut().zip(row) {
                        out.write(values.element(0, value));
                    }
                    continue;
                }
                for (x, pixel) in row.chunks_exact(channels).enumerate() {
                    let start = column(x) * channels;
                    for (channel, (out, &value)) in line[start..start + channels]
                        .iter_mut()
                        .zip(pixel)
                        .enumerate()
                    {
                        out.write(values.element(channel, value));
                    }
                }
            }
            Layout::Nchw => {
                for channel in 0..channels {
                    let plane = channel * height * width;
                    let line = &mut slot[plane + out_row * width..plane + (out_row + 1) * width];
                    let samples = row.iter().skip(channel).step_by(channels);
                    for (x, &value) in samples.enumerate() {
                        line[column(x)].write(values.element(channel, value));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Whether `T` is the byte type, whose values do not depend on the channel.
fn channels_are_bytes<T: 'static>() -> bool {
    std::any::TypeId::of::<T>() == std::any::TypeId::of::<u8>()
}

/// Fills all of `slot` with the pad value, channel by channel.
fn fill<T: Copy>(slot: &mut [MaybeUninit<T>], spec: &ImageSpec, values: &impl OutputValues<T>) {
    let channels = spec.channels();
    let pad: Vec<T> = (0..channels)
        .map(|channel| values.element(channel, spec.pad_value))
        .collect();
    match spec.layout {
        Layout::Nhwc => {
            for pixel in slot.chunks_exact_mut(channels) {
                for (out, &value) in pixel.iter_mut().zip(&pad) {
                    out.write(value);
                }
            }
        }
        Layout::Nchw => {
            let plane = spec.size.height as usize * spec.size.width as usize;
            for (values, &value) in slot.chunks_exact_mut(plane).zip(&pad) {
                for out in values {
                    out.write(value);
                }
            }
        }
    }
}

/// The plan's source region of `pixels` at the target's size, interleaved, in `buffers`.
fn resample<'b>(
    pixels: Pixels<'_>,
    plan: &Plan,
    spec: &ImageSpec,
    buffers: &'b mut ResampleBuffers,
) -> Result<&'b [u8]> {
    let channels = pixels.channels;
    let (width, height) = (plan.target.width, plan.target.height);
    let len = width as usize * height as usize * channels;
    let source = plan.source;
    if !plan.is_copy() {
        let from = (source.width, source.height);
        let image = (pixels.width, pixels.height);
        probe_resize(spec, image, from, (width, height), channels)?;
    }
    if len > buffers.region.len() {
        buffers
            .region
            .try_reserve_exact(len - buffers.region.len())
            .map_err(|_| arrow_dlpack_tensor::Error::OutOfMemory { bytes: len })?;
    }
    buffers.region.resize(len, 0);
    if plan.is_copy() {
        let (left, top) = (source.left as usize, source.top as usize);
        let stride = pixels.width as usize * channels;
        let row_len = width as usize * channels;
        for (y, out) in buffers.region.chunks_exact_mut(row_len).enumerate() {
            let start = (top + y) * stride + left * channels;
            out.copy_from_slice(&pixels.data[start..start + row_len]);
        }
        return Ok(&buffers.region);
    }
    let options = ResizeOptions::new()
        .resize_alg(algorithm(spec.interpolation))
        .crop(source.left, source.top, source.width, source.height);
    let (input, output) = (
        (pixels.width, pixels.height, pixels.data),
        &mut buffers.region[..],
    );
    let resizer = &mut buffers.resizer;
    // The three pixel layouts that decoding gives, each resized through its own type: the
    // resizer's dynamic entry point would compile its convolutions for every pixel type it knows
    // (16-bit, float, two-channel), most of the extension module's resampling code.
    match channels {
        1 => resize_as::<U8>(resizer, input, (width, height, output), &options),
        3 => resize_as::<U8x3>(resizer, input, (width, height, output), &options),
        _ => resize_as::<U8x4>(resizer, input, (width, height, output), &options),
    }
    .map_err(|reason| Error::ImageResize { reason })?;
    Ok(&buffers.region)
}

/// Makes sure that the resizer's working memory for a `from` region (width, height, in source
/// pixels) of an `image` (width, height) resized to `to` pixels of `channels` bytes can be
/// allocated, before anything of the resize is: the resizer allocates it without a way to fail,
/// so a size past what the process may allocate is a MemoryError rather than an abort, and it
/// is refused before the region (up to the target's size) is written.
fn probe_resize(
    spec: &ImageSpec,
    image: (u32, u32),
    from: (f64, f64),
    to: (u32, u32),
    channels: usize,
) -> Result<()> {
    let support = match spec.interpolation {
        Interpolation::Nearest => 0.5,
        Interpolation::Bilinear => 1.0,
        Interpolation::Bicubic => 2.0,
        Interpolation::Lanczos => 3.0,
    };
    let work = resize_work_bytes(image, from, to, channels, support);
    // Probed only where it is large: an image of training size needs well under a megabyte,
    // and a probe per image would map and unmap memory on every one.
    if work > PROBED_WORK_BYTES {
        let mut probe: Vec<u8> = Vec::new();
        probe
            .try_reserve_exact(work)
            .map_err(|_| arrow_dlpack_tensor::Error::OutOfMemory { bytes: work })?;
    }
    Ok(())
}

/// The resizer's working memory past which it is probed before the resize (64 MiB).
const PROBED_WORK_BYTES: usize = 64 << 20;

/// An upper bound of the bytes `fast_image_resize` allocates to resize a `from` region (width,
/// height, in source pixels) to `to` pixels of `channels` bytes with a filter of `support`: for
/// each axis, per output pixel, a window of coefficients (8-byte weights, then 2-byte
/// fixed-point copies) over the support on each side, widened by the scale when shrinking, and
/// the window's bounds and chunk (40 bytes); the image between the two passes (the target's
/// width by the source's height, or, for 8-bit pixels, whose vertical pass goes first, the
/// source's width by the target's height, with a pixel of alignment); and, for pixels with
/// alpha (four channels), the whole `image` premultiplied by its alpha (a pixel more).
fn resize_work_bytes(
    image: (u32, u32),
    from: (f64, f64),
    to: (u32, u32),
    channels: usize,
    support: f64,
) -> usize {
    let axis = |source: f64, target: u32| -> f64 {
        let target = f64::from(target.max(1));
        let window = 2.0 * (support * (source / target).max(1.0)).ceil() + 1.0;
        (window * 10.0 + 40.0) * target
    };
    let channels = channels as f64;
    let between = (f64::from(to.0) * from.1.ceil())
        .max((from.0.ceil() + 2.0 * support + 1.0) * f64::from(to.1))
        * channels
        + channels;
    let alpha = if channels == 4.0 {
        f64::from(image.0) * f64::from(image.1) * channels + channels
    } else {
        0.0
    };
    let total = axis(from.0, to.0) + axis(from.1, to.1) + between + alpha;
    // Past usize::MAX the cast saturates, which no allocation reaches.
    total as usize
}

/// `input` (width, height, interleaved bytes) resized into `output` (width, height, bytes) as
/// pixels of type `P`.
fn resize_as<P: PixelTrait>(
    resizer: &mut Resizer,
    (width, height, data): (u32, u32, &[u8]),
    (out_width, out_height, out): (u32, u32, &mut [u8]),
    options: &ResizeOptions,
) -> std::result::Result<(), String> {
    let input = TypedImageRef::<P>::from_buffer(width, height, data).map_err(|e| e.to_string())?;
    let mut output =
        TypedImage::<P>::from_buffer(out_width, out_height, out).map_err(|e| e.to_string())?;
    resizer
        .resize_typed(&input, &mut output, options)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::resize_work_bytes;

    #[test]
    fn the_work_bound_covers_the_premultiplied_copy_of_an_image_with_alpha() {
        // fast_image_resize premultiplies a four-channel image whole into a buffer of its
        // pixels and one more: 324,000,004 bytes for 9,000 x 9,000, which aborted the process
        // where the probe had counted only the coefficients and the image between the passes.
        let (image, from, to) = ((9000, 9000), (9000.0, 9000.0), (64, 64));
        assert!(resize_work_bytes(image, from, to, 4, 1.0) >= 9000 * 9000 * 4 + 4);
        let rgb = resize_work_bytes(image, from, to, 3, 1.0);
        assert!(rgb < 9000 * 9000 * 3);
        // The 8-bit vertical pass first: the source's width by the target's height.
        assert!(rgb >= (9000 + 3) * 64 * 3);
    }
}
