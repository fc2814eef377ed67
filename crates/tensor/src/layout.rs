//! Shape and stride arithmetic: element counts, spans and the contiguity predicates.
//!
//! Every function here is total: sizes that do not fit are reported as [`Error::Overflow`], never
//! wrapped and never a panic.

use crate::{Error, Result};

/// The number of elements of `shape`, refusing products that overflow `usize`.
pub fn element_count(shape: &[usize]) -> Result<usize> {
    // A zero extent makes the product zero whatever the other extents are; numpy and PyTorch agree.
    if shape.contains(&0) {
        return Ok(0);
    }
    shape.iter().try_fold(1usize, |count, &extent| {
        count.checked_mul(extent).ok_or(Error::Overflow {
            what: "the element count",
        })
    })
}

/// The strides, in elements, of a row-major (C order) tensor of `shape`.
pub fn row_major_strides(shape: &[usize]) -> Result<Vec<isize>> {
    let mut strides = vec![0isize; shape.len()];
    let mut step: isize = 1;
    for (dim, &extent) in shape.iter().enumerate().rev() {
        strides[dim] = step;
        let extent = isize::try_from(extent).map_err(|_| Error::Overflow {
            what: "row-major strides",
        })?;
        // An empty tensor keeps growing the stride as if the extent were 1, as numpy does.
        step = step.checked_mul(extent.max(1)).ok_or(Error::Overflow {
            what: "row-major strides",
        })?;
    }
    Ok(strides)
}

/// The strides, in elements, of a column-major (Fortran order) tensor of `shape`.
pub fn column_major_strides(shape: &[usize]) -> Result<Vec<isize>> {
    let reversed: Vec<usize> = shape.iter().rev().copied().collect();
    let mut strides = row_major_strides(&reversed)?;
    strides.reverse();
    Ok(strides)
}

/// The lowest and highest element offsets, relative to the logical first element, that a
/// non-empty tensor addresses; `None` when the tensor has no elements.
///
/// The arithmetic is done in `i128` with checks, so no stride or extent a caller can pass makes it
/// wrap.
pub fn span(shape: &[usize], strides: &[isize]) -> Result<Option<(i128, i128)>> {
    if strides.len() != shape.len() {
        return Err(Error::StridesLength {
            ndim: shape.len(),
            strides: strides.len(),
        });
    }
    if shape.contains(&0) {
        return Ok(None);
    }
    let overflow = || Error::Overflow {
        what: "the span of the strides",
    };
    let (mut low, mut high) = (0i128, 0i128);
    for (&extent, &stride) in shape.iter().zip(strides) {
        let reach = (extent as i128 - 1)
            .checked_mul(stride as i128)
            .ok_or_else(overflow)?;
        if reach < 0 {
            low = low.checked_add(reach).ok_or_else(overflow)?;
        } else {
            high = high.checked_add(reach).ok_or_else(overflow)?;
        }
    }
    Ok(Some((low, high)))
}

/// Whether `strides` describe a row-major (C order) layout of `shape`, by numpy's rule:
/// dimensions of extent 1 may have any stride, and an empty tensor is contiguous.
pub fn is_row_major(shape: &[usize], strides: &[isize]) -> bool {
    is_dense_in_order(shape.iter().zip(strides).rev(), shape)
}

/// Whether `strides` describe a column-major (Fortran order) layout of `shape`, by numpy's rule.
pub fn is_column_major(shape: &[usize], strides: &[isize]) -> bool {
    is_dense_in_order(shape.iter().zip(strides), shape)
}

fn is_dense_in_order<'a>(
    dims: impl Iterator<Item = (&'a usize, &'a isize)>,
    shape: &[usize],
) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut expected: i128 = 1;
    for (&extent, &stride) in dims {
        if extent == 1 {
            continue;
        }
        if stride as i128 != expected {
            return false;
        }
        expected *= extent as i128;
        // The product of the extents seen so far is bounded by the element count of a tensor
        // whose strides matched, but guard against absurd shapes anyway.
        if expected > i128::from(i64::MAX) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_count_of_0d_is_one_and_of_empty_is_zero() {
        assert_eq!(element_count(&[]), Ok(1));
        assert_eq!(element_count(&[3, 0, usize::MAX]), Ok(0));
        assert_eq!(element_count(&[2, 3, 4]), Ok(24));
    }

    #[test]
    fn element_count_refuses_overflow() {
        assert_eq!(
            element_count(&[usize::MAX, 2]),
            Err(Error::Overflow {
                what: "the element count"
            })
        );
    }

    #[test]
    fn row_and_column_major_strides() {
        assert_eq!(row_major_strides(&[2, 3, 4]).unwrap(), vec![12, 4, 1]);
        assert_eq!(column_major_strides(&[2, 3, 4]).unwrap(), vec![1, 2, 6]);
        assert_eq!(row_major_strides(&[2, 0, 4]).unwrap(), vec![4, 4, 1]);
        assert!(row_major_strides(&[usize::MAX, 2]).is_err());
    }

    #[test]
    fn span_handles_negative_and_zero_strides() {
        assert_eq!(span(&[3, 4], &[4, 1]).unwrap(), Some((0, 11)));
        assert_eq!(span(&[3, 4], &[-4, 1]).unwrap(), Some((-8, 3)));
        assert_eq!(span(&[3, 4], &[0, 0]).unwrap(), Some((0, 0)));
        assert_eq!(span(&[0, 4], &[isize::MAX, 1]).unwrap(), None);
    }

    #[test]
    fn span_refuses_overflowing_strides() {
        // i128 holds one such product, just below 2^127; the sum of two overflows and is refused.
        assert_eq!(span(&[usize::MAX], &[isize::MAX]).unwrap().unwrap().0, 0);
        assert_eq!(
            span(&[usize::MAX; 2], &[isize::MAX; 2]),
            Err(Error::Overflow {
                what: "the span of the strides"
            })
        );
        assert_eq!(
            span(&[usize::MAX; 2], &[isize::MIN; 2]),
            Err(Error::Overflow {
                what: "the span of the strides"
            })
        );
    }

    #[test]
    fn contiguity_follows_numpy_for_extent_one_and_empty_dimensions() {
        // a[:, None] of a (3,) array: shape (3, 1), the extent-1 stride is arbitrary.
        assert!(is_row_major(&[3, 1], &[1, 0]));
        assert!(is_column_major(&[3, 1], &[1, 99]));
        // Empty tensors are contiguous whatever the strides.
        assert!(is_row_major(&[0, 3], &[7, -2]));
        assert!(is_column_major(&[0, 3], &[7, -2]));
        // 0-d tensors are both.
        assert!(is_row_major(&[], &[]));
        assert!(is_column_major(&[], &[]));
        // A transposed matrix is column-major only.
        assert!(!is_row_major(&[3, 2], &[1, 3]));
        assert!(is_column_major(&[3, 2], &[1, 3]));
        // Gapped, broadcast and reversed strides are neither.
        assert!(!is_row_major(&[3, 2], &[4, 1]));
        assert!(!is_row_major(&[3, 2], &[0, 1]));
        assert!(!is_row_major(&[3], &[-1]));
        assert!(!is_column_major(&[3], &[-1]));
    }
}
