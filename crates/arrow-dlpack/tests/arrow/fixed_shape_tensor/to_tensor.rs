//! `FixedShapeTensorArray::to_tensor`: the specification's permutation, dim names and nulls.

use super::*;

// ---------------------------------------------------------------------------------------------
// to_tensor

#[test]
fn to_tensor_follows_the_spec_for_every_permutation_of_ranks_1_to_4() {
    for shape in SHAPES {
        for permutation in permutations(shape.len()) {
            let rows = 3;
            let array = array(shape, Some(permutation.clone()), rows);
            let tensor = array.to_tensor(ArrayToTensorOptions::default()).unwrap();
            let logical: Vec<usize> = permutation.iter().map(|&p| shape[p]).collect();
            let mut expected_shape = vec![rows];
            expected_shape.extend(&logical);
            assert_eq!(tensor.shape(), expected_shape.as_slice(), "{permutation:?}");
            assert_eq!(array.extension_type().logical_shape(), logical);
            for index in indices(tensor.shape()) {
                assert_eq!(
                    element(&tensor, &index),
                    spec_value(index[0], &index[1..], shape, &permutation),
                    "shape {shape:?}, permutation {permutation:?}, index {index:?}"
                );
            }
        }
    }
}

#[test]
fn to_tensor_without_permutation_is_row_major_and_zero_copy() {
    for shape in SHAPES {
        let array = array(shape, None, 2);
        let tensor = array.to_tensor(ArrayToTensorOptions::default()).unwrap();
        assert!(tensor.is_row_major());
        assert!(tensor.is_read_only());
        let values = array.storage().values().as_primitive::<Int64Type>();
        assert_eq!(tensor.data_ptr(), values.values().as_ptr().cast::<u8>());
        for index in indices(tensor.shape()) {
            let identity: Vec<usize> = (0..shape.len()).collect();
            assert_eq!(
                element(&tensor, &index),
                spec_value(index[0], &index[1..], shape, &identity)
            );
        }
    }
}

#[test]
fn three_cycles_give_the_spec_logical_shape() {
    // The specification's own example.
    let t = FixedShapeTensorType::try_new(
        DataType::Float32,
        vec![100, 200, 500],
        Some(vec![2, 0, 1]),
        None,
    )
    .unwrap();
    assert_eq!(t.logical_shape(), vec![500, 100, 200]);
    let t = FixedShapeTensorType::try_new(
        DataType::Float32,
        vec![100, 200, 500],
        Some(vec![1, 2, 0]),
        None,
    )
    .unwrap();
    assert_eq!(t.logical_shape(), vec![200, 500, 100]);
    // And the strides do not overlap (PyArrow bug 4): physical shape [2, 3, 4] has row-major
    // strides [12, 4, 1]; logical dimension i takes the stride of physical dimension p[i].
    let array = array(&[2, 3, 4], Some(vec![2, 0, 1]), 1);
    assert_eq!(
        array
            .to_tensor(ArrayToTensorOptions::default())
            .unwrap()
            .strides(),
        &[24, 1, 12, 4]
    );
    let array = self::array(&[2, 3, 4], Some(vec![1, 2, 0]), 1);
    assert_eq!(
        array
            .to_tensor(ArrayToTensorOptions::default())
            .unwrap()
            .strides(),
        &[24, 4, 1, 12]
    );
}

#[test]
fn dim_names_come_out_in_logical_order() {
    // The specification's note: shape [10, 20, 30], names [x, y, z], permutation [2, 0, 1]
    // is a logical tensor with names [z, x, y] and shape [30, 10, 20].
    let names = vec!["x".to_string(), "y".to_string(), "z".to_string()];
    let t = FixedShapeTensorType::try_new(
        DataType::Int64,
        vec![10, 20, 30],
        Some(vec![2, 0, 1]),
        Some(names),
    )
    .unwrap();
    assert_eq!(t.logical_dim_names().unwrap(), ["z", "x", "y"]);
    assert_eq!(t.logical_shape(), [30, 10, 20]);

    let storage = FixedSizeListArray::new_null(
        Arc::new(Field::new_list_field(DataType::Int64, true)),
        6000,
        1,
    );
    let array = FixedShapeTensorArray::try_new(t, storage).unwrap();
    let tensor = array
        .to_tensor(ArrayToTensorOptions {
            allow_nulls: true,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(tensor.dim_names().unwrap(), ["", "z", "x", "y"]);
    assert_eq!(tensor.shape(), &[1, 30, 10, 20]);
}

#[test]
fn to_tensor_refuses_nulls_unless_allowed() {
    let t = FixedShapeTensorType::try_new(DataType::Int64, vec![2], None, None).unwrap();
    let field = Arc::new(Field::new_list_field(DataType::Int64, true));

    let values = Int64Array::from_iter_values(0..6);
    let storage = FixedSizeListArray::new(
        field.clone(),
        2,
        Arc::new(values),
        Some(NullBuffer::from(vec![true, false, true])),
    );
    let array = FixedShapeTensorArray::try_new(t.clone(), storage).unwrap();
    assert_eq!(array.null_count(), 1);
    assert!(matches!(
        array.to_tensor(ArrayToTensorOptions::default()),
        Err(Error::Nulls {
            null_count: 1,
            location: NullLocation::Array { depth: 0 }
        })
    ));
    assert_eq!(
        array
            .to_tensor(ArrayToTensorOptions {
                allow_nulls: true,
                ..Default::default()
            })
            .unwrap()
            .shape(),
        &[3, 2]
    );
    // A slice without the null tensor is fine.
    assert_eq!(
        array
            .slice(2, 1)
            .to_tensor(ArrayToTensorOptions::default())
            .unwrap()
            .shape(),
        &[1, 2]
    );

    let values = Int64Array::from(vec![Some(0), None, Some(2), Some(3)]);
    let storage = FixedSizeListArray::new(field, 2, Arc::new(values), None);
    let array = FixedShapeTensorArray::try_new(t, storage).unwrap();
    assert!(matches!(
        array.to_tensor(ArrayToTensorOptions::default()),
        Err(Error::Nulls {
            null_count: 1,
            location: NullLocation::Array { depth: 1 }
        })
    ));
}
