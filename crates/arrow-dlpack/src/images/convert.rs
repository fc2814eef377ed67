//! Colour conversions as PIL makes them, so that the pixels equal `Image.convert(mode)`'s:
//! greyscale is ITU-R 601-2 luma in PIL's fixed point, alpha is dropped without compositing,
//! an added alpha is opaque, and 16-bit samples keep their high byte (16-bit grey, PIL's
//! `I;16`, is clipped to 255 instead).

use super::spec::Mode;

/// Decoded pixels: `height` rows of `width` pixels of `channels` bytes, row-major, interleaved.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pixels<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) width: u32,
    pub(crate) height: u32,
    pub(crate) channels: usize,
}

/// PIL's `L24`: the luma of an RGB pixel, times 65536, rounded.
fn luma(r: u8, g: u8, b: u8) -> u8 {
    ((u32::from(r) * 19595 + u32::from(g) * 38470 + u32::from(b) * 7471 + 0x8000) >> 16) as u8
}

/// 16-bit native-endian samples in `data` to 8 bits, packed into its first half (which the
/// caller then truncates to): the high byte, or the value clipped to 255 when `clip`.
pub(crate) fn reduce_to_8_bits(data: &mut Vec<u8>, clip: bool) {
    let samples = data.len() / 2;
    for index in 0..samples {
        let value = u16::from_ne_bytes([data[2 * index], data[2 * index + 1]]);
        data[index] = if clip {
            value.min(255) as u8
        } else {
            (value >> 8) as u8
        };
    }
    data.truncate(samples);
}

/// `pixels` (1 to 4 channels: L, LA, RGB, RGBA) converted to `mode` in `out`, which holds
/// exactly the converted pixels.
pub(crate) fn convert_mode(pixels: Pixels<'_>, mode: Mode, out: &mut [u8]) {
    let from = pixels.channels;
    let to = mode.channels();
    let sources = pixels.data.chunks_exact(from);
    let targets = out.chunks_exact_mut(to);
    match (from, mode) {
        (1 | 2, Mode::L) | (3 | 4, Mode::Rgb) => {
            // Drop what follows the first `to` channels (the alpha).
            for (source, target) in sources.zip(targets) {
                target.copy_from_slice(&source[..to]);
            }
        }
        (3 | 4, Mode::L) => {
            for (source, target) in sources.zip(targets) {
                target[0] = luma(source[0], source[1], source[2]);
            }
        }
        (1 | 2, Mode::Rgb | Mode::Rgba) => {
            for (source, target) in sources.zip(targets) {
                target[..3].fill(source[0]);
                if to == 4 {
                    target[3] = if from == 2 { source[1] } else { u8::MAX };
                }
            }
        }
        (3, Mode::Rgba) => {
            for (source, target) in sources.zip(targets) {
                target[..3].copy_from_slice(source);
                target[3] = u8::MAX;
            }
        }
        _ => {
            // Same channels: a plain copy (the caller does not convert then).
            out.copy_from_slice(&pixels.data[..out.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn converted(data: &[u8], channels: usize, mode: Mode) -> Vec<u8> {
        let pixels = Pixels {
            data,
            width: (data.len() / channels) as u32,
            height: 1,
            channels,
        };
        let mut out = vec![0; data.len() / channels * mode.channels()];
        convert_mode(pixels, mode, &mut out);
        out
    }

    #[test]
    fn conversions_match_pil() {
        // PIL: Image.new("RGB", (1, 1), (200, 100, 50)).convert("L").getpixel((0, 0)) == 124.
        assert_eq!(converted(&[200, 100, 50], 3, Mode::L), vec![124]);
        assert_eq!(converted(&[255, 255, 255, 0], 4, Mode::L), vec![255]);
        assert_eq!(converted(&[9, 7], 2, Mode::Rgb), vec![9, 9, 9]);
        assert_eq!(converted(&[9, 7], 2, Mode::Rgba), vec![9, 9, 9, 7]);
        assert_eq!(converted(&[9], 1, Mode::Rgba), vec![9, 9, 9, 255]);
        assert_eq!(converted(&[1, 2, 3], 3, Mode::Rgba), vec![1, 2, 3, 255]);
        assert_eq!(converted(&[1, 2, 3, 4], 4, Mode::Rgb), vec![1, 2, 3]);
    }

    #[test]
    fn sixteen_bits_keep_the_high_byte_and_grey_clips() {
        let samples: Vec<u8> = [0x1234u16, 0x0007, 0x0100, 0xffff]
            .iter()
            .flat_map(|value| value.to_ne_bytes())
            .collect();
        let mut high = samples.clone();
        reduce_to_8_bits(&mut high, false);
        assert_eq!(high, vec![0x12, 0x00, 0x01, 0xff]);
        let mut clipped = samples;
        reduce_to_8_bits(&mut clipped, true);
        assert_eq!(clipped, vec![255, 7, 255, 255]);
    }
}
