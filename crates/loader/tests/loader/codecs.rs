//! Parquet's codecs as features of the loader: every codec compiled in reads its files, and a
//! file compressed with a codec left out is refused when the loader is planned, naming the codec
//! and the feature (`cargo xtask test` runs this module again with only `snappy`).

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_dlpack_loader::{Error, Source, batches};
use parquet::arrow::ArrowWriter;
use parquet::basic::{BrotliLevel, Compression, GzipLevel, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::data::{collect, ids, spec, table};

/// Every codec, with the feature of the loader that reads it.
fn codecs() -> [(Compression, &'static str, bool); 6] {
    [
        (Compression::SNAPPY, "snappy", cfg!(feature = "snappy")),
        (Compression::LZ4_RAW, "lz4", cfg!(feature = "lz4")),
        (Compression::LZ4, "lz4", cfg!(feature = "lz4")),
        (
            Compression::ZSTD(ZstdLevel::default()),
            "zstd",
            cfg!(feature = "zstd"),
        ),
        (
            Compression::BROTLI(BrotliLevel::default()),
            "brotli",
            cfg!(feature = "brotli"),
        ),
        (
            Compression::GZIP(GzipLevel::default()),
            "gzip",
            cfg!(feature = "gzip"),
        ),
    ]
}

/// Writes 20 rows of the test table, compressed with `codec`.
fn write(path: &Path, codec: Compression) -> PathBuf {
    let rows = table(&[20]);
    let properties = WriterProperties::builder().set_compression(codec).build();
    let file = File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, rows[0].schema(), Some(properties)).unwrap();
    writer.write(&rows[0]).unwrap();
    writer.close().unwrap();
    path.to_path_buf()
}

#[test]
fn each_codec_reads_when_compiled_in_and_is_refused_by_name_when_left_out() {
    let dir = tempfile::tempdir().unwrap();
    for (index, (codec, feature, compiled)) in codecs().into_iter().enumerate() {
        let path = write(&dir.path().join(format!("{index}.parquet")), codec);
        let source = || Source::from_paths([&path]).unwrap();
        if compiled {
            let batches = collect(source(), spec(8, &["id", "emb"]));
            assert_eq!(ids(&batches), (0..20).collect::<Vec<_>>(), "{codec:?}");
            continue;
        }
        let error = batches(source(), spec(8, &["id"])).err().unwrap();
        assert!(
            matches!(error, Error::UnsupportedCodec { feature: f, .. } if f == feature),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            format!(
                "parquet file {} compresses column \"id\" of row group 0 with {codec:?}, which \
                 this build cannot read; expected a codec compiled in (enable the `{feature}` \
                 feature of arrow-dlpack-loader)",
                path.display()
            )
        );
    }
}

#[test]
fn an_uncompressed_file_reads_with_every_codec_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir.path().join("plain.parquet"), Compression::UNCOMPRESSED);
    let batches = collect(Source::from_paths([&path]).unwrap(), spec(8, &["id"]));
    assert_eq!(ids(&batches), (0..20).collect::<Vec<_>>());
}
