//! Element conversion for column groups copied from several record batches: each column is
//! converted to the group's dtype and written straight into the batch's one allocation.
//!
//! The conversions are Rust's `as` (C++'s `static_cast`), which is what
//! [`arrow_dlpack::columns_to_tensor`] does for the batches that lie inside one record batch, so a
//! batch gives the same values wherever its record-batch boundaries fall.
//! The conversion for a (source type, group dtype) pair is chosen once per run of rows, never per
//! element.

use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrowPrimitiveType, cast::AsArray};
use arrow_buffer::{ArrowNativeType, MutableBuffer};
use arrow_dlpack_tensor::DType;
use half::f16;

/// An element type of a group tensor.
pub(crate) trait Element: ArrowNativeType {
    fn from_i64(value: i64) -> Self;
    fn from_u64(value: u64) -> Self;
    fn from_f64(value: f64) -> Self;
    /// The value written for a null: NaN for floats (`null_to_nan` always gives a float dtype).
    fn null() -> Self;
}

macro_rules! integer_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            fn from_i64(value: i64) -> Self { value as Self }
            fn from_u64(value: u64) -> Self { value as Self }
            fn from_f64(value: f64) -> Self { value as Self }
            fn null() -> Self { 0 }
        }
    )*};
}
integer_element!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            fn from_i64(value: i64) -> Self { value as Self }
            fn from_u64(value: u64) -> Self { value as Self }
            fn from_f64(value: f64) -> Self { value as Self }
            fn null() -> Self { <$t>::NAN }
        }
    )*};
}
float_element!(f32, f64);

impl Element for f16 {
    fn from_i64(value: i64) -> Self {
        // Promotion gives float16 only for 8-bit integers, which f64 holds exactly.
        f16::from_f64(value as f64)
    }
    fn from_u64(value: u64) -> Self {
        f16::from_f64(value as f64)
    }
    fn from_f64(value: f64) -> Self {
        f16::from_f64(value)
    }
    fn null() -> Self {
        f16::NAN
    }
}

/// A source element type: how it becomes any [`Element`].
trait SourceElement: Copy {
    fn convert<D: Element>(self) -> D;
}

macro_rules! signed_source {
    ($($t:ty),*) => {$(
        impl SourceElement for $t {
            fn convert<D: Element>(self) -> D { D::from_i64(self as i64) }
        }
    )*};
}
signed_source!(i8, i16, i32, i64);

macro_rules! unsigned_source {
    ($($t:ty),*) => {$(
        impl SourceElement for $t {
            fn convert<D: Element>(self) -> D { D::from_u64(self as u64) }
        }
    )*};
}
unsigned_source!(u8, u16, u32, u64);

impl SourceElement for f32 {
    fn convert<D: Element>(self) -> D {
        // f32 -> f64 is exact, so the one rounding is the final one.
        D::from_f64(f64::from(self))
    }
}

impl SourceElement for f64 {
    fn convert<D: Element>(self) -> D {
        D::from_f64(self)
    }
}

impl SourceElement for f16 {
    fn convert<D: Element>(self) -> D {
        D::from_f64(self.to_f64())
    }
}

/// Where a run of rows of one column goes in the output: element `i` of the run is written at
/// `base + i * stride`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placement {
    pub(crate) base: usize,
    pub(crate) stride: usize,
}

/// Writes rows `start..start + len` of `array` (a numeric primitive array, checked when the
/// group was resolved) into `out`, whose elements have dtype `dtype`, converting each element;
/// null slots get NaN when `nulls_to_nan`, and their stored value otherwise.
pub(crate) fn write_run(
    out: &mut MutableBuffer,
    dtype: DType,
    array: &dyn Array,
    start: usize,
    len: usize,
    placement: Placement,
    nulls_to_nan: bool,
) {
    macro_rules! to {
        ($d:ty) => {
            write_typed::<$d>(
                out.typed_data_mut::<$d>(),
                array,
                start,
                len,
                placement,
                nulls_to_nan,
            )
        };
    }
    match dtype {
        DType::Int8 => to!(i8),
        DType::Int16 => to!(i16),
        DType::Int32 => to!(i32),
        DType::Int64 => to!(i64),
        DType::UInt8 => to!(u8),
        DType::UInt16 => to!(u16),
        DType::UInt32 => to!(u32),
        DType::UInt64 => to!(u64),
        DType::Float16 => to!(f16),
        DType::Float32 => to!(f32),
        DType::Float64 => to!(f64),
        // The group's dtype comes from `columns_to_tensor`, which gives only the types above.
        other => unreachable!("group dtype {other} is not a numeric Arrow type"),
    }
}

fn write_typed<D: Element>(
    out: &mut [D],
    array: &dyn Array,
    start: usize,
    len: usize,
    placement: Placement,
    nulls_to_nan: bool,
) {
    macro_rules! from {
        ($t:ty) => {
            write_values::<$t, D>(out, array, start, len, placement, nulls_to_nan)
        };
    }
    match array.data_type() {
        arrow_schema::DataType::Int8 => from!(Int8Type),
        arrow_schema::DataType::Int16 => from!(Int16Type),
        arrow_schema::DataType::Int32 => from!(Int32Type),
        arrow_schema::DataType::Int64 => from!(Int64Type),
        arrow_schema::DataType::UInt8 => from!(UInt8Type),
        arrow_schema::DataType::UInt16 => from!(UInt16Type),
        arrow_schema::DataType::UInt32 => from!(UInt32Type),
        arrow_schema::DataType::UInt64 => from!(UInt64Type),
        arrow_schema::DataType::Float16 => from!(Float16Type),
        arrow_schema::DataType::Float32 => from!(Float32Type),
        arrow_schema::DataType::Float64 => from!(Float64Type),
        // Group columns were checked by `columns_to_tensor` when the group was resolved, and
        // every record batch is checked against the first one's schema.
        other => unreachable!("group column type {other} is not numeric"),
    }
}

fn write_values<S, D>(
    out: &mut [D],
    array: &dyn Array,
    start: usize,
    len: usize,
    placement: Placement,
    nulls_to_nan: bool,
) where
    S: ArrowPrimitiveType,
    S::Native: SourceElement,
    D: Element,
{
    let values = &array.as_primitive::<S>().values()[start..start + len];
    let Placement { base, stride } = placement;
    if stride == 1 {
        let dst = &mut out[base..base + len];
        for (slot, &value) in dst.iter_mut().zip(values) {
            *slot = value.convert();
        }
    } else {
        for (i, &value) in values.iter().enumerate() {
            out[base + i * stride] = value.convert();
        }
    }
    if nulls_to_nan && let Some(nulls) = array.nulls() {
        if nulls.null_count() == 0 {
            return;
        }
        for i in 0..len {
            if nulls.is_null(start + i) {
                out[base + i * stride] = D::null();
            }
        }
    }
}
