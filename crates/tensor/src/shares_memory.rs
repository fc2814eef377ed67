//! Whether two tensors, or a tensor and a buffer, address the same bytes: the zero-copy check
//! without pointer casts.

use std::ops::Range;

use arrow_buffer::Buffer;

use crate::{Tensor, layout};

impl Tensor {
    /// The addresses of the bytes the tensor's elements occupy, from the lowest element's first
    /// byte to one past the highest element's last byte (gaps between strided elements
    /// included); `None` for a tensor without elements.
    pub fn byte_range(&self) -> Option<Range<usize>> {
        // The span was checked against the buffer when the tensor was built, so it fits.
        let (low, high) = layout::span(self.shape(), self.strides()).ok()??;
        let size = self.dtype().size() as i128;
        let first = self.data_ptr().addr() as i128;
        let start = usize::try_from(first + low * size).ok()?;
        let end = usize::try_from(first + (high + 1) * size).ok()?;
        Some(start..end)
    }

    /// Whether `self` and `other` may read the same bytes: their [`byte_range`](Tensor::byte_range)s
    /// overlap on one device.
    ///
    /// This is the check that a conversion was zero-copy (a tensor and the tensor it was made
    /// from), or that two tensors alias (writing one changes the other).
    /// Like numpy's `may_share_memory`, it compares ranges, so two interleaved strided views
    /// of one buffer (the even and the odd elements) count as sharing.
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; }
    /// use arrow_dlpack::Tensor;
    ///
    /// let matrix = Tensor::from_vec((0..6i32).collect(), vec![2, 3])?;
    /// let transposed = matrix.permuted(&[1, 0])?;
    /// assert!(transposed.shares_memory(&matrix));
    /// assert!(!matrix.to_contiguous()?.shares_memory(&matrix));
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn shares_memory(&self, other: &Tensor) -> bool {
        if self.device() != other.device() {
            return false;
        }
        match (self.byte_range(), other.byte_range()) {
            (Some(a), Some(b)) => overlap(&a, &b),
            _ => false,
        }
    }

    /// Whether the tensor's elements lie, at least in part, in `buffer`'s bytes: the check that
    /// a tensor is a view of an Arrow array's values buffer (`array.values().inner()`,
    /// `array.to_data().buffers()[0]`) rather than a copy.
    ///
    /// Only a tensor in host memory can share a buffer's memory: Arrow buffers are host memory.
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_buffer::Buffer; }
    /// use arrow_dlpack::{Buffer, DType, Tensor};
    ///
    /// let buffer = Buffer::from_vec(vec![1.0f32, 2.0, 3.0, 4.0]);
    /// let tensor = Tensor::try_new_row_major(buffer.clone(), DType::Float32, vec![2, 2])?;
    /// assert!(tensor.shares_memory_with_buffer(&buffer));
    /// assert!(!tensor.to_contiguous()?.shares_memory_with_buffer(&buffer));
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn shares_memory_with_buffer(&self, buffer: &Buffer) -> bool {
        if !self.device().is_cpu() || buffer.is_empty() {
            return false;
        }
        let start = buffer.as_ptr().addr();
        let range = start..start + buffer.len();
        self.byte_range().is_some_and(|own| overlap(&own, &range))
    }
}

/// Whether two non-empty ranges of addresses have an address in common.
fn overlap(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}
