//! `FixedShapeTensorType`: the extension type (shape, permutation, dimension names and the storage
//! type they imply), and its arrow-rs `ExtensionType` implementation.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::extension::{
    EXTENSION_TYPE_METADATA_KEY, EXTENSION_TYPE_NAME_KEY, ExtensionType,
};
use arrow_schema::{ArrowError, DataType, Field};

use super::{EXTENSION_NAME, FixedShapeTensorMetadata};
use crate::error::MAX_LIST_SIZE;
use crate::{Error, Result};

/// The type of an `arrow.fixed_shape_tensor` column: the element type, the physical shape of each
/// tensor, and optionally a permutation and dimension names.
///
/// The storage is `FixedSizeList<value_type>[product(shape)]`; each list holds one tensor in
/// row-major order of `shape`, the *physical* shape.
/// Logical dimension `i` is physical dimension `permutation[i]`, so the logical shape is
/// `[shape[permutation[0]], shape[permutation[1]], ...]`; `dim_names` name the physical
/// dimensions, as the specification says.
///
/// ```
/// use arrow_dlpack::FixedShapeTensorType;
/// use arrow_schema::DataType;
///
/// let tensor_type = FixedShapeTensorType::try_new(
///     DataType::Float32,
///     vec![100, 200, 500],
///     Some(vec![2, 0, 1]),
///     Some(vec!["C".into(), "H".into(), "W".into()]),
/// )?;
/// assert_eq!(tensor_type.logical_shape(), vec![500, 100, 200]);
/// assert_eq!(
///     tensor_type.metadata_json(),
///     r#"{"shape":[100,200,500],"permutation":[2,0,1],"dim_names":["C","H","W"]}"#
/// );
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedShapeTensorType {
    value_type: DataType,
    metadata: FixedShapeTensorMetadata,
    /// The product of the shape, checked to fit a fixed-size list.
    list_size: usize,
}

impl FixedShapeTensorType {
    /// The extension name, stored under `ARROW:extension:name`.
    pub const EXTENSION_NAME: &'static str = EXTENSION_NAME;

    /// Builds the type, checking that `permutation` reorders `0..shape.len()`, that there is one
    /// dimension name per dimension, and that a tensor's element count fits a fixed-size list.
    ///
    /// ```
    /// use arrow_dlpack::FixedShapeTensorType;
    /// use arrow_schema::DataType;
    ///
    /// // 2 x 3 images stored column-major: physical dimension 0 is logical dimension 1.
    /// let images = FixedShapeTensorType::try_new(
    ///     DataType::Float32,
    ///     vec![3, 2],
    ///     Some(vec![1, 0]),
    ///     Some(vec!["w".into(), "h".into()]),
    /// )?;
    /// assert_eq!(images.list_size(), 6);
    /// assert_eq!(images.logical_shape(), vec![2, 3]);
    /// assert_eq!(images.metadata_json(), r#"{"shape":[3,2],"permutation":[1,0],"dim_names":["w","h"]}"#);
    ///
    /// // Not a permutation of 0..2.
    /// assert!(FixedShapeTensorType::try_new(DataType::Float32, vec![3, 2], Some(vec![1, 1]), None).is_err());
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn try_new(
        value_type: DataType,
        shape: Vec<usize>,
        permutation: Option<Vec<usize>>,
        dim_names: Option<Vec<String>>,
    ) -> Result<Self> {
        Self::from_parts(
            value_type,
            FixedShapeTensorMetadata {
                shape,
                permutation,
                dim_names,
            },
        )
    }

    /// Like [`FixedShapeTensorType::try_new`].
    ///
    /// # Panics
    ///
    /// Panics where [`FixedShapeTensorType::try_new`] returns an error.
    pub fn new(
        value_type: DataType,
        shape: Vec<usize>,
        permutation: Option<Vec<usize>>,
        dim_names: Option<Vec<String>>,
    ) -> Self {
        match Self::try_new(value_type, shape, permutation, dim_names) {
            Ok(tensor_type) => tensor_type,
            Err(error) => panic!("invalid fixed-shape tensor type: {error}"),
        }
    }

    /// Builds the type from the element type and the JSON metadata PyArrow or this crate wrote.
    pub fn from_metadata(value_type: DataType, metadata: &str) -> Result<Self> {
        Self::from_parts(value_type, FixedShapeTensorMetadata::from_json(metadata)?)
    }

    fn from_parts(value_type: DataType, metadata: FixedShapeTensorMetadata) -> Result<Self> {
        let ndim = metadata.shape.len();
        if let Some(permutation) = &metadata.permutation
            && !is_permutation(permutation, ndim)
        {
            return Err(Error::InvalidExtension {
                reason: format!(
                    "permutation {permutation:?} does not reorder the {ndim} dimensions of shape \
                     {:?}; expected each of 0..{ndim} exactly once",
                    metadata.shape
                ),
            });
        }
        if let Some(names) = &metadata.dim_names
            && names.len() != ndim
        {
            return Err(Error::InvalidExtension {
                reason: format!(
                    "dim_names has {} names but shape {:?} has {ndim} dimensions; expected one \
                     name per dimension",
                    names.len(),
                    metadata.shape
                ),
            });
        }
        let list_size = metadata
            .shape
            .iter()
            .try_fold(1usize, |product, &extent| product.checked_mul(extent))
            .filter(|&size| size <= MAX_LIST_SIZE)
            .ok_or_else(|| Error::InvalidExtension {
                reason: format!(
                    "shape {:?} has too many elements per tensor; expected at most \
                     {MAX_LIST_SIZE}, the largest fixed-size list",
                    metadata.shape
                ),
            })?;
        Ok(FixedShapeTensorType {
            value_type,
            metadata,
            list_size,
        })
    }

    /// The element type.
    pub fn value_type(&self) -> &DataType {
        &self.value_type
    }

    /// The physical shape of each tensor.
    pub fn shape(&self) -> &[usize] {
        &self.metadata.shape
    }

    /// The permutation, if the metadata has one: logical dimension `i` is physical dimension
    /// `permutation[i]`.
    pub fn permutation(&self) -> Option<&[usize]> {
        self.metadata.permutation.as_deref()
    }

    /// The names of the physical dimensions, if any.
    pub fn dim_names(&self) -> Option<&[String]> {
        self.metadata.dim_names.as_deref()
    }

    /// The number of dimensions of each tensor.
    pub fn ndim(&self) -> usize {
        self.metadata.shape.len()
    }

    /// The number of elements of each tensor: the size of the storage's fixed-size lists.
    pub fn list_size(&self) -> usize {
        self.list_size
    }

    /// The shape of each tensor as its user sees it: `shape[permutation[i]]` for each `i`.
    pub fn logical_shape(&self) -> Vec<usize> {
        self.logical_order(self.shape())
    }

    /// The dimension names in logical order: `dim_names[permutation[i]]` for each `i`.
    pub fn logical_dim_names(&self) -> Option<Vec<String>> {
        self.dim_names().map(|names| self.logical_order(names))
    }

    fn logical_order<T: Clone>(&self, physical: &[T]) -> Vec<T> {
        match self.permutation() {
            None => physical.to_vec(),
            Some(permutation) => permutation.iter().map(|&p| physical[p].clone()).collect(),
        }
    }

    /// The metadata as a struct.
    pub fn as_metadata(&self) -> &FixedShapeTensorMetadata {
        &self.metadata
    }

    /// The JSON metadata, stored under `ARROW:extension:metadata`: `{"shape":[..]}` plus
    /// `"permutation"` and `"dim_names"` only when present.
    ///
    /// Named apart from arrow-rs's [`ExtensionType::metadata`], which gives the metadata as a
    /// [`FixedShapeTensorMetadata`] struct (as [`as_metadata`](Self::as_metadata) does).
    pub fn metadata_json(&self) -> String {
        self.metadata.to_json()
    }

    /// The storage type: `FixedSizeList<value_type>[list_size]`, whose child field `item` is
    /// nullable if `nullable_item` (PyArrow's form) or not.
    pub fn storage_type(&self, nullable_item: bool) -> DataType {
        DataType::FixedSizeList(
            Arc::new(Field::new_list_field(
                self.value_type.clone(),
                nullable_item,
            )),
            self.list_size as i32,
        )
    }

    /// A field of this type: the storage type with a nullable child (PyArrow's form), and the
    /// extension name and metadata in the field's metadata.
    pub fn to_field(&self, name: &str, nullable: bool) -> Field {
        Field::new(name, self.storage_type(true), nullable).with_metadata(self.field_metadata())
    }

    /// The two field-metadata entries that mark a field as this extension type.
    pub fn field_metadata(&self) -> HashMap<String, String> {
        HashMap::from([
            (
                EXTENSION_TYPE_NAME_KEY.to_string(),
                EXTENSION_NAME.to_string(),
            ),
            (
                EXTENSION_TYPE_METADATA_KEY.to_string(),
                self.metadata_json(),
            ),
        ])
    }

    /// Reads the type from a field, as PyArrow or this crate writes it: the extension name and
    /// metadata from the field's metadata, the element type from the storage, whose child field
    /// may be nullable or not.
    pub fn try_from_field(field: &Field) -> Result<Self> {
        match field.extension_type_name() {
            Some(EXTENSION_NAME) => {}
            found => {
                return Err(Error::InvalidExtension {
                    reason: format!(
                        "field {:?} has extension name {found:?}; expected \
                         Some(\"{EXTENSION_NAME}\")",
                        field.name()
                    ),
                });
            }
        }
        let Some(metadata) = field.extension_type_metadata() else {
            return Err(Error::InvalidExtension {
                reason: format!(
                    "field {:?} has no {EXTENSION_TYPE_METADATA_KEY}; expected the JSON metadata \
                     with at least a shape",
                    field.name()
                ),
            });
        };
        let value_type = storage_value_type(field.data_type())?;
        let tensor_type = Self::from_metadata(value_type.clone(), metadata)?;
        tensor_type.check_storage_type(field.data_type())?;
        Ok(tensor_type)
    }

    /// Checks that `data_type` can store this type: a fixed-size list of `value_type` (child
    /// nullable or not) whose size is the number of elements of a tensor.
    pub fn check_storage_type(&self, data_type: &DataType) -> Result<()> {
        let matches = match data_type {
            DataType::FixedSizeList(field, size) => {
                field.data_type() == &self.value_type
                    && usize::try_from(*size) == Ok(self.list_size)
            }
            _ => false,
        };
        if matches {
            return Ok(());
        }
        Err(Error::InvalidExtension {
            reason: format!(
                "storage type {data_type} does not store tensors of shape {:?}; expected {}",
                self.shape(),
                self.storage_type(true)
            ),
        })
    }
}

/// The element type of a fixed-size list storage type.
fn storage_value_type(data_type: &DataType) -> Result<&DataType> {
    match data_type {
        DataType::FixedSizeList(field, _) => Ok(field.data_type()),
        other => Err(Error::InvalidExtension {
            reason: format!("storage type {other}; expected a fixed-size list"),
        }),
    }
}

pub(crate) fn is_permutation(order: &[usize], ndim: usize) -> bool {
    let mut seen = vec![false; ndim];
    order.len() == ndim
        && order
            .iter()
            .all(|&dim| dim < ndim && !std::mem::replace(&mut seen[dim], true))
}

fn to_arrow_error(error: Error) -> ArrowError {
    ArrowError::InvalidArgumentError(error.to_string())
}

/// Integration with arrow-rs's extension API, so that `Field::try_extension_type` and
/// `Field::with_extension_type` work with this type.
impl ExtensionType for FixedShapeTensorType {
    const NAME: &'static str = EXTENSION_NAME;

    type Metadata = FixedShapeTensorMetadata;

    fn metadata(&self) -> &Self::Metadata {
        &self.metadata
    }

    fn serialize_metadata(&self) -> Option<String> {
        Some(self.metadata.to_json())
    }

    fn deserialize_metadata(metadata: Option<&str>) -> Result<Self::Metadata, ArrowError> {
        let metadata = metadata.ok_or_else(|| {
            ArrowError::InvalidArgumentError(format!(
                "invalid {EXTENSION_NAME}: no metadata; expected a JSON object with a shape"
            ))
        })?;
        FixedShapeTensorMetadata::from_json(metadata).map_err(to_arrow_error)
    }

    fn supports_data_type(&self, data_type: &DataType) -> Result<(), ArrowError> {
        self.check_storage_type(data_type).map_err(to_arrow_error)
    }

    fn try_new(data_type: &DataType, metadata: Self::Metadata) -> Result<Self, ArrowError> {
        let value_type = storage_value_type(data_type).map_err(to_arrow_error)?;
        let tensor_type = Self::from_parts(value_type.clone(), metadata).map_err(to_arrow_error)?;
        tensor_type
            .check_storage_type(data_type)
            .map_err(to_arrow_error)?;
        Ok(tensor_type)
    }
}
