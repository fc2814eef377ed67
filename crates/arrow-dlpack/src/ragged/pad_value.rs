//! Pad values: what a caller asks to pad with, checked against the values' dtype and turned into
//! the bytes of one element.

use arrow_dlpack_tensor::DType;
use half::{bf16, f16};

use crate::{Error, Result};

/// The value that fills the padding, in the kind the caller has it; [`PadValue::Int`] 0 by
/// default.
///
/// It is checked against the values' dtype before anything is written: an integer dtype takes
/// integers in its range (and floats with no fractional part), a float dtype takes any number
/// whose magnitude it can hold (rounded to the nearest value), a bool dtype takes `true`,
/// `false`, 0 or 1. `-100` into uint8, `0.5` into int32 or `1e6` into float16 are
/// [`Error::PadValue`]. Complex and float8 values can only be padded with zero.
///
/// ```
/// use arrow_dlpack::{DType, PadValue};
///
/// assert_eq!(PadValue::Int(-100).to_element_bytes(DType::Int16)?, (-100i16).to_ne_bytes());
/// assert!(PadValue::Int(-100).to_element_bytes(DType::UInt8).is_err());
/// assert!(PadValue::Float(0.5).to_element_bytes(DType::Int32).is_err());
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PadValue {
    /// A signed integer.
    Int(i64),
    /// An unsigned integer (for values above `i64::MAX` in uint64 data).
    UInt(u64),
    /// A floating-point number.
    Float(f64),
    /// A boolean: 1 or 0 in numeric data.
    Bool(bool),
}

impl Default for PadValue {
    fn default() -> Self {
        PadValue::Int(0)
    }
}

impl std::fmt::Display for PadValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PadValue::Int(value) => write!(f, "{value}"),
            PadValue::UInt(value) => write!(f, "{value}"),
            PadValue::Float(value) => write!(f, "{value:?}"),
            PadValue::Bool(value) => write!(f, "{value}"),
        }
    }
}

impl PadValue {
    /// Whether the value is zero (`false`, `0`, `0.0` or `-0.0`).
    fn is_zero(self) -> bool {
        match self {
            PadValue::Int(value) => value == 0,
            PadValue::UInt(value) => value == 0,
            PadValue::Float(value) => value == 0.0,
            PadValue::Bool(value) => !value,
        }
    }

    /// The value as an exact integer, when it is one.
    fn as_integer(self) -> Option<i128> {
        match self {
            PadValue::Int(value) => Some(i128::from(value)),
            PadValue::UInt(value) => Some(i128::from(value)),
            PadValue::Bool(value) => Some(i128::from(value)),
            // Finite floats below 2^100 convert exactly when they have no fractional part.
            PadValue::Float(value) => {
                (value.is_finite() && value.fract() == 0.0 && value.abs() < 1e30)
                    .then_some(value as i128)
            }
        }
    }

    /// The value as a float (integers rounded to the nearest double).
    fn as_float(self) -> f64 {
        match self {
            PadValue::Int(value) => value as f64,
            PadValue::UInt(value) => value as f64,
            PadValue::Float(value) => value,
            PadValue::Bool(value) => f64::from(u8::from(value)),
        }
    }

    /// The bytes of one element of `dtype` holding this value, in native byte order;
    /// [`Error::PadValue`] when `dtype` cannot hold it.
    pub fn to_element_bytes(self, dtype: DType) -> Result<Vec<u8>> {
        let refuse = |expected: &'static str| Error::PadValue {
            value: self.to_string(),
            dtype,
            expected,
        };
        macro_rules! integer {
            ($t:ty, $expected:literal) => {{
                let value = self
                    .as_integer()
                    .and_then(|value| <$t>::try_from(value).ok())
                    .ok_or_else(|| refuse($expected))?;
                Ok(value.to_ne_bytes().to_vec())
            }};
        }
        // A float that was finite must stay finite: 1e6 into float16 is an overflow, not infinity.
        let float = |value: f64, narrowed: f64, expected| {
            if value.is_finite() && !narrowed.is_finite() {
                Err(refuse(expected))
            } else {
                Ok(())
            }
        };
        let value = self.as_float();
        match dtype {
            DType::Int8 => integer!(i8, "an integer from -128 to 127"),
            DType::Int16 => integer!(i16, "an integer from -32768 to 32767"),
            DType::Int32 => integer!(i32, "an integer from -2147483648 to 2147483647"),
            DType::Int64 => integer!(i64, "an integer in the range of int64"),
            DType::UInt8 => integer!(u8, "an integer from 0 to 255"),
            DType::UInt16 => integer!(u16, "an integer from 0 to 65535"),
            DType::UInt32 => integer!(u32, "an integer from 0 to 4294967295"),
            DType::UInt64 => integer!(u64, "an integer in the range of uint64"),
            DType::Float16 => {
                let narrowed = f16::from_f64(value);
                float(
                    value,
                    narrowed.to_f64(),
                    "a number within the range of float16",
                )?;
                Ok(narrowed.to_ne_bytes().to_vec())
            }
            DType::BFloat16 => {
                let narrowed = bf16::from_f64(value);
                float(
                    value,
                    narrowed.to_f64(),
                    "a number within the range of bfloat16",
                )?;
                Ok(narrowed.to_ne_bytes().to_vec())
            }
            DType::Float32 => {
                let narrowed = value as f32;
                float(
                    value,
                    f64::from(narrowed),
                    "a number within the range of float32",
                )?;
                Ok(narrowed.to_ne_bytes().to_vec())
            }
            DType::Float64 => Ok(value.to_ne_bytes().to_vec()),
            DType::Bool => match self.as_integer() {
                Some(flag @ (0 | 1)) => Ok(vec![flag as u8]),
                _ => Err(refuse("true, false, 0 or 1")),
            },
            other if self.is_zero() => Ok(vec![0; other.size()]),
            _ => Err(refuse("zero, the only pad value for this dtype")),
        }
    }
}
