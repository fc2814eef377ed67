//! Export to DLPack and import back: every dtype and layout round-trips exactly and zero-copy,
//! exports follow the protocol rules, and every buffer is released exactly once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow_buffer::Buffer;
use arrow_dlpack_tensor::{DType, Error, ExportOptions, Managed, Tensor};
use dlpack_sys::{DLManagedTensorVersioned, DlpackFlags};

/// The bytes of the element at `index`, read through the tensor's own strides.
fn element(tensor: &Tensor, index: &[usize]) -> Vec<u8> {
    let size = tensor.dtype().size() as isize;
    let offset = tensor.offset() as isize
        + index
            .iter()
            .zip(tensor.strides())
            .map(|(&i, &s)| i as isize * s)
            .sum::<isize>();
    let start = (offset * size) as usize;
    tensor.buffer().as_slice()[start..start + size as usize].to_vec()
}

/// Every element, in row-major order of the logical index.
fn elements(tensor: &Tensor) -> Vec<Vec<u8>> {
    let shape = tensor.shape();
    let mut out = Vec::new();
    if tensor.is_empty() {
        return out;
    }
    let mut index = vec![0usize; shape.len()];
    loop {
        out.push(element(tensor, &index));
        let mut dim = shape.len();
        loop {
            if dim == 0 {
                return out;
            }
            dim -= 1;
            index[dim] += 1;
            if index[dim] < shape[dim] {
                break;
            }
            index[dim] = 0;
        }
    }
}

/// A buffer of `len` distinct bytes whose release is counted.
fn counted_buffer(len: usize) -> (Buffer, Arc<AtomicUsize>) {
    /// Holds the storage (read only through the raw pointer) and counts its release.
    struct Owner(#[allow(dead_code)] Vec<u128>, Arc<AtomicUsize>);
    impl Drop for Owner {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }
    let released = Arc::new(AtomicUsize::new(0));
    let mut words = vec![0u128; len.div_ceil(16).max(1)];
    // SAFETY: `words` holds at least `len` bytes.
    let bytes = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), len) };
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = (i * 7 + 3) as u8;
    }
    let ptr = std::ptr::NonNull::new(words.as_mut_ptr().cast::<u8>()).unwrap();
    let owner = Arc::new(Owner(words, Arc::clone(&released)));
    // SAFETY: `ptr` addresses `len` initialized bytes owned by `owner`, whose heap storage does
    // not move when the vector is moved into it.
    let buffer = unsafe { Buffer::from_custom_allocation(ptr, len, owner) };
    (buffer, released)
}

fn round_trip_versioned(tensor: &Tensor) -> Tensor {
    let managed = tensor
        .to_dlpack_versioned(ExportOptions::default())
        .unwrap();
    Tensor::from_managed(managed).unwrap()
}

fn round_trip_legacy(tensor: &Tensor) -> Tensor {
    let managed = tensor.to_dlpack_legacy(ExportOptions::default()).unwrap();
    Tensor::from_managed(managed).unwrap()
}

/// The layouts every dtype is tried with: (shape, strides, offset) over a 24-element buffer.
fn layouts() -> Vec<(&'static str, Vec<usize>, Vec<isize>, usize)> {
    vec![
        ("0-d", vec![], vec![], 5),
        ("1-d", vec![24], vec![1], 0),
        ("row-major", vec![2, 3, 4], vec![12, 4, 1], 0),
        ("empty", vec![2, 0, 4], vec![0, 4, 1], 0),
        ("gapped", vec![3, 2], vec![8, 3], 1),
        ("transposed", vec![4, 6], vec![1, 4], 0),
        ("broadcast", vec![5, 4], vec![0, 1], 2),
        ("negative", vec![3, 4], vec![-8, -1], 23),
        ("extent one", vec![4, 1, 6], vec![6, 99, 1], 0),
    ]
}

#[test]
fn every_dtype_and_layout_round_trips_zero_copy_in_both_abis() {
    for dtype in DType::ALL {
        for (name, shape, strides, offset) in layouts() {
            let (buffer, _) = counted_buffer(24 * dtype.size());
            let tensor = Tensor::try_new(buffer, dtype, shape.clone(), strides.clone(), offset)
                .unwrap_or_else(|e| panic!("{dtype} {name}: {e}"));
            for (abi, back) in [
                ("versioned", round_trip_versioned(&tensor)),
                ("legacy", round_trip_legacy(&tensor)),
            ] {
                let case = format!("{dtype} {name} {abi}");
                assert_eq!(back.dtype(), dtype, "{case}");
                assert_eq!(back.shape(), tensor.shape(), "{case}");
                assert_eq!(elements(&back), elements(&tensor), "{case}");
                if !tensor.is_empty() {
                    assert_eq!(back.strides(), tensor.strides(), "{case}");
                    assert_eq!(back.data_ptr(), tensor.data_ptr(), "{case}: zero-copy");
                }
            }
        }
    }
}

#[test]
fn exports_follow_the_protocol_rules() {
    let (buffer, _) = counted_buffer(24 * 4);
    let tensor = Tensor::try_new(buffer, DType::Float32, vec![3, 2], vec![8, 3], 1).unwrap();
    let managed: Managed<DLManagedTensorVersioned> = tensor
        .to_dlpack_versioned(ExportOptions::default())
        .unwrap();
    assert_eq!(managed.version(), dlpack_sys::DLPACK_VERSION);
    assert_eq!(managed.flags(), DlpackFlags::READ_ONLY);
    // SAFETY: our own export; the descriptor lives as long as `managed`.
    let raw = unsafe { managed.tensor() };
    assert_eq!(raw.byte_offset, 0, "the offset is folded into data");
    assert_eq!(raw.data as *const u8, tensor.data_ptr());
    assert_eq!(raw.ndim, 2);
    assert!(!raw.strides.is_null(), "strides are always explicit");
    // SAFETY: our own export has `ndim` shape and strides entries.
    let (shape, strides) = unsafe {
        (
            std::slice::from_raw_parts(raw.shape, 2),
            std::slice::from_raw_parts(raw.strides, 2),
        )
    };
    assert_eq!(shape, &[3, 2]);
    assert_eq!(strides, &[8, 3]);

    let writable = tensor.clone().with_read_only(false);
    let managed = writable
        .to_dlpack_versioned(ExportOptions::default())
        .unwrap();
    assert_eq!(managed.flags(), DlpackFlags::empty());
}

#[test]
fn empty_tensors_export_null_data() {
    let tensor = Tensor::try_new_row_major(
        Buffer::from_vec(Vec::<i64>::new()),
        DType::Int64,
        vec![0, 3],
    )
    .unwrap();
    let managed = tensor
        .to_dlpack_versioned(ExportOptions::default())
        .unwrap();
    // SAFETY: our own export.
    assert!(unsafe { managed.tensor() }.data.is_null());
    let back = Tensor::from_managed(managed).unwrap();
    assert_eq!(back.shape(), &[0, 3]);
}

#[test]
fn copy_true_copies_exactly_the_logical_elements_and_flags_is_copied() {
    let (buffer, _) = counted_buffer(24 * 2);
    let tensor = Tensor::try_new(buffer, DType::Int16, vec![3, 4], vec![-8, -1], 23).unwrap();
    for copy_legacy in [false, true] {
        let options = ExportOptions::copy(Some(true));
        let back = if copy_legacy {
            Tensor::from_managed(tensor.to_dlpack_legacy(options).unwrap()).unwrap()
        } else {
            let managed = tensor.to_dlpack_versioned(options).unwrap();
            assert_eq!(managed.flags(), DlpackFlags::IS_COPIED);
            Tensor::from_managed(managed).unwrap()
        };
        assert_ne!(
            back.data_ptr(),
            tensor.data_ptr(),
            "a copy has its own memory"
        );
        assert!(back.is_row_major());
        assert_eq!(back.buffer().len(), 12 * 2, "exactly the logical elements");
        assert_eq!(elements(&back), elements(&tensor));
    }
    // copy=False and copy=None share.
    for copy in [None, Some(false)] {
        let back = Tensor::from_managed(
            tensor
                .to_dlpack_versioned(ExportOptions::copy(copy))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(back.data_ptr(), tensor.data_ptr());
    }
}

#[test]
fn an_export_keeps_the_buffer_alive_until_its_deleter_runs() {
    let (buffer, released) = counted_buffer(16);
    let tensor = Tensor::try_new_row_major(buffer, DType::UInt8, vec![16]).unwrap();
    let expected = elements(&tensor);
    let managed = tensor
        .to_dlpack_versioned(ExportOptions::default())
        .unwrap();
    drop(tensor);
    assert_eq!(released.load(Ordering::SeqCst), 0);
    let back = Tensor::from_managed(managed).unwrap();
    assert_eq!(elements(&back), expected);
    drop(back);
    assert_eq!(released.load(Ordering::SeqCst), 1, "released exactly once");
}

#[test]
fn dropping_an_unconsumed_export_releases_the_buffer_once() {
    let (buffer, released) = counted_buffer(64);
    let tensor = Tensor::try_new_row_major(buffer, DType::Float64, vec![8]).unwrap();
    let versioned = tensor
        .to_dlpack_versioned(ExportOptions::default())
        .unwrap();
    let legacy = tensor.to_dlpack_legacy(ExportOptions::default()).unwrap();
    drop(tensor);
    drop(versioned);
    assert_eq!(released.load(Ordering::SeqCst), 0);
    drop(legacy);
    assert_eq!(released.load(Ordering::SeqCst), 1);
}

#[test]
fn construction_refuses_views_outside_the_buffer() {
    let buffer = Buffer::from_vec(vec![0i32; 6]);
    let attempt = |shape: Vec<usize>, strides: Vec<isize>, offset: usize| {
        Tensor::try_new(buffer.clone(), DType::Int32, shape, strides, offset)
    };
    assert!(attempt(vec![2, 3], vec![3, 1], 0).is_ok());
    assert_eq!(
        attempt(vec![2, 3], vec![3, 1], 1).unwrap_err(),
        Error::PastBuffer {
            needed: 28,
            available: 24
        }
    );
    assert_eq!(
        attempt(vec![2, 3], vec![-3, 1], 0).unwrap_err(),
        Error::BeforeBuffer {
            offset: 0,
            lowest: 3
        }
    );
    assert_eq!(
        attempt(vec![2, 3], vec![3], 0).unwrap_err(),
        Error::StridesLength {
            ndim: 2,
            strides: 1
        }
    );
    assert!(matches!(
        attempt(vec![usize::MAX, 2], vec![1, 1], 0).unwrap_err(),
        Error::Overflow { .. }
    ));
    // Huge strides over a small element count are refused by the byte-size check, not wrapped.
    let wide = Buffer::from_vec(vec![0u128; 4]);
    assert!(matches!(
        Tensor::try_new(
            wide,
            DType::Complex128,
            vec![1 << 40, 2],
            vec![isize::MAX, isize::MAX],
            0
        )
        .unwrap_err(),
        Error::PastBuffer { .. }
    ));
    // An empty view may point one past the end, no further.
    assert!(attempt(vec![0], vec![1], 6).is_ok());
    assert!(attempt(vec![0], vec![1], 7).is_err());
    // Misaligned: a buffer slice that starts one byte in.
    let misaligned = Buffer::from_vec(vec![0u8; 16]).slice(1);
    assert!(matches!(
        Tensor::try_new_row_major(misaligned, DType::Int32, vec![2]).unwrap_err(),
        Error::Misaligned { alignment: 4, .. }
    ));
    let named = Tensor::try_new_row_major(buffer.clone(), DType::Int32, vec![2, 3]).unwrap();
    assert_eq!(
        named
            .clone()
            .with_dim_names(Some(vec!["x".into()]))
            .unwrap_err(),
        Error::DimNamesLength { ndim: 2, names: 1 }
    );
    let named = named
        .with_dim_names(Some(vec!["x".into(), "y".into()]))
        .unwrap();
    assert_eq!(
        named.permuted(&[1, 0]).unwrap().dim_names().unwrap(),
        &["y", "x"]
    );
    assert!(matches!(
        named.permuted(&[0, 0]),
        Err(Error::InvalidPermutation { .. })
    ));
}

#[test]
fn tensor_metadata_snapshots() {
    let buffer = Buffer::from_vec((0..24i32).collect::<Vec<_>>());
    let tensor = Tensor::try_new(buffer, DType::Int32, vec![3, 4], vec![-8, -1], 23)
        .unwrap()
        .with_dim_names(Some(vec!["rows".into(), "cols".into()]))
        .unwrap();
    insta::assert_debug_snapshot!("negative_strides", tensor);
    insta::assert_debug_snapshot!("contiguous_copy", tensor.to_contiguous().unwrap());
    let scalar = Tensor::try_new(tensor.buffer().clone(), DType::Int32, vec![], vec![], 7).unwrap();
    insta::assert_debug_snapshot!("zero_dimensional", scalar);
}

#[test]
fn to_contiguous_copies_values_in_row_major_order() {
    let buffer = Buffer::from_vec((0..24i32).collect::<Vec<_>>());
    let tensor = Tensor::try_new(buffer, DType::Int32, vec![3, 4], vec![-8, -1], 23).unwrap();
    let copy = tensor.to_contiguous().unwrap();
    assert_eq!(
        copy.row_major_buffer().unwrap().typed_data::<i32>(),
        &[23, 22, 21, 20, 15, 14, 13, 12, 7, 6, 5, 4]
    );
    assert!(!copy.is_read_only());
}

/// A contiguous tensor past `STREAM_THRESHOLD` is copied with non-temporal stores: from an
/// offset that leaves its start off a cache line, the copy is still exact.
#[test]
fn large_contiguous_copies_are_streamed_exactly() {
    let len = arrow_dlpack_tensor::alloc::STREAM_THRESHOLD / 4 + 1_001;
    let buffer = Buffer::from_vec((0..len as u32 + 3).collect::<Vec<_>>());
    let tensor = Tensor::try_new(buffer, DType::UInt32, vec![len], vec![1], 3).unwrap();
    let copy = tensor.to_contiguous().unwrap();
    let values = copy.row_major_buffer().unwrap();
    assert!(
        values
            .typed_data::<u32>()
            .iter()
            .copied()
            .eq(3..len as u32 + 3)
    );
    assert!(!copy.is_read_only());
}

#[test]
fn memory_made_for_the_export_is_flagged_copied_and_not_copied_again() {
    let (buffer, _) = counted_buffer(24 * 4);
    let fresh = Tensor::try_new_row_major(buffer, DType::Float32, vec![4, 6])
        .unwrap()
        .with_read_only(false);
    for copy in [None, Some(false), Some(true)] {
        let options = ExportOptions::copy(copy).made_for_export(true);
        let managed = fresh.to_dlpack_versioned(options).unwrap();
        assert_eq!(managed.flags(), DlpackFlags::IS_COPIED, "copy={copy:?}");
        let back = Tensor::from_managed(managed).unwrap();
        assert_eq!(
            back.data_ptr(),
            fresh.data_ptr(),
            "copy={copy:?}: no second copy"
        );
    }
    // A fresh but strided tensor still gets its compacting copy for copy=True.
    let strided = fresh.permuted(&[1, 0]).unwrap();
    let options = ExportOptions::copy(Some(true)).made_for_export(true);
    let back = Tensor::from_managed(strided.to_dlpack_versioned(options).unwrap()).unwrap();
    assert_ne!(back.data_ptr(), strided.data_ptr());
    assert!(back.is_row_major());
    assert_eq!(elements(&back), elements(&strided));
}
