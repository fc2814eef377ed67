//! [`TensorBatch`]: the named tensors of one batch.

use std::ops::Index;

use arrow_dlpack_tensor::Tensor;

use crate::{Error, Result};

/// A tensor and its name in a [`TensorBatch`].
pub type NamedTensor = (String, Tensor);

/// One batch: named tensors in the order of the [`BatchSpec`](crate::BatchSpec) (single columns,
/// then groups), the validity masks asked for, and the row count.
///
/// Every tensor's first dimension is [`num_rows`](TensorBatch::num_rows).
/// A tensor is reached by name: [`tensor`](TensorBatch::tensor) returns an error that names the
/// tensors the batch has, [`get`](TensorBatch::get) an `Option`, and `batch["x"]` panics, as a
/// `HashMap` index does, when there is no tensor `"x"`.
/// A tensor that lies inside one record batch shares its memory (read-only); a tensor copied
/// from several record batches, a group, a boolean or a mask is a fresh, writable allocation.
#[derive(Debug, Clone)]
pub struct TensorBatch {
    num_rows: usize,
    tensors: Vec<(String, Tensor)>,
    masks: Vec<(String, Tensor)>,
}

impl TensorBatch {
    /// A batch of `num_rows` rows; used by the loader.
    pub(crate) fn new(
        num_rows: usize,
        tensors: Vec<(String, Tensor)>,
        masks: Vec<(String, Tensor)>,
    ) -> Self {
        TensorBatch {
            num_rows,
            tensors,
            masks,
        }
    }

    /// The number of rows.
    pub fn num_rows(&self) -> usize {
        self.num_rows
    }

    /// The number of tensors (masks not counted).
    pub fn num_tensors(&self) -> usize {
        self.tensors.len()
    }

    /// The tensor named `name`; [`Error::MissingTensor`], naming the tensors the batch has, when
    /// there is none.
    pub fn tensor(&self, name: &str) -> Result<&Tensor> {
        self.get(name).ok_or_else(|| Error::MissingTensor {
            name: name.to_string(),
            available: self.names().map(str::to_string).collect(),
        })
    }

    /// The tensor named `name`, if any.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.tensors
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, tensor)| tensor)
    }

    /// The validity mask of column `name` (bool, 1 = valid), when the spec asked for it.
    pub fn mask(&self, name: &str) -> Option<&Tensor> {
        self.masks
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, tensor)| tensor)
    }

    /// The names of the tensors, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.iter().map(|(name, _)| name.as_str())
    }

    /// The named tensors, in order.
    pub fn tensors(&self) -> &[(String, Tensor)] {
        &self.tensors
    }

    /// The named masks, in the order of [`BatchSpec::masks`](crate::BatchSpec::masks).
    pub fn masks(&self) -> &[(String, Tensor)] {
        &self.masks
    }

    /// The named tensors and masks, consuming the batch.
    pub fn into_parts(self) -> (Vec<NamedTensor>, Vec<NamedTensor>) {
        (self.tensors, self.masks)
    }
}

/// `batch["x"]`: the tensor named `"x"`.
///
/// # Panics
///
/// When the batch has no tensor of that name; [`TensorBatch::tensor`] returns the error
/// instead.
impl Index<&str> for TensorBatch {
    type Output = Tensor;

    fn index(&self, name: &str) -> &Tensor {
        match self.tensor(name) {
            Ok(tensor) => tensor,
            Err(error) => panic!("{error}"),
        }
    }
}
