//! Struct arrays, named columns, and the zero-copy per-column tensors.

use super::*;

fn struct_of(arrays: Vec<ArrayRef>, nulls: Option<NullBuffer>) -> StructArray {
    let fields: Vec<Field> = arrays
        .iter()
        .enumerate()
        .map(|(index, array)| Field::new(format!("f{index}"), array.data_type().clone(), true))
        .collect();
    StructArray::new(fields.into(), arrays, nulls)
}

#[test]
fn struct_arrays_convert_like_record_batches() {
    let specs = [
        Spec {
            dtype: DType::UInt32,
            values: samples(DType::UInt32),
            validity: None,
        },
        Spec {
            dtype: DType::Int8,
            values: samples(DType::Int8),
            validity: Some(vec![true, true, false, true, true, true, true, true]),
        },
    ];
    let array = struct_of(specs.iter().map(Spec::array).collect(), None);
    let sliced = array.slice(1, 6);
    for options in [ROW_MAJOR, COLUMN_MAJOR] {
        let options = with_nan(options);
        let tensor = table_to_tensor(&Table::from(&array), options).unwrap();
        check_against_reference(&tensor, &specs, 0, 8, DType::Float64, options);
        let tensor = table_to_tensor(&Table::from(&sliced), options).unwrap();
        check_against_reference(&tensor, &specs, 1, 6, DType::Float64, options);
    }
    let error = table_to_tensor(&Table::from(&array), ROW_MAJOR).unwrap_err();
    assert!(matches!(&error, Error::ColumnNulls { column, null_count: 1 } if column == "f1"));
}

#[test]
fn a_null_struct_row_is_null_in_every_column() {
    let array = struct_of(
        vec![
            Arc::new(Int16Array::from(vec![1, 2, 3])),
            Arc::new(Float32Array::from(vec![Some(0.5), Some(1.5), None])),
        ],
        Some(NullBuffer::from(vec![true, false, true])),
    );
    let error = table_to_tensor(&Table::from(&array), ROW_MAJOR).unwrap_err();
    assert!(matches!(&error, Error::ColumnNulls { column, null_count: 1 } if column == "f0"));
    let tensor = table_to_tensor(&Table::from(&array), with_nan(ROW_MAJOR)).unwrap();
    assert_eq!(tensor.dtype(), DType::Float32);
    let values = tensor.row_major_buffer().unwrap();
    let values = values.typed_data::<f32>();
    assert_eq!(&values[..2], &[1.0, 0.5]);
    assert!(values[2].is_nan() && values[3].is_nan());
    assert_eq!(values[4], 3.0);
    assert!(values[5].is_nan());
}

#[test]
fn columns_must_pair_with_names_and_share_a_length() {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(vec![1, 2, 3])),
        Arc::new(Int32Array::from(vec![1, 2])),
    ];
    assert!(matches!(
        named_columns_to_tensor(&["a"], &columns, ROW_MAJOR),
        Err(Error::ColumnNames {
            names: 1,
            columns: 2
        })
    ));
    let error = named_columns_to_tensor(&["a", "b"], &columns, ROW_MAJOR).unwrap_err();
    assert!(
        matches!(&error, Error::ColumnLength { column, found: 2, expected: 3 } if column == "b"),
        "{error}"
    );
    let tensor = named_columns_to_tensor(&["a", "b"], &columns[..1], ROW_MAJOR);
    assert!(matches!(tensor, Err(Error::ColumnNames { .. })));
    let tensor = named_columns_to_tensor(&["a"], &columns[..1], ROW_MAJOR).unwrap();
    assert_eq!(tensor.shape(), &[3, 1]);

    // One tensor per column: lengths may differ, names must still pair up.
    let tensors = named_columns_to_tensors(&["a", "b"], &columns, NO_NULLS).unwrap();
    assert_eq!(tensors[0].1.shape(), &[3]);
    assert_eq!(tensors[1].1.shape(), &[2]);
    assert!(matches!(
        named_columns_to_tensors(&["a"], &columns, NO_NULLS),
        Err(Error::ColumnNames { .. })
    ));
}

#[test]
fn columns_to_tensor_is_the_table_of_named_columns() {
    // The loader's entry point gives what `table_to_tensor` gives for the same columns.
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int16Array::from(vec![1, 2])),
        Arc::new(UInt8Array::from(vec![3, 4])),
    ];
    let tensor = columns_to_tensor(&["a", "b"], &columns, COLUMN_MAJOR).unwrap();
    assert_eq!(tensor.dtype(), DType::Int16);
    assert_eq!(tensor.strides(), &[1, 2]);
    assert_eq!(
        tensor.iter::<i16>().unwrap().collect::<Vec<_>>(),
        [1, 3, 2, 4]
    );
    assert!(matches!(
        columns_to_tensor(&["a"], &columns, COLUMN_MAJOR),
        Err(Error::ColumnNames { .. })
    ));
}

#[test]
fn columns_become_zero_copy_tensors_in_order() {
    let ids = Int64Array::from(vec![1, 2, 3, 4]);
    let embeddings = FixedSizeListArray::new(
        Arc::new(Field::new_list_field(DataType::Float32, false)),
        2,
        Arc::new(Float32Array::from_iter_values((0..8).map(|i| i as f32))),
        None,
    );
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(ids.clone()) as ArrayRef),
        ("embedding", Arc::new(embeddings.clone())),
    ])
    .unwrap();
    let tensors = table_to_tensors(&Table::from(&batch), NO_NULLS).unwrap();
    let names: Vec<&str> = tensors.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["id", "embedding"]);
    assert_eq!(tensors[0].1.shape(), &[4]);
    assert_eq!(tensors[0].1.data_ptr(), ids.values().as_ptr().cast());
    assert!(tensors[0].1.is_read_only());
    assert_eq!(tensors[1].1.shape(), &[4, 2]);
    assert_eq!(tensors[1].1.dtype(), DType::Float32);

    // A slice shares memory too, from its offset.
    let tensors = table_to_tensors(&Table::from(&batch.slice(1, 2)), NO_NULLS).unwrap();
    assert_eq!(tensors[0].1.data_ptr(), ids.values()[1..].as_ptr().cast());
    assert_eq!(tensors[1].1.shape(), &[2, 2]);
}

#[test]
fn column_tensors_refuse_nulls_and_types_naming_the_column() {
    let batch = RecordBatch::try_from_iter([
        ("ok", Arc::new(Int8Array::from(vec![1, 2])) as ArrayRef),
        ("holes", Arc::new(Int8Array::from(vec![None, Some(2)]))),
    ])
    .unwrap();
    let error = table_to_tensors(&Table::from(&batch), NO_NULLS).unwrap_err();
    assert!(
        matches!(&error, Error::TableNulls { null_count: 1, location: NullLocation::Column { column, depth: 0 } } if column == "holes"),
        "{error}"
    );
    assert_eq!(
        table_to_tensors(&Table::from(&batch), WITH_NULLS)
            .unwrap()
            .len(),
        2
    );

    let nested_nulls = FixedSizeListArray::new(
        Arc::new(Field::new_list_field(DataType::Int8, true)),
        1,
        Arc::new(Int8Array::from(vec![None, Some(2)])),
        None,
    );
    let error =
        named_columns_to_tensors(&["vectors"], &[Arc::new(nested_nulls)], NO_NULLS).unwrap_err();
    assert!(
        matches!(&error, Error::TableNulls { null_count: 1, location: NullLocation::Column { column, depth: 1 } } if column == "vectors"),
        "{error}"
    );

    let strings: ArrayRef = Arc::new(StringArray::from(vec!["a"]));
    let error = named_columns_to_tensors(&["text"], &[strings], NO_NULLS).unwrap_err();
    assert!(
        matches!(&error, Error::UnsupportedColumnType { column, data_type: DataType::Utf8, .. } if column == "text"),
        "{error}"
    );
}

#[test]
fn struct_columns_refuse_null_rows_unless_allowed() {
    let array = struct_of(
        vec![Arc::new(Int32Array::from(vec![1, 2]))],
        Some(NullBuffer::from(vec![true, false])),
    );
    let error = table_to_tensors(&Table::from(&array), NO_NULLS).unwrap_err();
    assert!(matches!(
        &error,
        Error::TableNulls {
            null_count: 1,
            location: NullLocation::Rows
        }
    ));
    let tensors = table_to_tensors(&Table::from(&array), WITH_NULLS).unwrap();
    assert_eq!(tensors[0].0, "f0");
    assert_eq!(tensors[0].1.shape(), &[2]);
}
