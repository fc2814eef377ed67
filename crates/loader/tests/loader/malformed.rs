//! Malformed files give clear errors, never a panic.

use arrow_dlpack_loader::{Error, Source, TensorBatch, batches};

use crate::data::{chain, collect, ids, spec, table, write_ipc, write_parquet, write_stream};

/// Every batch of `source` and the first error, whether at planning or while reading.
fn load(source: Source) -> Result<Vec<TensorBatch>, Error> {
    batches(source, spec(8, &["id", "emb"]))?.collect()
}

#[test]
fn a_truncated_parquet_file_is_a_parquet_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_parquet(&dir.path().join("t.parquet"), &table(&[50, 50]), 30);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let error = load(Source::ParquetFiles(vec![path.clone()])).unwrap_err();
    assert!(matches!(error, Error::Parquet { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!("cannot read parquet file {}", path.display())
    );
    let message = chain(&error);
    assert!(
        message.starts_with(&format!("cannot read parquet file {}: ", path.display())),
        "{message}"
    );
}

#[test]
fn a_parquet_file_with_corrupt_pages_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_parquet(&dir.path().join("t.parquet"), &table(&[50, 50]), 30);
    let mut bytes = std::fs::read(&path).unwrap();
    // Scribble over the data pages, between the leading magic and the footer.
    let end = bytes.len() / 2;
    for byte in &mut bytes[8..end] {
        *byte = byte.wrapping_mul(31).wrapping_add(7);
    }
    std::fs::write(&path, &bytes).unwrap();
    let error = load(Source::ParquetFiles(vec![path])).unwrap_err();
    assert!(
        matches!(
            error,
            Error::Parquet { .. } | Error::Decode { .. } | Error::CorruptParquet { .. }
        ),
        "expected a parquet, decode or corruption error, found {error:?}"
    );
}

#[test]
fn a_truncated_ipc_file_is_an_ipc_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_ipc(&dir.path().join("t.arrow"), &table(&[50, 50]));
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 20]).unwrap();
    let error = load(Source::IpcFiles(vec![path.clone()])).unwrap_err();
    assert!(matches!(error, Error::Ipc { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!(
            "cannot read arrow ipc {}: Parser error: Arrow file does not contain correct footer",
            path.display()
        )
    );
}

#[test]
fn an_ipc_file_with_a_corrupt_body_is_an_ipc_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_ipc(&dir.path().join("t.arrow"), &table(&[50, 50]));
    let mut bytes = std::fs::read(&path).unwrap();
    let len = bytes.len();
    // Scribble over everything between the magic and the footer: schema, headers and bodies.
    for byte in &mut bytes[8..len / 2] {
        *byte = 0xAB;
    }
    std::fs::write(&path, &bytes).unwrap();
    let error = load(Source::IpcFiles(vec![path])).unwrap_err();
    assert!(matches!(error, Error::Ipc { .. }), "{error:?}");
}

#[test]
fn a_file_that_is_not_arrow_is_refused_by_its_first_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.arrow");
    std::fs::write(&path, b"name,value\na,1\nb,2\n").unwrap();
    let error = load(Source::IpcFiles(vec![path])).unwrap_err();
    assert!(
        error.to_string().contains("does not start with ARROW1"),
        "{error}"
    );
    let csv = dir.path().join("x.csv");
    std::fs::write(&csv, b"name,value\na,1\n").unwrap();
    let error = Source::from_paths([&csv]).unwrap_err();
    assert!(matches!(error, Error::UnknownFormat { read: true, .. }));
    assert_eq!(
        error.to_string(),
        format!(
            "cannot tell the format of {} from its extension or its first bytes (not PAR1, \
             ARROW1 or an arrow ipc stream's); expected .arrow, .feather, .ipc, .arrows, \
             .parquet or .pq",
            csv.display()
        )
    );
    // A path that is not there is not found, whatever its extension (a missing directory has
    // none).
    for missing in ["nope.csv", "no_such_dir", "no_such_dir/"] {
        let error = Source::from_paths([dir.path().join(missing)]).unwrap_err();
        assert!(
            matches!(&error, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
            "{missing}: {error:?}"
        );
    }
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let error = load(Source::ParquetFiles(vec!["/nonexistent/t.parquet".into()])).unwrap_err();
    assert!(matches!(error, Error::Io { .. }));
    assert_eq!(error.to_string(), "cannot read /nonexistent/t.parquet");
    assert!(
        chain(&error).starts_with("cannot read /nonexistent/t.parquet: No such file"),
        "{error}"
    );
}

#[test]
fn a_file_named_without_a_known_extension_is_read_by_its_first_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(&[30, 20]);
    let files = [
        write_parquet(&dir.path().join("data"), &data, 16),
        write_ipc(&dir.path().join("part-0.bin"), &data),
        write_stream(&dir.path().join("cache-00000-of-00001.dat"), &data),
    ];
    for path in &files {
        let batches = collect(Source::from_paths([path]).unwrap(), spec(8, &["id"]));
        assert_eq!(
            ids(&batches),
            (0..50).collect::<Vec<_>>(),
            "{}",
            path.display()
        );
    }
    // Files of one format given by names that say nothing are still one format.
    let error = Source::from_paths([&files[0], &files[1]]).unwrap_err();
    assert!(
        error.to_string().contains("is a parquet file and"),
        "{error}"
    );
    // An empty file says nothing either.
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let error = Source::from_paths([&empty]).unwrap_err();
    assert!(
        matches!(error, Error::UnknownFormat { read: true, .. }),
        "{error:?}"
    );
}

#[cfg(unix)]
#[test]
fn a_fifo_is_refused_not_opened() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["data", "x.arrow", "x.parquet"] {
        let path = dir.path().join(name);
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        // Opening a FIFO blocks until a writer comes: the loader must not.
        let error = Source::from_paths([&path]).unwrap_err();
        assert!(matches!(error, Error::Io { .. }), "{error:?}");
        assert!(
            chain(&error).contains("not a regular file (a FIFO, a socket or a device)"),
            "{}",
            chain(&error)
        );
    }
}
