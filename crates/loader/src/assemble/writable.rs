//! [`BatchSpec::writable`](crate::BatchSpec::writable): batches whose every tensor is private,
//! writable memory.
//!
//! A batch's zero-copy views share memory with the source (a caller's table, a memory-mapped
//! file) and are flagged read-only, but consumers may ignore the flag (`torch.from_dlpack` does),
//! so an in-place operation would rewrite the source. With `writable`, each read-only tensor of a
//! batch is copied into a fresh allocation as the batch is handed out; tensors the loader made
//! itself (copies across record batches, groups, booleans, masks, shuffled batches) are already
//! private and writable, and are handed out as they are.

use arrow_dlpack_tensor::Tensor;

use crate::batch::NamedTensor;
use crate::{Result, TensorBatch};

/// `batch` as it is handed out: unchanged, or with its read-only tensors copied when `writable`.
pub(crate) fn hand_out(batch: TensorBatch, writable: bool) -> Result<TensorBatch> {
    if !writable {
        return Ok(batch);
    }
    let num_rows = batch.num_rows();
    let (tensors, masks) = batch.into_parts();
    Ok(TensorBatch::new(
        num_rows,
        private(tensors)?,
        private(masks)?,
    ))
}

/// The tensors, each read-only one replaced by a writable copy.
fn private(named: Vec<NamedTensor>) -> Result<Vec<NamedTensor>> {
    named
        .into_iter()
        .map(|(name, tensor)| {
            if tensor.is_read_only() {
                Ok((name, copy_keeping_layout(&tensor)?))
            } else {
                Ok((name, tensor))
            }
        })
        .collect()
}

/// A writable copy of `tensor` whose dimensions are laid out in the same order as the view's:
/// a column-major group view `(B, k)` with strides `(1, d)` becomes a dense column-major tensor
/// with strides `(1, B)`, so that `writable` changes who owns the memory, not the layout.
fn copy_keeping_layout(tensor: &Tensor) -> Result<Tensor> {
    // The dimensions from the largest stride to the smallest: the order in which a dense copy
    // of the same layout nests them.
    let mut order: Vec<usize> = (0..tensor.ndim()).collect();
    order.sort_by_key(|&dim| std::cmp::Reverse(tensor.strides()[dim].unsigned_abs()));
    if order
        .iter()
        .enumerate()
        .all(|(position, &dim)| position == dim)
    {
        return Ok(tensor.to_contiguous()?);
    }
    let mut inverse = vec![0; order.len()];
    for (position, &dim) in order.iter().enumerate() {
        inverse[dim] = position;
    }
    Ok(tensor
        .permuted(&order)?
        .to_contiguous()?
        .permuted(&inverse)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_only_view_becomes_a_writable_copy_of_the_same_values_and_layout() {
        let values: Vec<f32> = (0..6).map(|v| v as f32).collect();
        // A (3, 2) column-major view: column j of row i at i + 3 j.
        let view = Tensor::from_vec(values, vec![2, 3])
            .unwrap()
            .permuted(&[1, 0])
            .unwrap()
            .with_read_only(true);
        let batch = TensorBatch::new(3, vec![("g".into(), view.clone())], Vec::new());
        let batch = hand_out(batch, true).unwrap();
        let copy = batch.get("g").unwrap();
        assert!(!copy.is_read_only());
        assert_ne!(copy.data_ptr(), view.data_ptr());
        assert_eq!(copy.shape(), &[3, 2]);
        assert_eq!(copy.strides(), &[1, 3]);
        for i in 0..3 {
            for j in 0..2 {
                assert_eq!(
                    copy.get::<f32>(&[i, j]).unwrap(),
                    view.get::<f32>(&[i, j]).unwrap()
                );
            }
        }
    }

    #[test]
    fn writable_tensors_and_unasked_batches_are_handed_out_as_they_are() {
        let fresh = Tensor::from_vec(vec![1i64, 2], vec![2])
            .unwrap()
            .with_read_only(false);
        let view = fresh.clone().with_read_only(true);
        let batch = TensorBatch::new(2, vec![("a".into(), fresh.clone())], Vec::new());
        let batch = hand_out(batch, true).unwrap();
        assert_eq!(batch.get("a").unwrap().data_ptr(), fresh.data_ptr());
        let batch = TensorBatch::new(2, vec![("v".into(), view.clone())], Vec::new());
        let batch = hand_out(batch, false).unwrap();
        assert!(batch.get("v").unwrap().is_read_only());
        assert_eq!(batch.get("v").unwrap().data_ptr(), view.data_ptr());
    }
}
