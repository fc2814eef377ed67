//! The rows of an Arrow column of encoded images: `binary`, `large_binary` and `binary_view`
//! hold each image's bytes; a struct with a `bytes` field of one of these and an optional `path`
//! string field (Hugging Face's `Image` feature) holds bytes, or a path where the bytes are null.

use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{BinaryType, LargeBinaryType};
use arrow_array::{Array, StructArray};
use arrow_schema::DataType;

use crate::{Error, Result};

/// Where one row's encoded image is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImageSource<'a> {
    /// The encoded bytes themselves.
    Bytes(&'a [u8]),
    /// A file, resolved against [`DecodeOptions::image_root`](super::DecodeOptions::image_root)
    /// when relative.
    Path(&'a str),
    /// No image: a null row, or a struct row whose bytes and path are both null.
    Null,
}

impl ImageSource<'_> {
    /// The file of a [`ImageSource::Path`], resolved against `root`; `None` for other sources.
    pub fn resolve(&self, root: Option<&Path>) -> Option<PathBuf> {
        match (self, root) {
            (ImageSource::Path(path), Some(root)) => Some(root.join(path)),
            (ImageSource::Path(path), None) => Some(PathBuf::from(path)),
            _ => None,
        }
    }
}

/// The types an image column may have, for errors.
const EXPECTED: &str = "binary, large_binary or binary_view, or a struct with a `bytes` field \
                        of one of these and an optional `path` field of utf8, large_utf8 or \
                        utf8_view";

fn unsupported(data_type: &DataType) -> Error {
    Error::UnsupportedImageColumn {
        data_type: data_type.clone(),
        expected: EXPECTED,
    }
}

/// Whether `data_type` is a type an image column may have.
pub fn is_image_column_type(data_type: &DataType) -> bool {
    match data_type {
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => true,
        DataType::Struct(fields) => {
            let bytes = fields.iter().find(|field| field.name() == "bytes");
            let path = fields.iter().find(|field| field.name() == "path");
            bytes.is_some_and(|field| {
                matches!(
                    field.data_type(),
                    DataType::Binary | DataType::LargeBinary | DataType::BinaryView
                )
            }) && path.is_none_or(|field| {
                matches!(
                    field.data_type(),
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                )
            })
        }
        _ => false,
    }
}

/// The source of every row of `array`, in order; `UnsupportedImageColumn` for any other type.
///
/// ```
/// use arrow_array::BinaryArray;
/// use arrow_dlpack::images::{ImageSource, image_sources};
///
/// let column = BinaryArray::from_opt_vec(vec![Some(b"\x89PNG".as_slice()), None]);
/// let sources = image_sources(&column)?;
/// assert_eq!(sources, vec![ImageSource::Bytes(b"\x89PNG"), ImageSource::Null]);
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
pub fn image_sources(array: &dyn Array) -> Result<Vec<ImageSource<'_>>> {
    if !is_image_column_type(array.data_type()) {
        return Err(unsupported(array.data_type()));
    }
    match array.data_type() {
        DataType::Struct(_) => struct_sources(array.as_struct()),
        _ => binary_sources(array),
    }
}

/// The bytes of each row of a binary array, `None` where null.
fn binary_values(array: &dyn Array) -> Result<Vec<Option<&[u8]>>> {
    Ok(match array.data_type() {
        DataType::Binary => array.as_bytes::<BinaryType>().iter().collect(),
        DataType::LargeBinary => array.as_bytes::<LargeBinaryType>().iter().collect(),
        DataType::BinaryView => array.as_binary_view().iter().collect(),
        other => return Err(unsupported(other)),
    })
}

fn binary_sources(array: &dyn Array) -> Result<Vec<ImageSource<'_>>> {
    Ok(binary_values(array)?
        .into_iter()
        .map(|bytes| bytes.map_or(ImageSource::Null, ImageSource::Bytes))
        .collect())
}

fn struct_sources(array: &StructArray) -> Result<Vec<ImageSource<'_>>> {
    let bytes = binary_values(
        array
            .column_by_name("bytes")
            .ok_or_else(|| unsupported(array.data_type()))?
            .as_ref(),
    )?;
    let paths: Vec<Option<&str>> = match array.column_by_name("path") {
        None => vec![None; array.len()],
        Some(paths) => match paths.data_type() {
            DataType::Utf8 => paths.as_string::<i32>().iter().collect(),
            DataType::LargeUtf8 => paths.as_string::<i64>().iter().collect(),
            DataType::Utf8View => paths.as_string_view().iter().collect(),
            _ => return Err(unsupported(array.data_type())),
        },
    };
    Ok(bytes
        .into_iter()
        .zip(paths)
        .enumerate()
        .map(
            |(row, (bytes, path))| match (array.is_null(row), bytes, path) {
                (true, _, _) => ImageSource::Null,
                (false, Some(bytes), _) => ImageSource::Bytes(bytes),
                (false, None, Some(path)) => ImageSource::Path(path),
                (false, None, None) => ImageSource::Null,
            },
        )
        .collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, BinaryViewArray, Int32Array, LargeBinaryArray, StringArray};
    use arrow_buffer::NullBuffer;
    use arrow_schema::{Field, Fields};

    use super::*;

    #[test]
    fn reads_every_binary_type() {
        let rows = vec![Some(b"a".as_slice()), None];
        let large = LargeBinaryArray::from_opt_vec(rows.clone());
        let view = BinaryViewArray::from(rows);
        for array in [&large as &dyn Array, &view] {
            assert_eq!(
                image_sources(array).unwrap(),
                vec![ImageSource::Bytes(b"a"), ImageSource::Null]
            );
        }
    }

    #[test]
    fn reads_hugging_face_image_structs() {
        let bytes: ArrayRef = Arc::new(arrow_array::BinaryArray::from_opt_vec(vec![
            Some(b"x".as_slice()),
            None,
            None,
            Some(b"y".as_slice()),
        ]));
        let paths: ArrayRef = Arc::new(StringArray::from(vec![
            Some("ignored.png"),
            Some("a/b.jpg"),
            None,
            None,
        ]));
        let fields = Fields::from(vec![
            Field::new("bytes", DataType::Binary, true),
            Field::new("path", DataType::Utf8, true),
        ]);
        let nulls = NullBuffer::from(vec![true, true, true, false]);
        let array = StructArray::new(fields, vec![bytes, paths], Some(nulls));
        assert_eq!(
            image_sources(&array).unwrap(),
            vec![
                ImageSource::Bytes(b"x"),
                ImageSource::Path("a/b.jpg"),
                ImageSource::Null,
                ImageSource::Null,
            ]
        );
        assert_eq!(
            ImageSource::Path("a/b.jpg").resolve(Some(Path::new("/data"))),
            Some(PathBuf::from("/data/a/b.jpg"))
        );
    }

    #[test]
    fn rejects_other_types_naming_them() {
        let error = image_sources(&Int32Array::from(vec![1])).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("cannot read Int32 as encoded images; expected")
        );
        let fields = Fields::from(vec![Field::new("bytes", DataType::Utf8, true)]);
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["x"]));
        let array = StructArray::new(fields, vec![strings], None);
        assert!(image_sources(&array).is_err());
    }
}
