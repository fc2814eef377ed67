//! `VariableShapeTensorArray`: a variable-shape tensor column (type and checked storage), each
//! row a zero-copy tensor of its own shape.

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{Array, ArrayRef, FixedSizeListArray, ListArray, StructArray};
use arrow_dlpack_tensor::{Tensor, layout};
use arrow_schema::Field;

use super::VariableShapeTensorType;
use super::tensor_type::uniform_text;
use crate::{ArrayToTensorOptions, Error, NullLocation, Result, array_to_tensor, dtype_of};

/// An `arrow.variable_shape_tensor` array: its [`VariableShapeTensorType`] and its struct
/// storage, checked row by row when the two are paired.
///
/// arrow-rs keeps extension types in [`Field`] metadata, not in arrays, so this pairs the two;
/// [`VariableShapeTensorArray::field`] gives the field to put in a schema beside
/// [`VariableShapeTensorArray::storage`].
///
/// ```
/// use arrow_dlpack::{Tensor, VariableShapeTensorArray, VariableShapeTensorMetadata};
///
/// // Two images of different sizes, stored transposed (physical W x H, logical H x W).
/// let a = Tensor::from_vec((0..6u8).collect(), vec![2, 3])?;
/// let b = Tensor::from_vec((0..20u8).collect(), vec![4, 5])?;
/// let metadata = VariableShapeTensorMetadata {
///     permutation: Some(vec![1, 0]),
///     ..Default::default()
/// };
/// let array = VariableShapeTensorArray::from_tensors(&[a.clone(), b], metadata)?;
/// assert_eq!(array.len(), 2);
/// assert_eq!(array.shape(0)?, vec![3, 2]); // as stored
///
/// // Each row is a view of the column's data, of its own (logical) shape.
/// let row = array.row(0)?;
/// assert_eq!(row.shape(), &[2, 3]);
/// assert_eq!(row.strides(), &[1, 2]);
/// assert_eq!(row.get::<u8>(&[1, 2])?, a.get::<u8>(&[1, 2])?);
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct VariableShapeTensorArray {
    data_type: VariableShapeTensorType,
    storage: StructArray,
    /// The `data` child: one list of elements per row.
    data: ListArray,
    /// The values of the `shape` child, `ndim` per row from `shapes.value_offset(row)`.
    shapes: FixedSizeListArray,
    /// All the elements of `data` as one 1-D tensor, when the value type has a dtype.
    values: Option<Tensor>,
}

impl VariableShapeTensorArray {
    /// Pairs a type with its storage, checking the storage type and every valid row: its `data`
    /// and `shape` are not null, the shape holds no null and no negative extent, agrees with
    /// the type's uniform shape, and the product of its extents is the length of the row's
    /// data.
    ///
    /// Null rows (nulls of the struct) are not checked: they have no tensor.
    pub fn try_new(data_type: VariableShapeTensorType, storage: StructArray) -> Result<Self> {
        data_type.check_storage_type(storage.data_type())?;
        let invalid = |reason: String| Error::InvalidVariableShapeTensor { reason };
        let data = storage
            .column_by_name("data")
            .and_then(|column| column.as_list_opt::<i32>())
            .expect("check_storage_type found a list `data`")
            .clone();
        let shapes = storage
            .column_by_name("shape")
            .and_then(|column| column.as_fixed_size_list_opt())
            .expect("check_storage_type found a fixed-size list `shape`")
            .clone();
        let ndim = data_type.ndim();
        let extents = shapes
            .values()
            .as_primitive_opt::<Int32Type>()
            .expect("check_storage_type found int32 extents");
        for row in (0..storage.len()).filter(|&row| storage.is_valid(row)) {
            if data.is_null(row) || shapes.is_null(row) {
                return Err(invalid(format!(
                    "row {row} is valid but its {} is null; expected a null row (a null of the \
                     struct) or a data list and a shape",
                    if data.is_null(row) { "data" } else { "shape" }
                )));
            }
            let start = shapes.value_offset_at(row);
            if let Some(nulls) = extents.nulls()
                && nulls.slice(start, ndim).null_count() > 0
            {
                return Err(invalid(format!(
                    "row {row} has a null in its shape; expected {ndim} extents"
                )));
            }
            let (first, end) = (data.value_offsets()[row], data.value_offsets()[row + 1]);
            if first < 0 || end < first || end as usize > data.values().len() {
                return Err(invalid(format!(
                    "row {row} has data offsets {first}..{end}; expected an increasing range \
                     inside the {} values",
                    data.values().len()
                )));
            }
            let shape = &extents.values()[start..start + ndim];
            check_row_shape(&data_type, row, shape, end - first)?;
        }
        let values = dtype_of(data_type.value_type())
            .ok()
            .map(|_| {
                let options = ArrayToTensorOptions {
                    allow_nulls: true,
                    allow_copy: false,
                };
                array_to_tensor(data.values().as_ref(), options)
            })
            .transpose()?;
        Ok(VariableShapeTensorArray {
            data_type,
            storage,
            data,
            shapes,
            values,
        })
    }

    /// Reads an array imported with its field (from the C data interface, IPC or a record
    /// batch).
    pub fn try_from_field_and_array(field: &Field, array: ArrayRef) -> Result<Self> {
        let data_type = VariableShapeTensorType::try_from_field(field)?;
        let Some(storage) = array.as_struct_opt() else {
            return Err(Error::InvalidVariableShapeTensor {
                reason: format!(
                    "storage array has type {}; expected a struct array",
                    array.data_type()
                ),
            });
        };
        Self::try_new(data_type, storage.clone())
    }

    /// The extension type.
    pub fn extension_type(&self) -> &VariableShapeTensorType {
        &self.data_type
    }

    /// The struct storage.
    pub fn storage(&self) -> &StructArray {
        &self.storage
    }

    /// The type and the storage, taken apart.
    pub fn into_parts(self) -> (VariableShapeTensorType, StructArray) {
        (self.data_type, self.storage)
    }

    /// The field to describe this array in a schema (nullable, with the extension name and
    /// metadata) and the storage, as a `RecordBatch` takes them.
    pub fn into_field_and_array(self, name: &str) -> (Field, ArrayRef) {
        let field = self.field(name);
        (field, std::sync::Arc::new(self.storage))
    }

    /// The field to describe this array in a schema: the storage's exact type, nullable, with
    /// the extension name and metadata.
    pub fn field(&self, name: &str) -> Field {
        Field::new(name, self.storage.data_type().clone(), true)
            .with_metadata(self.data_type.field_metadata())
    }

    /// The number of tensors (rows).
    pub fn len(&self) -> usize {
        self.storage.len()
    }

    /// Whether the array holds no rows.
    pub fn is_empty(&self) -> bool {
        self.storage.is_empty()
    }

    /// The number of dimensions of every tensor.
    pub fn ndim(&self) -> usize {
        self.data_type.ndim()
    }

    /// The number of null rows.
    pub fn null_count(&self) -> usize {
        self.storage.null_count()
    }

    /// Whether row `index` is null (false past the end).
    pub fn is_null(&self, index: usize) -> bool {
        index < self.len() && self.storage.is_null(index)
    }

    /// A zero-copy slice of `len` rows from `offset`.
    ///
    /// # Panics
    ///
    /// Panics if `offset + len > self.len()`, as arrow-rs slices do.
    pub fn slice(&self, offset: usize, len: usize) -> Self {
        VariableShapeTensorArray {
            data_type: self.data_type.clone(),
            storage: self.storage.slice(offset, len),
            data: self.data.slice(offset, len),
            shapes: self.shapes.slice(offset, len),
            values: self.values.clone(),
        }
    }

    /// The shape of row `index` as stored (the physical shape, the row-major layout of its
    /// data); [`Error::RowsOutOfRange`] past the end, [`Error::NullTensor`] for a null row.
    pub fn shape(&self, index: usize) -> Result<Vec<usize>> {
        self.check_row(index)?;
        Ok(self.stored_shape(index))
    }

    /// The shape of row `index` as [`row`](Self::row) gives it: the stored shape in logical
    /// order.
    pub fn logical_shape(&self, index: usize) -> Result<Vec<usize>> {
        Ok(self.data_type.logical_order(&self.shape(index)?))
    }

    /// The tensor of row `index`: a read-only view of the row's data, zero-copy, of the row's
    /// own shape, with the permutation applied as strides (logical dimension `i` is physical
    /// dimension `permutation[i]`) and the dimension names in logical order.
    ///
    /// A null row is refused with [`Error::NullTensor`], an index past the end with
    /// [`Error::RowsOutOfRange`], nulls among the row's elements with [`Error::Nulls`], and a
    /// value type without a dtype with [`Error::UnsupportedType`].
    pub fn row(&self, index: usize) -> Result<Tensor> {
        self.row_with(index, ArrayToTensorOptions::default())
    }

    /// [`row`](Self::row), with nulls among the row's elements accepted when
    /// [`allow_nulls`](ArrayToTensorOptions::allow_nulls) is set (they then hold unspecified
    /// values). The elements are always shared, so `allow_copy` changes nothing.
    pub fn row_with(&self, index: usize, options: ArrayToTensorOptions) -> Result<Tensor> {
        self.check_row(index)?;
        let Some(values) = &self.values else {
            return Err(Error::UnsupportedType {
                data_type: self.data_type.value_type().clone(),
                reason: "a variable-shape tensor's elements must be numbers",
            });
        };
        let start = self.data.value_offsets()[index] as usize;
        let len = self.data.value_length(index) as usize;
        if !options.allow_nulls
            && let Some(nulls) = self.data.values().logical_nulls()
        {
            let null_count = nulls.slice(start, len).null_count();
            if null_count > 0 {
                return Err(Error::Nulls {
                    null_count,
                    location: NullLocation::Array { depth: 1 },
                });
            }
        }
        let shape = self.stored_shape(index);
        let strides = layout::row_major_strides(&shape)?;
        let names = self.data_type.dim_names().map(<[String]>::to_vec);
        let physical = Tensor::try_new(
            values.buffer().clone(),
            values.dtype(),
            shape,
            strides,
            values.offset() + start,
        )?
        .with_dim_names(names)?;
        match self.data_type.permutation() {
            None => Ok(physical),
            Some(permutation) => Ok(physical.permuted(permutation)?),
        }
    }

    /// Refuses an index past the end or a null row.
    fn check_row(&self, index: usize) -> Result<()> {
        if index >= self.len() {
            return Err(Error::RowsOutOfRange {
                start: index,
                end: index + 1,
                rows: self.len(),
            });
        }
        if self.storage.is_null(index) {
            return Err(Error::NullTensor { index });
        }
        Ok(())
    }

    /// The stored shape of a valid row, checked non-negative when the array was made.
    fn stored_shape(&self, index: usize) -> Vec<usize> {
        let start = self.shapes.value_offset_at(index);
        let extents = self.shapes.values().as_primitive::<Int32Type>();
        extents.values()[start..start + self.ndim()]
            .iter()
            .map(|&extent| extent as usize)
            .collect()
    }

    /// The 1-D tensor of all the elements, and the `data` list, for the conversions of this
    /// module.
    pub(super) fn values_and_data(&self) -> (Option<&Tensor>, &ListArray) {
        (self.values.as_ref(), &self.data)
    }
}

/// Checks the shape of valid row `row` against the type and the length of its data.
pub(super) fn check_row_shape(
    data_type: &VariableShapeTensorType,
    row: usize,
    shape: &[i32],
    data_len: i32,
) -> Result<()> {
    let invalid = |reason: String| Err(Error::InvalidVariableShapeTensor { reason });
    if shape.iter().any(|&extent| extent < 0) {
        return invalid(format!(
            "row {row} has shape {shape:?}; expected extents >= 0"
        ));
    }
    if let Some(uniform) = data_type.uniform_shape()
        && shape
            .iter()
            .zip(uniform)
            .any(|(&extent, uniform)| uniform.is_some_and(|uniform| uniform != extent))
    {
        return invalid(format!(
            "row {row} has shape {shape:?}, which differs from uniform_shape {}; expected the \
             uniform extents in every row",
            uniform_text(uniform)
        ));
    }
    let product = shape
        .iter()
        .try_fold(1u64, |product, &extent| product.checked_mul(extent as u64));
    if product != Some(data_len as u64) {
        return invalid(format!(
            "row {row} has shape {shape:?} but {data_len} elements; expected the product of the \
             shape"
        ));
    }
    Ok(())
}

/// The shape of `ndim` int32 of a new row, checked to fit.
pub(super) fn shape_to_i32(shape: &[usize]) -> Result<Vec<i32>> {
    shape
        .iter()
        .map(|&extent| {
            i32::try_from(extent).map_err(|_| Error::InvalidVariableShapeTensor {
                reason: format!(
                    "shape {shape:?} has an extent above {}; expected int32 extents",
                    i32::MAX
                ),
            })
        })
        .collect()
}
