//! Column kinds: nulls refused, allowed or NaN, masks, booleans, fixed-shape tensors and
//! column groups with promotion, in both layouts, inside and across record batches.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int32Array, RecordBatch};
use arrow_dlpack_loader::{BatchSpec, ColumnGroup, Error, Source, batches};
use arrow_dlpack_tensor::DType;

use crate::data::{
    chain, collect, reader, spec, table, values, write_ipc, write_parquet, write_stream,
};

/// Two record batches of 3 rows: `a` int32 with a null at row 4, `b` float64 with a null at
/// row 1.
fn with_nulls() -> Vec<RecordBatch> {
    let part = |a: Vec<Option<i32>>, b: Vec<Option<f64>>| {
        // Nullable fields in every part, so that a reader's schema (the first part's) says
        // that `a` may hold nulls.
        RecordBatch::try_from_iter_with_nullable([
            ("a", Arc::new(Int32Array::from(a)) as ArrayRef, true),
            ("b", Arc::new(Float64Array::from(b)) as ArrayRef, true),
        ])
        .unwrap()
    };
    vec![
        part(
            vec![Some(0), Some(1), Some(2)],
            vec![Some(0.5), None, Some(2.5)],
        ),
        part(
            vec![Some(3), None, Some(5)],
            vec![Some(3.5), Some(4.5), Some(5.5)],
        ),
    ]
}

#[test]
fn nulls_are_refused_at_the_batch_that_holds_them() {
    let mut loader = batches(reader(with_nulls()), spec(2, &["a"])).unwrap();
    assert_eq!(
        values::<i32>(loader.next().unwrap().unwrap().get("a").unwrap()),
        [0, 1]
    );
    assert_eq!(
        values::<i32>(loader.next().unwrap().unwrap().get("a").unwrap()),
        [2, 3]
    );
    let error = loader.next().unwrap().unwrap_err();
    assert!(matches!(error, Error::Column { ref column, .. } if column == "a"));
    assert_eq!(error.to_string(), "cannot load \"a\"");
    assert_eq!(
        chain(&error),
        "cannot load \"a\": nulls are not allowed: found 1 null in the array; expected none, or \
         set the `allow_nulls` option to accept them (null slots then hold unspecified values)"
    );
    assert!(loader.next().is_none());
}

#[test]
fn nulls_across_record_batches_are_refused_too() {
    let result: Result<Vec<_>, _> = batches(reader(with_nulls()), spec(4, &["b"]))
        .unwrap()
        .collect();
    let error = result.unwrap_err();
    assert!(
        chain(&error).starts_with("cannot load \"b\": nulls are not allowed: found 1 null in"),
        "{error}"
    );
}

#[test]
fn allowed_nulls_come_with_a_mask() {
    let spec = BatchSpec {
        allow_nulls: true,
        masks: vec!["a".into(), "b".into()],
        ..spec(4, &["a", "b"])
    };
    let batches = collect(reader(with_nulls()), spec);
    assert_eq!(values::<u8>(batches[0].mask("b").unwrap()), [1, 0, 1, 1]);
    assert_eq!(values::<u8>(batches[1].mask("a").unwrap()), [0, 1]);
    assert_eq!(batches[1].mask("a").unwrap().dtype(), DType::Bool);
    assert_eq!(values::<i32>(batches[0].get("a").unwrap()), [0, 1, 2, 3]);
}

#[test]
fn null_to_nan_writes_nan_and_promotes_integers() {
    let spec = BatchSpec {
        null_to_nan: true.into(),
        ..spec(4, &["a", "b"])
    };
    let batches = collect(reader(with_nulls()), spec);
    let b = values::<f64>(batches[0].get("b").unwrap());
    assert!(b[1].is_nan());
    assert_eq!([b[0], b[2], b[3]], [0.5, 2.5, 3.5]);
    let a = batches[1].get("a").unwrap();
    assert_eq!(a.dtype(), DType::Float64);
    assert_eq!(a.shape(), &[2]);
    let a = values::<f64>(a);
    assert!(a[0].is_nan() && a[1] == 5.0);
}

#[test]
fn booleans_become_bool_tensors_inside_and_across_record_batches() {
    let batches = collect(reader(table(&[4, 4])), spec(3, &["flag"]));
    let flags: Vec<u8> = batches
        .iter()
        .flat_map(|b| values::<u8>(b.get("flag").unwrap()))
        .collect();
    let expected: Vec<u8> = (0..8).map(|i| u8::from(i % 3 == 0)).collect();
    assert_eq!(flags, expected);
    assert!(
        batches
            .iter()
            .all(|b| b.get("flag").unwrap().dtype() == DType::Bool)
    );
}

#[test]
fn fixed_shape_tensor_columns_keep_their_cell_shape() {
    let batches = collect(reader(table(&[5, 2])), spec(3, &["emb"]));
    for (i, batch) in batches.iter().enumerate() {
        let emb = batch.get("emb").unwrap();
        assert_eq!(&emb.shape()[1..], &[2, 3]);
        assert_eq!(emb.dtype(), DType::Float32);
        let expected: Vec<f32> = (i as i64 * 3..i as i64 * 3 + emb.shape()[0] as i64)
            .flat_map(|row| (0..6).map(move |cell| (row * 10 + cell) as f32))
            .collect();
        assert_eq!(values::<f32>(emb), expected, "batch {i}");
    }
}

#[test]
fn groups_promote_and_lay_out_rows_inside_and_across_record_batches() {
    for row_major in [true, false] {
        let spec = BatchSpec {
            groups: vec![ColumnGroup::new("features", ["small", "x"])],
            row_major,
            ..spec(4, &["id"])
        };
        let batches = collect(reader(table(&[4, 3, 3])), spec);
        for batch in &batches {
            let features = batch.get("features").unwrap();
            let n = batch.num_rows();
            assert_eq!(features.dtype(), DType::Float32);
            assert_eq!(features.shape(), &[n, 2]);
            let strides: &[isize] = if row_major { &[2, 1] } else { &[1, n as isize] };
            assert_eq!(features.strides(), strides);
            let ids = values::<i64>(batch.get("id").unwrap());
            let expected: Vec<f32> = ids
                .iter()
                .flat_map(|&i| [(i % 100) as f32, i as f32 + 0.5])
                .collect();
            assert_eq!(values::<f32>(features), expected);
        }
    }
}

#[test]
fn a_group_of_its_own_dtype_converts_every_value_in_both_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(&[4, 3, 3]);
    let ipc = write_ipc(&dir.path().join("t.arrow"), &data);
    // int64 and float32 promote to float64; asked for float32 (and int64, which truncates).
    for (dtype, columns) in [(DType::Float32, ["id", "x"]), (DType::Int64, ["x", "id"])] {
        for row_major in [true, false] {
            let spec = BatchSpec {
                groups: vec![ColumnGroup::new("g", columns).dtype(dtype)],
                row_major,
                ..spec(4, &["id"])
            };
            let sources = [reader(data.clone()), Source::IpcFiles(vec![ipc.clone()])];
            for source in sources {
                for batch in collect(source, spec.clone()) {
                    let g = batch.get("g").unwrap();
                    assert_eq!((g.dtype(), g.shape()), (dtype, &[batch.num_rows(), 2][..]));
                    let ids = values::<i64>(batch.get("id").unwrap());
                    if dtype == DType::Float32 {
                        let expected: Vec<f32> = ids
                            .iter()
                            .flat_map(|&i| [i as f32, i as f32 + 0.5])
                            .collect();
                        assert_eq!(values::<f32>(g), expected);
                    } else {
                        let expected: Vec<i64> = ids.iter().flat_map(|&i| [i, i]).collect();
                        assert_eq!(values::<i64>(g), expected);
                    }
                }
            }
        }
    }
    // Two float32 columns side by side in one allocation, which a column-major group views
    // without a copy when it keeps their dtype: asked for float64, the values are converted.
    let values_f32: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let buffer = arrow_array::Float32Array::from(values_f32);
    let (a, b) = (buffer.slice(0, 4), buffer.slice(4, 4));
    let batch =
        RecordBatch::try_from_iter([("a", Arc::new(a) as ArrayRef), ("b", Arc::new(b))]).unwrap();
    for dtype in [None, Some(DType::Float64)] {
        let group = ColumnGroup::new("g", ["a", "b"]);
        let spec = BatchSpec {
            groups: vec![dtype.map_or(group.clone(), |dtype| group.dtype(dtype))],
            row_major: false,
            ..spec(4, &[])
        };
        let batch = &collect(reader(vec![batch.clone()]), spec)[0];
        let g = batch.get("g").unwrap();
        assert_eq!(g.dtype(), dtype.unwrap_or(DType::Float32));
        let as_f64: Vec<f64> = match dtype {
            None => values::<f32>(g).into_iter().map(f64::from).collect(),
            Some(_) => values::<f64>(g),
        };
        assert_eq!(as_f64, [0.0, 4.0, 1.0, 5.0, 2.0, 6.0, 3.0, 7.0]);
    }
    // A dtype that nulls written as NaN cannot go into, or one a table's tensor cannot have.
    for (dtype, expected) in [
        (DType::Int32, "null_to_nan writes nulls as NaN"),
        (DType::Bool, "cannot have dtype bool"),
    ] {
        let spec = BatchSpec {
            groups: vec![ColumnGroup::new("g", ["a", "b"]).dtype(dtype)],
            null_to_nan: arrow_dlpack_loader::NullToNan::Auto,
            ..spec(3, &[])
        };
        let error = batches(reader(with_nulls()), spec).err().unwrap();
        assert!(chain(&error).contains(expected), "{}", chain(&error));
    }
}

#[test]
fn all_columns_are_loaded_when_none_are_named() {
    let batches = collect(reader(table(&[3])), BatchSpec::default());
    let names: Vec<&str> = batches[0].names().collect();
    assert_eq!(names, ["id", "x", "small", "flag", "emb"]);
    assert_eq!(batches[0].num_tensors(), 5);
}

#[test]
fn unknown_columns_are_refused_by_batches_naming_every_column_of_every_source() {
    let dir = tempfile::tempdir().unwrap();
    let rows = table(&[3, 2]);
    let sources = || {
        [
            reader(rows.clone()),
            Source::IpcFiles(vec![write_ipc(&dir.path().join("t.arrow"), &rows)]),
            Source::IpcStreams(vec![write_stream(&dir.path().join("t.arrows"), &rows)]),
            Source::ParquetFiles(vec![write_parquet(&dir.path().join("t.parquet"), &rows, 2)]),
        ]
    };
    let expected = "column \"idd\" not found; expected one of [\"id\", \"x\", \"small\", \"flag\", \
                    \"emb\"]";
    for source in sources() {
        let what = format!("{source:?}");
        // Checked before the loader starts its threads: `batches` itself fails.
        let error = batches(source, spec(2, &["id", "idd"])).err().unwrap();
        assert!(matches!(error, Error::MissingColumn { .. }), "{what}");
        assert_eq!(error.to_string(), expected, "{what}");
    }
    for source in sources() {
        let spec = BatchSpec::new(2).group("features", ["x", "nope"]);
        let error = batches(source, spec).err().unwrap();
        assert!(
            error.to_string().starts_with("column \"nope\" not found"),
            "{error}"
        );
    }
    for source in sources() {
        let spec = BatchSpec::new(2).columns(["id"]).masks(["gone"]);
        let error = batches(source, spec).err().unwrap();
        assert!(
            error.to_string().starts_with("column \"gone\" not found"),
            "{error}"
        );
    }
}

#[test]
fn unloadable_types_are_refused_by_batches_for_every_source() {
    use arrow_array::StringArray;
    let dir = tempfile::tempdir().unwrap();
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef),
        ("s", Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef),
    ])
    .unwrap();
    let rows = vec![batch];
    let sources = [
        reader(rows.clone()),
        Source::IpcFiles(vec![write_ipc(&dir.path().join("t.arrow"), &rows)]),
        Source::IpcStreams(vec![write_stream(&dir.path().join("t.arrows"), &rows)]),
        Source::ParquetFiles(vec![write_parquet(&dir.path().join("t.parquet"), &rows, 2)]),
    ];
    for source in sources {
        let error = batches(source, spec(2, &["id", "s"])).err().unwrap();
        assert!(
            matches!(error, Error::UnsupportedColumn { ref column, .. } if column == "s"),
            "{error:?}"
        );
    }
}

#[test]
fn bad_specs_are_refused_up_front() {
    let error = batches(reader(table(&[3])), spec(0, &["id"]))
        .err()
        .unwrap();
    assert_eq!(
        error.to_string(),
        "invalid batch spec: batch_size is 0; expected at least 1"
    );
    let bad_shard = BatchSpec {
        shard_index: 2,
        num_shards: 2,
        ..spec(2, &["id"])
    };
    let error = batches(reader(table(&[3])), bad_shard).err().unwrap();
    assert_eq!(
        error.to_string(),
        "invalid batch spec: shard_index is 2; expected less than num_shards (2)"
    );
}
