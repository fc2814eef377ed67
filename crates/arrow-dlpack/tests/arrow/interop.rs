//! Interop with a real DLPack consumer and producer: dlpark's ndarray integration reads Arrow
//! data through DLPack without copying, and hands ndarray data to Arrow the same way.

use std::sync::Arc;

use arrow_array::types::{Float32Type, Int32Type};
use arrow_array::{Array, FixedSizeListArray, Float64Array, Int32Array, cast::AsArray};
use arrow_dlpack::{
    ArrayToTensorOptions, FixedShapeTensorArray, TensorToArrayOptions, array_to_tensor,
    tensor_to_array, tensor_to_fixed_size_list,
};
use arrow_dlpack_tensor::{ExportOptions, Tensor};
use arrow_schema::Field;
use dlpack_sys::DLManagedTensorVersioned;
use dlpark::allocation::dynamic::Initialized;
use dlpark::{Managed, TryFromDlpack};
use ndarray::{Array1, Array3, ArrayViewD, IxDyn};

/// Reads a managed tensor as an ndarray view, as a Rust consumer of DLPack would.
fn view<T: dlpark::DlpackElement>(
    managed: &Managed<DLManagedTensorVersioned>,
) -> ArrayViewD<'_, T> {
    // SAFETY: `managed` was exported by the tensor crate: CPU memory, valid while `managed` lives,
    // and nothing writes to it meanwhile.
    unsafe { ArrayViewD::<T>::try_from_dlpack(managed, ()) }.unwrap()
}

#[test]
fn ndarray_reads_a_sliced_arrow_array_in_place() {
    let array = Int32Array::from_iter_values(0..10).slice(3, 4);
    let managed = array_to_tensor(&array, ArrayToTensorOptions::default())
        .unwrap()
        .to_dlpack_versioned(ExportOptions::default())
        .unwrap();
    let view = view::<i32>(&managed);
    assert_eq!(view.shape(), &[4]);
    assert_eq!(view.iter().copied().collect::<Vec<_>>(), vec![3, 4, 5, 6]);
    assert_eq!(view.as_ptr(), array.values().as_ptr());
}

#[test]
fn ndarray_reads_nested_fixed_size_lists_as_a_matrix() {
    let values = Float64Array::from_iter_values((0..6).map(f64::from));
    let field = Arc::new(Field::new_list_field(values.data_type().clone(), true));
    let array = FixedSizeListArray::new(field, 2, Arc::new(values), None);
    let managed = array_to_tensor(&array, ArrayToTensorOptions::default())
        .unwrap()
        .to_dlpack_versioned(ExportOptions::default())
        .unwrap();
    let view = view::<f64>(&managed);
    assert_eq!(view.shape(), &[3, 2]);
    assert_eq!(view[IxDyn(&[2, 1])], 5.0);
}

#[test]
fn ndarray_indexes_a_permuted_fixed_shape_tensor_by_the_spec() {
    // Physical cells of shape [2, 3, 4] holding 0..24 per cell; permutation [2, 0, 1]: logical
    // index (i, j, k) is physical index (j, k, i).
    let array = crate::fixed_shape_tensor::permuted_int32_cells();
    assert_eq!(array.extension_type().permutation(), Some(&[2, 0, 1][..]));

    let managed = array
        .to_tensor(ArrayToTensorOptions::default())
        .unwrap()
        .to_dlpack_versioned(ExportOptions::default())
        .unwrap();
    let view = view::<i32>(&managed);
    assert_eq!(view.shape(), &[2, 4, 2, 3]);
    for n in 0..2 {
        for i in 0..4 {
            for j in 0..2 {
                for k in 0..3 {
                    let expected = (n * 24 + j * 12 + k * 4 + i) as i32;
                    assert_eq!(view[IxDyn(&[n, i, j, k])], expected);
                }
            }
        }
    }
}

/// Hands an owned ndarray to DLPack through dlpark's producer.
fn export_ndarray<T, D>(array: ndarray::Array<T, D>) -> Managed<DLManagedTensorVersioned>
where
    T: dlpark::DlpackElement + Send,
    D: ndarray::Dimension,
{
    let initialized = Initialized::<DLManagedTensorVersioned>::try_from(Box::new(array)).unwrap();
    // SAFETY: dlpark's ndarray producer filled in every field from the boxed array, which it
    // keeps alive as the context until the deleter runs.
    unsafe { initialized.finish() }
}

#[test]
fn ndarray_vectors_become_arrow_arrays_in_place() {
    let vector = Array1::from_vec(vec![1i32, 2, 3]);
    let ptr = vector.as_ptr();
    let tensor = Tensor::from_managed(export_ndarray(vector)).unwrap();
    let array = tensor_to_array(&tensor, TensorToArrayOptions::default()).unwrap();
    assert_eq!(
        array.as_primitive::<Int32Type>().values().as_ref(),
        &[1, 2, 3]
    );
    assert_eq!(array.as_primitive::<Int32Type>().values().as_ptr(), ptr);
}

#[test]
fn ndarray_cubes_become_fixed_size_lists_and_tensor_columns_in_place() {
    let cube = Array3::from_shape_fn((2, 3, 4), |(a, b, c)| (a * 12 + b * 4 + c) as f32);
    let ptr = cube.as_ptr();
    let tensor = Tensor::from_managed(export_ndarray(cube)).unwrap();

    let lists = tensor_to_fixed_size_list(&tensor, TensorToArrayOptions::default()).unwrap();
    assert_eq!(lists.len(), 2);
    let leaf = lists
        .values()
        .as_fixed_size_list()
        .values()
        .as_primitive::<Float32Type>();
    assert_eq!(leaf.values().as_ptr(), ptr);
    assert_eq!(leaf.value(23), 23.0);

    let column =
        FixedShapeTensorArray::from_tensor(&tensor, TensorToArrayOptions::default()).unwrap();
    assert_eq!(column.extension_type().shape(), &[3, 4]);
    assert_eq!(column.extension_type().permutation(), None);
}
