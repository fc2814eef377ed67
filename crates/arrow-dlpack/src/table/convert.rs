//! The element conversions of the table copy kernel (`copy.rs`): every numeric type into every
//! other, with the meaning of C++'s `static_cast` (Rust's `as`), half precision included.

use half::f16;

/// A conversion between numeric types with the meaning of C++'s `static_cast` (Rust's `as`).
pub(super) trait ConvertTo<D>: Copy {
    /// `self` as a `D`.
    fn convert(self) -> D;
}

macro_rules! convert_with_as {
    ($target:ty: $($source:ty),+) => {
        $(impl ConvertTo<$target> for $source {
            #[inline(always)]
            fn convert(self) -> $target {
                self as $target
            }
        })+
    };
}

convert_with_as!(i8: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(i16: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(i32: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(i64: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(u8: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(u16: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(u32: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(u64: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(f32: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(f64: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

// Half precision has no `as`: it goes through `f32` (exact for every value of `f16` and of the
// 8- and 16-bit integers) or `f64` (one rounding from the wider types). Promotion only ever
// converts `f16` into wider floats and 8-bit integers into `f16`; the other pairs exist so that
// every column can be written into every element type (`write_rows` takes any dtype).
macro_rules! convert_half {
    (via $via:ty, $to_half:path: $($source:ty),+) => {
        $(impl ConvertTo<f16> for $source {
            #[inline(always)]
            fn convert(self) -> f16 {
                $to_half(self as $via)
            }
        }
        impl ConvertTo<$source> for f16 {
            #[inline(always)]
            fn convert(self) -> $source {
                self.to_f64() as $source
            }
        })+
    };
}

convert_half!(via f32, f16::from_f32: i8, i16, u8, u16, f32);
convert_half!(via f64, f16::from_f64: i32, i64, u32, u64, f64);

impl ConvertTo<f16> for f16 {
    #[inline(always)]
    fn convert(self) -> f16 {
        self
    }
}
