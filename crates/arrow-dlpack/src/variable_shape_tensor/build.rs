//! `VariableShapeTensorArray::from_tensors`: tensors of one dtype and rank, copied into one
//! column.

use std::sync::Arc;

use arrow_array::{ArrayRef, FixedSizeListArray, Int32Array, ListArray, StructArray};
use arrow_buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_dlpack_tensor::Tensor;
use arrow_dlpack_tensor::alloc::PooledVec;
use arrow_schema::{DataType, Field};

use super::array::shape_to_i32;
use super::{VariableShapeTensorArray, VariableShapeTensorMetadata, VariableShapeTensorType};
use crate::from_tensor::{list_size, primitive_array};
use crate::{Error, Result, arrow_type_of, dtype_of};

impl VariableShapeTensorArray {
    /// Builds a column of `tensors`, copying their elements into one data buffer.
    ///
    /// The element type and rank come from `tensors[0]`; every tensor must have the same dtype
    /// and rank. `metadata` describes the column: with a permutation, each tensor is taken as
    /// the logical tensor and stored in its physical order, so that [`row`](Self::row) gives
    /// back the same logical tensor; `dim_names` and `uniform_shape` name and constrain the
    /// physical dimensions and are checked against every tensor.
    /// The tensors' own dimension names are not used.
    ///
    /// No tensors give [`Error::InvalidVariableShapeTensor`] (the type would be unknown); use
    /// [`from_tensors_with_type`](Self::from_tensors_with_type) for an empty column.
    pub fn from_tensors(tensors: &[Tensor], metadata: VariableShapeTensorMetadata) -> Result<Self> {
        let rows: Vec<Option<Tensor>> = tensors.iter().cloned().map(Some).collect();
        Self::from_optional_tensors(&rows, metadata)
    }

    /// [`from_tensors`](Self::from_tensors) with null rows where `tensors` holds `None`; the
    /// type comes from the first tensor.
    pub fn from_optional_tensors(
        tensors: &[Option<Tensor>],
        metadata: VariableShapeTensorMetadata,
    ) -> Result<Self> {
        let Some(first) = tensors.iter().flatten().next() else {
            return Err(Error::InvalidVariableShapeTensor {
                reason: "no tensors given; expected at least one (the value type and the number \
                         of dimensions come from the first tensor)"
                    .to_string(),
            });
        };
        let value_type = arrow_type_of(first.dtype())?;
        let tensor_type = VariableShapeTensorType::from_parts(value_type, first.ndim(), metadata)?;
        Self::from_tensors_with_type(tensor_type, tensors)
    }

    /// Builds a column of `tensor_type` from `tensors` (`None` for a null row), copying their
    /// elements into one data buffer; as [`from_tensors`](Self::from_tensors), for any number
    /// of tensors.
    pub fn from_tensors_with_type(
        tensor_type: VariableShapeTensorType,
        tensors: &[Option<Tensor>],
    ) -> Result<Self> {
        let value_type = tensor_type.value_type().clone();
        let dtype = dtype_of(&value_type)?;
        let ndim = tensor_type.ndim();
        // Logical dimension i is physical dimension permutation[i]: the physical tensor is the
        // logical one permuted by the inverse.
        let inverse: Vec<usize> = match tensor_type.permutation() {
            None => (0..ndim).collect(),
            Some(permutation) => {
                let mut inverse = vec![0; ndim];
                for (logical, &physical) in permutation.iter().enumerate() {
                    inverse[physical] = logical;
                }
                inverse
            }
        };
        let mut physical = Vec::with_capacity(tensors.len());
        let mut total = 0usize;
        for (index, tensor) in tensors.iter().enumerate() {
            let Some(tensor) = tensor else {
                physical.push(None);
                continue;
            };
            tensor.require_cpu("make an Arrow array of it")?;
            if tensor.dtype() != dtype || tensor.ndim() != ndim {
                return Err(Error::InvalidVariableShapeTensor {
                    reason: format!(
                        "tensor {index} has dtype {} and {} dimensions; expected {dtype} and \
                         {ndim}, as the column's type",
                        tensor.dtype(),
                        tensor.ndim()
                    ),
                });
            }
            total = total
                .checked_add(tensor.len())
                .ok_or(Error::ListSizeOverflow { size: usize::MAX })?;
            physical.push(Some(tensor.permuted(&inverse)?));
        }
        list_size(total)?;
        let size = dtype.size();
        let mut bytes = PooledVec::<u8>::try_with_capacity(total * size)?;
        let mut offsets = Vec::with_capacity(tensors.len() + 1);
        offsets.push(0i32);
        let mut shapes = Vec::with_capacity(tensors.len() * ndim);
        let mut validity = Vec::with_capacity(tensors.len());
        for tensor in &physical {
            match tensor {
                None => {
                    shapes.extend(std::iter::repeat_n(0, ndim));
                    validity.push(false);
                }
                Some(tensor) => {
                    let row = match tensor.row_major_buffer() {
                        Some(row) => row,
                        None => tensor
                            .to_contiguous()?
                            .row_major_buffer()
                            .expect("a contiguous copy is row-major"),
                    };
                    bytes.extend_from_slice(row.as_slice());
                    shapes.extend(shape_to_i32(tensor.shape())?);
                    validity.push(true);
                }
            }
            // `total` fits an i32, so every partial sum does.
            offsets.push((bytes.len() / size) as i32);
        }
        let nulls = validity
            .contains(&false)
            .then(|| NullBuffer::from(validity));
        let values = primitive_array(value_type.clone(), bytes.into_buffer(), total)?;
        let item = Arc::new(Field::new_list_field(value_type, true));
        let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
        let data = ListArray::try_new(item, offsets, values, nulls.clone())?;
        let shape_item = Arc::new(Field::new_list_field(DataType::Int32, true));
        let shape = FixedSizeListArray::try_new_with_length(
            shape_item,
            ndim as i32,
            Arc::new(Int32Array::from(shapes)),
            nulls.clone(),
            tensors.len(),
        )?;
        let DataType::Struct(fields) = tensor_type.storage_type() else {
            unreachable!("the storage type is a struct")
        };
        let columns: Vec<ArrayRef> = vec![Arc::new(data), Arc::new(shape)];
        let storage = StructArray::try_new(fields, columns, nulls)?;
        Self::try_new(tensor_type, storage)
    }
}
