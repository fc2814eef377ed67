//! The `arrow.fixed_shape_tensor` canonical extension type: a column whose every value is a tensor
//! of one shape, stored row-major in a fixed-size list.
//!
//! The metadata is written and read here through serde, following the specification (key
//! `permutation`, absent keys omitted, nullable storage child accepted), because arrow-rs's own
//! `FixedShapeTensor` writes a form PyArrow rejects; see `docs/fixed-shape-tensor.md`.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, FixedSizeListArray};
use arrow_buffer::{Buffer, MutableBuffer};
use arrow_dlpack_tensor::{Tensor, layout};
use arrow_schema::extension::{
    EXTENSION_TYPE_METADATA_KEY, EXTENSION_TYPE_NAME_KEY, ExtensionType,
};
use arrow_schema::{ArrowError, DataType, Field};
use serde::{Deserialize, Serialize};

use crate::error::MAX_LIST_SIZE;
use crate::import::{list_size, primitive_array};
use crate::{Error, Result, arrow_type_of, dtype_of};

/// The extension name, stored under `ARROW:extension:name`.
pub const EXTENSION_NAME: &str = "arrow.fixed_shape_tensor";

/// The JSON metadata of `arrow.fixed_shape_tensor`, stored under `ARROW:extension:metadata`.
///
/// Serialized with the keys in the order `shape`, `permutation`, `dim_names`, and with absent
/// optional keys omitted, as PyArrow writes it: `{"shape":[2,3]}`,
/// `{"shape":[2,3],"permutation":[1,0],"dim_names":["x","y"]}`.
/// Reading accepts explicit `null`s for the optional keys, ignores unknown keys, and also accepts
/// the key `permutations` that arrow-rs writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixedShapeTensorMetadata {
    /// The physical shape of each tensor (the row-major layout of its storage).
    pub shape: Vec<usize>,
    /// Logical dimension `i` is physical dimension `permutation[i]`; absent means the identity.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "permutations"
    )]
    pub permutation: Option<Vec<usize>>,
    /// Names of the physical dimensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dim_names: Option<Vec<String>>,
}

impl FixedShapeTensorMetadata {
    /// Parses the JSON metadata.
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json).map_err(|error| Error::InvalidExtension {
            reason: format!(
                "metadata {json:?} does not parse ({error}); expected a JSON object such as \
                 {{\"shape\":[2,3]}}"
            ),
        })
    }

    /// The JSON metadata, compact, absent keys omitted.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("serializing vectors of numbers and strings cannot fail")
    }
}

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
///     tensor_type.metadata(),
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
    pub fn metadata(&self) -> String {
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
            (EXTENSION_TYPE_METADATA_KEY.to_string(), self.metadata()),
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

fn is_permutation(order: &[usize], ndim: usize) -> bool {
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

/// An `arrow.fixed_shape_tensor` array: its [`FixedShapeTensorType`] and its fixed-size list
/// storage.
///
/// arrow-rs keeps extension types in [`Field`] metadata, not in arrays, so this pairs the two;
/// [`FixedShapeTensorArray::field`] gives the field to put in a schema beside
/// [`FixedShapeTensorArray::storage`].
///
/// ```
/// use arrow_buffer::Buffer;
/// use arrow_dlpack::FixedShapeTensorArray;
/// use arrow_dlpack_tensor::{DType, Tensor};
///
/// // Three 2x2 matrices, transposed: the strides say the cells are column-major.
/// let buffer = Buffer::from_vec((0..12i32).collect::<Vec<_>>());
/// let tensor = Tensor::try_new_row_major(buffer, DType::Int32, vec![3, 2, 2])?.permuted(&[0, 2, 1])?;
///
/// let array = FixedShapeTensorArray::from_tensor(&tensor, false)?;
/// assert_eq!(array.len(), 3);
/// assert_eq!(array.extension_type().shape(), &[2, 2]);
/// assert_eq!(array.extension_type().permutation(), Some(&[1, 0][..]));
///
/// // The round trip gives the same logical tensor over the same memory.
/// let back = array.to_tensor(false)?;
/// assert_eq!(back.shape(), tensor.shape());
/// assert_eq!(back.strides(), tensor.strides());
/// assert_eq!(back.data_ptr(), tensor.data_ptr());
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct FixedShapeTensorArray {
    data_type: FixedShapeTensorType,
    storage: FixedSizeListArray,
}

impl FixedShapeTensorArray {
    /// Pairs a type with its storage, checking that the storage type matches.
    pub fn try_new(data_type: FixedShapeTensorType, storage: FixedSizeListArray) -> Result<Self> {
        data_type.check_storage_type(storage.data_type())?;
        Ok(FixedShapeTensorArray { data_type, storage })
    }

    /// Reads an array imported with its field (from the C data interface, IPC or a record batch).
    pub fn try_from_field_and_array(field: &Field, array: ArrayRef) -> Result<Self> {
        let data_type = FixedShapeTensorType::try_from_field(field)?;
        let Some(storage) = array.as_any().downcast_ref::<FixedSizeListArray>() else {
            return Err(Error::InvalidExtension {
                reason: format!(
                    "storage array has type {}; expected a fixed-size list array",
                    array.data_type()
                ),
            });
        };
        Self::try_new(data_type, storage.clone())
    }

    /// The extension type.
    pub fn extension_type(&self) -> &FixedShapeTensorType {
        &self.data_type
    }

    /// The fixed-size list storage.
    pub fn storage(&self) -> &FixedSizeListArray {
        &self.storage
    }

    /// The type and the storage, taken apart.
    pub fn into_parts(self) -> (FixedShapeTensorType, FixedSizeListArray) {
        (self.data_type, self.storage)
    }

    /// The number of tensors.
    pub fn len(&self) -> usize {
        self.storage.len()
    }

    /// Whether the array holds no tensors.
    pub fn is_empty(&self) -> bool {
        self.storage.is_empty()
    }

    /// The number of null tensors (nulls inside tensors are not counted).
    pub fn null_count(&self) -> usize {
        self.storage.null_count()
    }

    /// A zero-copy slice of `len` tensors from `offset`.
    ///
    /// # Panics
    ///
    /// Panics if `offset + len > self.len()`, as arrow-rs slices do.
    pub fn slice(&self, offset: usize, len: usize) -> Self {
        FixedShapeTensorArray {
            data_type: self.data_type.clone(),
            storage: self.storage.slice(offset, len),
        }
    }

    /// The field to describe this array in a schema: the storage's exact type, nullable, with the
    /// extension name and metadata.
    pub fn field(&self, name: &str) -> Field {
        Field::new(name, self.storage.data_type().clone(), true)
            .with_metadata(self.data_type.field_metadata())
    }

    /// Views the whole array as one read-only tensor of shape `(len, *logical_shape)`, zero-copy.
    ///
    /// The strides follow the permutation exactly, for any rank: logical dimension `i` of a cell
    /// is physical dimension `permutation[i]`.
    /// Dimension names, when the type has them, are given in logical order, with `""` for the
    /// outermost dimension.
    /// Nulls, of whole tensors or of values inside them, are refused with [`Error::Nulls`] unless
    /// `allow_nulls`.
    pub fn to_tensor(&self, allow_nulls: bool) -> Result<Tensor> {
        let dtype = dtype_of(self.data_type.value_type())?;
        let flat = crate::to_tensor(&self.storage, allow_nulls)?;
        let mut shape = Vec::with_capacity(self.data_type.ndim() + 1);
        shape.push(self.len());
        shape.extend_from_slice(self.data_type.shape());
        let strides = layout::row_major_strides(&shape)?;
        let names = self.data_type.dim_names().map(|names| {
            std::iter::once(String::new())
                .chain(names.iter().cloned())
                .collect()
        });
        let physical =
            Tensor::try_new(flat.buffer().clone(), dtype, shape, strides, flat.offset())?
                .with_dim_names(names)?;
        match self.data_type.permutation() {
            None => Ok(physical),
            Some(permutation) => {
                let order: Vec<usize> = std::iter::once(0)
                    .chain(permutation.iter().map(|&p| p + 1))
                    .collect();
                Ok(physical.permuted(&order)?)
            }
        }
    }

    /// Builds an array from a tensor whose outermost dimension becomes the array length.
    ///
    /// The outermost dimension must have the largest stride ([`Error::NotFirstMajor`] otherwise);
    /// the order of the other strides gives the permutation (none when they are already in
    /// row-major order), and the tensor's dimension names, without the outermost one, become
    /// the type's (physical) `dim_names`.
    /// The array shares the tensor's memory when the elements are densely packed.
    /// Gapped strides (`x[::2]`, `x[:, ::2]`), overlapping, zero or negative strides are never
    /// misread: they give [`Error::GappedStrides`], or, with `allow_copy`, a row-major copy with
    /// no permutation.
    /// A 0-d tensor is refused with [`Error::ZeroDimensional`]; a tensor without elements (shape
    /// `(0, 2, 2)`, or `(3, 0)`) gives an array of the right length and shape, with no
    /// permutation.
    /// The storage's child field is nullable, as in PyArrow's storage type, and holds no nulls.
    pub fn from_tensor(tensor: &Tensor, allow_copy: bool) -> Result<Self> {
        tensor.require_cpu("make an Arrow array of it")?;
        if tensor.ndim() == 0 {
            return Err(Error::ZeroDimensional);
        }
        let value_type = arrow_type_of(tensor.dtype())?;
        let shape = tensor.shape();
        let strides = tensor.strides();
        let len = shape[0];
        let cell_names = tensor.dim_names().map(|names| names[1..].to_vec());
        let build = |buffer: Buffer,
                     cell_shape: Vec<usize>,
                     permutation: Option<Vec<usize>>,
                     names: Option<Vec<String>>|
         -> Result<Self> {
            let data_type =
                FixedShapeTensorType::try_new(value_type.clone(), cell_shape, permutation, names)?;
            let leaf = primitive_array(value_type.clone(), buffer, len * data_type.list_size())?;
            let field = Arc::new(Field::new_list_field(value_type.clone(), true));
            let size = list_size(data_type.list_size())?;
            let storage = FixedSizeListArray::try_new_with_length(field, size, leaf, None, len)?;
            Ok(FixedShapeTensorArray { data_type, storage })
        };
        let copy = || {
            let copy = tensor.to_contiguous()?;
            let buffer = copy
                .row_major_buffer()
                .expect("a contiguous copy is row-major");
            build(buffer, shape[1..].to_vec(), None, cell_names.clone())
        };
        let refuse = || Error::GappedStrides {
            shape: shape.to_vec(),
            strides: strides.to_vec(),
        };

        if tensor.is_empty() {
            let empty = Buffer::from(MutableBuffer::new(0));
            return build(empty, shape[1..].to_vec(), None, cell_names.clone());
        }
        // Extent-1 dimensions address one element whatever their stride, so only the others
        // constrain the layout.
        let significant = |dim: usize| shape[dim] > 1;
        if (0..shape.len()).any(|dim| significant(dim) && strides[dim] <= 0) {
            return if allow_copy { copy() } else { Err(refuse()) };
        }
        if significant(0)
            && (1..shape.len()).any(|dim| significant(dim) && strides[dim] > strides[0])
        {
            return Err(Error::NotFirstMajor {
                shape: shape.to_vec(),
                strides: strides.to_vec(),
            });
        }
        // Physical dimension j of a cell is logical cell dimension `order[j]`: the significant
        // dimensions by decreasing stride, the extent-1 dimensions left where they are.
        let ndim = shape.len() - 1;
        let mut by_stride: Vec<usize> = (0..ndim).filter(|&d| significant(d + 1)).collect();
        let slots = by_stride.clone();
        by_stride.sort_by_key(|&d| std::cmp::Reverse(strides[d + 1]));
        let mut order: Vec<usize> = (0..ndim).collect();
        for (slot, dim) in slots.into_iter().zip(by_stride) {
            order[slot] = dim;
        }
        let full_order: Vec<usize> = std::iter::once(0)
            .chain(order.iter().map(|&d| d + 1))
            .collect();
        let physical = tensor.permuted(&full_order)?;
        let Some(buffer) = physical.row_major_buffer() else {
            return if allow_copy { copy() } else { Err(refuse()) };
        };
        let is_identity = order.iter().enumerate().all(|(j, &d)| j == d);
        // The inverse of `order`: logical dimension i is physical dimension permutation[i].
        let permutation = (!is_identity).then(|| {
            let mut permutation = vec![0; ndim];
            for (j, &d) in order.iter().enumerate() {
                permutation[d] = j;
            }
            permutation
        });
        let physical_names =
            cell_names.map(|names| order.iter().map(|&d| names[d].clone()).collect());
        build(
            buffer,
            physical.shape()[1..].to_vec(),
            permutation,
            physical_names,
        )
    }
}
