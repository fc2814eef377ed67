//! Rust element types: the sealed [`NativeDType`] trait that links a Rust type to its [`DType`].

use arrow_buffer::Buffer;
use half::{bf16, f16};

use crate::DType;

mod sealed {
    /// Keeps [`NativeDType`](super::NativeDType) closed: the typed reads rely on its guarantees.
    // Public in a private module, so that the trait is nameable as a supertrait but not
    // implementable outside this crate.
    #[allow(unreachable_pub)]
    pub trait Sealed {}
}

/// A Rust type whose values are the elements of tensors of one [`DType`].
///
/// The trait is sealed: it is implemented for `i8`, `i16`, `i32`, `i64`, `u8`, `u16`, `u32`,
/// `u64`, `f32`, `f64`, [`half::f16`] and [`half::bf16`], each of which has exactly the size of its
/// dtype, an alignment no larger than the dtype's, and no invalid bit patterns, so that any
/// element of a tensor of that dtype can be read as a value of the type.
///
/// `bool` is deliberately not implemented: a foreign producer may store bytes other than 0 and 1
/// in a bool tensor, and reading such a byte as a Rust `bool` is undefined behaviour. Read bool
/// tensors as `u8` instead (see [`NativeDType::reads`]); any nonzero byte means true.
///
/// ```
/// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
/// use arrow_dlpack::{DType, NativeDType};
///
/// assert_eq!(DType::of::<f32>(), DType::Float32);
/// assert_eq!(<i64 as NativeDType>::DTYPE, DType::Int64);
/// assert!(u8::reads(DType::Bool));
/// assert!(!i8::reads(DType::UInt8));
/// ```
pub trait NativeDType: Copy + Send + Sync + std::fmt::Debug + 'static + sealed::Sealed {
    /// The dtype of tensors built from values of this type.
    const DTYPE: DType;

    /// The name of the Rust type, for error messages (`"f32"`, `"half::bf16"`).
    const RUST_NAME: &'static str;

    /// Whether the elements of a tensor of `dtype` may be read as values of this type: the type's
    /// own dtype, and for `u8` also [`DType::Bool`] (whose bytes are not guaranteed to be 0 or 1).
    fn reads(dtype: DType) -> bool {
        dtype == Self::DTYPE
    }

    /// Moves `values` into an Arrow buffer without copying them.
    #[doc(hidden)]
    fn into_buffer(values: Vec<Self>) -> Buffer;
}

/// Implements [`NativeDType`] for types that arrow-buffer can own directly.
macro_rules! native {
    ($($rust:ty => $dtype:ident, $name:literal;)*) => {$(
        // The typed reads rely on these: same size as the dtype, alignment no larger.
        const _: () = assert!(size_of::<$rust>() == DType::$dtype.size());
        const _: () = assert!(align_of::<$rust>() <= DType::$dtype.alignment());

        impl sealed::Sealed for $rust {}

        impl NativeDType for $rust {
            const DTYPE: DType = DType::$dtype;
            const RUST_NAME: &'static str = $name;

            fn into_buffer(values: Vec<Self>) -> Buffer {
                Buffer::from_vec(values)
            }
        }
    )*};
}

native! {
    i8 => Int8, "i8";
    i16 => Int16, "i16";
    i32 => Int32, "i32";
    i64 => Int64, "i64";
    u16 => UInt16, "u16";
    u32 => UInt32, "u32";
    u64 => UInt64, "u64";
    f32 => Float32, "f32";
    f64 => Float64, "f64";
    f16 => Float16, "half::f16";
}

const _: () = assert!(size_of::<u8>() == DType::UInt8.size());
const _: () = assert!(size_of::<bf16>() == DType::BFloat16.size());
const _: () = assert!(align_of::<bf16>() <= DType::BFloat16.alignment());

impl sealed::Sealed for u8 {}

impl NativeDType for u8 {
    const DTYPE: DType = DType::UInt8;
    const RUST_NAME: &'static str = "u8";

    /// `uint8` and `bool`: every byte is a valid `u8`, whatever a producer stored.
    fn reads(dtype: DType) -> bool {
        matches!(dtype, DType::UInt8 | DType::Bool)
    }

    fn into_buffer(values: Vec<Self>) -> Buffer {
        Buffer::from_vec(values)
    }
}

impl sealed::Sealed for bf16 {}

impl NativeDType for bf16 {
    const DTYPE: DType = DType::BFloat16;
    const RUST_NAME: &'static str = "half::bf16";

    fn into_buffer(values: Vec<Self>) -> Buffer {
        // arrow-buffer has no `ArrowNativeType` for bf16; its bits are a u16 of the same size and
        // alignment, and the standard library reuses the allocation for this in-place map.
        Buffer::from_vec(values.into_iter().map(bf16::to_bits).collect::<Vec<u16>>())
    }
}

impl DType {
    /// The dtype of tensors whose elements are values of `T`.
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use half; }
    /// use arrow_dlpack::DType;
    ///
    /// assert_eq!(DType::of::<u16>(), DType::UInt16);
    /// assert_eq!(DType::of::<arrow_dlpack::half::bf16>(), DType::BFloat16);
    /// ```
    pub const fn of<T: NativeDType>() -> DType {
        T::DTYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<T: NativeDType>() {
        assert_eq!(size_of::<T>(), T::DTYPE.size(), "{}", T::RUST_NAME);
        assert!(align_of::<T>() <= T::DTYPE.alignment(), "{}", T::RUST_NAME);
        assert!(T::reads(T::DTYPE));
        assert_eq!(DType::of::<T>(), T::DTYPE);
        // Every other dtype is refused, except bool for u8.
        for dtype in DType::ALL {
            let allowed = dtype == T::DTYPE || (T::DTYPE == DType::UInt8 && dtype == DType::Bool);
            assert_eq!(T::reads(dtype), allowed, "{} reads {dtype:?}", T::RUST_NAME);
        }
    }

    #[test]
    fn every_native_type_matches_its_dtype() {
        check::<i8>();
        check::<i16>();
        check::<i32>();
        check::<i64>();
        check::<u8>();
        check::<u16>();
        check::<u32>();
        check::<u64>();
        check::<f16>();
        check::<f32>();
        check::<f64>();
        check::<bf16>();
    }

    #[test]
    fn bf16_buffers_hold_the_bits_in_order() {
        let values = vec![bf16::from_f32(1.5), bf16::from_f32(-2.0)];
        let buffer = bf16::into_buffer(values.clone());
        let bits: Vec<u16> = values.iter().map(|v| v.to_bits()).collect();
        assert_eq!(buffer.typed_data::<u16>(), bits.as_slice());
    }
}
