//! The correspondence between Arrow data types and tensor dtypes.
//!
//! Only types whose values are stored one fixed-width element after another, with the same bytes
//! in both worlds, correspond: the integers, the unsigned integers and the three float widths.

use arrow_dlpack_tensor::DType;
use arrow_schema::DataType;

use crate::{Error, Result};

/// The dtypes that have an Arrow primitive type (and so convert both ways without a copy):
/// the signed and unsigned integers, then the floats, narrowest first.
pub const ARROW_DTYPES: [DType; 11] = [
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
];

/// The Arrow type whose values have the memory layout of `dtype`.
///
/// ```
/// use arrow_dlpack::arrow_type_of;
/// use arrow_dlpack::DType;
/// use arrow_schema::DataType;
///
/// assert_eq!(arrow_type_of(DType::Float32).unwrap(), DataType::Float32);
/// assert!(arrow_type_of(DType::Bool).is_err()); // Arrow booleans are bit-packed
/// ```
pub fn arrow_type_of(dtype: DType) -> Result<DataType> {
    Ok(match dtype {
        DType::Int8 => DataType::Int8,
        DType::Int16 => DataType::Int16,
        DType::Int32 => DataType::Int32,
        DType::Int64 => DataType::Int64,
        DType::UInt8 => DataType::UInt8,
        DType::UInt16 => DataType::UInt16,
        DType::UInt32 => DataType::UInt32,
        DType::UInt64 => DataType::UInt64,
        DType::Float16 => DataType::Float16,
        DType::Float32 => DataType::Float32,
        DType::Float64 => DataType::Float64,
        dtype => return Err(Error::UnsupportedDType { dtype }),
    })
}

/// The tensor dtype whose elements have the memory layout of Arrow's `data_type` values.
///
/// Every other type is refused with [`Error::UnsupportedType`], whose reason says why, for example
/// that booleans are bit-packed.
///
/// ```
/// use arrow_dlpack::dtype_of;
/// use arrow_dlpack::DType;
/// use arrow_schema::DataType;
///
/// assert_eq!(dtype_of(&DataType::UInt16).unwrap(), DType::UInt16);
/// let error = dtype_of(&DataType::Boolean).unwrap_err();
/// assert!(error.to_string().contains("bit-packed"));
/// ```
pub fn dtype_of(data_type: &DataType) -> Result<DType> {
    Ok(match data_type {
        DataType::Int8 => DType::Int8,
        DataType::Int16 => DType::Int16,
        DataType::Int32 => DType::Int32,
        DataType::Int64 => DType::Int64,
        DataType::UInt8 => DType::UInt8,
        DataType::UInt16 => DType::UInt16,
        DataType::UInt32 => DType::UInt32,
        DataType::UInt64 => DType::UInt64,
        DataType::Float16 => DType::Float16,
        DataType::Float32 => DType::Float32,
        DataType::Float64 => DType::Float64,
        other => {
            return Err(Error::UnsupportedType {
                data_type: other.clone(),
                reason: unsupported_reason(other),
            });
        }
    })
}

/// Why values of `data_type` cannot be viewed as a tensor without a copy.
pub(crate) fn unsupported_reason(data_type: &DataType) -> &'static str {
    match data_type {
        DataType::Boolean => {
            "bit-packed boolean values have no one-byte-per-element layout, so exporting them \
             needs an unpacking copy"
        }
        DataType::Null => "the null type stores no values",
        DataType::Date32
        | DataType::Date64
        | DataType::Time32(_)
        | DataType::Time64(_)
        | DataType::Timestamp(_, _)
        | DataType::Duration(_)
        | DataType::Interval(_) => {
            "temporal values carry a unit (and maybe a time zone) that DLPack cannot express; \
             cast to an integer type first"
        }
        DataType::Decimal32(_, _)
        | DataType::Decimal64(_, _)
        | DataType::Decimal128(_, _)
        | DataType::Decimal256(_, _) => {
            "decimal values carry a scale that DLPack cannot express; cast to a float or integer \
             type first"
        }
        DataType::Dictionary(_, _) => {
            "dictionary-encoded values are indices into a dictionary; decode them or export the \
             keys"
        }
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView => "variable-length values have no fixed element size",
        DataType::FixedSizeBinary(_) => "fixed-size binary values are opaque bytes, not numbers",
        DataType::List(_)
        | DataType::LargeList(_)
        | DataType::ListView(_)
        | DataType::LargeListView(_) => {
            "variable-length lists are not rectangular; only fixed-size lists form a tensor"
        }
        DataType::FixedSizeList(_, _) => {
            "a fixed-size list is a tensor only through to_tensor, which adds its dimensions"
        }
        DataType::Struct(_) | DataType::Union(_, _) | DataType::Map(_, _) => {
            "nested records are not tensors; export their numeric fields one by one"
        }
        DataType::RunEndEncoded(_, _) => "run-end encoded values are compressed; decode them first",
        _ => "DLPack has no dtype for it",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrow_dtypes_are_exactly_the_dtypes_with_an_arrow_type() {
        let convertible: Vec<DType> = DType::ALL
            .into_iter()
            .filter(|&dtype| arrow_type_of(dtype).is_ok())
            .collect();
        assert_eq!(convertible, ARROW_DTYPES);
        for dtype in ARROW_DTYPES {
            assert_eq!(dtype_of(&arrow_type_of(dtype).unwrap()).unwrap(), dtype);
        }
    }

    #[test]
    fn every_dtype_with_an_arrow_type_maps_back_to_itself() {
        let mut mapped = 0;
        for dtype in DType::ALL {
            if let Ok(data_type) = arrow_type_of(dtype) {
                assert_eq!(dtype_of(&data_type).unwrap(), dtype);
                mapped += 1;
            }
        }
        assert_eq!(mapped, 11);
    }

    #[test]
    fn dtypes_without_an_arrow_type_are_refused_by_name() {
        for dtype in [
            DType::Bool,
            DType::BFloat16,
            DType::Complex64,
            DType::Float8E4M3Fn,
        ] {
            assert!(matches!(
                arrow_type_of(dtype),
                Err(Error::UnsupportedDType { dtype: found }) if found == dtype
            ));
        }
    }
}
