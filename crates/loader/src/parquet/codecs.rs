//! Parquet's compression codecs, each a feature of this crate: which are compiled in, and the
//! check, when a file is planned, that every column chunk to be read uses one of them.

use std::path::Path;

use parquet::arrow::ProjectionMask;
use parquet::basic::Compression;
use parquet::file::metadata::ParquetMetaData;

use crate::{Error, Result};

/// The feature of this crate that reads `codec`, and whether it is compiled in; `None` for no
/// compression, and for codecs no feature reads (LZO), which the decoder reports itself.
fn feature_of(codec: Compression) -> Option<(&'static str, bool)> {
    match codec {
        Compression::UNCOMPRESSED | Compression::LZO => None,
        Compression::SNAPPY => Some(("snappy", cfg!(feature = "snappy"))),
        Compression::GZIP(_) => Some(("gzip", cfg!(feature = "gzip"))),
        Compression::BROTLI(_) => Some(("brotli", cfg!(feature = "brotli"))),
        Compression::LZ4 | Compression::LZ4_RAW => Some(("lz4", cfg!(feature = "lz4"))),
        Compression::ZSTD(_) => Some(("zstd", cfg!(feature = "zstd"))),
    }
}

/// Refuses a file with a column chunk that `mask` reads and whose codec this build leaves out,
/// naming the codec and the feature that reads it.
pub(crate) fn check_codecs(
    path: &Path,
    metadata: &ParquetMetaData,
    mask: &ProjectionMask,
) -> Result<()> {
    for (row_group, group) in metadata.row_groups().iter().enumerate() {
        for (leaf, chunk) in group.columns().iter().enumerate() {
            if !mask.leaf_included(leaf) {
                continue;
            }
            if let Some((feature, false)) = feature_of(chunk.compression()) {
                return Err(Error::UnsupportedCodec {
                    path: path.to_path_buf(),
                    row_group,
                    column: chunk.column_path().string(),
                    codec: format!("{:?}", chunk.compression()),
                    feature,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_but_lzo_has_a_feature() {
        let codecs = [
            (Compression::SNAPPY, "snappy"),
            (Compression::GZIP(Default::default()), "gzip"),
            (Compression::BROTLI(Default::default()), "brotli"),
            (Compression::LZ4, "lz4"),
            (Compression::LZ4_RAW, "lz4"),
            (Compression::ZSTD(Default::default()), "zstd"),
        ];
        for (codec, feature) in codecs {
            assert_eq!(feature_of(codec).map(|(name, _)| name), Some(feature));
        }
        assert_eq!(feature_of(Compression::UNCOMPRESSED), None);
        assert_eq!(feature_of(Compression::LZO), None);
    }
}
