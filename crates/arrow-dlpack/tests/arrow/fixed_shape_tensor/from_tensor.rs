//! `FixedShapeTensorArray::from_tensor`: every permutation derived zero-copy, and the layouts refused or copied.

use super::*;

// ---------------------------------------------------------------------------------------------
// from_tensor

#[test]
fn from_tensor_derives_every_permutation_zero_copy() {
    for shape in SHAPES {
        for permutation in permutations(shape.len()) {
            // A logical tensor whose logical dimension i is physical dimension permutation[i]:
            // numpy's `x.transpose(0, 1 + p[0], 1 + p[1], ...)` of a row-major x.
            let mut physical_shape = vec![3];
            physical_shape.extend(shape.iter());
            let physical = row_major(&physical_shape);
            let order: Vec<usize> = std::iter::once(0)
                .chain(permutation.iter().map(|&p| p + 1))
                .collect();
            let logical = physical.permuted(&order).unwrap();

            let array =
                FixedShapeTensorArray::from_tensor(&logical, TensorToArrayOptions::default())
                    .unwrap();
            let t = array.extension_type();
            assert_eq!(t.shape(), shape, "{permutation:?}");
            let identity: Vec<usize> = (0..shape.len()).collect();
            let expected = (permutation != identity).then(|| permutation.clone());
            assert_eq!(t.permutation(), expected.as_deref());
            assert_eq!(array.len(), 3);

            // Zero-copy: the storage values are the tensor's memory.
            let values = array.storage().values().as_primitive::<Int64Type>();
            assert_eq!(values.values().as_ptr().cast::<u8>(), logical.data_ptr());

            // And back: the same logical tensor, element by element.
            let back = array.to_tensor(ArrayToTensorOptions::default()).unwrap();
            assert_eq!(back.shape(), logical.shape());
            assert_eq!(back.strides(), logical.strides());
            for index in indices(back.shape()) {
                assert_eq!(element(&back, &index), element(&logical, &index));
                assert_eq!(
                    element(&back, &index),
                    spec_value(index[0], &index[1..], shape, &permutation)
                );
            }
        }
    }
}

#[test]
fn from_tensor_keeps_dim_names_in_physical_order() {
    let physical = row_major(&[2, 3, 4, 5])
        .with_dim_names(Some(["n", "x", "y", "z"].map(String::from).to_vec()))
        .unwrap();
    // Logical order [n, z, x, y]: permutation [2, 0, 1].
    let logical = physical.permuted(&[0, 3, 1, 2]).unwrap();
    assert_eq!(logical.dim_names().unwrap(), ["n", "z", "x", "y"]);
    let array =
        FixedShapeTensorArray::from_tensor(&logical, TensorToArrayOptions::default()).unwrap();
    let t = array.extension_type();
    assert_eq!(t.permutation(), Some(&[2, 0, 1][..]));
    assert_eq!(t.dim_names().unwrap(), ["x", "y", "z"]);
    assert_eq!(
        t.metadata_json(),
        r#"{"shape":[3,4,5],"permutation":[2,0,1],"dim_names":["x","y","z"]}"#
    );
    let back = array.to_tensor(ArrayToTensorOptions::default()).unwrap();
    assert_eq!(back.dim_names().unwrap(), ["", "z", "x", "y"]);
}

#[test]
fn from_tensor_refuses_0_d() {
    // PyArrow bug 1: this crashes PyArrow.
    let scalar = row_major(&[]);
    assert!(matches!(
        FixedShapeTensorArray::from_tensor(&scalar, TensorToArrayOptions { allow_copy: true }),
        Err(Error::ZeroDimensional)
    ));
}

#[test]
fn from_tensor_accepts_an_empty_outer_dimension() {
    // PyArrow bug 1: shape (0, 2, 2) divides by zero in PyArrow.
    let empty = Tensor::try_new(
        Buffer::from_vec(Vec::<i64>::new()),
        DType::Int64,
        vec![0, 2, 2],
        vec![0, 0, 0],
        0,
    )
    .unwrap();
    let array =
        FixedShapeTensorArray::from_tensor(&empty, TensorToArrayOptions::default()).unwrap();
    assert_eq!(array.len(), 0);
    assert_eq!(array.extension_type().shape(), &[2, 2]);
    assert_eq!(
        array
            .to_tensor(ArrayToTensorOptions::default())
            .unwrap()
            .shape(),
        &[0, 2, 2]
    );

    // Empty cells: three tensors of shape (0, 2).
    let empty_cells = Tensor::try_new(
        Buffer::from_vec(Vec::<i64>::new()),
        DType::Int64,
        vec![3, 0, 2],
        vec![5, 1, 1],
        0,
    )
    .unwrap();
    let array =
        FixedShapeTensorArray::from_tensor(&empty_cells, TensorToArrayOptions::default()).unwrap();
    assert_eq!(array.len(), 3);
    assert_eq!(array.extension_type().shape(), &[0, 2]);
    assert_eq!(
        array
            .to_tensor(ArrayToTensorOptions::default())
            .unwrap()
            .shape(),
        &[3, 0, 2]
    );
}

#[test]
fn from_tensor_never_misreads_gapped_strides() {
    // PyArrow bug 2: x[::2] and x[:, ::2] give wrong data silently.
    let x = row_major(&[4, 4, 3]);
    let every_other_row = Tensor::try_new(
        x.buffer().clone(),
        DType::Int64,
        vec![2, 4, 3],
        vec![24, 3, 1],
        0,
    )
    .unwrap();
    let every_other_column = Tensor::try_new(
        x.buffer().clone(),
        DType::Int64,
        vec![4, 2, 3],
        vec![12, 6, 1],
        0,
    )
    .unwrap();
    let last_of_each = Tensor::try_new(
        x.buffer().clone(),
        DType::Int64,
        vec![4, 4, 1],
        vec![12, 3, 1],
        2,
    )
    .unwrap();
    for gapped in [every_other_row, every_other_column, last_of_each] {
        let error = FixedShapeTensorArray::from_tensor(&gapped, TensorToArrayOptions::default())
            .unwrap_err();
        assert!(
            matches!(&error, Error::GappedStrides { shape, strides } if shape == gapped.shape() && strides == gapped.strides()),
            "{error}"
        );
        // With a copy allowed: exactly the logical elements.
        let array =
            FixedShapeTensorArray::from_tensor(&gapped, TensorToArrayOptions { allow_copy: true })
                .unwrap();
        let back = array.to_tensor(ArrayToTensorOptions::default()).unwrap();
        assert_eq!(back.shape(), gapped.shape());
        for index in indices(gapped.shape()) {
            assert_eq!(element(&back, &index), element(&gapped, &index));
        }
    }
}

#[test]
fn from_tensor_copies_or_refuses_negative_and_zero_strides() {
    let x = row_major(&[3, 2]);
    let flipped =
        Tensor::try_new(x.buffer().clone(), DType::Int64, vec![3, 2], vec![-2, 1], 4).unwrap();
    let broadcast =
        Tensor::try_new(x.buffer().clone(), DType::Int64, vec![3, 2], vec![0, 1], 0).unwrap();
    let reversed_cells =
        Tensor::try_new(x.buffer().clone(), DType::Int64, vec![3, 2], vec![2, -1], 1).unwrap();
    for tensor in [flipped, broadcast, reversed_cells] {
        assert!(matches!(
            FixedShapeTensorArray::from_tensor(&tensor, TensorToArrayOptions::default()),
            Err(Error::GappedStrides { .. })
        ));
        let array =
            FixedShapeTensorArray::from_tensor(&tensor, TensorToArrayOptions { allow_copy: true })
                .unwrap();
        assert_eq!(array.extension_type().permutation(), None);
        let back = array.to_tensor(ArrayToTensorOptions::default()).unwrap();
        for index in indices(tensor.shape()) {
            assert_eq!(element(&back, &index), element(&tensor, &index));
        }
    }
}

#[test]
fn from_tensor_refuses_tensors_that_are_not_first_major() {
    // A column-major (3, 2, 2) tensor: the outermost stride is the smallest.
    let column_major = row_major(&[2, 2, 3]).permuted(&[2, 1, 0]).unwrap();
    for allow_copy in [false, true] {
        let error =
            FixedShapeTensorArray::from_tensor(&column_major, TensorToArrayOptions { allow_copy })
                .unwrap_err();
        assert!(
            matches!(&error, Error::NotFirstMajor { shape, strides } if shape == &[3, 2, 2] && strides == &[1, 3, 6]),
            "{error}"
        );
    }
}

#[test]
fn extent_1_dimensions_do_not_constrain_the_layout() {
    // One row, column-major cells: the outermost stride does not matter for one row.
    let one_row = row_major(&[3, 2, 1]).permuted(&[2, 1, 0]).unwrap();
    assert_eq!(one_row.shape(), &[1, 2, 3]);
    let array =
        FixedShapeTensorArray::from_tensor(&one_row, TensorToArrayOptions::default()).unwrap();
    assert_eq!(array.extension_type().permutation(), Some(&[1, 0][..]));
    assert_eq!(array.extension_type().shape(), &[3, 2]);

    // An extent-1 cell dimension with an odd stride stays where it is: no permutation.
    let x = row_major(&[2, 3]);
    let with_unit = Tensor::try_new(
        x.buffer().clone(),
        DType::Int64,
        vec![2, 1, 3],
        vec![3, 99, 1],
        0,
    )
    .unwrap();
    let array =
        FixedShapeTensorArray::from_tensor(&with_unit, TensorToArrayOptions::default()).unwrap();
    assert_eq!(array.extension_type().permutation(), None);
    assert_eq!(array.extension_type().shape(), &[1, 3]);
    let values = array.storage().values().as_primitive::<Int64Type>();
    assert_eq!(values.values().as_ptr().cast::<u8>(), with_unit.data_ptr());
}

#[test]
fn one_dimensional_tensors_become_arrays_of_scalar_cells() {
    let vector = row_major(&[4]);
    let array =
        FixedShapeTensorArray::from_tensor(&vector, TensorToArrayOptions::default()).unwrap();
    assert_eq!(array.len(), 4);
    assert_eq!(array.extension_type().shape(), &[] as &[usize]);
    assert_eq!(array.extension_type().metadata_json(), r#"{"shape":[]}"#);
    assert_eq!(
        array
            .to_tensor(ArrayToTensorOptions::default())
            .unwrap()
            .shape(),
        &[4]
    );
}

#[test]
fn round_trips_through_dlpack_with_a_three_cycle() {
    let physical = row_major(&[2, 3, 4, 5]);
    let logical = physical.permuted(&[0, 2, 3, 1]).unwrap(); // permutation [1, 2, 0]
    let array =
        FixedShapeTensorArray::from_tensor(&logical, TensorToArrayOptions::default()).unwrap();
    assert_eq!(array.extension_type().permutation(), Some(&[1, 2, 0][..]));

    let exported = array.to_tensor(ArrayToTensorOptions::default()).unwrap();
    let managed = exported
        .to_dlpack_versioned(ExportOptions::default())
        .unwrap();
    let imported = Tensor::from_managed(managed).unwrap();
    let again =
        FixedShapeTensorArray::from_tensor(&imported, TensorToArrayOptions::default()).unwrap();
    assert_eq!(again.extension_type(), array.extension_type());
    assert_eq!(
        again
            .to_tensor(ArrayToTensorOptions::default())
            .unwrap()
            .data_ptr(),
        logical.data_ptr()
    );
}

#[test]
fn from_tensor_storage_is_pyarrow_shaped() {
    let array =
        FixedShapeTensorArray::from_tensor(&row_major(&[3, 2, 2]), TensorToArrayOptions::default())
            .unwrap();
    // pa.fixed_shape_tensor(pa.int64(), [2, 2]).storage_type == pa.list_(pa.int64(), 4)
    assert_eq!(
        array.storage().data_type(),
        &array.extension_type().storage_type(true)
    );
    assert_eq!(
        array.storage().data_type().to_string(),
        "FixedSizeList(4 x Int64)"
    );
    assert_eq!(array.storage().null_count(), 0);
}
