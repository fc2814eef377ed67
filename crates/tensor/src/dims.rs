//! [`Dims`]: a tensor's extents or strides, held inline up to [`INLINE`] dimensions.
//!
//! A `Vec` each for the shape and the strides cost two allocations and two frees per tensor, a
//! measurable share of a zero-copy DLPack import (`Array.from_dlpack(np_array)`, perf); almost
//! every tensor has at most four dimensions.

use std::ops::Deref;

/// The number of dimensions held without an allocation.
pub(crate) const INLINE: usize = 4;

/// Extents or strides: inline up to [`INLINE`] entries, on the heap beyond.
#[derive(Clone)]
pub(crate) enum Dims<T> {
    Inline { len: u8, values: [T; INLINE] },
    Heap(Vec<T>),
}

impl<T: Copy + Default> Dims<T> {
    /// The entries of `values`, copied.
    pub(crate) fn from_slice(values: &[T]) -> Self {
        if values.len() > INLINE {
            return Dims::Heap(values.to_vec());
        }
        let mut inline = [T::default(); INLINE];
        inline[..values.len()].copy_from_slice(values);
        Dims::Inline {
            len: values.len() as u8,
            values: inline,
        }
    }

    /// `value(0)`, ..., `value(len - 1)`, or `None` as soon as one is `None` (the caller builds
    /// its error on that cold path: an `Option` per entry keeps the loop free of error values).
    pub(crate) fn try_from_fn(
        len: usize,
        mut value: impl FnMut(usize) -> Option<T>,
    ) -> Option<Self> {
        if len > INLINE {
            return (0..len)
                .map(value)
                .collect::<Option<Vec<T>>>()
                .map(Dims::Heap);
        }
        let mut values = [T::default(); INLINE];
        for (index, slot) in values[..len].iter_mut().enumerate() {
            *slot = value(index)?;
        }
        Some(Dims::Inline {
            len: len as u8,
            values,
        })
    }
}

impl<T: Copy + Default> From<Vec<T>> for Dims<T> {
    /// A short `Vec` is copied inline (and freed), a long one kept.
    fn from(values: Vec<T>) -> Self {
        if values.len() > INLINE {
            Dims::Heap(values)
        } else {
            Dims::from_slice(&values)
        }
    }
}

impl<T: Copy + Default> FromIterator<T> for Dims<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Dims::from(iter.into_iter().collect::<Vec<T>>())
    }
}

impl<T> Deref for Dims<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match self {
            Dims::Inline { len, values } => &values[..usize::from(*len)],
            Dims::Heap(values) => values,
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Dims<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_dims_are_inline_and_long_ones_on_the_heap() {
        let short = Dims::from(vec![2usize, 3]);
        assert!(matches!(short, Dims::Inline { len: 2, .. }));
        assert_eq!(&*short, &[2, 3]);
        let long = Dims::from(vec![1isize; INLINE + 1]);
        assert!(matches!(long, Dims::Heap(_)));
        assert_eq!(long.len(), INLINE + 1);
        assert_eq!(&*Dims::<usize>::from_slice(&[]), &[] as &[usize]);
        assert_eq!(format!("{short:?}"), "[2, 3]");
    }

    #[test]
    fn try_from_fn_keeps_the_values_or_fails() {
        let short = Dims::try_from_fn(3, |index| Some(index + 1)).unwrap();
        assert_eq!(&*short, &[1, 2, 3]);
        let long = Dims::try_from_fn(6, Some).unwrap();
        assert_eq!(&*long, &[0, 1, 2, 3, 4, 5]);
        assert!(Dims::try_from_fn(3, |index| (index != 1).then_some(index)).is_none());
        assert!(Dims::try_from_fn(5, |index| (index != 4).then_some(index)).is_none());
    }
}
