//! Where each output pixel comes from: the [`Plan`] of one image, worked out from its size, the
//! spec and the row's generator before any pixel is touched.
//!
//! The windows are torchvision's, to the pixel: `Resize(resize)` scales the shorter side to
//! `resize` and the longer to `int(resize * long / short)`; `CenterCrop` starts at
//! `round((side - crop) / 2)` (ties to even, as Python rounds) and centres a window larger than
//! the image with `(crop - side) // 2` pixels of padding before it; `RandomCrop` draws the top
//! row, then the left column; `RandomResizedCrop` draws up to ten regions by area and
//! log-aspect-ratio before falling back to a centred one.
//! A window is then resampled from the source region it covers, rather than the whole image
//! being resized first: the scale, and so every sample position and filter weight, are the same.

use super::random::RowRng;
use super::spec::{Crop, ImageSpec};

/// A region of the source image, in source pixels (fractional: the window of a resized image
/// maps onto fractions of source pixels).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SourceBox {
    pub(crate) left: f64,
    pub(crate) top: f64,
    pub(crate) width: f64,
    pub(crate) height: f64,
}

/// A rectangle of the output, in output pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutputRect {
    pub(crate) top: u32,
    pub(crate) left: u32,
    pub(crate) height: u32,
    pub(crate) width: u32,
}

/// How one output is made: `source` resampled into `target`, the rest of the output filled with
/// the pad value, and the whole output mirrored left to right when `flip`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Plan {
    pub(crate) source: SourceBox,
    pub(crate) target: OutputRect,
    pub(crate) flip: bool,
}

impl Plan {
    /// Whether `target` leaves part of an output of `height` x `width` to the pad value.
    pub(crate) fn pads(&self, height: u32, width: u32) -> bool {
        self.target.height != height || self.target.width != width
    }

    /// Whether the source region is whole pixels of the target's size, so that the pixels are
    /// copied rather than resampled.
    pub(crate) fn is_copy(&self) -> bool {
        let SourceBox {
            left,
            top,
            width,
            height,
        } = self.source;
        left.fract() == 0.0
            && top.fract() == 0.0
            && width == f64::from(self.target.width)
            && height == f64::from(self.target.height)
    }
}

/// The plan of an image of `width` x `height` (after its EXIF orientation, both at least 1),
/// drawing from `rng` for random crops and flips.
pub(crate) fn plan(spec: &ImageSpec, width: u32, height: u32, rng: &mut RowRng) -> Plan {
    let (out_height, out_width) = (spec.size.height, spec.size.width);
    let full = SourceBox {
        left: 0.0,
        top: 0.0,
        width: f64::from(width),
        height: f64::from(height),
    };
    let whole_output = OutputRect {
        top: 0,
        left: 0,
        height: out_height,
        width: out_width,
    };
    let (source, target) = match spec.crop {
        Crop::Center | Crop::Random => {
            let random = spec.crop == Crop::Random;
            let (resized_width, resized_height) =
                resized_size(width, height, spec.resize_or_default());
            let top = window_start(resized_height, out_height, random.then_some(&mut *rng));
            let left = window_start(resized_width, out_width, random.then_some(&mut *rng));
            let (y0, y1) = overlap(top, out_height, resized_height);
            let (x0, x1) = overlap(left, out_width, resized_width);
            let scale_x = f64::from(width) / f64::from(resized_width);
            let scale_y = f64::from(height) / f64::from(resized_height);
            let source = SourceBox {
                left: x0 as f64 * scale_x,
                top: y0 as f64 * scale_y,
                width: (x1 - x0) as f64 * scale_x,
                height: (y1 - y0) as f64 * scale_y,
            };
            let target = OutputRect {
                top: (y0 - top) as u32,
                left: (x0 - left) as u32,
                height: (y1 - y0) as u32,
                width: (x1 - x0) as u32,
            };
            (source, target)
        }
        Crop::RandomResized => {
            let (top, left, region_height, region_width) =
                random_resized_region(width, height, spec.scale, spec.ratio, rng);
            let source = SourceBox {
                left: f64::from(left),
                top: f64::from(top),
                width: f64::from(region_width),
                height: f64::from(region_height),
            };
            (source, whole_output)
        }
        Crop::None => (full, whole_output),
        Crop::Pad => (full, fitted(width, height, out_width, out_height)),
    };
    let flip = spec.hflip > 0.0 && rng.next_f64() < spec.hflip;
    Plan {
        source,
        target,
        flip,
    }
}

/// The size of an image of `width` x `height` whose shorter side is scaled to `shorter`, the
/// longer to `int(shorter * long / short)`, as torchvision's `Resize(int)` computes it.
pub(crate) fn resized_size(width: u32, height: u32, shorter: u32) -> (u32, u32) {
    let longer = |long: u32, short: u32| {
        ((u64::from(shorter) * u64::from(long)) / u64::from(short)).clamp(1, u64::from(u32::MAX))
            as u32
    };
    if width <= height {
        (shorter, longer(height, width))
    } else {
        (longer(width, height), shorter)
    }
}

/// The first row (or column) of a window of `window` pixels over a side of `side` pixels:
/// drawn uniformly when `rng` is given and the window fits, centred otherwise. Negative when
/// the window is larger than the side: the window then starts before the image.
fn window_start(side: u32, window: u32, rng: Option<&mut RowRng>) -> i64 {
    let (side, window) = (i64::from(side), i64::from(window));
    if window > side {
        return -((window - side) / 2);
    }
    match rng {
        Some(rng) => rng.below_or_equal((side - window) as u64) as i64,
        None => ((side - window) as f64 / 2.0).round_ties_even() as i64,
    }
}

/// The part `[start, end)` of a window `[start, start + window)` that lies inside `[0, side)`.
fn overlap(start: i64, window: u32, side: u32) -> (i64, i64) {
    (
        start.max(0),
        (start + i64::from(window)).min(i64::from(side)),
    )
}

/// torchvision's `RandomResizedCrop.get_params`: `(top, left, height, width)` of a region of an
/// image of `width` x `height`.
pub(crate) fn random_resized_region(
    width: u32,
    height: u32,
    scale: (f64, f64),
    ratio: (f64, f64),
    rng: &mut RowRng,
) -> (u32, u32, u32, u32) {
    let area = f64::from(width) * f64::from(height);
    let log_ratio = (ratio.0.ln(), ratio.1.ln());
    for _ in 0..10 {
        let target_area = area * rng.uniform(scale.0, scale.1);
        let aspect = rng.uniform(log_ratio.0, log_ratio.1).exp();
        let w = (target_area * aspect).sqrt().round_ties_even();
        let h = (target_area / aspect).sqrt().round_ties_even();
        if w > 0.0 && w <= f64::from(width) && h > 0.0 && h <= f64::from(height) {
            let (w, h) = (w as u32, h as u32);
            let top = rng.below_or_equal(u64::from(height - h)) as u32;
            let left = rng.below_or_equal(u64::from(width - w)) as u32;
            return (top, left, h, w);
        }
    }
    // The fallback: the largest centred region whose ratio is within range.
    let in_ratio = f64::from(width) / f64::from(height);
    let (w, h) = if in_ratio < ratio.0 {
        let h = (f64::from(width) / ratio.0).round_ties_even() as u32;
        (width, h.clamp(1, height))
    } else if in_ratio > ratio.1 {
        let w = (f64::from(height) * ratio.1).round_ties_even() as u32;
        (w.clamp(1, width), height)
    } else {
        (width, height)
    };
    ((height - h) / 2, (width - w) / 2, h, w)
}

/// The centred rectangle of an image of `width` x `height` scaled to fit inside
/// `out_width` x `out_height` with its aspect ratio kept (each side rounded, at least 1).
fn fitted(width: u32, height: u32, out_width: u32, out_height: u32) -> OutputRect {
    let scale =
        (f64::from(out_width) / f64::from(width)).min(f64::from(out_height) / f64::from(height));
    let side = |length: u32, limit: u32| {
        ((f64::from(length) * scale).round_ties_even() as u32).clamp(1, limit)
    };
    let (fit_width, fit_height) = (side(width, out_width), side(height, out_height));
    OutputRect {
        top: (out_height - fit_height) / 2,
        left: (out_width - fit_width) / 2,
        height: fit_height,
        width: fit_width,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::spec::{Crop, ImageSize};

    fn rng() -> RowRng {
        RowRng::new(7, 11)
    }

    #[test]
    fn resize_scales_the_shorter_side_and_truncates_the_longer() {
        // torchvision: Resize(256) of a 500 x 375 image gives 341 x 256 (int(256 * 500 / 375)).
        assert_eq!(resized_size(500, 375, 256), (341, 256));
        assert_eq!(resized_size(375, 500, 256), (256, 341));
        assert_eq!(resized_size(300, 300, 256), (256, 256));
        assert_eq!(resized_size(1, 10_000, 2), (2, 20_000));
    }

    #[test]
    fn center_crop_maps_the_window_onto_the_source() {
        let spec = ImageSpec::new(ImageSize::square(224)).resize(256);
        let plan = plan(&spec, 500, 375, &mut rng());
        // Resized to 341 x 256; the window starts at round(117 / 2) = 58 (ties to even) and
        // round(32 / 2) = 16.
        let scale_x = 500.0 / 341.0;
        let scale_y = 375.0 / 256.0;
        assert_eq!(
            plan.target,
            OutputRect {
                top: 0,
                left: 0,
                height: 224,
                width: 224
            }
        );
        assert_eq!(plan.source.left, 58.0 * scale_x);
        assert_eq!(plan.source.top, 16.0 * scale_y);
        assert_eq!(plan.source.width, 224.0 * scale_x);
        assert_eq!(plan.source.height, 224.0 * scale_y);
        assert!(!plan.flip);
        // 5 pixels left over: round(2.5) is 2 in Python.
        let spec = ImageSpec::new(ImageSize::new(4, 4)).resize(9);
        assert_eq!(plan_of(&spec, 9, 9).source.left, 2.0);
    }

    fn plan_of(spec: &ImageSpec, width: u32, height: u32) -> Plan {
        plan(spec, width, height, &mut rng())
    }

    #[test]
    fn windows_larger_than_the_image_are_centred_and_padded() {
        // Resized to 256 x 341, a window 300 wide starts (300 - 256) // 2 = 22 before it.
        let spec = ImageSpec::new(ImageSize::new(224, 300)).resize(256);
        let plan = plan_of(&spec, 375, 500);
        assert_eq!(
            plan.target,
            OutputRect {
                top: 0,
                left: 22,
                height: 224,
                width: 256
            }
        );
        assert_eq!(plan.source.left, 0.0);
        assert_eq!(plan.source.width, 375.0);
        assert!(plan.pads(224, 300));
        // 45 pixels short: 22 before, 23 after, as torchvision pads.
        let spec = ImageSpec::new(ImageSize::new(10, 300)).resize(255);
        assert_eq!(plan_of(&spec, 255, 400).target.left, 22);
    }

    #[test]
    fn random_windows_stay_inside_the_resized_image() {
        let spec = ImageSpec::new(ImageSize::square(224))
            .resize(256)
            .crop(Crop::Random);
        let mut lefts = std::collections::BTreeSet::new();
        for key in 0..200 {
            let plan = plan(&spec, 500, 375, &mut RowRng::new(1, key));
            let scale_x = 500.0 / 341.0;
            let left = (plan.source.left / scale_x).round() as i64;
            assert!((0..=117).contains(&left), "{plan:?}");
            let top = (plan.source.top / (375.0 / 256.0)).round() as i64;
            assert!((0..=32).contains(&top), "{plan:?}");
            assert_eq!(
                plan.target,
                OutputRect {
                    top: 0,
                    left: 0,
                    height: 224,
                    width: 224
                }
            );
            lefts.insert(left);
        }
        assert!(lefts.len() > 50, "{lefts:?}");
    }

    #[test]
    fn random_resized_regions_respect_scale_ratio_and_bounds() {
        let (width, height) = (640, 480);
        let area = f64::from(width * height);
        let mut fallbacks = 0;
        for key in 0..500 {
            let (top, left, h, w) = random_resized_region(
                width,
                height,
                (0.08, 1.0),
                (3.0 / 4.0, 4.0 / 3.0),
                &mut RowRng::new(0, key),
            );
            assert!(h >= 1 && w >= 1 && top + h <= height && left + w <= width);
            let fraction = f64::from(w * h) / area;
            let ratio = f64::from(w) / f64::from(h);
            if (h, w) == (height, width) {
                fallbacks += 1;
                continue;
            }
            // Rounding each side moves the area and ratio a little past the drawn ones.
            assert!((0.07..=1.01).contains(&fraction), "{fraction}");
            assert!((0.74..=1.35).contains(&ratio), "{ratio}");
        }
        assert!(fallbacks < 50, "{fallbacks}");
    }

    #[test]
    fn random_resized_falls_back_to_a_centred_region_of_the_ratio() {
        // A scale no region can reach forces the fallback: a 1000 x 100 image with ratio at most
        // 2 keeps the centred 200 x 100.
        let region = random_resized_region(1000, 100, (50.0, 60.0), (0.5, 2.0), &mut rng());
        assert_eq!(region, (0, 400, 100, 200));
        let region = random_resized_region(100, 1000, (50.0, 60.0), (0.5, 2.0), &mut rng());
        assert_eq!(region, (400, 0, 200, 100));
    }

    #[test]
    fn pad_fits_the_image_centred() {
        let spec = ImageSpec::new(ImageSize::new(100, 200)).crop(Crop::Pad);
        // 400 x 100 scaled by 0.5 to 200 x 50, 25 rows above.
        let plan = plan_of(&spec, 400, 100);
        assert_eq!(
            plan.target,
            OutputRect {
                top: 25,
                left: 0,
                height: 50,
                width: 200
            }
        );
        // 50 x 100 scaled by 1 stays 50 x 100, 75 columns to its left.
        assert_eq!(
            plan_of(&spec, 50, 100).target,
            OutputRect {
                top: 0,
                left: 75,
                height: 100,
                width: 50
            }
        );
        // A sliver keeps at least one pixel.
        assert_eq!(plan_of(&spec, 100_000, 1).target.height, 1);
    }

    #[test]
    fn none_scales_the_whole_image_and_same_size_is_a_copy() {
        let spec = ImageSpec::new(ImageSize::new(30, 40)).crop(Crop::None);
        assert!(plan_of(&spec, 40, 30).is_copy());
        assert!(!plan_of(&spec, 41, 30).is_copy());
    }

    #[test]
    fn flips_follow_the_probability() {
        let spec = ImageSpec::new(ImageSize::square(8)).hflip(0.5);
        let flips = (0..1000)
            .filter(|&key| plan(&spec, 16, 16, &mut RowRng::new(0, key)).flip)
            .count();
        assert!((400..600).contains(&flips), "{flips}");
        let never = ImageSpec::new(ImageSize::square(8));
        assert!((0..100).all(|key| !plan(&never, 16, 16, &mut RowRng::new(0, key)).flip));
        let always = never.hflip(1.0);
        assert!((0..100).all(|key| plan(&always, 16, 16, &mut RowRng::new(0, key)).flip));
    }
}
