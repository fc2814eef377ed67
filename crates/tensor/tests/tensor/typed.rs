//! Typed values: `from_vec`, `as_slice`, `get`, `iter` and (feature `ndarray`) `view` against
//! plain index arithmetic on random views, every native type, and the error messages.

use arrow_buffer::Buffer;
use arrow_dlpack_tensor::{DType, Error, ExportOptions, NativeDType, Tensor};
use half::{bf16, f16};
use proptest::prelude::*;

/// A random view over a buffer whose element `k` holds `k`: shape, strides (zero and negative
/// included), the element offset and the buffer length that make it valid.
#[derive(Debug, Clone)]
struct View {
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
    buffer_len: usize,
}

fn view() -> impl Strategy<Value = View> {
    (
        proptest::collection::vec((0usize..4, -4isize..5), 0..5),
        0usize..3,
        0usize..3,
    )
        .prop_map(|(dims, extra_offset, slack)| {
            let (shape, strides): (Vec<usize>, Vec<isize>) = dims.into_iter().unzip();
            let (low, high) = if shape.contains(&0) {
                (0, 0)
            } else {
                shape
                    .iter()
                    .zip(&strides)
                    .fold((0, 0), |(low, high), (&n, &s)| {
                        let reach = (n as isize - 1) * s;
                        (low + reach.min(0), high + reach.max(0))
                    })
            };
            let offset = (-low) as usize + extra_offset;
            View {
                buffer_len: offset + high as usize + 1 + slack,
                shape,
                strides,
                offset,
            }
        })
}

impl View {
    fn tensor(&self) -> Tensor {
        let values: Vec<i32> = (0..self.buffer_len as i32).collect();
        Tensor::try_new(
            Buffer::from_vec(values),
            DType::Int32,
            self.shape.clone(),
            self.strides.clone(),
            self.offset,
        )
        .unwrap()
    }

    /// Every index in row-major order with the value stored there (its buffer position).
    fn elements(&self) -> Vec<(Vec<usize>, i32)> {
        let count: usize = self.shape.iter().product();
        let mut out = Vec::with_capacity(count);
        for flat in 0..count {
            let mut rest = flat;
            let mut index = vec![0; self.shape.len()];
            for dim in (0..self.shape.len()).rev() {
                index[dim] = rest % self.shape[dim];
                rest /= self.shape[dim];
            }
            let position = self.offset as isize
                + index
                    .iter()
                    .zip(&self.strides)
                    .map(|(&i, &s)| i as isize * s)
                    .sum::<isize>();
            out.push((index, position as i32));
        }
        out
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// `get` and `iter` agree with index arithmetic, `as_slice` exists exactly for row-major
    /// views, and every index past an extent is an error.
    #[test]
    fn get_and_iter_match_index_arithmetic(view in view()) {
        let tensor = view.tensor();
        let elements = view.elements();
        let expected: Vec<i32> = elements.iter().map(|(_, value)| *value).collect();
        let iter = tensor.iter::<i32>().unwrap();
        prop_assert_eq!(iter.len(), expected.len());
        prop_assert_eq!(iter.collect::<Vec<_>>(), expected.clone());
        for (index, value) in &elements {
            prop_assert_eq!(tensor.get::<i32>(index), Ok(*value));
        }
        for dim in 0..view.shape.len() {
            let mut index = vec![0; view.shape.len()];
            index[dim] = view.shape[dim];
            let refused = matches!(
                tensor.get::<i32>(&index),
                Err(Error::IndexOutOfBounds { .. })
            );
            prop_assert!(refused);
        }
        match tensor.as_slice::<i32>() {
            Ok(slice) => prop_assert_eq!(slice, expected.as_slice()),
            Err(error) => {
                prop_assert!(!tensor.is_row_major());
                let not_row_major = matches!(error, Error::NotRowMajor { .. });
                prop_assert!(not_row_major);
            }
        }
        prop_assert_eq!(tensor.is_row_major(), tensor.as_slice::<i32>().is_ok());
        prop_assert!(tensor.iter::<u32>().is_err());
    }

    /// The ndarray view agrees with `get` at every index, negative strides included.
    #[cfg(feature = "ndarray")]
    #[test]
    fn view_matches_get(view in view()) {
        let tensor = view.tensor();
        let array = tensor.view::<i32>().unwrap();
        prop_assert_eq!(array.shape(), tensor.shape());
        for (index, value) in view.elements() {
            prop_assert_eq!(array[index.as_slice()], value);
            prop_assert_eq!(tensor.get::<i32>(&index), Ok(value));
        }
        let expected: Vec<i32> = tensor.iter::<i32>().unwrap().collect();
        prop_assert_eq!(array.iter().copied().collect::<Vec<_>>(), expected.clone());
        // Back into a tensor: an owned copy and a copy of the view hold the same elements.
        let owned = Tensor::from_ndarray(array.to_owned()).unwrap();
        prop_assert_eq!(owned.iter::<i32>().unwrap().collect::<Vec<_>>(), expected.clone());
        let copied = Tensor::from_ndarray_view(array).unwrap();
        prop_assert_eq!(copied.as_slice::<i32>().unwrap(), expected.as_slice());
    }
}

/// `from_vec` and `as_slice` round-trip for one type, which reads no other type's tensors.
fn round_trip<T: NativeDType + PartialEq>(values: [T; 3]) {
    let tensor = Tensor::from_vec(values.to_vec(), vec![3, 1]).unwrap();
    assert_eq!(tensor.dtype(), DType::of::<T>());
    assert_eq!(tensor.as_slice::<T>().unwrap(), &values);
    assert_eq!(tensor.get::<T>(&[2, 0]).unwrap(), values[2]);
    // Through DLPack and back, still the same memory.
    let managed = tensor
        .to_dlpack_versioned(ExportOptions::default())
        .unwrap();
    let imported = Tensor::from_managed(managed).unwrap();
    assert_eq!(
        imported.as_slice::<T>().unwrap().as_ptr(),
        tensor.as_slice::<T>().unwrap().as_ptr()
    );
}

#[test]
fn every_native_type_round_trips() {
    round_trip([1i8, -2, 3]);
    round_trip([1i16, -2, 3]);
    round_trip([1i32, -2, 3]);
    round_trip([1i64, -2, 3]);
    round_trip([1u8, 2, 255]);
    round_trip([1u16, 2, 3]);
    round_trip([1u32, 2, 3]);
    round_trip([1u64, 2, u64::MAX]);
    round_trip([f16::ONE, f16::NEG_ONE, f16::INFINITY]);
    round_trip([bf16::ONE, bf16::NEG_ONE, bf16::MIN_POSITIVE]);
    round_trip([1.5f32, -2.0, f32::MAX]);
    round_trip([1.5f64, -2.0, f64::MIN]);
}

#[test]
fn reads_check_the_dtype() {
    let tensor = Tensor::from_vec(vec![1.0f32, 2.0], vec![2]).unwrap();
    assert!(tensor.as_slice::<i32>().is_err());
    assert!(tensor.as_slice::<f64>().is_err());
    assert!(tensor.get::<u32>(&[0]).is_err());
    assert!(tensor.iter::<f16>().is_err());
}

#[test]
fn error_messages() {
    let ints = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], vec![2, 3]).unwrap();
    let errors = [
        ints.as_slice::<i64>().unwrap_err(),
        ints.permuted(&[1, 0])
            .unwrap()
            .as_slice::<i32>()
            .unwrap_err(),
        ints.get::<i32>(&[1]).unwrap_err(),
        ints.get::<i32>(&[1, 3]).unwrap_err(),
        Tensor::from_vec(vec![0u8; 5], vec![2, 3]).unwrap_err(),
        Tensor::from_vec(vec![0i8], vec![])
            .unwrap()
            .get::<u8>(&[])
            .unwrap_err(),
    ];
    let report: Vec<String> = errors.iter().map(ToString::to_string).collect();
    insta::assert_snapshot!(report.join("\n"));
}
