//! Files that lie about their contents or change after planning: refused with errors naming
//! them, never read differently than planned.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, RecordBatchOptions};
use arrow_dlpack_loader::{BatchSpec, Error, Source, batches};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};

use crate::data::{batch_of, collect, ids, spec, table, write_ipc, write_parquet, write_stream};

/// The `ARROW:extension:metadata` of the `emb` column of [`crate::data::schema`].
const EMB_METADATA: &str = r#"{"shape":[2,3]}"#;

/// `batch` with the `emb` column's extension metadata replaced by `metadata`.
fn with_emb_metadata(batch: &RecordBatch, metadata: &str) -> RecordBatch {
    let fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|field| {
            let mut field = field.as_ref().clone();
            if field.name() == "emb" {
                let mut map = field.metadata().clone();
                map.insert("ARROW:extension:metadata", metadata);
                field = field.with_metadata(map);
            }
            field
        })
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), batch.columns().to_vec()).unwrap()
}

#[test]
fn local_streams_of_other_columns_than_the_first_are_refused_when_the_loader_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let first = write_stream(&dir.path().join("a.arrows"), &[batch_of(&[0, 1])]);
    let batch = with_emb_metadata(&batch_of(&[2, 3]), r#"{"shape":[3,2]}"#);
    let second = write_stream(&dir.path().join("b.arrows"), &[batch]);
    // Over two ranks each would read one stream: the second rank's tensors would differ.
    for spec in [spec(2, &["emb"]), spec(2, &["emb"]).shard(1, 2)] {
        let error = batches(
            Source::IpcStreams(vec![first.clone(), second.clone()]),
            spec,
        )
        .err()
        .expect("streams of other columns are refused");
        assert!(matches!(error, Error::SchemaMismatch { .. }), "{error:?}");
        let message = error.to_string();
        assert!(message.starts_with(&format!("stream {} has columns", second.display())));
    }
}

#[test]
fn fixed_shape_tensors_whose_metadata_differ_across_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for other in [
        r#"{"shape":[3,2]}"#,
        r#"{"shape":[2,3],"permutation":[1,0]}"#,
        r#"{"shape":[2,3],"dim_names":["h","w"]}"#,
    ] {
        let first = write_ipc(&dir.path().join("a.arrow"), &[batch_of(&[0, 1])]);
        let batch = with_emb_metadata(&batch_of(&[2, 3]), other);
        let second = write_ipc(&dir.path().join("b.arrow"), &[batch]);
        let error = batches(
            Source::IpcFiles(vec![first, second.clone()]),
            spec(2, &["emb"]),
        )
        .err()
        .expect("files whose tensors differ in shape are refused");
        let message = error.to_string();
        assert!(matches!(error, Error::SchemaMismatch { .. }), "{error:?}");
        assert!(message.starts_with(&format!("file {} has columns", second.display())));
        assert!(
            message.contains(other) && message.contains(EMB_METADATA),
            "{message}"
        );
    }
}

#[test]
fn a_source_without_columns_is_refused_at_planning() {
    let dir = tempfile::tempdir().unwrap();
    let options = RecordBatchOptions::new().with_row_count(Some(5));
    let empty = RecordBatch::try_new_with_options(Arc::new(Schema::empty()), vec![], &options);
    let path = write_ipc(&dir.path().join("empty.arrow"), &[empty.unwrap()]);
    let error = batches(Source::IpcFiles(vec![path.clone()]), spec(2, &[]))
        .err()
        .expect("a source without columns is refused");
    assert_eq!(
        error.to_string(),
        format!(
            "invalid batch spec: {} has no columns to load; expected at least one column",
            path.display()
        )
    );
}

#[test]
fn a_file_replaced_after_planning_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [10; 40];
    for extension in ["parquet", "arrow"] {
        let path = |name: &str| dir.path().join(format!("{name}.{extension}"));
        let write = |name: &str, batches: &[RecordBatch]| match extension {
            "parquet" => write_parquet(&path(name), batches, 10),
            _ => write_ipc(&path(name), batches),
        };
        // The second file is opened for reading only after the forty units of the first, which
        // a loader with one decoder and a prefetch of one cannot have read ahead.
        let first = write("first", &table(&sizes));
        let second = write("second", &table(&[10]));
        let spec = BatchSpec {
            prefetch: 1,
            decode_threads: 1,
            ..spec(10, &["id"])
        };
        let loader = batches(Source::from_paths([&first, &second]).unwrap(), spec).unwrap();
        let other = write("other", &[batch_of(&[7; 10])]);
        std::fs::rename(&other, &second).unwrap();
        let error = loader
            .collect::<Result<Vec<_>, _>>()
            .expect_err("a replaced file is an error");
        assert_eq!(
            error.to_string(),
            format!(
                "{} changed after the loader read its metadata: another file has replaced it; \
                 expected the file as planned",
                second.display()
            )
        );
    }
}

#[test]
fn files_rewritten_in_place_after_planning_are_errors_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    // Many small units, read one at a time, so that most are read after the file changes.
    let sizes = [10; 40];
    let parquet = write_parquet(&dir.path().join("t.parquet"), &table(&sizes), 10);
    let ipc = write_ipc(&dir.path().join("t.arrow"), &table(&sizes));
    for path in [parquet, ipc] {
        let source = Source::from_paths([&path]).unwrap();
        let spec = BatchSpec {
            prefetch: 1,
            decode_threads: 1,
            ..spec(10, &["id"])
        };
        let mut loader = batches(source, spec).unwrap();
        assert_eq!(
            ids(&[loader.next().unwrap().unwrap()]),
            (0..10).collect::<Vec<_>>()
        );
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, b"more").unwrap();
        let error = loader
            .collect::<Result<Vec<_>, _>>()
            .expect_err("a changed file is an error");
        assert!(matches!(error, Error::FileChanged { .. }), "{error:?}");
        // A prefetching thread may look while the append is under way: Linux updates the
        // modification time before it writes and grows the file, so the change it reports is
        // either the new length (the usual case) or, in that window, the new time alone.
        let planned = file.metadata().unwrap().len() - 4;
        let prefix = format!(
            "{} changed after the loader read its metadata: ",
            path.display()
        );
        let suffix = "; expected the file as planned";
        let message = error.to_string();
        let change = message
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(suffix))
            .unwrap_or_else(|| panic!("unexpected message: {message}"));
        assert!(
            change == format!("its length is {} bytes, was {planned}", planned + 4)
                || change == "its modification time differs",
            "{message}"
        );
    }
}

/// Writes ids 0..1000 as one uncompressed, plainly encoded data page of an `id` column.
fn write_plain_ids(path: &Path) -> PathBuf {
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..1000));
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(schema.clone(), vec![ids]).unwrap();
    let properties = WriterProperties::builder()
        .set_dictionary_enabled(false)
        .build();
    let mut writer =
        ArrowWriter::try_new(File::create(path).unwrap(), schema, Some(properties)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    path.to_path_buf()
}

#[test]
fn a_page_declaring_fewer_values_than_its_rows_is_refused_naming_the_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_plain_ids(&dir.path().join("t.parquet"));
    let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
    let start = reader.metadata().row_group(0).column(0).data_page_offset() as usize;
    let mut bytes = std::fs::read(&path).unwrap();
    // The data page header's `num_values`: field 1, an i32, zigzag 2000 as a varint.
    let at = start
        + bytes[start..start + 64]
            .windows(3)
            .position(|window| window == [0x15, 0xD0, 0x0F])
            .expect("the data page header declares 1000 values");
    // 999 values: zigzag 1998, the same length.
    bytes[at + 1..at + 3].copy_from_slice(&[0xCE, 0x0F]);
    std::fs::write(&path, &bytes).unwrap();
    let error = batches(Source::ParquetFiles(vec![path.clone()]), spec(100, &["id"]))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .expect_err("999 of 1000 values is an error");
    assert_eq!(
        error.to_string(),
        format!(
            "parquet file {} is corrupt in row group 0, column \"id\": the pages of the chunk \
             hold 999 values; the chunk declares 1000",
            path.display()
        )
    );
    // Unedited, the same file reads whole.
    let path = write_plain_ids(&dir.path().join("u.parquet"));
    let got = collect(Source::ParquetFiles(vec![path]), spec(100, &["id"]));
    assert_eq!(ids(&got), (0..1000).collect::<Vec<i64>>());
}

#[test]
fn a_parquet_file_written_over_while_it_is_decoded_is_said_to_have_changed() {
    // Written over from its start (as `pq.write_table` to the same path does), a row group that
    // a decoder was reading meanwhile held other bytes, and the error read as a corrupt file.
    let dir = tempfile::tempdir().unwrap();
    for round in 0..5 {
        let path = dir.path().join(format!("t{round}.parquet"));
        let path = write_parquet(&path, &table(&[10; 40]), 10);
        let spec = BatchSpec {
            prefetch: 1,
            decode_threads: 1,
            ..spec(10, &["id"])
        };
        let mut loader = batches(Source::from_paths([&path]).unwrap(), spec).unwrap();
        loader.next().unwrap().unwrap();
        let length = std::fs::metadata(&path).unwrap().len();
        let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        std::io::Write::write_all(&mut file, &vec![0xA5; length as usize / 2]).unwrap();
        file.set_len(length / 2).unwrap();
        drop(file);
        let error = loader
            .collect::<Result<Vec<_>, _>>()
            .expect_err("a file written over is an error");
        assert!(
            matches!(error, Error::FileChanged { .. }),
            "round {round}: {error:?}"
        );
    }
}
