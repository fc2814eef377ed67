//! `arrow.fixed_shape_tensor`: metadata, fields, and tensors in both directions, checked element
//! by element against the specification's definition of the permutation.

use std::sync::Arc;

use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef, FixedSizeListArray, Int64Array, cast::AsArray};
use arrow_buffer::{Buffer, NullBuffer};
use arrow_dlpack::{
    ArrayToTensorOptions, EXTENSION_NAME, Error, FixedShapeTensorArray, FixedShapeTensorMetadata,
    FixedShapeTensorType, NullLocation, TensorToArrayOptions,
};
use arrow_dlpack_tensor::{DType, ExportOptions, Tensor};
use arrow_schema::extension::{EXTENSION_TYPE_METADATA_KEY, EXTENSION_TYPE_NAME_KEY};
use arrow_schema::{DataType, Field};

// ---------------------------------------------------------------------------------------------
// Helpers, written from the specification alone.

/// Every permutation of `0..n`, in lexicographic order.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for first in 0..n {
        for rest in permutations(n - 1) {
            let mut p = vec![first];
            p.extend(rest.into_iter().map(|d| if d >= first { d + 1 } else { d }));
            out.push(p);
        }
    }
    out
}

/// Every index of `shape`, last dimension fastest.
fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    for &extent in shape {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                (0..extent).map(move |i| {
                    let mut index = prefix.clone();
                    index.push(i);
                    index
                })
            })
            .collect();
    }
    out
}

/// The value that the spec puts at logical `index` of cell `row`, for storage holding
/// `row * cell_size + (row-major position in the physical shape)`: logical dimension `i` is
/// physical dimension `permutation[i]`.
fn spec_value(row: usize, index: &[usize], physical_shape: &[usize], permutation: &[usize]) -> i64 {
    let mut physical = vec![0; physical_shape.len()];
    for (i, &p) in permutation.iter().enumerate() {
        physical[p] = index[i];
    }
    let linear = physical
        .iter()
        .zip(physical_shape)
        .fold(0, |acc, (&i, &extent)| acc * extent + i);
    (row * physical_shape.iter().product::<usize>() + linear) as i64
}

/// Reads element `index` of an int64 tensor through its own strides and offset.
fn element(tensor: &Tensor, index: &[usize]) -> i64 {
    let position = index
        .iter()
        .zip(tensor.strides())
        .fold(tensor.offset() as isize, |acc, (&i, &s)| {
            acc + i as isize * s
        });
    tensor.buffer().typed_data::<i64>()[position as usize]
}

/// A fixed-shape tensor array of `rows` cells, physical shape `shape`, whose storage holds
/// `0..rows * cell_size`, cut from the middle of a larger array so that offsets matter.
fn array(shape: &[usize], permutation: Option<Vec<usize>>, rows: usize) -> FixedShapeTensorArray {
    let tensor_type =
        FixedShapeTensorType::try_new(DataType::Int64, shape.to_vec(), permutation, None).unwrap();
    let cell = tensor_type.list_size();
    let values = Int64Array::from_iter_values(-(cell as i64)..((rows + 1) * cell) as i64);
    let field = Arc::new(Field::new_list_field(DataType::Int64, true));
    let storage = FixedSizeListArray::new(field, cell as i32, Arc::new(values), None);
    FixedShapeTensorArray::try_new(tensor_type, storage.slice(1, rows)).unwrap()
}

/// A row-major int64 tensor of `shape` holding `0..count`.
fn row_major(shape: &[usize]) -> Tensor {
    let count: usize = shape.iter().product();
    let buffer = Buffer::from_vec((0..count as i64).collect::<Vec<_>>());
    Tensor::try_new_row_major(buffer, DType::Int64, shape.to_vec()).unwrap()
}

const SHAPES: [&[usize]; 4] = [&[2], &[2, 3], &[2, 3, 4], &[2, 3, 4, 5]];

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

// ---------------------------------------------------------------------------------------------
// Metadata and fields

#[test]
fn metadata_is_written_in_pyarrow_form() {
    let plain = FixedShapeTensorType::try_new(DataType::Float32, vec![2, 2], None, None).unwrap();
    insta::assert_snapshot!("metadata_shape_only", plain.metadata_json());
    let permuted =
        FixedShapeTensorType::try_new(DataType::Float32, vec![2, 3, 4], Some(vec![2, 0, 1]), None)
            .unwrap();
    insta::assert_snapshot!("metadata_with_permutation", permuted.metadata_json());
    let named = FixedShapeTensorType::try_new(
        DataType::Float32,
        vec![100, 200, 500],
        None,
        Some(["C", "H", "W"].map(String::from).to_vec()),
    )
    .unwrap();
    insta::assert_snapshot!("metadata_with_dim_names", named.metadata_json());
    let both = FixedShapeTensorType::try_new(
        DataType::Float32,
        vec![2, 2],
        Some(vec![0, 1]),
        Some(["x", "y"].map(String::from).to_vec()),
    )
    .unwrap();
    insta::assert_snapshot!(
        "metadata_with_permutation_and_dim_names",
        both.metadata_json()
    );
    let field = permuted.to_field("tensors", true);
    let metadata: std::collections::BTreeMap<_, _> = field.metadata().iter().collect();
    insta::assert_snapshot!(
        "field_of_permuted_type",
        format!(
            "{}: {}, nullable: {}\n{metadata:#?}",
            field.name(),
            field.data_type(),
            field.is_nullable()
        )
    );
}

#[test]
fn metadata_reads_what_pyarrow_and_arrow_rs_write() {
    let cases = [
        // PyArrow, no permutation.
        (r#"{"shape":[2,2]}"#, vec![2, 2], None, None),
        // PyArrow's from_tensor writes the identity permutation.
        (
            r#"{"shape":[2,2],"permutation":[0,1]}"#,
            vec![2, 2],
            Some(vec![0, 1]),
            None,
        ),
        // The specification's examples, with spaces.
        (
            r#"{ "shape": [100, 200, 500], "dim_names": ["C", "H", "W"]}"#,
            vec![100, 200, 500],
            None,
            Some(vec!["C", "H", "W"]),
        ),
        (
            r#"{ "shape": [100, 200, 500], "permutation": [2, 0, 1]}"#,
            vec![100, 200, 500],
            Some(vec![2, 0, 1]),
            None,
        ),
        // arrow-rs: explicit nulls and the key "permutations".
        (
            r#"{"shape":[2,2],"dim_names":null,"permutations":null}"#,
            vec![2, 2],
            None,
            None,
        ),
        (
            r#"{"shape":[2,2],"dim_names":null,"permutations":[1,0]}"#,
            vec![2, 2],
            Some(vec![1, 0]),
            None,
        ),
        // Unknown keys are ignored.
        (r#"{"shape":[3],"future_key":true}"#, vec![3], None, None),
    ];
    for (json, shape, permutation, names) in cases {
        let t = FixedShapeTensorType::from_metadata(DataType::Int8, json).unwrap();
        assert_eq!(t.shape(), shape.as_slice(), "{json}");
        assert_eq!(t.permutation(), permutation.as_deref(), "{json}");
        let names: Option<Vec<String>> = names.map(|n| n.into_iter().map(String::from).collect());
        assert_eq!(t.dim_names(), names.as_deref(), "{json}");
    }
}

#[test]
fn metadata_round_trips_through_its_json() {
    let metadata = FixedShapeTensorMetadata {
        shape: vec![4, 5],
        permutation: Some(vec![1, 0]),
        dim_names: Some(vec!["h".into(), "w".into()]),
    };
    assert_eq!(
        FixedShapeTensorMetadata::from_json(&metadata.to_json()).unwrap(),
        metadata
    );
}

#[test]
fn fields_round_trip_with_either_child_nullability() {
    let t =
        FixedShapeTensorType::try_new(DataType::UInt8, vec![2, 3], Some(vec![1, 0]), None).unwrap();
    let field = t.to_field("images", true);
    assert_eq!(
        field.metadata().get(EXTENSION_TYPE_NAME_KEY).unwrap(),
        EXTENSION_NAME
    );
    assert_eq!(
        field.metadata().get(EXTENSION_TYPE_METADATA_KEY).unwrap(),
        &t.metadata_json()
    );
    assert_eq!(FixedShapeTensorType::try_from_field(&field).unwrap(), t);

    let non_nullable_child =
        Field::new("images", t.storage_type(false), false).with_metadata(field.metadata().clone());
    assert_eq!(
        FixedShapeTensorType::try_from_field(&non_nullable_child).unwrap(),
        t
    );

    // arrow-rs's extension API.
    assert_eq!(
        field.try_extension_type::<FixedShapeTensorType>().unwrap(),
        t
    );
    let via_arrow_rs =
        Field::new("images", t.storage_type(true), true).with_extension_type(t.clone());
    assert_eq!(via_arrow_rs.metadata(), field.metadata());
}

#[test]
fn array_field_and_storage_rebuild_the_array() {
    let array = array(&[2, 2], Some(vec![1, 0]), 3);
    let field = array.field("t");
    let storage: ArrayRef = Arc::new(array.storage().clone());
    let again = FixedShapeTensorArray::try_from_field_and_array(&field, storage).unwrap();
    assert_eq!(again.extension_type(), array.extension_type());
    assert_eq!(again.len(), 3);
}

#[test]
fn invalid_types_and_storage_are_refused() {
    let bad = [
        FixedShapeTensorType::try_new(DataType::Int8, vec![2, 2], Some(vec![0, 0]), None),
        FixedShapeTensorType::try_new(DataType::Int8, vec![2, 2], Some(vec![0, 1, 2]), None),
        FixedShapeTensorType::try_new(DataType::Int8, vec![2, 2], None, Some(vec!["x".into()])),
        FixedShapeTensorType::try_new(DataType::Int8, vec![1 << 20, 1 << 20], None, None),
        FixedShapeTensorType::from_metadata(DataType::Int8, r#"{"permutation":[0]}"#),
        FixedShapeTensorType::from_metadata(DataType::Int8, r#"{"shape":[-1]}"#),
        FixedShapeTensorType::from_metadata(DataType::Int8, "not json"),
    ];
    for result in bad {
        assert!(
            matches!(result, Err(Error::InvalidExtension { .. })),
            "{result:?}"
        );
    }

    let t = FixedShapeTensorType::try_new(DataType::Int64, vec![2, 2], None, None).unwrap();
    let field = Arc::new(Field::new_list_field(DataType::Int64, true));
    let wrong_size =
        FixedSizeListArray::new(field, 3, Arc::new(Int64Array::from_iter_values(0..6)), None);
    assert!(matches!(
        FixedShapeTensorArray::try_new(t.clone(), wrong_size),
        Err(Error::InvalidExtension { .. })
    ));

    let plain = Field::new("x", t.storage_type(true), true);
    assert!(matches!(
        FixedShapeTensorType::try_from_field(&plain),
        Err(Error::InvalidExtension { .. })
    ));
    let not_a_list: ArrayRef = Arc::new(Int64Array::from_iter_values(0..4));
    assert!(matches!(
        FixedShapeTensorArray::try_from_field_and_array(&t.to_field("x", true), not_a_list),
        Err(Error::InvalidExtension { .. })
    ));
}

#[test]
fn the_worked_example_of_the_docs_holds() {
    // docs/fixed-shape-tensor.md: shape [2, 3, 4], permutation [2, 0, 1], names [x, y, z].
    let names = ["x", "y", "z"].map(String::from).to_vec();
    let t = FixedShapeTensorType::try_new(
        DataType::Int32,
        vec![2, 3, 4],
        Some(vec![2, 0, 1]),
        Some(names),
    )
    .unwrap();
    assert_eq!(t.logical_shape(), [4, 2, 3]);
    assert_eq!(t.logical_dim_names().unwrap(), ["z", "x", "y"]);
    assert_eq!(spec_value(0, &[3, 1, 2], &[2, 3, 4], &[2, 0, 1]), 23);

    let physical = Tensor::try_new_row_major(
        Buffer::from_vec((0..48i32).collect::<Vec<_>>()),
        DType::Int32,
        vec![2, 2, 3, 4],
    )
    .unwrap();
    let logical = physical.permuted(&[0, 3, 1, 2]).unwrap();
    let column =
        FixedShapeTensorArray::from_tensor(&logical, TensorToArrayOptions::default()).unwrap();
    assert_eq!(
        column.extension_type().metadata_json(),
        r#"{"shape":[2,3,4],"permutation":[2,0,1]}"#
    );
    let tensor = column.to_tensor(ArrayToTensorOptions::default()).unwrap();
    assert_eq!(tensor.shape(), &[2, 4, 2, 3]);
    assert_eq!(tensor.strides(), &[24, 1, 12, 4]);
}

mod sweep {
    use proptest::prelude::*;

    use super::*;

    /// A view of a row-major tensor: dimensions reordered by `order`, then each dimension
    /// stepped by 1, 2 or -1 (reversed), as numpy's `x.transpose(order)[::s0, ::s1, ...]`.
    fn view(shape: &[usize], order: &[usize], steps: &[i8]) -> Tensor {
        let base = row_major(shape).permuted(order).unwrap();
        let mut shape = base.shape().to_vec();
        let mut strides = base.strides().to_vec();
        let mut offset = base.offset() as isize;
        for (dim, &step) in steps.iter().enumerate() {
            match step {
                2 => {
                    shape[dim] = shape[dim].div_ceil(2);
                    strides[dim] *= 2;
                }
                -1 => {
                    offset += (shape[dim] as isize - 1) * strides[dim];
                    strides[dim] = -strides[dim];
                }
                _ => {}
            }
        }
        Tensor::try_new(
            base.buffer().clone(),
            DType::Int64,
            shape,
            strides,
            offset as usize,
        )
        .unwrap()
    }

    fn case() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Vec<i8>)> {
        prop::collection::vec(1usize..5, 1..5).prop_flat_map(|shape| {
            let ndim = shape.len();
            let order = Just((0..ndim).collect::<Vec<_>>()).prop_shuffle();
            let steps = prop::collection::vec(prop::sample::select(vec![1i8, 1, 2, -1]), ndim);
            (Just(shape), order, steps)
        })
    }

    proptest! {
        /// Whatever the strides, `from_tensor` either refuses with a layout error or gives a
        /// column whose tensor has exactly the input's elements; without a copy it shares memory.
        #[test]
        fn from_tensor_never_misreads_a_view((shape, order, steps) in case()) {
            let input = view(&shape, &order, &steps);
            for allow_copy in [false, true] {
                match FixedShapeTensorArray::from_tensor(&input, TensorToArrayOptions { allow_copy }) {
                    Ok(array) => {
                        let back = array.to_tensor(ArrayToTensorOptions::default()).unwrap();
                        prop_assert_eq!(back.shape(), input.shape());
                        for index in indices(input.shape()) {
                            prop_assert_eq!(element(&back, &index), element(&input, &index));
                        }
                        if !allow_copy && !input.is_empty() {
                            prop_assert_eq!(back.data_ptr(), input.data_ptr());
                        }
                    }
                    Err(Error::NotFirstMajor { .. }) => {}
                    Err(Error::GappedStrides { .. }) => prop_assert!(!allow_copy),
                    Err(other) => prop_assert!(false, "unexpected error {other}"),
                }
            }
        }
    }
}
