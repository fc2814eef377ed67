//! PyArrow's type promotion for tables: the element type of one 2-D tensor made from columns of
//! several numeric types (see [`table_to_tensor`](crate::table_to_tensor) for the rule and its
//! sources).

use arrow_dlpack_tensor::DType;

/// The kind of a numeric dtype, for promotion.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Signed,
    Unsigned,
    Float,
}

fn kind(dtype: DType) -> Kind {
    match dtype {
        DType::Bool => unreachable!("bool merges before its kind is asked"),
        DType::Int8 | DType::Int16 | DType::Int32 | DType::Int64 => Kind::Signed,
        DType::UInt8 | DType::UInt16 | DType::UInt32 | DType::UInt64 => Kind::Unsigned,
        DType::Float16 | DType::Float32 | DType::Float64 => Kind::Float,
        other => unreachable!("{other} is not a column dtype"),
    }
}

fn bits(dtype: DType) -> usize {
    dtype.size() * 8
}

/// The narrowest dtype of `kind` with at least `bits` bits (64 at most).
fn of_width(kind: Kind, bits: usize) -> DType {
    match (kind, bits) {
        (Kind::Signed, 0..=8) => DType::Int8,
        (Kind::Signed, 9..=16) => DType::Int16,
        (Kind::Signed, 17..=32) => DType::Int32,
        (Kind::Signed, _) => DType::Int64,
        (Kind::Unsigned, 0..=8) => DType::UInt8,
        (Kind::Unsigned, 9..=16) => DType::UInt16,
        (Kind::Unsigned, 17..=32) => DType::UInt32,
        (Kind::Unsigned, _) => DType::UInt64,
        (Kind::Float, 0..=16) => DType::Float16,
        (Kind::Float, 17..=32) => DType::Float32,
        (Kind::Float, _) => DType::Float64,
    }
}

/// Arrow's `MaybeMergeNumericTypes` with integer-to-float, integer-sign and numeric-width
/// promotion (see [`table_to_tensor`](crate::table_to_tensor)), and bool, which Arrow does not
/// merge, giving way to any other type as in numpy.
fn merge(promoted: DType, other: DType) -> DType {
    if promoted == other || other == DType::Bool {
        return promoted;
    }
    if promoted == DType::Bool {
        return other;
    }
    match (kind(promoted), kind(other)) {
        (Kind::Unsigned, Kind::Signed) | (Kind::Signed, Kind::Unsigned) => {
            let (unsigned, signed) = if kind(promoted) == Kind::Unsigned {
                (promoted, other)
            } else {
                (other, promoted)
            };
            let mut width = bits(unsigned).max(bits(signed));
            // An unsigned integer at least as wide as the signed one needs one more bit.
            if bits(unsigned) >= bits(signed) {
                width += 1;
            }
            of_width(Kind::Signed, width)
        }
        (Kind::Float, Kind::Signed | Kind::Unsigned)
        | (Kind::Signed | Kind::Unsigned, Kind::Float) => {
            let (float, integer) = if kind(promoted) == Kind::Float {
                (promoted, other)
            } else {
                (other, promoted)
            };
            let integer_as_float = match bits(integer) {
                8 => DType::Float16,
                16 => DType::Float32,
                _ => DType::Float64,
            };
            of_width(Kind::Float, bits(float).max(bits(integer_as_float)))
        }
        (kind, _) => of_width(kind, bits(promoted).max(bits(other))),
    }
}

/// The tensor dtype for columns of dtypes `sources` (not empty): PyArrow's left fold of
/// [`merge`], then a merge with `float32` when `null_to_nan` leaves an integer type.
pub(super) fn promoted_dtype(sources: &[DType], null_to_nan: bool) -> DType {
    let merged = sources[1..]
        .iter()
        .fold(sources[0], |promoted, &other| merge(promoted, other));
    if null_to_nan && (merged == DType::Bool || kind(merged) != Kind::Float) {
        merge(merged, DType::Float32)
    } else {
        merged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [DType; 11] = crate::ARROW_DTYPES;

    #[test]
    fn merge_is_symmetric_for_every_pair() {
        for a in ALL {
            for b in ALL {
                assert_eq!(merge(a, b), merge(b, a), "{a} + {b}");
            }
        }
    }

    #[test]
    fn bool_gives_way_to_every_type_and_to_float32_with_null_to_nan() {
        for other in ALL {
            assert_eq!(merge(DType::Bool, other), other, "bool + {other}");
            assert_eq!(merge(other, DType::Bool), other, "{other} + bool");
        }
        assert_eq!(
            promoted_dtype(&[DType::Bool, DType::Bool], false),
            DType::Bool
        );
        assert_eq!(promoted_dtype(&[DType::Bool], true), DType::Float32);
        let mixed = [DType::Int8, DType::Bool, DType::UInt8];
        assert_eq!(promoted_dtype(&mixed, false), DType::Int16);
    }

    #[test]
    fn merge_follows_arrows_examples() {
        // The examples of Field::MergeOptions in Arrow C++ type.h, and of its tests.
        assert_eq!(merge(DType::Int8, DType::Float32), DType::Float32);
        assert_eq!(merge(DType::Int32, DType::Float32), DType::Float64);
        assert_eq!(merge(DType::Int32, DType::Float64), DType::Float64);
        assert_eq!(merge(DType::UInt8, DType::Int16), DType::Int16);
        assert_eq!(merge(DType::UInt16, DType::Int16), DType::Int32);
        assert_eq!(merge(DType::Int16, DType::Int32), DType::Int32);
    }
}
