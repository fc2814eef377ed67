//! Every error message, produced by a real call where one exists, in one snapshot.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Date32Array, FixedSizeListArray, Int32Array, RecordBatch, StringArray,
};
use arrow_buffer::{Buffer, NullBuffer};
use arrow_dlpack::{
    ArrayToTensorOptions, ColumnTensorOptions, ConcatOptions, Error, FixedShapeTensorArray,
    FixedShapeTensorType, Table, TableToTensorOptions, TensorToArrayOptions,
    VariableShapeTensorArray, VariableShapeTensorType, array_to_tensor, arrow_type_of,
    columns_to_tensor, concat_chunks, table_to_tensor, table_to_tensors, tensor_to_array,
    tensor_to_fixed_size_list,
};
use arrow_dlpack_tensor::{DType, Tensor};
use arrow_schema::{ArrowError, DataType, Field};

fn tensor(shape: &[usize], strides: &[isize], dtype: DType) -> Tensor {
    Tensor::try_new(
        Buffer::from_vec(vec![0u64; 64]),
        dtype,
        shape.to_vec(),
        strides.to_vec(),
        0,
    )
    .unwrap()
}

fn list(values: ArrayRef, size: i32, nulls: Option<NullBuffer>) -> FixedSizeListArray {
    let field = Arc::new(Field::new_list_field(values.data_type().clone(), true));
    FixedSizeListArray::new(field, size, values, nulls)
}

/// The variant's name, so that the snapshot shows which variant each message belongs to.
fn variant(error: &Error) -> &'static str {
    match error {
        Error::Tensor(_) => "Tensor",
        Error::UnsupportedType { .. } => "UnsupportedType",
        Error::Nulls { .. } => "Nulls",
        Error::NotOneDimensional { .. } => "NotOneDimensional",
        Error::TooFewDimensions { .. } => "TooFewDimensions",
        Error::NotRowMajor { .. } => "NotRowMajor",
        Error::NotFirstMajor { .. } => "NotFirstMajor",
        Error::ZeroDimensional => "ZeroDimensional",
        Error::GappedStrides { .. } => "GappedStrides",
        Error::CopyRequired { .. } => "CopyRequired",
        Error::UnsupportedDType { .. } => "UnsupportedDType",
        Error::InvalidExtension { .. } => "InvalidExtension",
        Error::ListSizeOverflow { .. } => "ListSizeOverflow",
        Error::MixedChunkTypes { .. } => "MixedChunkTypes",
        Error::NoChunks => "NoChunks",
        Error::NoColumns => "NoColumns",
        Error::UnsupportedColumnType { .. } => "UnsupportedColumnType",
        Error::ColumnNulls { .. } => "ColumnNulls",
        Error::TableNulls { .. } => "TableNulls",
        Error::ColumnLength { .. } => "ColumnLength",
        Error::ColumnNames { .. } => "ColumnNames",
        Error::InvalidVariableShapeTensor { .. } => "InvalidVariableShapeTensor",
        Error::NullTensor { .. } => "NullTensor",
        Error::Arrow(_) => "Arrow",
        other => panic!("a variant this test does not know: {other:?}; add it here"),
    }
}

const EVERY_VARIANT: [&str; 24] = [
    "Tensor",
    "UnsupportedType",
    "Nulls",
    "NotOneDimensional",
    "TooFewDimensions",
    "NotRowMajor",
    "NotFirstMajor",
    "ZeroDimensional",
    "GappedStrides",
    "CopyRequired",
    "UnsupportedDType",
    "InvalidExtension",
    "ListSizeOverflow",
    "MixedChunkTypes",
    "NoChunks",
    "NoColumns",
    "UnsupportedColumnType",
    "ColumnNulls",
    "TableNulls",
    "ColumnLength",
    "ColumnNames",
    "InvalidVariableShapeTensor",
    "NullTensor",
    "Arrow",
];

#[test]
fn every_error_message() {
    let float_type =
        FixedShapeTensorType::try_new(DataType::Float32, vec![2, 2], None, None).unwrap();
    let scalar = Tensor::from_vec(vec![1i32], vec![]).unwrap();
    let scalars = VariableShapeTensorArray::from_optional_tensors(
        &[Some(scalar.clone()), None],
        Default::default(),
    )
    .unwrap();
    let errors: Vec<Error> = vec![
        Error::from(arrow_dlpack_tensor::Error::Overflow {
            what: "the element count",
        }),
        array_to_tensor(&Date32Array::from(vec![1]), ArrayToTensorOptions::default()).unwrap_err(),
        array_to_tensor(
            &list(Arc::new(StringArray::from(vec!["a", "b"])), 2, None),
            ArrayToTensorOptions::default(),
        )
        .unwrap_err(),
        array_to_tensor(
            &Int32Array::from(vec![Some(1), None, None]),
            ArrayToTensorOptions::default(),
        )
        .unwrap_err(),
        array_to_tensor(
            &list(Arc::new(Int32Array::from(vec![Some(1), None])), 2, None),
            ArrayToTensorOptions::default(),
        )
        .unwrap_err(),
        tensor_to_array(
            &tensor(&[2, 3], &[3, 1], DType::Int32),
            TensorToArrayOptions::default(),
        )
        .unwrap_err(),
        tensor_to_fixed_size_list(
            &tensor(&[6], &[1], DType::Int32),
            TensorToArrayOptions::default(),
        )
        .unwrap_err(),
        tensor_to_array(
            &tensor(&[4], &[2], DType::Int32),
            TensorToArrayOptions::default(),
        )
        .unwrap_err(),
        FixedShapeTensorArray::from_tensor(
            &tensor(&[3, 2], &[1, 3], DType::Int32),
            TensorToArrayOptions::default(),
        )
        .unwrap_err(),
        FixedShapeTensorArray::from_tensor(
            &tensor(&[], &[], DType::Int32),
            TensorToArrayOptions::default(),
        )
        .unwrap_err(),
        FixedShapeTensorArray::from_tensor(
            &tensor(&[2, 2], &[4, 1], DType::Int32),
            TensorToArrayOptions::default(),
        )
        .unwrap_err(),
        concat_chunks(
            &[
                Arc::new(Int32Array::from(vec![1])),
                Arc::new(Int32Array::from(vec![2])),
            ],
            ConcatOptions::default(),
        )
        .unwrap_err(),
        array_to_tensor(
            &BooleanArray::from(vec![true]),
            ArrayToTensorOptions::default(),
        )
        .unwrap_err(),
        tensor_to_array(
            &tensor(&[2], &[1], DType::Bool),
            TensorToArrayOptions::default(),
        )
        .unwrap_err(),
        arrow_type_of(DType::Bool).unwrap_err(),
        tensor_to_array(
            &tensor(&[2], &[1], DType::BFloat16),
            TensorToArrayOptions { allow_copy: true },
        )
        .unwrap_err(),
        tensor_to_array(
            &tensor(&[2], &[1], DType::Complex64),
            TensorToArrayOptions::default(),
        )
        .unwrap_err(),
        FixedShapeTensorType::try_new(DataType::Int8, vec![2, 3], Some(vec![1, 1]), None)
            .unwrap_err(),
        FixedShapeTensorType::try_new(DataType::Int8, vec![2, 3], None, Some(vec!["x".into()]))
            .unwrap_err(),
        FixedShapeTensorType::try_new(DataType::Int8, vec![65536, 65536], None, None).unwrap_err(),
        FixedShapeTensorType::from_metadata(DataType::Int8, r#"{"shape":[2,-2]}"#).unwrap_err(),
        FixedShapeTensorType::try_from_field(&Field::new("plain", DataType::Int8, true))
            .unwrap_err(),
        FixedShapeTensorArray::try_new(
            float_type.clone(),
            list(Arc::new(Int32Array::from_iter_values(0..4)), 4, None),
        )
        .unwrap_err(),
        tensor_to_fixed_size_list(
            &tensor(&[0, 1 << 31], &[1, 1], DType::Int8),
            TensorToArrayOptions::default(),
        )
        .unwrap_err(),
        concat_chunks(
            &[
                Arc::new(Int32Array::from(vec![1])),
                Arc::new(StringArray::from(vec!["a"])),
            ],
            ConcatOptions { allow_copy: true },
        )
        .unwrap_err(),
        concat_chunks(&[], ConcatOptions { allow_copy: true }).unwrap_err(),
        columns_to_tensor(&[] as &[&str], &[], TableToTensorOptions::default()).unwrap_err(),
        table_to_tensor(
            &Table::from(
                &RecordBatch::try_from_iter([(
                    "name",
                    Arc::new(StringArray::from(vec!["a"])) as ArrayRef,
                )])
                .unwrap(),
            ),
            TableToTensorOptions::default(),
        )
        .unwrap_err(),
        table_to_tensor(
            &Table::from(
                &RecordBatch::try_from_iter([(
                    "x",
                    Arc::new(Int32Array::from(vec![None, Some(1)])) as ArrayRef,
                )])
                .unwrap(),
            ),
            TableToTensorOptions::default(),
        )
        .unwrap_err(),
        table_to_tensors(
            &Table::try_from_columns(
                &["vectors"],
                &[Arc::new(list(
                    Arc::new(Int32Array::from(vec![Some(1), None])),
                    2,
                    None,
                )) as ArrayRef],
            )
            .unwrap(),
            ColumnTensorOptions::default(),
        )
        .unwrap_err(),
        columns_to_tensor(
            &["a", "b"],
            &[
                Arc::new(Int32Array::from(vec![1, 2])),
                Arc::new(Int32Array::from(vec![1])),
            ],
            TableToTensorOptions::default(),
        )
        .unwrap_err(),
        columns_to_tensor(
            &["a", "b"],
            &[Arc::new(Int32Array::from(vec![1])) as ArrayRef],
            TableToTensorOptions::default(),
        )
        .unwrap_err(),
        VariableShapeTensorType::from_metadata(DataType::Int8, 2, r#"{"permutation":[1]}"#)
            .unwrap_err(),
        scalars.row(1).unwrap_err(),
        Error::from(ArrowError::InvalidArgumentError(
            "an error raised by arrow-rs".to_string(),
        )),
    ];

    let mut seen: Vec<&str> = errors.iter().map(variant).collect();
    seen.dedup();
    for name in EVERY_VARIANT {
        assert!(seen.contains(&name), "no message for {name}");
    }
    let listing: String = errors
        .iter()
        .map(|error| format!("{}: {error}\n", variant(error)))
        .collect();
    insta::assert_snapshot!(listing);
}
