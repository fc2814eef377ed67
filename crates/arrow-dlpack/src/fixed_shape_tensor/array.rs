//! `FixedShapeTensorArray`: a fixed-shape tensor column (type and storage), to and from tensors.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, FixedSizeListArray};
use arrow_buffer::{Buffer, MutableBuffer};
use arrow_dlpack_tensor::{Tensor, layout};
use arrow_schema::Field;

use super::FixedShapeTensorType;
use crate::from_tensor::{list_size, primitive_array};
use crate::{ArrayToTensorOptions, Error, Result, TensorToArrayOptions, arrow_type_of, dtype_of};

/// An `arrow.fixed_shape_tensor` array: its [`FixedShapeTensorType`] and its fixed-size list
/// storage.
///
/// arrow-rs keeps extension types in [`Field`] metadata, not in arrays, so this pairs the two;
/// [`FixedShapeTensorArray::field`] gives the field to put in a schema beside
/// [`FixedShapeTensorArray::storage`].
///
/// ```
/// use arrow_dlpack::Buffer;
/// use arrow_dlpack::{ArrayToTensorOptions, FixedShapeTensorArray, TensorToArrayOptions};
/// use arrow_dlpack::{DType, Tensor};
///
/// // Three 2x2 matrices, transposed: the strides say the cells are column-major.
/// let buffer = Buffer::from_vec((0..12i32).collect::<Vec<_>>());
/// let tensor = Tensor::try_new_row_major(buffer, DType::Int32, vec![3, 2, 2])?.permuted(&[0, 2, 1])?;
///
/// let array = FixedShapeTensorArray::from_tensor(&tensor, TensorToArrayOptions::default())?;
/// assert_eq!(array.len(), 3);
/// assert_eq!(array.extension_type().shape(), &[2, 2]);
/// assert_eq!(array.extension_type().permutation(), Some(&[1, 0][..]));
///
/// // The round trip gives the same logical tensor over the same memory.
/// let back = array.to_tensor(ArrayToTensorOptions::default())?;
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
    ///
    /// ```
    /// use arrow_array::RecordBatch;
    /// use arrow_dlpack::{ArrayToTensorOptions, FixedShapeTensorArray, Tensor, TensorToArrayOptions};
    /// use arrow_schema::Schema;
    /// use std::sync::Arc;
    ///
    /// let cells = Tensor::from_vec((0..8i16).collect(), vec![2, 2, 2])?;
    /// let (field, array) = FixedShapeTensorArray::from_tensor(&cells, TensorToArrayOptions::default())?
    ///     .into_field_and_array("cells");
    /// let batch = RecordBatch::try_new(Arc::new(Schema::new(vec![field])), vec![array])?;
    ///
    /// // The schema's field carries the extension type; the column is its storage.
    /// let column = FixedShapeTensorArray::try_from_field_and_array(
    ///     batch.schema().field(0),
    ///     batch.column(0).clone(),
    /// )?;
    /// assert_eq!(column.to_tensor(ArrayToTensorOptions::default())?.shape(), &[2, 2, 2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
    /// [`allow_nulls`](ArrayToTensorOptions::allow_nulls) is set.
    /// The values are always shared, so [`allow_copy`](ArrayToTensorOptions::allow_copy) changes
    /// nothing: the value type of a fixed-shape tensor is numeric.
    pub fn to_tensor(&self, options: ArrayToTensorOptions) -> Result<Tensor> {
        let dtype = dtype_of(self.data_type.value_type())?;
        let flat = crate::array_to_tensor(&self.storage, options)?;
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
    /// misread: they give [`Error::GappedStrides`], or, with
    /// [`allow_copy`](TensorToArrayOptions::allow_copy), a row-major copy with no permutation.
    /// A 0-d tensor is refused with [`Error::ZeroDimensional`]; a tensor without elements (shape
    /// `(0, 2, 2)`, or `(3, 0)`) gives an array of the right length and shape, with no
    /// permutation.
    /// The storage's child field is nullable, as in PyArrow's storage type, and holds no nulls.
    pub fn from_tensor(tensor: &Tensor, options: TensorToArrayOptions) -> Result<Self> {
        let allow_copy = options.allow_copy;
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
