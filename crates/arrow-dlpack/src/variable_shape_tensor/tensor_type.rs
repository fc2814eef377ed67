//! `VariableShapeTensorType`: the extension type (element type, rank, dimension names,
//! permutation, uniform shape and the storage type they imply), and its arrow-rs
//! `ExtensionType` implementation.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_dlpack_tensor::MAX_NDIM;
use arrow_schema::extension::{
    EXTENSION_TYPE_METADATA_KEY, EXTENSION_TYPE_NAME_KEY, ExtensionType,
};
use arrow_schema::{ArrowError, DataType, Field, Fields};

use super::{VARIABLE_SHAPE_TENSOR_NAME, VariableShapeTensorMetadata};
use crate::fixed_shape_tensor::is_permutation;
use crate::{Error, Result};

/// The type of an `arrow.variable_shape_tensor` column: the element type, the number of
/// dimensions, and optionally dimension names, a permutation and a uniform shape.
///
/// The storage is `Struct<data: List<value_type>, shape: FixedSizeList<int32>[ndim]>`: each row
/// holds one tensor, its elements in row-major order of its `shape`, the *physical* shape.
/// Logical dimension `i` is physical dimension `permutation[i]`; `dim_names` and
/// `uniform_shape` describe the physical dimensions, as `shape` does.
///
/// ```
/// use arrow_dlpack::VariableShapeTensorType;
/// use arrow_schema::DataType;
///
/// // Colour images of fixed height and channel count and variable width.
/// let images = VariableShapeTensorType::try_new(
///     DataType::UInt8,
///     3,
///     Some(vec!["H".into(), "W".into(), "C".into()]),
///     None,
///     Some(vec![Some(400), None, Some(3)]),
/// )?;
/// assert_eq!(
///     images.metadata_json(),
///     r#"{"dim_names":["H","W","C"],"uniform_shape":[400,null,3]}"#
/// );
/// assert_eq!(
///     images.storage_type().to_string(),
///     r#"Struct("data": List(UInt8), "shape": FixedSizeList(3 x Int32))"#
/// );
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VariableShapeTensorType {
    value_type: DataType,
    ndim: usize,
    metadata: VariableShapeTensorMetadata,
}

impl VariableShapeTensorType {
    /// The extension name, stored under `ARROW:extension:name`.
    pub const EXTENSION_NAME: &'static str = VARIABLE_SHAPE_TENSOR_NAME;

    /// Builds the type, checking that `ndim` is at most [`MAX_NDIM`], that there is one
    /// dimension name and one uniform extent (or `None`) per dimension, that the uniform extents
    /// are not negative, and that `permutation` reorders `0..ndim`.
    pub fn try_new(
        value_type: DataType,
        ndim: usize,
        dim_names: Option<Vec<String>>,
        permutation: Option<Vec<usize>>,
        uniform_shape: Option<Vec<Option<i32>>>,
    ) -> Result<Self> {
        Self::from_parts(
            value_type,
            ndim,
            VariableShapeTensorMetadata {
                dim_names,
                permutation,
                uniform_shape,
            },
        )
    }

    /// Builds the type from the element type, the rank and the JSON metadata that PyArrow,
    /// arrow-rs or this crate wrote.
    pub fn from_metadata(value_type: DataType, ndim: usize, metadata: &str) -> Result<Self> {
        Self::from_parts(
            value_type,
            ndim,
            VariableShapeTensorMetadata::from_json(metadata)?,
        )
    }

    /// Builds the type from its parts, checking the metadata against `ndim`.
    pub fn from_parts(
        value_type: DataType,
        ndim: usize,
        metadata: VariableShapeTensorMetadata,
    ) -> Result<Self> {
        let invalid = |reason: String| Err(Error::InvalidVariableShapeTensor { reason });
        if ndim > MAX_NDIM {
            return invalid(format!("{ndim} dimensions; expected at most {MAX_NDIM}"));
        }
        if let Some(permutation) = &metadata.permutation
            && !is_permutation(permutation, ndim)
        {
            return invalid(format!(
                "permutation {permutation:?} does not reorder {ndim} dimensions; expected each \
                 of 0..{ndim} exactly once"
            ));
        }
        if let Some(names) = &metadata.dim_names
            && names.len() != ndim
        {
            return invalid(format!(
                "dim_names has {} names for {ndim} dimensions; expected one name per dimension",
                names.len()
            ));
        }
        if let Some(uniform) = &metadata.uniform_shape {
            if uniform.len() != ndim {
                return invalid(format!(
                    "uniform_shape {} has {} entries for {ndim} dimensions; expected one extent \
                     or null per dimension",
                    uniform_text(uniform),
                    uniform.len()
                ));
            }
            if uniform.iter().flatten().any(|&extent| extent < 0) {
                return invalid(format!(
                    "uniform_shape {} has a negative extent; expected extents >= 0 or null",
                    uniform_text(uniform)
                ));
            }
        }
        Ok(VariableShapeTensorType {
            value_type,
            ndim,
            metadata,
        })
    }

    /// The element type.
    pub fn value_type(&self) -> &DataType {
        &self.value_type
    }

    /// The number of dimensions of each tensor.
    pub fn ndim(&self) -> usize {
        self.ndim
    }

    /// The names of the physical dimensions, if any.
    pub fn dim_names(&self) -> Option<&[String]> {
        self.metadata.dim_names.as_deref()
    }

    /// The permutation, if the metadata has one: logical dimension `i` is physical dimension
    /// `permutation[i]`.
    pub fn permutation(&self) -> Option<&[usize]> {
        self.metadata.permutation.as_deref()
    }

    /// The uniform shape, if the metadata has one: per physical dimension, the extent every
    /// tensor has, or `None` where it varies.
    pub fn uniform_shape(&self) -> Option<&[Option<i32>]> {
        self.metadata.uniform_shape.as_deref()
    }

    /// The physical extents in logical order: `physical[permutation[i]]` for each `i`.
    pub fn logical_order<T: Clone>(&self, physical: &[T]) -> Vec<T> {
        match self.permutation() {
            None => physical.to_vec(),
            Some(permutation) => permutation.iter().map(|&p| physical[p].clone()).collect(),
        }
    }

    /// The metadata as a struct.
    pub fn as_metadata(&self) -> &VariableShapeTensorMetadata {
        &self.metadata
    }

    /// The JSON metadata, stored under `ARROW:extension:metadata`: only the keys present, the
    /// permutation under the specification's key `permutation`.
    pub fn metadata_json(&self) -> String {
        self.metadata.to_json()
    }

    /// The storage type, in PyArrow's form (every field nullable):
    /// `Struct<data: List<item: value_type>, shape: FixedSizeList<item: int32>[ndim]>`.
    pub fn storage_type(&self) -> DataType {
        let data = DataType::List(Arc::new(Field::new_list_field(
            self.value_type.clone(),
            true,
        )));
        let shape = DataType::FixedSizeList(
            Arc::new(Field::new_list_field(DataType::Int32, true)),
            self.ndim as i32,
        );
        DataType::Struct(Fields::from(vec![
            Field::new("data", data, true),
            Field::new("shape", shape, true),
        ]))
    }

    /// A field of this type: the storage type and the extension name and metadata in the
    /// field's metadata.
    pub fn to_field(&self, name: &str, nullable: bool) -> Field {
        Field::new(name, self.storage_type(), nullable).with_metadata(self.field_metadata())
    }

    /// The two field-metadata entries that mark a field as this extension type.
    pub fn field_metadata(&self) -> HashMap<String, String> {
        HashMap::from([
            (
                EXTENSION_TYPE_NAME_KEY.to_string(),
                VARIABLE_SHAPE_TENSOR_NAME.to_string(),
            ),
            (
                EXTENSION_TYPE_METADATA_KEY.to_string(),
                self.metadata_json(),
            ),
        ])
    }

    /// Reads the type from a field, as PyArrow, arrow-rs or this crate writes it: the extension
    /// name and metadata from the field's metadata (absent metadata means no optional keys),
    /// the element type and rank from the storage.
    pub fn try_from_field(field: &Field) -> Result<Self> {
        match field.extension_type_name() {
            Some(VARIABLE_SHAPE_TENSOR_NAME) => {}
            found => {
                return Err(Error::InvalidVariableShapeTensor {
                    reason: format!(
                        "field {:?} has extension name {found:?}; expected \
                         Some(\"{VARIABLE_SHAPE_TENSOR_NAME}\")",
                        field.name()
                    ),
                });
            }
        }
        let (value_type, ndim) = storage_parts(field.data_type())?;
        Self::from_metadata(
            value_type.clone(),
            ndim,
            field.extension_type_metadata().unwrap_or(""),
        )
    }

    /// Checks that `data_type` can store this type: a struct of a `data` list of `value_type`
    /// and a `shape` fixed-size list of `ndim` int32, any of them nullable or not.
    pub fn check_storage_type(&self, data_type: &DataType) -> Result<()> {
        let (value_type, ndim) = storage_parts(data_type)?;
        if value_type == &self.value_type && ndim == self.ndim {
            return Ok(());
        }
        Err(Error::InvalidVariableShapeTensor {
            reason: format!(
                "storage type {data_type} does not store {}-dimensional tensors of {}; expected \
                 {}",
                self.ndim,
                self.value_type,
                self.storage_type()
            ),
        })
    }
}

/// The element type and rank of a storage type, which must be
/// `Struct<data: List<T>, shape: FixedSizeList<int32>[ndim]>` (the fields found by name).
pub(super) fn storage_parts(data_type: &DataType) -> Result<(&DataType, usize)> {
    let refuse = |what: &str| Error::InvalidVariableShapeTensor {
        reason: format!(
            "storage type {data_type} {what}; expected a struct of a list `data` and a \
             fixed-size list of int32 `shape`"
        ),
    };
    let DataType::Struct(fields) = data_type else {
        return Err(refuse("is not a struct"));
    };
    if fields.len() != 2 {
        return Err(refuse("does not have exactly two fields"));
    }
    let field = |name: &str| fields.iter().find(|field| field.name() == name);
    let value_type = match field("data").map(|field| field.data_type()) {
        Some(DataType::List(item)) => item.data_type(),
        Some(_) => return Err(refuse("has a `data` field that is not a list")),
        None => return Err(refuse("has no `data` field")),
    };
    let ndim = match field("shape").map(|field| field.data_type()) {
        Some(DataType::FixedSizeList(item, size)) if item.data_type() == &DataType::Int32 => {
            usize::try_from(*size).map_err(|_| refuse("has a `shape` of negative size"))?
        }
        Some(_) => {
            return Err(refuse(
                "has a `shape` field that is not a fixed-size list of int32",
            ));
        }
        None => return Err(refuse("has no `shape` field")),
    };
    Ok((value_type, ndim))
}

/// `[400,null,3]`, as the JSON writes it.
pub(super) fn uniform_text(uniform: &[Option<i32>]) -> String {
    serde_json::to_string(uniform).expect("serializing numbers cannot fail")
}

fn to_arrow_error(error: Error) -> ArrowError {
    ArrowError::InvalidArgumentError(error.to_string())
}

/// Integration with arrow-rs's extension API, so that `Field::try_extension_type` and
/// `Field::with_extension_type` work with this type.
impl ExtensionType for VariableShapeTensorType {
    const NAME: &'static str = VARIABLE_SHAPE_TENSOR_NAME;

    type Metadata = VariableShapeTensorMetadata;

    fn metadata(&self) -> &Self::Metadata {
        &self.metadata
    }

    fn serialize_metadata(&self) -> Option<String> {
        Some(self.metadata.to_json())
    }

    fn deserialize_metadata(metadata: Option<&str>) -> Result<Self::Metadata, ArrowError> {
        VariableShapeTensorMetadata::from_json(metadata.unwrap_or("")).map_err(to_arrow_error)
    }

    fn supports_data_type(&self, data_type: &DataType) -> Result<(), ArrowError> {
        self.check_storage_type(data_type).map_err(to_arrow_error)
    }

    fn try_new(data_type: &DataType, metadata: Self::Metadata) -> Result<Self, ArrowError> {
        let (value_type, ndim) = storage_parts(data_type).map_err(to_arrow_error)?;
        Self::from_parts(value_type.clone(), ndim, metadata).map_err(to_arrow_error)
    }
}
