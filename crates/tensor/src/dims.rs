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

    /// The values of `iter`, which yields exactly `len` items, or its first error.
    pub(crate) fn try_collect<E>(
        len: usize,
        iter: impl Iterator<Item = Result<T, E>>,
    ) -> Result<Self, E> {
        if len > INLINE {
            return iter.collect::<Result<Vec<T>, E>>().map(Dims::Heap);
        }
        let mut values = [T::default(); INLINE];
        let mut count = 0;
        for (slot, value) in values.iter_mut().zip(iter) {
            *slot = value?;
            count += 1;
        }
        debug_assert_eq!(count, len);
        Ok(Dims::Inline {
            len: count as u8,
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
    fn try_collect_keeps_the_values_or_the_first_error() {
        let ok = Dims::try_collect(3, [1, 2, 3].into_iter().map(Ok::<usize, ()>));
        assert_eq!(&*ok.unwrap(), &[1, 2, 3]);
        let long = Dims::try_collect(6, (0..6).map(Ok::<usize, ()>)).unwrap();
        assert_eq!(&*long, &[0, 1, 2, 3, 4, 5]);
        let failed = Dims::try_collect(3, [Ok(1usize), Err("second"), Err("third")].into_iter());
        assert_eq!(failed.unwrap_err(), "second");
        let failed_long = Dims::try_collect(5, (0..5).map(|i| if i == 4 { Err(i) } else { Ok(i) }));
        assert_eq!(failed_long.unwrap_err(), 4);
    }
}
