//! The [`Tensor`] type: a checked, strided n-dimensional view over an Arrow [`Buffer`].

use arrow_buffer::{Buffer, MutableBuffer};

use crate::alloc::UninitBuffer;
use crate::dims::Dims;
use crate::strided_copy::copy_strided_elements;
use crate::{DType, Device, Error, Result, layout};

/// The largest rank a [`Tensor`] may have.
///
/// numpy allows 64 dimensions; the bound only keeps hostile metadata from forcing large
/// allocations, so it is set far above any real use.
pub const MAX_NDIM: usize = 1024;

/// A strided n-dimensional view over an Arrow [`Buffer`].
///
/// Strides are signed and counted in elements; `offset` is the element index, from the start of
/// the buffer, of the logical first element (index `[0, 0, ...]`).
/// Construction checks that every element the view can address lies inside the buffer, that no
/// size computation overflows, and that the first element is aligned for the dtype, so that the
/// accessors and the DLPack export never read outside the buffer.
///
/// Cloning is cheap: the buffer is reference counted.
///
/// ```
/// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
/// use arrow_dlpack::Buffer;
/// use arrow_dlpack::{DType, Tensor};
///
/// let buffer = Buffer::from_vec((0..6i32).collect::<Vec<_>>());
/// let matrix = Tensor::try_new_row_major(buffer, DType::Int32, vec![2, 3]).unwrap();
/// assert_eq!(matrix.strides(), &[3, 1]);
/// assert!(matrix.is_row_major());
///
/// // The transpose shares the buffer and is column-major.
/// let transposed = matrix.permuted(&[1, 0]).unwrap();
/// assert_eq!(transposed.shape(), &[3, 2]);
/// assert!(transposed.is_column_major() && !transposed.is_row_major());
/// let copy = transposed.to_contiguous().unwrap();
/// assert_eq!(copy.row_major_buffer().unwrap().typed_data::<i32>(), &[0, 3, 1, 4, 2, 5]);
/// ```
#[derive(Clone)]
pub struct Tensor {
    buffer: Buffer,
    dtype: DType,
    shape: Dims<usize>,
    strides: Dims<isize>,
    offset: usize,
    dim_names: Option<Vec<String>>,
    read_only: bool,
    device: Device,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("strides", &self.strides)
            .field("offset", &self.offset)
            .field("dim_names", &self.dim_names)
            .field("read_only", &self.read_only)
            .field("device", &self.device)
            .field("buffer_len", &self.buffer.len())
            .finish()
    }
}

impl Tensor {
    /// Builds a tensor, checking that every addressed element lies inside `buffer`, that no size
    /// overflows and that the data is aligned for `dtype`.
    ///
    /// The tensor is read-only (Arrow buffers are immutable) and has no dimension names; see
    /// [`Tensor::with_read_only`] and [`Tensor::with_dim_names`].
    ///
    /// `buffer` holds untyped bytes, so `dtype` is taken at its word: bytes written as `f32`
    /// and described as [`DType::Float64`] are read as `f64`. Build from typed values with
    /// [`Tensor::from_vec`] or [`Tensor::from_scalar_buffer`], which take the dtype from the type.
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
    /// use arrow_dlpack::Buffer;
    /// use arrow_dlpack::{DType, Tensor};
    ///
    /// // A 2 x 3 int32 matrix, viewed column by column (strides in elements).
    /// let buffer = Buffer::from_vec(vec![1i32, 2, 3, 4, 5, 6]);
    /// let columns = Tensor::try_new(buffer.clone(), DType::Int32, vec![3, 2], vec![1, 3], 0)?;
    /// assert_eq!(columns.get::<i32>(&[2, 1])?, 6);
    ///
    /// // An element past the end of the buffer is refused.
    /// assert!(Tensor::try_new(buffer, DType::Int32, vec![3, 2], vec![1, 3], 1).is_err());
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn try_new(
        buffer: Buffer,
        dtype: DType,
        shape: Vec<usize>,
        strides: Vec<isize>,
        offset: usize,
    ) -> Result<Self> {
        check_view(&buffer, dtype, &shape, &strides, offset)?;
        Ok(Tensor {
            buffer,
            dtype,
            shape: shape.into(),
            strides: strides.into(),
            offset,
            dim_names: None,
            read_only: true,
            device: Device::CPU,
        })
    }

    /// Like [`Tensor::try_new`].
    ///
    /// # Panics
    ///
    /// Panics where [`Tensor::try_new`] returns an error.
    pub fn new(
        buffer: Buffer,
        dtype: DType,
        shape: Vec<usize>,
        strides: Vec<isize>,
        offset: usize,
    ) -> Self {
        match Self::try_new(buffer, dtype, shape, strides, offset) {
            Ok(tensor) => tensor,
            Err(error) => panic!("invalid tensor: {error}"),
        }
    }

    /// Builds a row-major tensor that starts at the beginning of `buffer`.
    pub fn try_new_row_major(buffer: Buffer, dtype: DType, shape: Vec<usize>) -> Result<Self> {
        let strides = layout::row_major_strides(&shape)?;
        Self::try_new(buffer, dtype, shape, strides, 0)
    }

    /// Builds a tensor without any check.
    ///
    /// # Safety
    ///
    /// Every element addressed by `shape`, `strides` and `offset` must lie inside `buffer`, the
    /// element at `offset` must be aligned for `dtype`, the element count times the element size
    /// must fit `isize`, and `shape.len() == strides.len() <= MAX_NDIM`.
    pub unsafe fn new_unchecked(
        buffer: Buffer,
        dtype: DType,
        shape: Vec<usize>,
        strides: Vec<isize>,
        offset: usize,
    ) -> Self {
        // SAFETY: the caller's guarantees.
        unsafe { Tensor::from_dims_unchecked(buffer, dtype, shape.into(), strides.into(), offset) }
    }

    /// [`Tensor::new_unchecked`] with the shape and strides already in their stored form.
    ///
    /// # Safety
    ///
    /// As for [`Tensor::new_unchecked`].
    pub(crate) unsafe fn from_dims_unchecked(
        buffer: Buffer,
        dtype: DType,
        shape: Dims<usize>,
        strides: Dims<isize>,
        offset: usize,
    ) -> Self {
        debug_assert!(check_view(&buffer, dtype, &shape, &strides, offset).is_ok());
        Tensor {
            buffer,
            dtype,
            shape,
            strides,
            offset,
            dim_names: None,
            read_only: true,
            device: Device::CPU,
        }
    }

    /// Names the dimensions; there must be one name per dimension.
    pub fn with_dim_names(mut self, names: Option<Vec<String>>) -> Result<Self> {
        if let Some(names) = &names
            && names.len() != self.ndim()
        {
            return Err(Error::DimNamesLength {
                ndim: self.ndim(),
                names: names.len(),
            });
        }
        self.dim_names = names;
        Ok(self)
    }

    /// Sets whether consumers of a DLPack export may write through the data pointer.
    ///
    /// Arrow treats buffers as immutable, so tensors start read-only; a tensor imported from a
    /// writable DLPack producer keeps the producer's flag.
    pub fn with_read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// The buffer the tensor views (it may be larger than the view).
    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The extent of each dimension.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The stride of each dimension, in elements; may be zero or negative.
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// The stride of each dimension in bytes, as numpy and PyArrow report them.
    pub fn byte_strides(&self) -> Vec<isize> {
        // Cannot overflow for a non-empty tensor: the byte span was checked at construction.
        // For an empty one the strides are arbitrary, so saturate rather than wrap.
        let size = self.dtype.size() as isize;
        self.strides
            .iter()
            .map(|&stride| stride.saturating_mul(size))
            .collect()
    }

    /// The element index, from the start of the buffer, of the logical first element.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The dimension names, if any.
    pub fn dim_names(&self) -> Option<&[String]> {
        self.dim_names.as_deref()
    }

    /// Whether consumers must not write through the data pointer.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Where the memory lives: [`Device::CPU`] for every tensor built in Rust, the producer's
    /// device for an import that allowed other devices ([`ImportOptions::any_device`]).
    ///
    /// [`ImportOptions::any_device`]: crate::ImportOptions::any_device
    pub fn device(&self) -> Device {
        self.device
    }

    /// Refuses, with [`Error::DeviceMemory`](crate::Error::DeviceMemory) naming `operation`, a
    /// tensor whose memory is not host memory: the check every operation that reads the elements
    /// makes first.
    pub fn require_cpu(&self, operation: &'static str) -> Result<()> {
        if self.device.is_cpu() {
            return Ok(());
        }
        Err(Error::DeviceMemory {
            operation,
            device_type: self.device.device_type,
            device_id: self.device.device_id,
            name: self.device.type_name(),
        })
    }

    /// The same tensor, on `device`; for the import only, which knows where the memory lives.
    pub(crate) fn on_device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }

    /// The number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The number of elements (1 for a 0-d tensor).
    pub fn len(&self) -> usize {
        // Checked at construction.
        self.shape.iter().product()
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.shape.contains(&0)
    }

    /// The address of the logical first element.
    ///
    /// For an empty tensor this may be one past the end of the buffer and must not be read.
    pub fn data_ptr(&self) -> *const u8 {
        // `offset * size <= buffer.len()` was checked at construction, so this stays inside or one
        // past the end of the buffer's allocation.
        self.buffer
            .as_ptr()
            .wrapping_add(self.offset * self.dtype.size())
    }

    /// Whether the layout is row-major or column-major (numpy's rule: extent-1 dimensions may have
    /// any stride, empty tensors are contiguous).
    pub fn is_contiguous(&self) -> bool {
        self.is_row_major() || self.is_column_major()
    }

    /// Whether the layout is row-major (C order), by numpy's rule.
    pub fn is_row_major(&self) -> bool {
        layout::is_row_major(&self.shape, &self.strides)
    }

    /// Whether the layout is column-major (Fortran order), by numpy's rule.
    pub fn is_column_major(&self) -> bool {
        layout::is_column_major(&self.shape, &self.strides)
    }

    /// The exact bytes of a row-major tensor, zero-copy; `None` when the layout is not row-major.
    pub fn row_major_buffer(&self) -> Option<Buffer> {
        if !self.is_row_major() {
            return None;
        }
        if self.is_empty() {
            return Some(Buffer::from(MutableBuffer::new(0)));
        }
        let start = self.offset * self.dtype.size();
        Some(
            self.buffer
                .slice_with_length(start, self.len() * self.dtype.size()),
        )
    }

    /// Reorders the dimensions without copying: dimension `i` of the result is dimension
    /// `order[i]` of `self`. Dimension names follow their dimensions.
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
    /// use arrow_dlpack::Tensor;
    ///
    /// let matrix = Tensor::from_vec(vec![1u8, 2, 3, 4, 5, 6], vec![2, 3])?;
    /// let transposed = matrix.permuted(&[1, 0])?;
    /// assert_eq!(transposed.shape(), &[3, 2]);
    /// assert_eq!(transposed.strides(), &[1, 3]);
    /// assert_eq!(transposed.get::<u8>(&[2, 0])?, 3);
    /// assert!(matrix.permuted(&[0, 0]).is_err()); // not a permutation
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn permuted(&self, order: &[usize]) -> Result<Tensor> {
        let ndim = self.ndim();
        let mut seen = vec![false; ndim];
        let valid = order.len() == ndim
            && order
                .iter()
                .all(|&dim| dim < ndim && !std::mem::replace(&mut seen[dim], true));
        if !valid {
            return Err(Error::InvalidPermutation {
                ndim,
                order: order.to_vec(),
            });
        }
        let mut permuted = self.clone();
        permuted.shape = order.iter().map(|&dim| self.shape[dim]).collect();
        permuted.strides = order.iter().map(|&dim| self.strides[dim]).collect();
        permuted.dim_names = self
            .dim_names
            .as_ref()
            .map(|names| order.iter().map(|&d| names[d].clone()).collect());
        Ok(permuted)
    }

    /// Copies exactly the logical elements, in row-major order, into a new buffer.
    ///
    /// The copy is writable (not read-only) and keeps the dimension names.
    /// Fails with [`Error::OutOfMemory`](crate::Error::OutOfMemory) when the allocator refuses the
    /// memory (a zero-stride view can describe far more elements than it holds), and with
    /// [`Error::DeviceMemory`](crate::Error::DeviceMemory) for a tensor that is not in host memory.
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
    /// use arrow_dlpack::Tensor;
    ///
    /// let matrix = Tensor::from_vec(vec![1u8, 2, 3, 4, 5, 6], vec![2, 3])?;
    /// let copy = matrix.permuted(&[1, 0])?.to_contiguous()?;
    /// assert!(copy.is_row_major() && !copy.is_read_only());
    /// assert_eq!(copy.as_slice::<u8>()?, &[1, 4, 2, 5, 3, 6]);
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn to_contiguous(&self) -> Result<Tensor> {
        self.require_cpu("copy the tensor")?;
        let size = self.dtype.size();
        let count = self.len();
        let bytes = count
            .checked_mul(size)
            .ok_or(Error::OutOfMemory { bytes: usize::MAX })?;
        // Uninitialised on purpose: zeroing first would write every byte twice; the copy below
        // writes each of the `count * size` bytes exactly once before the buffer is made.
        let mut out = UninitBuffer::try_new(bytes)?;
        if let Some(contiguous) = self.row_major_buffer() {
            // One run: streamed past the cache when large (`alloc::copy_to_uninit`).
            crate::alloc::copy_to_uninit(contiguous.as_slice(), out.as_uninit_mut(), bytes);
        } else if count > 0 {
            let src = self.data_ptr();
            let dst = out.as_mut_ptr();
            // SAFETY: construction checked that every element addressed by shape, strides and
            // offset lies inside the buffer and is aligned for the dtype, whose size and alignment
            // are passed; `dst` has room for `count` elements and is 16-byte aligned.
            unsafe {
                copy_strided_elements(
                    src,
                    size,
                    self.dtype.alignment(),
                    &self.shape,
                    &self.strides,
                    dst,
                );
            }
        }
        // SAFETY: `copy_to_uninit` or `copy_strided` wrote all `count` elements, `bytes` bytes.
        let buffer = unsafe { out.assume_init() };
        // An empty shape such as (0, 2**62, 2**62) has no elements but strides that overflow.
        let strides = layout::row_major_strides(&self.shape)?;
        Ok(Tensor {
            buffer,
            dtype: self.dtype,
            shape: self.shape.clone(),
            strides: strides.into(),
            offset: 0,
            dim_names: self.dim_names.clone(),
            read_only: false,
            device: self.device,
        })
    }
}

/// Checks that a view addresses only elements inside `buffer`, without overflow, aligned.
fn check_view(
    buffer: &Buffer,
    dtype: DType,
    shape: &[usize],
    strides: &[isize],
    offset: usize,
) -> Result<()> {
    if shape.len() > MAX_NDIM {
        return Err(Error::InvalidNdim {
            ndim: shape.len() as i64,
            max: MAX_NDIM,
        });
    }
    let size = dtype.size();
    let count = layout::element_count(shape)?;
    let bytes = count.checked_mul(size).ok_or(Error::Overflow {
        what: "the byte size",
    })?;
    if bytes > isize::MAX as usize {
        return Err(Error::Overflow {
            what: "the byte size",
        });
    }
    let offset_bytes = offset.checked_mul(size).ok_or(Error::Overflow {
        what: "the byte offset",
    })?;
    let Some((low, high)) = layout::span(shape, strides)? else {
        // No element is addressed; the offset may point one past the end, no further.
        if offset_bytes > buffer.len() {
            return Err(Error::PastBuffer {
                needed: offset_bytes as u128,
                available: buffer.len(),
            });
        }
        return Ok(());
    };
    let lowest = offset as i128 + low;
    if lowest < 0 {
        return Err(Error::BeforeBuffer {
            offset,
            lowest: lowest.unsigned_abs(),
        });
    }
    // With the element count bounded above, `high` stays far below 2^120; checked all the same,
    // so that a future relaxation of those checks cannot turn into wrapping arithmetic.
    let needed = (offset as i128 + high + 1)
        .checked_mul(size as i128)
        .ok_or(Error::Overflow {
            what: "the span of the strides",
        })?;
    if needed > buffer.len() as i128 {
        return Err(Error::PastBuffer {
            needed: needed as u128,
            available: buffer.len(),
        });
    }
    let address = (buffer.as_ptr() as usize).wrapping_add(offset_bytes);
    if address % dtype.alignment() != 0 {
        return Err(Error::Misaligned {
            address,
            alignment: dtype.alignment(),
            dtype,
        });
    }
    Ok(())
}
