//! Arrow IPC files and streams whose buffers are compressed (LZ4 frame, ZSTD), as pyarrow and
//! polars write them: read when the loader's feature for the codec is on, refused naming the
//! feature when it is off (`cargo xtask test` runs the tests whose names hold `codecs` again with
//! only `snappy`), and a forged decompressed length refused before anything is allocated for it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_dlpack_loader::{Error, Source, batches};
use arrow_ipc::CompressionType;
use arrow_ipc::writer::{FileWriter, IpcWriteOptions, StreamWriter};

use crate::data::{ids, spec, table};

/// Writes `batches` as an IPC file, or a stream, with buffers compressed by `codec`.
fn write(path: &Path, batches: &[RecordBatch], codec: CompressionType, stream: bool) -> PathBuf {
    let options = IpcWriteOptions::default()
        .try_with_compression(Some(codec))
        .unwrap();
    let file = File::create(path).unwrap();
    let schema = batches[0].schema();
    if stream {
        let mut writer = StreamWriter::try_new_with_options(file, &schema, options).unwrap();
        for batch in batches {
            writer.write(batch).unwrap();
        }
        writer.finish().unwrap();
    } else {
        let mut writer = FileWriter::try_new_with_options(file, &schema, options).unwrap();
        for batch in batches {
            writer.write(batch).unwrap();
        }
        writer.finish().unwrap();
    }
    path.to_path_buf()
}

/// Every codec of IPC, the loader's feature that reads it, and whether it is compiled in.
fn codecs() -> [(CompressionType, &'static str, bool); 2] {
    [
        (CompressionType::LZ4_FRAME, "lz4", cfg!(feature = "lz4")),
        (CompressionType::ZSTD, "zstd", cfg!(feature = "zstd")),
    ]
}

/// Every id the loader gives of `source`, or its first error.
fn load(source: Source) -> Result<Vec<i64>, Error> {
    let got = batches(source, spec(128, &["id", "x", "emb"]))?.collect::<Result<Vec<_>, _>>()?;
    Ok(ids(&got))
}

#[test]
fn ipc_codecs_read_files_and_streams_or_are_refused_naming_their_feature() {
    let dir = tempfile::tempdir().unwrap();
    let rows = table(&[300, 300, 400]);
    for (codec, feature, compiled) in codecs() {
        // The stream is named `.arrow`, as Hugging Face `datasets` names its streams: its first
        // bytes, not its name, say that it is a stream.
        let file = write(
            &dir.path().join(format!("{feature}.feather")),
            &rows,
            codec,
            false,
        );
        let stream = write(
            &dir.path().join(format!("{feature}.arrow")),
            &rows,
            codec,
            true,
        );
        let file_source = Source::from_paths([&file]).unwrap();
        assert!(
            matches!(file_source, Source::IpcFiles(_)),
            "{file_source:?}"
        );
        let stream_source = Source::from_paths([&stream]).unwrap();
        assert!(
            matches!(stream_source, Source::IpcStreams(_)),
            "{stream_source:?}"
        );
        for source in [file_source, stream_source] {
            match load(source) {
                Ok(got) => {
                    assert!(compiled, "{feature} read without its feature");
                    assert_eq!(got, (0..1000).collect::<Vec<i64>>());
                }
                Err(error) => {
                    assert!(!compiled, "{feature}: {error}");
                    let message = error.to_string();
                    assert!(
                        message.contains(&format!("the `{feature}` feature")),
                        "{message}"
                    );
                }
            }
        }
    }
}

/// A record batch of one int64 column of `rows` equal values: its values buffer compresses to a
/// few bytes and declares `8 * rows` bytes decompressed.
fn constant(rows: usize) -> RecordBatch {
    let values: ArrayRef = Arc::new(Int64Array::from(vec![7i64; rows]));
    RecordBatch::try_from_iter([("id", values)]).unwrap()
}

/// `bytes` with the one 8-byte little-endian `from` replaced by `to`.
fn replace_length(bytes: &[u8], from: u64, to: u64) -> Vec<u8> {
    let pattern = from.to_le_bytes();
    let found: Vec<usize> = bytes
        .windows(8)
        .enumerate()
        .filter(|(_, window)| *window == pattern)
        .map(|(at, _)| at)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "the declared length is not unique in the file"
    );
    let mut edited = bytes.to_vec();
    edited[found[0]..found[0] + 8].copy_from_slice(&to.to_le_bytes());
    edited
}

#[cfg(feature = "lz4")]
#[test]
fn ipc_codecs_refuse_a_forged_decompressed_length_before_allocating_it() {
    let dir = tempfile::tempdir().unwrap();
    let rows = 1000;
    for stream in [false, true] {
        let path = dir.path().join(if stream { "s.arrows" } else { "f.arrow" });
        write(&path, &[constant(rows)], CompressionType::LZ4_FRAME, stream);
        let bytes = std::fs::read(&path).unwrap();
        // 1 TiB declared: more than LZ4 can expand the buffer's few bytes to, and more than
        // this machine can allocate; arrow-ipc would abort on the allocation.
        let forged = replace_length(&bytes, 8 * rows as u64, 1 << 40);
        std::fs::write(&path, forged).unwrap();
        let source = Source::from_paths([&path]).unwrap();
        let error = batches(source, spec(10, &["id"]))
            .and_then(|loader| loader.collect::<Result<Vec<_>, _>>())
            .unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, Error::Ipc { .. }), "{error:?}");
        assert!(
            message.contains("declares 1099511627776 bytes decompressed"),
            "{message}"
        );
    }
}
