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

mod from_tensor;
mod to_tensor;

// ---------------------------------------------------------------------------------------------
// Helpers, written from the specification alone.

/// Two cells of physical shape [2, 3, 4] holding 0..24 and 24..48, built from the logical view
/// of permutation [2, 0, 1]: logical index (i, j, k) of a cell is its physical index (j, k, i).
/// Shared with `interop.rs`.
pub(crate) fn permuted_int32_cells() -> FixedShapeTensorArray {
    let physical = Tensor::try_new_row_major(
        Buffer::from_vec((0..48i32).collect::<Vec<_>>()),
        DType::Int32,
        vec![2, 2, 3, 4],
    )
    .unwrap();
    let logical = physical.permuted(&[0, 3, 1, 2]).unwrap();
    FixedShapeTensorArray::from_tensor(&logical, TensorToArrayOptions::default()).unwrap()
}

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

    let column = permuted_int32_cells();
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
