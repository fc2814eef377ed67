//! Primitive arrays to tensors and back, for every supported type: values, zero-copy (pointer
//! identity), slices, empties, nulls, and what is refused.

use std::sync::Arc;

use arrow_array::types::*;
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, BooleanArray, Date32Array, PrimitiveArray, StringArray,
    cast::AsArray,
};
use arrow_buffer::{ArrowNativeType, Buffer};
use arrow_dlpack::{
    ArrayToTensorOptions, Error, NullLocation, TensorToArrayOptions, array_to_tensor,
    arrow_type_of, dtype_of, tensor_to_array,
};
use arrow_dlpack_tensor::{DType, ExportOptions, Tensor};
use arrow_schema::DataType;

/// Eleven values of `T`, from 0 up, and a null at index 7 in the nullable variant.
fn sample<T: ArrowPrimitiveType>() -> Vec<T::Native> {
    (0..11).map(T::Native::usize_as).collect()
}

/// array -> tensor -> DLPack (versioned and legacy) -> tensor -> array, for full arrays, slices
/// and empty slices: same values, same memory.
fn round_trips_through_dlpack<T: ArrowPrimitiveType>() {
    let full = PrimitiveArray::<T>::from_iter_values(sample::<T>());
    for (offset, len) in [(0, 11), (3, 5), (10, 1), (4, 0), (11, 0)] {
        let array = full.slice(offset, len);
        let tensor = array_to_tensor(&array, ArrayToTensorOptions::default()).unwrap();
        assert_eq!(tensor.shape(), &[len]);
        assert_eq!(tensor.strides(), &[1]);
        assert_eq!(tensor.dtype(), dtype_of(&T::DATA_TYPE).unwrap());
        assert!(tensor.is_read_only());
        if len > 0 {
            assert_eq!(tensor.data_ptr(), array.values().as_ptr().cast::<u8>());
        }

        let versioned = tensor
            .to_dlpack_versioned(ExportOptions::default())
            .unwrap();
        let back = tensor_to_array(
            &Tensor::from_managed(versioned).unwrap(),
            TensorToArrayOptions::default(),
        )
        .unwrap();
        check_same::<T>(&back, &array, len > 0);

        let legacy = tensor.to_dlpack_legacy(ExportOptions::default()).unwrap();
        let back = tensor_to_array(
            &Tensor::from_managed(legacy).unwrap(),
            TensorToArrayOptions::default(),
        )
        .unwrap();
        check_same::<T>(&back, &array, len > 0);
    }
}

fn check_same<T: ArrowPrimitiveType>(
    back: &ArrayRef,
    original: &PrimitiveArray<T>,
    same_memory: bool,
) {
    assert_eq!(back.data_type(), &T::DATA_TYPE);
    assert_eq!(back.null_count(), 0);
    let back = back.as_primitive::<T>();
    assert_eq!(back.values().as_ref(), original.values().as_ref());
    if same_memory {
        assert_eq!(back.values().as_ptr(), original.values().as_ptr());
    }
}

/// tensor -> array -> tensor: the same view over the same buffer.
fn tensor_round_trips_through_an_array<T: ArrowPrimitiveType>() {
    let dtype = dtype_of(&T::DATA_TYPE).unwrap();
    let buffer = Buffer::from_vec(sample::<T>());
    for (offset, len) in [(0, 11), (2, 6), (11, 0)] {
        let tensor = Tensor::try_new(buffer.clone(), dtype, vec![len], vec![1], offset).unwrap();
        let array = tensor_to_array(&tensor, TensorToArrayOptions::default()).unwrap();
        assert_eq!(array.len(), len);
        assert_eq!(array.data_type(), &arrow_type_of(dtype).unwrap());
        let again = array_to_tensor(array.as_ref(), ArrayToTensorOptions::default()).unwrap();
        assert_eq!(again.shape(), tensor.shape());
        assert_eq!(again.dtype(), dtype);
        if len > 0 {
            assert_eq!(again.data_ptr(), tensor.data_ptr());
        }
        assert_eq!(
            again.row_major_buffer().unwrap().as_slice(),
            tensor.row_major_buffer().unwrap().as_slice()
        );
    }
}

macro_rules! for_every_primitive_type {
    ($($name:ident: $type:ty,)*) => {
        mod every_type {
            use super::*;
            $(
                #[test]
                fn $name() {
                    round_trips_through_dlpack::<$type>();
                    tensor_round_trips_through_an_array::<$type>();
                }
            )*
        }
    };
}

for_every_primitive_type! {
    int8: Int8Type,
    int16: Int16Type,
    int32: Int32Type,
    int64: Int64Type,
    uint8: UInt8Type,
    uint16: UInt16Type,
    uint32: UInt32Type,
    uint64: UInt64Type,
    float16: Float16Type,
    float32: Float32Type,
    float64: Float64Type,
}

#[test]
fn refuses_nulls_unless_allowed() {
    let array = PrimitiveArray::<Int32Type>::from(vec![Some(2), None, Some(4), None]);
    let error = array_to_tensor(&array, ArrayToTensorOptions::default()).unwrap_err();
    assert!(matches!(
        &error,
        Error::Nulls {
            null_count: 2,
            location: NullLocation::Array { depth: 0 }
        }
    ));

    // Allowed: the valid slots hold their values, the null slots something unspecified.
    let tensor = array_to_tensor(
        &array,
        ArrayToTensorOptions {
            allow_nulls: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(tensor.shape(), &[4]);
    let values = tensor.row_major_buffer().unwrap();
    assert_eq!(values.typed_data::<i32>()[0], 2);
    assert_eq!(values.typed_data::<i32>()[2], 4);
}

#[test]
fn accepts_a_slice_that_excludes_the_nulls() {
    let array = PrimitiveArray::<Int64Type>::from(vec![None, Some(1), Some(2), None]);
    let slice = array.slice(1, 2);
    let tensor = array_to_tensor(&slice, ArrayToTensorOptions::default()).unwrap();
    assert_eq!(
        tensor.row_major_buffer().unwrap().typed_data::<i64>(),
        &[1, 2]
    );

    let error = array_to_tensor(&array.slice(2, 2), ArrayToTensorOptions::default()).unwrap_err();
    assert!(matches!(error, Error::Nulls { null_count: 1, .. }));
}

#[test]
fn refuses_other_types_by_name() {
    // Booleans are refused for the copy they need, not for their type: see
    // `booleans_are_unpacked_only_when_a_copy_is_allowed`.
    let cases: Vec<(ArrayRef, &str)> = vec![
        (Arc::new(Date32Array::from(vec![1])), "temporal"),
        (Arc::new(StringArray::from(vec!["a"])), "variable-length"),
        (
            Arc::new(
                arrow_array::Decimal128Array::from(vec![1])
                    .with_precision_and_scale(10, 2)
                    .unwrap(),
            ),
            "decimal",
        ),
        (
            Arc::new(arrow_array::DictionaryArray::<Int8Type>::from_iter([
                "a", "b", "a",
            ])),
            "dictionary",
        ),
        (
            Arc::new(
                arrow_array::ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![
                    Some(1),
                ])]),
            ),
            "variable-length lists",
        ),
        (Arc::new(arrow_array::NullArray::new(2)), "null type"),
    ];
    for (array, reason) in cases {
        let error = array_to_tensor(array.as_ref(), ArrayToTensorOptions::default()).unwrap_err();
        let Error::UnsupportedType { data_type, .. } = &error else {
            panic!("expected UnsupportedType, got {error:?}");
        };
        assert_eq!(data_type, array.data_type());
        let message = error.to_string();
        assert!(message.starts_with(&format!("cannot export {}", array.data_type())));
        assert!(message.contains(reason), "{message}");
    }
}

#[test]
fn booleans_are_unpacked_only_when_a_copy_is_allowed() {
    let array = BooleanArray::from(vec![
        true, false, true, true, false, false, true, false, true,
    ]);
    let slice = array.slice(3, 5);
    let error = array_to_tensor(&slice, ArrayToTensorOptions::default()).unwrap_err();
    assert!(matches!(error, Error::CopyRequired { .. }));

    let options = ArrayToTensorOptions {
        allow_copy: true,
        ..Default::default()
    };
    let tensor = array_to_tensor(&slice, options).unwrap();
    assert_eq!(tensor.dtype(), DType::Bool);
    assert_eq!(tensor.shape(), &[5]);
    assert!(!tensor.is_read_only());
    assert_eq!(
        tensor.row_major_buffer().unwrap().as_slice(),
        &[1, 0, 0, 1, 0]
    );

    // Back: a bool tensor packs into a BooleanArray only when a copy is allowed.
    assert!(matches!(
        tensor_to_array(&tensor, TensorToArrayOptions::default()),
        Err(Error::CopyRequired { .. })
    ));
    let back = tensor_to_array(&tensor, TensorToArrayOptions { allow_copy: true }).unwrap();
    assert_eq!(
        back.as_boolean(),
        &BooleanArray::from(slice.iter().collect::<Vec<_>>())
    );
}

#[test]
fn bool_tensor_with_any_stride_packs_and_nonzero_bytes_are_true() {
    let buffer = Buffer::from_vec(vec![0u8, 7, 1, 0, 255, 0]);
    let tensor = Tensor::try_new(buffer, DType::Bool, vec![3], vec![-2], 5).unwrap();
    // Elements at 5, 3, 1: 0, 0, 7.
    let array = tensor_to_array(&tensor, TensorToArrayOptions { allow_copy: true }).unwrap();
    assert_eq!(
        array.as_boolean(),
        &BooleanArray::from(vec![false, false, true])
    );
}

#[test]
fn boolean_nulls_are_refused_unless_allowed() {
    let array = BooleanArray::from(vec![Some(true), None]);
    let copy = ArrayToTensorOptions {
        allow_copy: true,
        allow_nulls: false,
    };
    assert!(matches!(
        array_to_tensor(&array, copy),
        Err(Error::Nulls { null_count: 1, .. })
    ));
    let both = ArrayToTensorOptions {
        allow_copy: true,
        allow_nulls: true,
    };
    assert_eq!(array_to_tensor(&array, both).unwrap().shape(), &[2]);
}

#[test]
fn empty_tensors_with_any_stride_become_empty_arrays() {
    for stride in [0, 1, 7, -3] {
        let tensor = Tensor::try_new(
            Buffer::from_vec(vec![1.0f32]),
            DType::Float32,
            vec![0],
            vec![stride],
            0,
        )
        .unwrap();
        let array = tensor_to_array(&tensor, TensorToArrayOptions::default()).unwrap();
        assert_eq!(array.len(), 0);
        assert_eq!(array.data_type(), &DataType::Float32);
    }
}

#[test]
fn one_element_tensors_accept_any_stride() {
    let buffer = Buffer::from_vec(vec![5u16, 6, 7]);
    let tensor = Tensor::try_new(buffer, DType::UInt16, vec![1], vec![-9], 2).unwrap();
    let array = tensor_to_array(&tensor, TensorToArrayOptions::default()).unwrap();
    assert_eq!(array.as_primitive::<UInt16Type>().values().as_ref(), &[7]);
}

#[test]
fn strided_tensors_are_refused_or_copied() {
    let buffer = Buffer::from_vec((0..10i32).collect::<Vec<_>>());
    let every_other = Tensor::try_new(buffer.clone(), DType::Int32, vec![5], vec![2], 0).unwrap();
    let error = tensor_to_array(&every_other, TensorToArrayOptions::default()).unwrap_err();
    assert!(matches!(
        &error,
        Error::NotRowMajor { shape, strides } if shape == &[5] && strides == &[2]
    ));
    let copied = tensor_to_array(&every_other, TensorToArrayOptions { allow_copy: true }).unwrap();
    assert_eq!(
        copied.as_primitive::<Int32Type>().values().as_ref(),
        &[0, 2, 4, 6, 8]
    );

    let reversed = Tensor::try_new(buffer, DType::Int32, vec![3], vec![-1], 9).unwrap();
    let copied = tensor_to_array(&reversed, TensorToArrayOptions { allow_copy: true }).unwrap();
    assert_eq!(
        copied.as_primitive::<Int32Type>().values().as_ref(),
        &[9, 8, 7]
    );
}

#[test]
fn refuses_tensors_that_are_not_one_dimensional() {
    let buffer = Buffer::from_vec((0..6i8).collect::<Vec<_>>());
    let matrix = Tensor::try_new_row_major(buffer.clone(), DType::Int8, vec![2, 3]).unwrap();
    assert!(matches!(
        tensor_to_array(&matrix, TensorToArrayOptions::default()),
        Err(Error::NotOneDimensional { shape }) if shape == [2, 3]
    ));
    let scalar = Tensor::try_new_row_major(buffer, DType::Int8, vec![]).unwrap();
    assert!(matches!(
        tensor_to_array(&scalar, TensorToArrayOptions::default()),
        Err(Error::NotOneDimensional { shape }) if shape.is_empty()
    ));
}

#[test]
fn refuses_dtypes_without_an_arrow_type() {
    let buffer = Buffer::from_vec(vec![0u64; 4]);
    for dtype in [
        DType::BFloat16,
        DType::Complex64,
        DType::Complex128,
        DType::Float8E5M2,
    ] {
        let tensor = Tensor::try_new_row_major(buffer.clone(), dtype, vec![1]).unwrap();
        assert!(matches!(
            tensor_to_array(&tensor, TensorToArrayOptions::default()),
            Err(Error::UnsupportedDType { dtype: found }) if found == dtype
        ));
    }
}

#[test]
fn validity_mask_marks_valid_slots() {
    let array = PrimitiveArray::<Int32Type>::from(vec![Some(1), None, Some(3), None, Some(5)]);
    let mask = arrow_dlpack::validity_to_tensor(&array.slice(1, 4)).unwrap();
    assert_eq!(mask.dtype(), DType::Bool);
    assert_eq!(mask.row_major_buffer().unwrap().as_slice(), &[0, 1, 0, 1]);
    let no_nulls = PrimitiveArray::<Int32Type>::from(vec![1, 2]);
    assert_eq!(
        arrow_dlpack::validity_to_tensor(&no_nulls)
            .unwrap()
            .row_major_buffer()
            .unwrap()
            .as_slice(),
        &[1, 1]
    );
}

#[test]
fn the_type_is_refused_before_the_nulls_are_counted() {
    let strings = StringArray::from(vec![Some("a"), None]);
    assert!(matches!(
        array_to_tensor(&strings, ArrayToTensorOptions::default()),
        Err(Error::UnsupportedType { .. })
    ));
    // A boolean array with nulls is refused for the copy it needs before its nulls are counted.
    let booleans = BooleanArray::from(vec![Some(true), None]);
    assert!(matches!(
        array_to_tensor(&booleans, ArrayToTensorOptions::default()),
        Err(Error::CopyRequired { .. })
    ));
}
