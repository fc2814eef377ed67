//! Element types: every DLPack dtype with one lane and a whole number of bytes.

use dlpack_sys::{DLDataType, DLDataTypeCode};

// The fallible reading of a DLPack descriptor, `DType::from_dlpack`, lives in `import.rs` with
// the other checks of foreign fields, so that this file is below the error type that names
// dtypes.

/// The element type of a [`Tensor`](crate::Tensor).
///
/// These are exactly the DLPack types with `lanes == 1` whose width is a whole number of bytes.
/// Vector types and sub-byte types (float4, float6) are refused on import.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    /// Signed 8-bit integer.
    Int8,
    /// Signed 16-bit integer.
    Int16,
    /// Signed 32-bit integer.
    Int32,
    /// Signed 64-bit integer.
    Int64,
    /// Unsigned 8-bit integer.
    UInt8,
    /// Unsigned 16-bit integer.
    UInt16,
    /// Unsigned 32-bit integer.
    UInt32,
    /// Unsigned 64-bit integer.
    UInt64,
    /// IEEE 754 half precision.
    Float16,
    /// IEEE 754 single precision.
    Float32,
    /// IEEE 754 double precision.
    Float64,
    /// bfloat16.
    BFloat16,
    /// Two single-precision floats, real part first.
    Complex64,
    /// Two double-precision floats, real part first.
    Complex128,
    /// One byte per element, 0 or 1.
    Bool,
    /// float8 e3m4.
    Float8E3M4,
    /// float8 e4m3.
    Float8E4M3,
    /// float8 e4m3b11fnuz.
    Float8E4M3B11Fnuz,
    /// float8 e4m3fn.
    Float8E4M3Fn,
    /// float8 e4m3fnuz.
    Float8E4M3Fnuz,
    /// float8 e5m2.
    Float8E5M2,
    /// float8 e5m2fnuz.
    Float8E5M2Fnuz,
    /// float8 e8m0fnu.
    Float8E8M0Fnu,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 23] = [
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::UInt8,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Float16,
        DType::Float32,
        DType::Float64,
        DType::BFloat16,
        DType::Complex64,
        DType::Complex128,
        DType::Bool,
        DType::Float8E3M4,
        DType::Float8E4M3,
        DType::Float8E4M3B11Fnuz,
        DType::Float8E4M3Fn,
        DType::Float8E4M3Fnuz,
        DType::Float8E5M2,
        DType::Float8E5M2Fnuz,
        DType::Float8E8M0Fnu,
    ];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::Int8 | DType::UInt8 | DType::Bool => 1,
            DType::Float8E3M4
            | DType::Float8E4M3
            | DType::Float8E4M3B11Fnuz
            | DType::Float8E4M3Fn
            | DType::Float8E4M3Fnuz
            | DType::Float8E5M2
            | DType::Float8E5M2Fnuz
            | DType::Float8E8M0Fnu => 1,
            DType::Int16 | DType::UInt16 | DType::Float16 | DType::BFloat16 => 2,
            DType::Int32 | DType::UInt32 | DType::Float32 => 4,
            DType::Int64 | DType::UInt64 | DType::Float64 | DType::Complex64 => 8,
            DType::Complex128 => 16,
        }
    }

    /// The alignment in bytes that element pointers must have.
    ///
    /// Complex numbers are pairs of floats and need the alignment of one float, as in C.
    pub const fn alignment(self) -> usize {
        match self {
            DType::Complex64 => 4,
            DType::Complex128 => 8,
            other => other.size(),
        }
    }

    /// The Rust type that reads the elements of this dtype (a [`NativeDType`](crate::NativeDType):
    /// `"f32"` for float32, `"u8"` for bool), or `None` when no Rust type of this crate does
    /// (complex and float8 kinds).
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; }
    /// use arrow_dlpack::DType;
    ///
    /// assert_eq!(DType::Float32.rust_type(), Some("f32"));
    /// assert_eq!(DType::Bool.rust_type(), Some("u8"));
    /// assert_eq!(DType::Complex64.rust_type(), None);
    /// ```
    pub const fn rust_type(self) -> Option<&'static str> {
        Some(match self {
            DType::Int8 => "i8",
            DType::Int16 => "i16",
            DType::Int32 => "i32",
            DType::Int64 => "i64",
            DType::UInt8 | DType::Bool => "u8",
            DType::UInt16 => "u16",
            DType::UInt32 => "u32",
            DType::UInt64 => "u64",
            DType::Float16 => "half::f16",
            DType::Float32 => "f32",
            DType::Float64 => "f64",
            DType::BFloat16 => "half::bf16",
            _ => return None,
        })
    }

    /// The type's name as Rust and DLPack users write it: the element width in bits after the
    /// kind (`int8`, `uint16`, `float32`, `bfloat16`, `complex64`, `bool`, `float8_e4m3fn`), as
    /// numpy and PyTorch name them.
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
    /// use arrow_dlpack::DType;
    ///
    /// assert_eq!(DType::Float32.name(), "float32");
    /// assert_eq!(DType::Float16.to_string(), "float16");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            DType::Int8 => "int8",
            DType::Int16 => "int16",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::UInt8 => "uint8",
            DType::UInt16 => "uint16",
            DType::UInt32 => "uint32",
            DType::UInt64 => "uint64",
            DType::Float16 => "float16",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
            DType::BFloat16 => "bfloat16",
            DType::Complex64 => "complex64",
            DType::Complex128 => "complex128",
            DType::Bool => "bool",
            DType::Float8E3M4 => "float8_e3m4",
            DType::Float8E4M3 => "float8_e4m3",
            DType::Float8E4M3B11Fnuz => "float8_e4m3b11fnuz",
            DType::Float8E4M3Fn => "float8_e4m3fn",
            DType::Float8E4M3Fnuz => "float8_e4m3fnuz",
            DType::Float8E5M2 => "float8_e5m2",
            DType::Float8E5M2Fnuz => "float8_e5m2fnuz",
            DType::Float8E8M0Fnu => "float8_e8m0fnu",
        }
    }

    /// The DLPack descriptor of this type, with one lane.
    pub const fn to_dlpack(self) -> DLDataType {
        let code = match self {
            DType::Int8 | DType::Int16 | DType::Int32 | DType::Int64 => DLDataTypeCode::INT,
            DType::UInt8 | DType::UInt16 | DType::UInt32 | DType::UInt64 => DLDataTypeCode::UINT,
            DType::Float16 | DType::Float32 | DType::Float64 => DLDataTypeCode::FLOAT,
            DType::BFloat16 => DLDataTypeCode::BFLOAT,
            DType::Complex64 | DType::Complex128 => DLDataTypeCode::COMPLEX,
            DType::Bool => DLDataTypeCode::BOOL,
            DType::Float8E3M4 => DLDataTypeCode::FLOAT8_E3M4,
            DType::Float8E4M3 => DLDataTypeCode::FLOAT8_E4M3,
            DType::Float8E4M3B11Fnuz => DLDataTypeCode::FLOAT8_E4M3B11FNUZ,
            DType::Float8E4M3Fn => DLDataTypeCode::FLOAT8_E4M3FN,
            DType::Float8E4M3Fnuz => DLDataTypeCode::FLOAT8_E4M3FNUZ,
            DType::Float8E5M2 => DLDataTypeCode::FLOAT8_E5M2,
            DType::Float8E5M2Fnuz => DLDataTypeCode::FLOAT8_E5M2FNUZ,
            DType::Float8E8M0Fnu => DLDataTypeCode::FLOAT8_E8M0FNU,
        };
        DLDataType {
            code,
            bits: (self.size() * 8) as u8,
            lanes: 1,
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
