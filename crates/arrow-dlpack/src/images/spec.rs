//! [`ImageSpec`]: what one image column becomes (size, crop, colour mode, layout, dtype), checked
//! once by [`ImageSpec::validate`], and the named choices it is made of, each spelled in one
//! place ([`named_choice!`]) for Rust, serde and the Python bindings alike.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{Error, Result};

/// PIL's decompression-bomb limit (`Image.MAX_IMAGE_PIXELS`), the default of
/// [`ImageSpec::max_pixels`].
pub const DEFAULT_MAX_PIXELS: u64 = 89_478_485;

/// Declares a choice among named values: the enum (its default marked `#[default]`), its names
/// (`as_str`, `Display`, `FromStr`, `ALL`) and its serde form, which is the same name.
macro_rules! named_choice {
    (
        $(#[$meta:meta])*
        $name:ident, field $field:literal {
            $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The value's name, as `FromStr`, serde and the Python bindings spell it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = Error;

            fn from_str(text: &str) -> Result<Self> {
                $name::ALL
                    .iter()
                    .copied()
                    .find(|value| value.as_str() == text)
                    .ok_or_else(|| Error::InvalidImageSpec {
                        field: $field,
                        reason: format!(
                            "expected one of {}, found {text:?}",
                            $name::ALL
                                .iter()
                                .map(|value| format!("{:?}", value.as_str()))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    })
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

named_choice! {
    /// How the window of [`ImageSpec::size`] is taken from an image.
    Crop, field "crop" {
        /// The shorter side is scaled to [`ImageSpec::resize`], then the centre window is kept
        /// (torchvision's `Resize` then `CenterCrop`).
        #[default]
        Center = "center",
        /// The shorter side is scaled to [`ImageSpec::resize`], then a window at a random place
        /// is kept (torchvision's `Resize` then `RandomCrop`).
        Random = "random",
        /// A random region of the image, of area within [`ImageSpec::scale`] of the image's and
        /// aspect ratio within [`ImageSpec::ratio`], scaled to the size (torchvision's
        /// `RandomResizedCrop`).
        RandomResized = "random_resized",
        /// The whole image scaled to the size, whatever its aspect ratio.
        None = "none",
        /// The whole image scaled to fit inside the size, aspect ratio kept, centred, the rest
        /// filled with [`ImageSpec::pad_value`].
        Pad = "pad",
    }
}

named_choice! {
    /// The colour mode of the output, as PIL's `Image.convert` names it.
    Mode, field "mode" {
        /// Red, green, blue: 3 channels.
        #[default]
        Rgb = "RGB",
        /// Luminance (ITU-R 601-2, as PIL computes it): 1 channel.
        L = "L",
        /// Red, green, blue, alpha: 4 channels.
        Rgba = "RGBA",
    }
}

named_choice! {
    /// The order of the output's dimensions.
    Layout, field "layout" {
        /// `(B, C, H, W)`: channels first, as PyTorch's models take images.
        #[default]
        Nchw = "NCHW",
        /// `(B, H, W, C)`: channels last, as the decoded pixels are.
        Nhwc = "NHWC",
    }
}

named_choice! {
    /// The element type of the output.
    ImageDType, field "dtype" {
        /// The pixel values, 0 to 255.
        #[default]
        Uint8 = "uint8",
        /// The pixel values divided by 255, then `(x - mean) / std` per channel when
        /// [`ImageSpec::mean`] and [`ImageSpec::std`] are given.
        Float32 = "float32",
    }
}

named_choice! {
    /// The resampling filter; every filter but `nearest` is antialiased when shrinking (its
    /// support widened by the scale), as PIL's `resize` and torchvision's with `antialias=True`.
    Interpolation, field "interpolation" {
        /// Triangle filter.
        #[default]
        Bilinear = "bilinear",
        /// Cubic filter with `a = -0.5` (Catmull-Rom), PIL's `BICUBIC`.
        Bicubic = "bicubic",
        /// Lanczos filter of 3 lobes, PIL's `LANCZOS`.
        Lanczos = "lanczos",
        /// The nearest source pixel, never antialiased.
        Nearest = "nearest",
    }
}

named_choice! {
    /// What a row that cannot become an image (null, malformed, too large) does.
    OnError, field "on_error" {
        /// The call fails with an error naming the row and the column.
        #[default]
        Raise = "raise",
        /// The row is dropped; [`DecodedImages::rows`](super::DecodedImages::rows) says which
        /// rows were kept.
        Skip = "skip",
    }
}

impl Mode {
    /// The number of channels: 3, 1 or 4.
    pub fn channels(self) -> usize {
        match self {
            Mode::Rgb => 3,
            Mode::L => 1,
            Mode::Rgba => 4,
        }
    }
}

/// The output size of every image: `height` rows of `width` pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSize {
    /// Rows of the output.
    pub height: u32,
    /// Columns of the output.
    pub width: u32,
}

impl ImageSize {
    /// A size of `height` rows of `width` pixels.
    pub fn new(height: u32, width: u32) -> Self {
        ImageSize { height, width }
    }

    /// A square size.
    pub fn square(side: u32) -> Self {
        ImageSize::new(side, side)
    }

    /// The shorter side.
    pub fn shorter_side(self) -> u32 {
        self.height.min(self.width)
    }
}

/// What one column of encoded images becomes: the options of
/// [`decode_images`](super::decode_images) and [`decode_rows`](super::decode_rows).
///
/// The fields are public and each has a builder method of the same name; [`ImageSpec::new`]
/// takes the one required field, the size, and gives every other its default. The serde form
/// names the fields as they are named here (and in Python), so a saved state can hold a spec.
///
/// ```
/// use arrow_dlpack::images::{Crop, ImageSize, ImageSpec, Interpolation};
///
/// let spec = ImageSpec::new(ImageSize::square(224)).resize(256).crop(Crop::Center);
/// assert_eq!(spec.resize_or_default(), 256);
/// assert_eq!(spec.interpolation, Interpolation::Bilinear);
/// spec.validate()?;
/// assert!(ImageSpec::new(ImageSize::new(0, 224)).validate().is_err());
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSpec {
    /// The output size of every image.
    pub size: ImageSize,
    /// For [`Crop::Center`] and [`Crop::Random`], the length the shorter side is scaled to
    /// before the window is taken; `None` for the shorter side of [`size`](Self::size).
    pub resize: Option<u32>,
    /// How the window is taken.
    pub crop: Crop,
    /// For [`Crop::RandomResized`], the range of the region's area as a fraction of the image's.
    pub scale: (f64, f64),
    /// For [`Crop::RandomResized`], the range of the region's aspect ratio (width / height),
    /// drawn uniformly in its logarithm.
    pub ratio: (f64, f64),
    /// The value of every channel of the pixels outside the image ([`Crop::Pad`], and windows
    /// larger than the resized image).
    pub pad_value: u8,
    /// The probability that an image is flipped horizontally.
    pub hflip: f64,
    /// The colour mode.
    pub mode: Mode,
    /// The order of the dimensions.
    pub layout: Layout,
    /// The element type.
    pub dtype: ImageDType,
    /// With [`ImageDType::Float32`], the mean subtracted from each channel (after the division
    /// by 255); one value per channel of [`mode`](Self::mode).
    pub mean: Option<Vec<f32>>,
    /// With [`ImageDType::Float32`], the standard deviation each channel is divided by; one
    /// non-zero value per channel.
    pub std: Option<Vec<f32>>,
    /// The resampling filter.
    pub interpolation: Interpolation,
    /// Whether the EXIF orientation is applied, so photos come out upright.
    pub exif_transpose: bool,
    /// What a row that cannot become an image does.
    pub on_error: OnError,
    /// The most pixels an image may have: larger ones are refused from their header, before any
    /// pixel is allocated.
    pub max_pixels: u64,
}

/// Every field of [`ImageSpec`], by name, as its serde form and the Python bindings name it.
pub const IMAGE_SPEC_FIELDS: [&str; 16] = [
    "size",
    "resize",
    "crop",
    "scale",
    "ratio",
    "pad_value",
    "hflip",
    "mode",
    "layout",
    "dtype",
    "mean",
    "std",
    "interpolation",
    "exif_transpose",
    "on_error",
    "max_pixels",
];

macro_rules! builder {
    ($($(#[$meta:meta])* $field:ident: $type:ty => $value:expr;)+) => {
        $($(#[$meta])*
        #[must_use]
        pub fn $field(mut self, $field: $type) -> Self {
            self.$field = $value;
            self
        })+
    };
}

impl ImageSpec {
    /// A spec of output `size` with every other field at its default: the shorter side resized to
    /// the size's, centre crop, RGB, NCHW, uint8, bilinear, EXIF applied, errors raised,
    /// [`DEFAULT_MAX_PIXELS`].
    pub fn new(size: ImageSize) -> Self {
        ImageSpec {
            size,
            resize: None,
            crop: Crop::default(),
            scale: (0.08, 1.0),
            ratio: (3.0 / 4.0, 4.0 / 3.0),
            pad_value: 0,
            hflip: 0.0,
            mode: Mode::default(),
            layout: Layout::default(),
            dtype: ImageDType::default(),
            mean: None,
            std: None,
            interpolation: Interpolation::default(),
            exif_transpose: true,
            on_error: OnError::default(),
            max_pixels: DEFAULT_MAX_PIXELS,
        }
    }

    builder! {
        /// Sets [`size`](Self::size).
        size: ImageSize => size;
        /// Sets [`resize`](Self::resize).
        resize: u32 => Some(resize);
        /// Sets [`crop`](Self::crop).
        crop: Crop => crop;
        /// Sets [`scale`](Self::scale).
        scale: (f64, f64) => scale;
        /// Sets [`ratio`](Self::ratio).
        ratio: (f64, f64) => ratio;
        /// Sets [`pad_value`](Self::pad_value).
        pad_value: u8 => pad_value;
        /// Sets [`hflip`](Self::hflip).
        hflip: f64 => hflip;
        /// Sets [`mode`](Self::mode).
        mode: Mode => mode;
        /// Sets [`layout`](Self::layout).
        layout: Layout => layout;
        /// Sets [`dtype`](Self::dtype).
        dtype: ImageDType => dtype;
        /// Sets [`mean`](Self::mean).
        mean: Vec<f32> => Some(mean);
        /// Sets [`std`](Self::std).
        std: Vec<f32> => Some(std);
        /// Sets [`interpolation`](Self::interpolation).
        interpolation: Interpolation => interpolation;
        /// Sets [`exif_transpose`](Self::exif_transpose).
        exif_transpose: bool => exif_transpose;
        /// Sets [`on_error`](Self::on_error).
        on_error: OnError => on_error;
        /// Sets [`max_pixels`](Self::max_pixels).
        max_pixels: u64 => max_pixels;
    }

    /// The length the shorter side is scaled to before a [`Crop::Center`] or [`Crop::Random`]
    /// window: [`resize`](Self::resize), or the shorter side of [`size`](Self::size).
    pub fn resize_or_default(&self) -> u32 {
        self.resize.unwrap_or(self.size.shorter_side())
    }

    /// The number of channels of the output.
    pub fn channels(&self) -> usize {
        self.mode.channels()
    }

    /// The shape of `rows` images in this spec's layout.
    pub fn shape(&self, rows: usize) -> Vec<usize> {
        let (height, width) = (self.size.height as usize, self.size.width as usize);
        match self.layout {
            Layout::Nchw => vec![rows, self.channels(), height, width],
            Layout::Nhwc => vec![rows, height, width, self.channels()],
        }
    }

    /// Checks every field against the others; the error names the first wrong field.
    pub fn validate(&self) -> Result<()> {
        let invalid =
            |field: &'static str, reason: String| Err(Error::InvalidImageSpec { field, reason });
        let ImageSize { height, width } = self.size;
        if height == 0 || width == 0 {
            return invalid(
                "size",
                format!("expected a height and a width of at least 1, found {height} x {width}"),
            );
        }
        // One image's bytes must be addressable: a larger one could never be allocated, and its
        // element count would overflow where a batch is sized.
        let element = if self.dtype == ImageDType::Float32 {
            4
        } else {
            1
        };
        let bytes = u64::from(height)
            .checked_mul(u64::from(width))
            .and_then(|pixels| pixels.checked_mul(self.channels() as u64 * element))
            .filter(|&bytes| bytes <= isize::MAX as u64);
        if bytes.is_none() {
            return invalid(
                "size",
                format!(
                    "one image of {height} x {width} pixels of {} channels of {} is more bytes \
                     than memory can address; expected a smaller size",
                    self.channels(),
                    self.dtype
                ),
            );
        }
        if self.resize == Some(0) {
            return invalid("resize", "expected at least 1, found 0".to_string());
        }
        check_range("scale", self.scale)?;
        check_range("ratio", self.ratio)?;
        if !(0.0..=1.0).contains(&self.hflip) {
            return invalid(
                "hflip",
                format!("expected a probability from 0 to 1, found {}", self.hflip),
            );
        }
        let channels = self.channels();
        for (field, values) in [("mean", &self.mean), ("std", &self.std)] {
            let Some(values) = values else { continue };
            if self.dtype != ImageDType::Float32 {
                return invalid(
                    field,
                    format!(
                        "applies to dtype float32 only; expected none with dtype {}",
                        self.dtype
                    ),
                );
            }
            if values.len() != channels {
                return invalid(
                    field,
                    format!(
                        "expected one value per channel of mode {} ({channels}), found {}",
                        self.mode,
                        values.len()
                    ),
                );
            }
            if let Some(value) = values.iter().find(|value| !value.is_finite()) {
                return invalid(field, format!("expected finite values, found {value}"));
            }
        }
        if self.mean.is_some() != self.std.is_some() {
            let (given, missing) = if self.mean.is_some() {
                ("mean", "std")
            } else {
                ("std", "mean")
            };
            return invalid(
                missing,
                format!("expected with {given}: the normalisation takes both, found none"),
            );
        }
        if let Some(std) = &self.std
            && std.contains(&0.0)
        {
            return invalid("std", format!("expected non-zero values, found {std:?}"));
        }
        if self.max_pixels == 0 {
            return invalid("max_pixels", "expected at least 1, found 0".to_string());
        }
        Ok(())
    }
}

/// Checks a `(low, high)` range of positive finite numbers in order.
fn check_range(field: &'static str, (low, high): (f64, f64)) -> Result<()> {
    if low.is_finite() && high.is_finite() && low > 0.0 && low <= high {
        return Ok(());
    }
    Err(Error::InvalidImageSpec {
        field,
        reason: format!(
            "expected (low, high) with 0 < low <= high, both finite, found ({low}, {high})"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ImageSpec {
        ImageSpec::new(ImageSize::square(224))
    }

    fn field_of(error: Error) -> &'static str {
        match error {
            Error::InvalidImageSpec { field, .. } => field,
            other => panic!("expected InvalidImageSpec, found {other:?}"),
        }
    }

    #[test]
    fn default_spec_is_valid_and_resizes_to_the_shorter_side() {
        spec().validate().unwrap();
        let spec = ImageSpec::new(ImageSize::new(224, 300));
        assert_eq!(spec.resize_or_default(), 224);
        assert_eq!(spec.shape(2), vec![2, 3, 224, 300]);
        assert_eq!(
            spec.mode(Mode::L).layout(Layout::Nhwc).shape(2),
            vec![2, 224, 300, 1]
        );
    }

    #[test]
    fn rejects_each_wrong_field_by_name() {
        let cases: Vec<(ImageSpec, &str)> = vec![
            (ImageSpec::new(ImageSize::new(0, 4)), "size"),
            (spec().resize(0), "resize"),
            (spec().scale((0.5, 0.1)), "scale"),
            (spec().scale((0.0, 1.0)), "scale"),
            (spec().ratio((1.0, f64::NAN)), "ratio"),
            (spec().hflip(1.5), "hflip"),
            (spec().mean(vec![0.5; 3]).std(vec![0.5; 3]), "mean"),
            (
                spec()
                    .dtype(ImageDType::Float32)
                    .mean(vec![0.5; 2])
                    .std(vec![0.5; 3]),
                "mean",
            ),
            (spec().dtype(ImageDType::Float32).mean(vec![0.5; 3]), "std"),
            (spec().dtype(ImageDType::Float32).std(vec![0.5; 3]), "mean"),
            (
                spec()
                    .dtype(ImageDType::Float32)
                    .mean(vec![0.5; 3])
                    .std(vec![1.0, 0.0, 1.0]),
                "std",
            ),
            (spec().max_pixels(0), "max_pixels"),
        ];
        for (spec, field) in cases {
            assert_eq!(field_of(spec.validate().unwrap_err()), field, "{spec:?}");
        }
    }

    #[test]
    fn names_parse_back_and_unknown_names_list_the_choices() {
        for crop in Crop::ALL {
            assert_eq!(crop.as_str().parse::<Crop>().unwrap(), *crop);
        }
        for mode in Mode::ALL {
            assert_eq!(mode.to_string().parse::<Mode>().unwrap(), *mode);
        }
        let error = "bilinar".parse::<Interpolation>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid image spec field `interpolation`: expected one of \"bilinear\", \
             \"bicubic\", \"lanczos\", \"nearest\", found \"bilinar\""
        );
    }

    #[test]
    fn serde_form_names_fields_and_choices_as_python_does() {
        let spec = spec().crop(Crop::RandomResized).mode(Mode::Rgba);
        let json = serde_json::to_value(&spec).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut expected = IMAGE_SPEC_FIELDS.to_vec();
        expected.sort_unstable();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(keys, expected);
        assert_eq!(json["crop"], "random_resized");
        assert_eq!(json["mode"], "RGBA");
        let back: ImageSpec = serde_json::from_value(json).unwrap();
        assert_eq!(back, spec);
    }
}
