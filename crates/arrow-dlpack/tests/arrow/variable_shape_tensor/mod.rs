//! `arrow.variable_shape_tensor`: metadata in every spelling, fields, rows as zero-copy tensors
//! checked element by element against the specification's permutation, building from tensors,
//! padding, and hostile storage refused with errors.

use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, Int32Array, Int64Array, ListArray, StructArray,
};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_dlpack::{
    ArrayToTensorOptions, Error, NullLocation, PadValue, Tensor, VARIABLE_SHAPE_TENSOR_NAME,
    VariableShapePadOptions, VariableShapeTensorArray, VariableShapeTensorMetadata,
    VariableShapeTensorType,
};
use arrow_schema::extension::{EXTENSION_TYPE_METADATA_KEY, EXTENSION_TYPE_NAME_KEY};
use arrow_schema::{DataType, Field, Fields};

mod hostile;

/// A row-major int64 tensor of `shape` holding `start..`.
fn counting(shape: &[usize], start: i64) -> Tensor {
    let count: usize = shape.iter().product();
    Tensor::from_vec((start..start + count as i64).collect(), shape.to_vec()).unwrap()
}

/// Every element of `tensor` (int64), in row-major order of its logical index.
fn elements(tensor: &Tensor) -> Vec<i64> {
    tensor.iter::<i64>().unwrap().collect()
}

/// A storage struct of int64 `data` lists and int32 `shape` lists of `ndim`, with optional
/// struct nulls, as a producer that skipped every check might write it.
pub(crate) fn storage(
    lists: &[Vec<i64>],
    shapes: &[Vec<i32>],
    ndim: i32,
    nulls: Option<NullBuffer>,
) -> StructArray {
    let offsets = OffsetBuffer::from_lengths(lists.iter().map(Vec::len));
    let values = Int64Array::from(lists.concat());
    let item = Arc::new(Field::new_list_field(DataType::Int64, true));
    let data = ListArray::new(item, offsets, Arc::new(values), None);
    let extents = Int32Array::from(shapes.concat());
    let shape_item = Arc::new(Field::new_list_field(DataType::Int32, true));
    let shape = FixedSizeListArray::new(shape_item, ndim, Arc::new(extents), None);
    let fields = Fields::from(vec![
        Field::new("data", data.data_type().clone(), true),
        Field::new("shape", shape.data_type().clone(), true),
    ]);
    StructArray::new(fields, vec![Arc::new(data), Arc::new(shape)], nulls)
}

fn plain_type(ndim: usize) -> VariableShapeTensorType {
    VariableShapeTensorType::try_new(DataType::Int64, ndim, None, None, None).unwrap()
}

#[test]
fn metadata_is_written_with_the_spec_keys_and_absent_keys_omitted() {
    let written = |dim_names, permutation, uniform_shape| {
        VariableShapeTensorType::try_new(
            DataType::Float32,
            2,
            dim_names,
            permutation,
            uniform_shape,
        )
        .unwrap()
        .metadata_json()
    };
    insta::assert_snapshot!("metadata_empty", written(None, None, None));
    insta::assert_snapshot!(
        "metadata_every_key",
        written(
            Some(vec!["H".into(), "W".into()]),
            Some(vec![1, 0]),
            Some(vec![Some(400), None]),
        )
    );
    insta::assert_snapshot!(
        "metadata_permutation_only",
        written(None, Some(vec![1, 0]), None)
    );
}

#[test]
fn metadata_reads_what_pyarrow_and_arrow_rs_write() {
    let read = |json: &str| VariableShapeTensorType::from_metadata(DataType::Int8, 2, json);
    // arrow-rs: the misspelled key and explicit nulls.
    let arrow_rs = read(r#"{"dim_names":null,"permutations":[1,0],"uniform_shape":null}"#).unwrap();
    assert_eq!(arrow_rs.permutation(), Some(&[1, 0][..]));
    assert_eq!(arrow_rs.dim_names(), None);
    // Re-written with the specification's key.
    assert_eq!(arrow_rs.metadata_json(), r#"{"permutation":[1,0]}"#);
    // The specification's form, unknown keys ignored.
    let spec =
        read(r#"{"permutation":[1,0],"dim_names":["a","b"],"uniform_shape":[null,3],"x":1}"#)
            .unwrap();
    assert_eq!(spec.uniform_shape(), Some(&[None, Some(3)][..]));
    assert_eq!(spec.dim_names().unwrap(), ["a", "b"]);
    // No metadata at all, and an empty object.
    assert_eq!(read("").unwrap().as_metadata(), &Default::default());
    assert_eq!(read("{}").unwrap().as_metadata(), &Default::default());
    // Both spellings at once are ambiguous.
    assert!(read(r#"{"permutation":[0,1],"permutations":[1,0]}"#).is_err());
}

#[test]
fn invalid_metadata_is_refused_with_its_reason() {
    let cases = [
        r#"{"permutation":[0,0]}"#,
        r#"{"permutation":[0,1,2]}"#,
        r#"{"dim_names":["x"]}"#,
        r#"{"uniform_shape":[1]}"#,
        r#"{"uniform_shape":[-1,null]}"#,
        r#"{"uniform_shape":[1.5,null]}"#,
        r#"{"dim_names":"x"}"#,
        "not json",
    ];
    let listing: String = cases
        .iter()
        .map(|json| {
            let error =
                VariableShapeTensorType::from_metadata(DataType::Int8, 2, json).unwrap_err();
            assert!(
                matches!(error, Error::InvalidVariableShapeTensor { .. }),
                "{error:?}"
            );
            format!("{json}\n  {error}\n")
        })
        .collect();
    insta::assert_snapshot!(listing);
}

#[test]
fn fields_carry_the_extension_and_round_trip() {
    let t = VariableShapeTensorType::try_new(
        DataType::Float64,
        3,
        Some(vec!["H".into(), "W".into(), "C".into()]),
        Some(vec![2, 0, 1]),
        Some(vec![None, None, Some(3)]),
    )
    .unwrap();
    let field = t.to_field("images", true);
    assert_eq!(
        field.metadata().get(EXTENSION_TYPE_NAME_KEY).unwrap(),
        VARIABLE_SHAPE_TENSOR_NAME
    );
    assert_eq!(
        field.metadata().get(EXTENSION_TYPE_METADATA_KEY).unwrap(),
        r#"{"dim_names":["H","W","C"],"permutation":[2,0,1],"uniform_shape":[null,null,3]}"#
    );
    assert_eq!(VariableShapeTensorType::try_from_field(&field).unwrap(), t);
    // arrow-rs's extension API reads it too.
    let through_arrow_rs = field
        .try_extension_type::<VariableShapeTensorType>()
        .unwrap();
    assert_eq!(through_arrow_rs, t);
    // A field without metadata has no optional keys.
    let bare =
        Field::new("x", t.storage_type(), true).with_metadata(std::collections::HashMap::from([(
            EXTENSION_TYPE_NAME_KEY.to_string(),
            VARIABLE_SHAPE_TENSOR_NAME.to_string(),
        )]));
    assert_eq!(
        VariableShapeTensorType::try_from_field(&bare)
            .unwrap()
            .ndim(),
        3
    );
    // A plain struct field is not the extension.
    assert!(
        VariableShapeTensorType::try_from_field(&Field::new("x", t.storage_type(), true)).is_err()
    );
}

#[test]
fn rows_are_zero_copy_views_of_their_own_shape() {
    let tensors = [
        counting(&[2, 3], 0),
        counting(&[4, 1], 100),
        counting(&[0, 5], 0),
    ];
    let array = VariableShapeTensorArray::from_tensors(&tensors, Default::default()).unwrap();
    assert_eq!(array.len(), 3);
    assert_eq!(array.ndim(), 2);
    let data = array
        .storage()
        .column(0)
        .as_any()
        .downcast_ref::<ListArray>()
        .unwrap();
    let base = data.values().to_data().buffers()[0].as_ptr();
    let mut expected_offset = 0;
    for (index, tensor) in tensors.iter().enumerate() {
        let row = array.row(index).unwrap();
        assert_eq!(row.shape(), tensor.shape());
        assert_eq!(row.strides(), tensor.strides());
        assert!(row.is_read_only());
        assert_eq!(elements(&row), elements(tensor));
        if !tensor.is_empty() {
            // The row starts inside the column's one data buffer: a view, not a copy.
            assert_eq!(row.data_ptr(), base.wrapping_add(expected_offset * 8));
        }
        expected_offset += tensor.len();
        assert_eq!(array.shape(index).unwrap(), tensor.shape());
    }
}

#[test]
fn rows_follow_the_spec_permutation_for_every_permutation_of_rank_3() {
    let perms = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    for permutation in perms {
        let t = VariableShapeTensorType::try_new(
            DataType::Int64,
            3,
            Some(vec!["a".into(), "b".into(), "c".into()]),
            Some(permutation.to_vec()),
            None,
        )
        .unwrap();
        // Physical shapes stored row-major; logical dimension i is physical permutation[i].
        let physical = [[2usize, 3, 4], [1, 5, 2]];
        let lists: Vec<Vec<i64>> = physical
            .iter()
            .map(|shape| (0..shape.iter().product::<usize>() as i64).collect())
            .collect();
        let shapes: Vec<Vec<i32>> = physical
            .iter()
            .map(|shape| shape.iter().map(|&e| e as i32).collect())
            .collect();
        let array =
            VariableShapeTensorArray::try_new(t, storage(&lists, &shapes, 3, None)).unwrap();
        for (row, shape) in physical.iter().enumerate() {
            let tensor = array.row(row).unwrap();
            let logical: Vec<usize> = permutation.iter().map(|&p| shape[p]).collect();
            assert_eq!(tensor.shape(), &logical[..], "{permutation:?}");
            assert_eq!(array.logical_shape(row).unwrap(), logical);
            let names: Vec<&str> = permutation.iter().map(|&p| ["a", "b", "c"][p]).collect();
            assert_eq!(tensor.dim_names().unwrap(), &names[..]);
            // Logical index (i0, i1, i2) is physical index p with p[permutation[k]] = i_k.
            for i0 in 0..logical[0] {
                for i1 in 0..logical[1] {
                    for i2 in 0..logical[2] {
                        let mut p = [0usize; 3];
                        for (k, &i) in [i0, i1, i2].iter().enumerate() {
                            p[permutation[k]] = i;
                        }
                        let flat = (p[0] * shape[1] + p[1]) * shape[2] + p[2];
                        assert_eq!(
                            tensor.get::<i64>(&[i0, i1, i2]).unwrap(),
                            flat as i64,
                            "{permutation:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn from_tensors_stores_the_physical_layout_and_rows_give_back_the_logical_tensors() {
    let metadata = VariableShapeTensorMetadata {
        permutation: Some(vec![1, 2, 0]),
        dim_names: Some(vec!["C".into(), "H".into(), "W".into()]),
        uniform_shape: Some(vec![Some(3), None, None]),
    };
    // Logical H x W x C images; stored C x H x W.
    let images = [counting(&[2, 4, 3], 0), counting(&[5, 1, 3], 1000)];
    let array = VariableShapeTensorArray::from_tensors(&images, metadata).unwrap();
    assert_eq!(array.shape(0).unwrap(), vec![3, 2, 4]);
    assert_eq!(array.shape(1).unwrap(), vec![3, 5, 1]);
    for (index, image) in images.iter().enumerate() {
        let row = array.row(index).unwrap();
        assert_eq!(row.shape(), image.shape());
        assert_eq!(elements(&row), elements(image));
        assert_eq!(row.dim_names().unwrap(), ["H", "W", "C"]);
    }
    // Strided (transposed) input is copied in its logical order too.
    let transposed = counting(&[3, 2, 4], 0).permuted(&[1, 2, 0]).unwrap();
    let array = VariableShapeTensorArray::from_tensors(
        std::slice::from_ref(&transposed),
        Default::default(),
    )
    .unwrap();
    assert_eq!(elements(&array.row(0).unwrap()), elements(&transposed));
}

#[test]
fn from_tensors_refuses_mixed_dtypes_ranks_and_an_empty_list() {
    let a = counting(&[2], 0);
    let b = Tensor::from_vec(vec![1.0f32], vec![1]).unwrap();
    let c = counting(&[1, 1], 0);
    for tensors in [vec![a.clone(), b], vec![a.clone(), c], vec![]] {
        let error =
            VariableShapeTensorArray::from_tensors(&tensors, Default::default()).unwrap_err();
        assert!(
            matches!(error, Error::InvalidVariableShapeTensor { .. }),
            "{error}"
        );
    }
    let uniform = VariableShapeTensorMetadata {
        uniform_shape: Some(vec![Some(3)]),
        ..Default::default()
    };
    assert!(matches!(
        VariableShapeTensorArray::from_tensors(&[a], uniform),
        Err(Error::InvalidVariableShapeTensor { .. })
    ));
    // An empty column needs its type.
    let empty = VariableShapeTensorArray::from_tensors_with_type(plain_type(2), &[]).unwrap();
    assert!(empty.is_empty());
    let (padded, shapes) = empty.to_padded(Default::default()).unwrap();
    assert_eq!(padded.shape(), &[0, 0, 0]);
    assert_eq!(shapes.shape(), &[0, 2]);
}

#[test]
fn null_rows_have_no_tensor_and_pad_only_when_allowed() {
    let a = counting(&[1, 2], 1);
    let b = counting(&[2, 1], 10);
    let array = VariableShapeTensorArray::from_optional_tensors(
        &[Some(a.clone()), None, Some(b.clone())],
        Default::default(),
    )
    .unwrap();
    assert_eq!(array.null_count(), 1);
    assert!(array.is_null(1));
    assert!(matches!(array.row(1), Err(Error::NullTensor { index: 1 })));
    assert!(matches!(
        array.shape(1),
        Err(Error::NullTensor { index: 1 })
    ));
    assert!(matches!(
        array.row(3),
        Err(Error::RowsOutOfRange {
            start: 3,
            end: 4,
            rows: 3
        })
    ));
    assert_eq!(elements(&array.row(2).unwrap()), [10, 11]);
    assert!(matches!(
        array.to_padded(Default::default()),
        Err(Error::Nulls {
            null_count: 1,
            location: NullLocation::Array { depth: 0 }
        })
    ));
    let options = VariableShapePadOptions {
        pad_value: PadValue::Int(-1),
        allow_nulls: true,
    };
    let (padded, shapes) = array.to_padded(options).unwrap();
    assert_eq!(padded.shape(), &[3, 2, 2]);
    assert_eq!(
        padded.as_slice::<i64>().unwrap(),
        &[1, 2, -1, -1, -1, -1, -1, -1, 10, -1, 11, -1]
    );
    assert_eq!(shapes.as_slice::<i32>().unwrap(), &[1, 2, 0, 0, 2, 1]);
    // A slice that leaves the null row out pads without allow_nulls.
    let tail = array.slice(2, 1);
    assert_eq!(tail.null_count(), 0);
    let (padded, _) = tail.to_padded(Default::default()).unwrap();
    assert_eq!(padded.as_slice::<i64>().unwrap(), &[10, 11]);
}

#[test]
fn nulls_inside_a_row_are_refused_unless_allowed() {
    let t = plain_type(1);
    let offsets = OffsetBuffer::from_lengths([2, 2]);
    let values = Int64Array::from(vec![Some(1), Some(2), None, Some(4)]);
    let item = Arc::new(Field::new_list_field(DataType::Int64, true));
    let data = ListArray::new(item, offsets, Arc::new(values), None);
    let shape = FixedSizeListArray::new(
        Arc::new(Field::new_list_field(DataType::Int32, true)),
        1,
        Arc::new(Int32Array::from(vec![2, 2])),
        None,
    );
    let DataType::Struct(fields) = t.storage_type() else {
        unreachable!()
    };
    let storage = StructArray::new(
        fields,
        vec![Arc::new(data) as ArrayRef, Arc::new(shape)],
        None,
    );
    let array = VariableShapeTensorArray::try_new(t, storage).unwrap();
    assert_eq!(elements(&array.row(0).unwrap()), [1, 2]);
    assert!(matches!(
        array.row(1),
        Err(Error::Nulls {
            null_count: 1,
            location: NullLocation::Array { depth: 1 }
        })
    ));
    let allowed = ArrayToTensorOptions {
        allow_nulls: true,
        ..Default::default()
    };
    assert_eq!(array.row_with(1, allowed).unwrap().shape(), &[2]);
}

#[test]
fn to_padded_pads_permuted_rows_in_logical_order() {
    let metadata = VariableShapeTensorMetadata {
        permutation: Some(vec![1, 0]),
        ..Default::default()
    };
    let a = counting(&[1, 3], 0);
    let b = counting(&[2, 2], 10);
    let array = VariableShapeTensorArray::from_tensors(&[a, b], metadata).unwrap();
    let (padded, shapes) = array
        .to_padded(VariableShapePadOptions {
            pad_value: PadValue::Int(7),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(padded.shape(), &[2, 2, 3]);
    assert!(!padded.is_read_only());
    assert_eq!(
        padded.as_slice::<i64>().unwrap(),
        &[0, 1, 2, 7, 7, 7, 10, 11, 7, 12, 13, 7]
    );
    assert_eq!(shapes.as_slice::<i32>().unwrap(), &[1, 3, 2, 2]);
    assert!(matches!(
        array.to_padded(VariableShapePadOptions {
            pad_value: PadValue::Float(0.5),
            ..Default::default()
        }),
        Err(Error::PadValue { .. })
    ));
}

#[test]
fn zero_dimensional_rows_are_scalars() {
    let scalars = [counting(&[], 5), counting(&[], 6)];
    let array = VariableShapeTensorArray::from_tensors(&scalars, Default::default()).unwrap();
    assert_eq!(array.ndim(), 0);
    assert_eq!(array.row(1).unwrap().get::<i64>(&[]).unwrap(), 6);
    let (padded, shapes) = array.to_padded(Default::default()).unwrap();
    assert_eq!(padded.as_slice::<i64>().unwrap(), &[5, 6]);
    assert_eq!(shapes.shape(), &[2, 0]);
}

#[test]
fn field_and_storage_rebuild_the_array_and_slices_keep_their_rows() {
    let tensors = [counting(&[3], 0), counting(&[1], 10), counting(&[2], 20)];
    let array = VariableShapeTensorArray::from_tensors(&tensors, Default::default()).unwrap();
    let (field, storage) = array.clone().into_field_and_array("x");
    let again = VariableShapeTensorArray::try_from_field_and_array(&field, storage).unwrap();
    assert_eq!(again.extension_type(), array.extension_type());
    let sliced = again.slice(1, 2);
    assert_eq!(elements(&sliced.row(0).unwrap()), [10]);
    assert_eq!(elements(&sliced.row(1).unwrap()), [20, 21]);
    let not_a_struct: ArrayRef = Arc::new(Int64Array::from(vec![1]));
    assert!(matches!(
        VariableShapeTensorArray::try_from_field_and_array(&field, not_a_struct),
        Err(Error::InvalidVariableShapeTensor { .. })
    ));
}

#[test]
fn to_ragged_views_rows_that_differ_only_in_their_first_dimension() {
    let rows = [
        counting(&[2, 3], 0),
        counting(&[0, 3], 0),
        counting(&[4, 3], 100),
    ];
    let array = VariableShapeTensorArray::from_tensors(&rows, Default::default()).unwrap();
    let ragged = array.to_ragged(ArrayToTensorOptions::default()).unwrap();
    assert_eq!(ragged.values().shape(), &[6, 3]);
    assert_eq!(ragged.offsets().as_slice::<i32>().unwrap(), &[0, 2, 2, 6]);
    // Zero-copy: the values start where row 0 does.
    assert_eq!(ragged.values().data_ptr(), array.row(0).unwrap().data_ptr());
    for (index, row) in rows.iter().enumerate() {
        assert_eq!(elements(&ragged.row(index).unwrap()), elements(row));
    }
    // A slice starts at its first row.
    let tail = array
        .slice(2, 1)
        .to_ragged(ArrayToTensorOptions::default())
        .unwrap();
    assert_eq!(elements(tail.values()), elements(&rows[2]));
    assert_eq!(tail.offsets().as_slice::<i32>().unwrap(), &[0, 4]);
}

#[test]
fn to_ragged_refuses_what_is_not_ragged() {
    let mixed = VariableShapeTensorArray::from_tensors(
        &[counting(&[2, 3], 0), counting(&[2, 4], 0)],
        Default::default(),
    )
    .unwrap();
    assert!(matches!(
        mixed.to_ragged(ArrayToTensorOptions::default()),
        Err(Error::MixedRaggedPieces { index: 1, .. })
    ));
    let a = counting(&[2], 0);
    let with_null = VariableShapeTensorArray::from_optional_tensors(
        &[Some(a.clone()), None],
        Default::default(),
    )
    .unwrap();
    assert!(matches!(
        with_null.to_ragged(ArrayToTensorOptions::default()),
        Err(Error::Nulls { null_count: 1, .. })
    ));
    let scalars =
        VariableShapeTensorArray::from_tensors(&[counting(&[], 0)], Default::default()).unwrap();
    assert!(matches!(
        scalars.to_ragged(ArrayToTensorOptions::default()),
        Err(Error::ZeroDimensional)
    ));
    // Permuted rows are not stored one after another in logical order: a copy, when allowed.
    let metadata = VariableShapeTensorMetadata {
        permutation: Some(vec![1, 0]),
        ..Default::default()
    };
    let rows = [counting(&[2, 3], 0), counting(&[1, 3], 50)];
    let permuted = VariableShapeTensorArray::from_tensors(&rows, metadata).unwrap();
    assert!(matches!(
        permuted.to_ragged(ArrayToTensorOptions::default()),
        Err(Error::CopyRequired { .. })
    ));
    let copy = permuted
        .to_ragged(ArrayToTensorOptions {
            allow_copy: true,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(copy.values().shape(), &[3, 3]);
    assert_eq!(elements(copy.values()), [0, 1, 2, 3, 4, 5, 50, 51, 52]);
}
