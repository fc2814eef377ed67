//! Import of hand-built DLPack tensors: every malformed field is refused with an error naming it,
//! every accepted layout is viewed without copying, and the deleter runs exactly once either way.

use arrow_dlpack_tensor::{DType, Error, Tensor};
use dlpack_sys::{DLDataType, DLDataTypeCode, DLDeviceType, DLPackVersion, DlpackFlags};

use crate::common::{Data, Spec, count, legacy, versioned};

/// Imports `spec` as a versioned tensor and returns the error, checking the deleter ran once.
fn refuse(name: &str, spec: &Spec) -> Error {
    let (raw, deleted) = versioned(spec);
    // SAFETY: `raw` is a freshly built, owned managed tensor whose arrays match `ndim` or are NULL.
    let result = unsafe { Tensor::from_raw_versioned(raw) };
    let error = result.expect_err(&format!("malformed tensor was accepted: {name}"));
    assert_eq!(
        count(&deleted),
        1,
        "deleter must run exactly once before the error returns"
    );
    error
}

fn with<F: FnOnce(&mut Spec)>(shape: &[i64], change: F) -> Spec {
    let mut spec = Spec::float32(shape);
    change(&mut spec);
    spec
}

/// The malformed cases, each with a name; their messages are snapshotted together.
fn malformed_cases() -> Vec<(&'static str, Spec)> {
    let dtype = |code: u8, bits: u8, lanes: u16| DLDataType {
        code: DLDataTypeCode(code),
        bits,
        lanes,
    };
    vec![
        (
            "null shape with ndim 2",
            with(&[2, 3], |s| {
                s.shape = None;
                s.ndim = Some(2);
            }),
        ),
        ("negative ndim", with(&[2], |s| s.ndim = Some(-1))),
        (
            "ndim above the maximum",
            with(&[2], |s| {
                s.ndim = Some(5000);
                s.shape = Some(vec![1; 5000]);
            }),
        ),
        (
            "negative extent",
            with(&[2, 3], |s| s.shape = Some(vec![2, -3])),
        ),
        (
            "element count overflows",
            with(&[2], |s| {
                s.shape = Some(vec![i64::MAX, i64::MAX]);
                s.strides = Some(vec![1, 1]);
            }),
        ),
        (
            "strides reach past the address space",
            with(&[2], |s| {
                s.shape = Some(vec![1 << 20, 1 << 20, 4]);
                s.strides = Some(vec![i64::MAX, i64::MAX, 1]);
            }),
        ),
        (
            "implicit strides overflow",
            with(&[2], |s| {
                s.shape = Some(vec![1 << 62, 1 << 62]);
                s.strides = None;
            }),
        ),
        (
            "16-byte elements whose byte span overflows i128",
            with(&[2], |s| {
                s.dtype = dtype(5, 128, 1);
                s.shape = Some(vec![1 << 62, 2]);
                s.strides = Some(vec![i64::MAX, i64::MAX]);
            }),
        ),
        (
            "byte offset overflows the address",
            with(&[4], |s| s.byte_offset = u64::MAX - 3),
        ),
        (
            "data end overflows the address",
            with(&[4], |s| s.data = Data::Address(usize::MAX - 7)),
        ),
        (
            "negative stride reaches below address zero",
            with(&[10], |s| {
                s.data = Data::Address(16);
                s.strides = Some(vec![-1]);
            }),
        ),
        (
            "null data with elements",
            with(&[2, 3], |s| s.data = Data::Null),
        ),
        ("misaligned data", with(&[2], |s| s.data = Data::Offset(1))),
        ("misaligned byte offset", with(&[2], |s| s.byte_offset = 2)),
        ("lanes 0", with(&[2], |s| s.dtype = dtype(2, 32, 0))),
        ("lanes 2", with(&[2], |s| s.dtype = dtype(2, 32, 2))),
        (
            "float with 0 bits",
            with(&[2], |s| s.dtype = dtype(2, 0, 1)),
        ),
        ("int with 1 bit", with(&[2], |s| s.dtype = dtype(0, 1, 1))),
        ("uint with 4 bits", with(&[2], |s| s.dtype = dtype(1, 4, 1))),
        ("int with 7 bits", with(&[2], |s| s.dtype = dtype(0, 7, 1))),
        (
            "float with 128 bits",
            with(&[2], |s| s.dtype = dtype(2, 128, 1)),
        ),
        ("float4 sub-byte", with(&[2], |s| s.dtype = dtype(17, 4, 1))),
        (
            "opaque handle type code",
            with(&[2], |s| s.dtype = dtype(3, 64, 1)),
        ),
        (
            "unknown type code",
            with(&[2], |s| s.dtype = dtype(200, 32, 1)),
        ),
        ("bool with 1 bit", with(&[2], |s| s.dtype = dtype(6, 1, 1))),
        (
            "cuda device",
            with(&[2], |s| s.device.device_type = DLDeviceType::CUDA),
        ),
        (
            "unknown device",
            with(&[2], |s| s.device.device_type = DLDeviceType(99)),
        ),
        (
            "major version 0",
            with(&[2], |s| s.version = DLPackVersion { major: 0, minor: 8 }),
        ),
        (
            "major version 2",
            with(&[2], |s| s.version = DLPackVersion { major: 2, minor: 0 }),
        ),
    ]
}

#[test]
fn refuses_every_malformed_tensor_and_runs_the_deleter_once() {
    let mut report = String::new();
    for (name, spec) in malformed_cases() {
        let error = refuse(name, &spec);
        report.push_str(&format!("{name}: {error}\n"));
    }
    insta::with_settings!({filters => vec![(r"0x[0-9a-f]+", "[address]")]}, {
        insta::assert_snapshot!(report);
    });
}

#[test]
fn refused_errors_have_the_expected_variants() {
    let variant = |name: &str| {
        let (_, spec) = malformed_cases()
            .into_iter()
            .find(|(n, _)| *n == name)
            .unwrap();
        refuse(name, &spec)
    };
    assert_eq!(
        variant("null shape with ndim 2"),
        Error::NullShape { ndim: 2 }
    );
    assert_eq!(
        variant("negative extent"),
        Error::NegativeExtent { dim: 1, extent: -3 }
    );
    assert_eq!(
        variant("null data with elements"),
        Error::NullData { elements: 6 }
    );
    assert_eq!(variant("lanes 2"), Error::UnsupportedLanes { lanes: 2 });
    assert_eq!(
        variant("major version 2"),
        Error::UnsupportedVersion {
            major: 2,
            minor: 0,
            expected_major: 1
        }
    );
    assert!(matches!(
        variant("cuda device"),
        Error::UnsupportedDevice { device_type: 2, .. }
    ));
    assert!(matches!(
        variant("misaligned data"),
        Error::Misaligned { alignment: 4, .. }
    ));
    assert!(matches!(
        variant("element count overflows"),
        Error::Overflow { .. }
    ));
}

#[test]
fn refuses_a_null_managed_pointer() {
    // SAFETY: NULL is explicitly allowed.
    let error = unsafe { Tensor::from_raw_versioned(std::ptr::null_mut()) }.unwrap_err();
    assert_eq!(error, Error::NullManagedTensor);
    // SAFETY: NULL is explicitly allowed.
    let error = unsafe { Tensor::from_raw_legacy(std::ptr::null_mut()) }.unwrap_err();
    assert_eq!(error, Error::NullManagedTensor);
}

#[test]
fn legacy_tensors_are_validated_the_same_way() {
    let spec = with(&[2, 3], |s| s.shape = Some(vec![2, -3]));
    let (raw, deleted) = legacy(&spec);
    // SAFETY: freshly built and owned.
    let error = unsafe { Tensor::from_raw_legacy(raw) }.unwrap_err();
    assert_eq!(error, Error::NegativeExtent { dim: 1, extent: -3 });
    assert_eq!(count(&deleted), 1);
}

fn values(tensor: &Tensor) -> Vec<f32> {
    let contiguous = tensor.to_contiguous().unwrap();
    contiguous
        .row_major_buffer()
        .unwrap()
        .typed_data::<f32>()
        .to_vec()
}

#[test]
fn null_strides_mean_row_major_and_the_view_is_zero_copy() {
    let spec = Spec::float32(&[2, 3]);
    let (raw, deleted) = versioned(&spec);
    // SAFETY: the data pointer of a freshly built tensor; read before handing it over.
    let data = unsafe { (*raw).dl_tensor.data } as *const u8;
    // SAFETY: freshly built and owned.
    let tensor = unsafe { Tensor::from_raw_versioned(raw) }.unwrap();
    assert_eq!(tensor.shape(), &[2, 3]);
    assert_eq!(tensor.strides(), &[3, 1]);
    assert_eq!(tensor.data_ptr(), data);
    assert_eq!(values(&tensor), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(count(&deleted), 0);
    let clone = tensor.clone();
    drop(tensor);
    assert_eq!(count(&deleted), 0, "a clone still holds the buffer");
    drop(clone);
    assert_eq!(count(&deleted), 1);
}

#[test]
fn byte_offset_is_honoured() {
    let spec = with(&[4], |s| s.byte_offset = 8);
    let (raw, deleted) = versioned(&spec);
    // SAFETY: freshly built and owned; 4 floats from byte 8 fit in the storage.
    let tensor = unsafe { Tensor::from_raw_versioned(raw) }.unwrap();
    assert_eq!(values(&tensor), vec![2.0, 3.0, 4.0, 5.0]);
    drop(tensor);
    assert_eq!(count(&deleted), 1);
}

#[test]
fn negative_zero_and_gapped_strides_are_viewed_exactly() {
    // Storage holds 0..12; view rows in reverse with every other column.
    let spec = with(&[12], |s| {
        s.shape = Some(vec![3, 2]);
        s.strides = Some(vec![-4, 2]);
        s.byte_offset = 8 * 4;
    });
    let (raw, deleted) = versioned(&spec);
    // SAFETY: freshly built; the addressed elements 0..=10 lie inside the 12-float storage.
    let tensor = unsafe { Tensor::from_raw_versioned(raw) }.unwrap();
    assert_eq!(values(&tensor), vec![8.0, 10.0, 4.0, 6.0, 0.0, 2.0]);
    assert!(!tensor.is_contiguous());
    drop(tensor);
    assert_eq!(count(&deleted), 1);

    let spec = with(&[3], |s| {
        s.shape = Some(vec![2, 3]);
        s.strides = Some(vec![0, 1]);
    });
    let (raw, deleted) = versioned(&spec);
    // SAFETY: freshly built; a broadcast row of 3 floats.
    let tensor = unsafe { Tensor::from_raw_versioned(raw) }.unwrap();
    assert_eq!(values(&tensor), vec![0.0, 1.0, 2.0, 0.0, 1.0, 2.0]);
    drop(tensor);
    assert_eq!(count(&deleted), 1);
}

#[test]
fn empty_tensors_with_any_strides_and_null_data_release_at_once() {
    for strides in [None, Some(vec![0, 1]), Some(vec![-7, 99])] {
        let spec = with(&[0, 3], |s| {
            s.data = Data::Null;
            s.strides = strides.clone();
        });
        let (raw, deleted) = versioned(&spec);
        // SAFETY: freshly built and owned.
        let tensor = unsafe { Tensor::from_raw_versioned(raw) }.unwrap();
        assert_eq!(
            count(&deleted),
            1,
            "an empty tensor holds no foreign memory"
        );
        assert_eq!(tensor.shape(), &[0, 3]);
        assert!(tensor.is_empty() && tensor.is_row_major());
    }
}

#[test]
fn zero_dimensional_tensors_import() {
    let spec = with(&[], |s| {
        s.shape = None;
        s.byte_offset = 12;
    });
    let (raw, deleted) = versioned(&spec);
    // SAFETY: freshly built; one float at byte 12.
    let tensor = unsafe { Tensor::from_raw_versioned(raw) }.unwrap();
    assert_eq!(tensor.ndim(), 0);
    assert_eq!(tensor.len(), 1);
    assert_eq!(values(&tensor), vec![3.0]);
    drop(tensor);
    assert_eq!(count(&deleted), 1);
}

#[test]
fn read_only_flag_and_minor_versions_are_read() {
    let spec = with(&[2], |s| {
        s.flags = DlpackFlags::READ_ONLY;
        s.version = DLPackVersion {
            major: 1,
            minor: 99,
        };
    });
    let (raw, deleted) = versioned(&spec);
    // SAFETY: freshly built and owned.
    let tensor = unsafe { Tensor::from_raw_versioned(raw) }.unwrap();
    assert!(tensor.is_read_only());
    assert_eq!(tensor.dtype(), DType::Float32);
    drop(tensor);
    assert_eq!(count(&deleted), 1);

    let (raw, deleted) = versioned(&Spec::float32(&[2]));
    // SAFETY: freshly built and owned.
    let tensor = unsafe { Tensor::from_raw_versioned(raw) }.unwrap();
    assert!(
        !tensor.is_read_only(),
        "a versioned tensor without READ_ONLY is writable"
    );
    drop(tensor);
    assert_eq!(count(&deleted), 1);
}

#[test]
fn legacy_tensors_are_read_only_since_they_cannot_say_otherwise() {
    let (raw, deleted) = legacy(&Spec::float32(&[2]));
    // SAFETY: freshly built and owned.
    let tensor = unsafe { Tensor::from_raw_legacy(raw) }.unwrap();
    assert!(
        tensor.is_read_only(),
        "a legacy tensor carries no flags, so it cannot promise writable memory"
    );
    // Its re-export says so to versioned consumers.
    let managed = tensor
        .to_dlpack_versioned(arrow_dlpack_tensor::ExportOptions::default())
        .unwrap();
    assert!(managed.flags().contains(DlpackFlags::READ_ONLY));
    drop(managed);
    drop(tensor);
    assert_eq!(count(&deleted), 1);
}

#[test]
fn a_null_deleter_is_never_called() {
    let spec = with(&[2], |s| s.null_deleter = true);
    let (raw, deleted) = versioned(&spec);
    // SAFETY: freshly built; with a NULL deleter the producer keeps ownership, reclaimed below.
    let tensor = unsafe { Tensor::from_raw_versioned(raw) }.unwrap();
    assert_eq!(values(&tensor), vec![0.0, 1.0]);
    drop(tensor);
    assert_eq!(count(&deleted), 0);
    // SAFETY: built with a NULL deleter, and the consumer above has dropped its view.
    unsafe { crate::common::reclaim_versioned(raw) };
}

#[test]
fn deleters_may_run_on_another_thread() {
    let (raw, deleted) = versioned(&Spec::float32(&[1000]));
    // SAFETY: freshly built and owned.
    let tensor = unsafe { Tensor::from_raw_versioned(raw) }.unwrap();
    let clones: Vec<Tensor> = (0..8).map(|_| tensor.clone()).collect();
    drop(tensor);
    let handles: Vec<_> = clones
        .into_iter()
        .map(|clone| std::thread::spawn(move || values(&clone).iter().sum::<f32>()))
        .collect();
    for handle in handles {
        assert_eq!(handle.join().unwrap(), (0..1000).sum::<i32>() as f32);
    }
    assert_eq!(count(&deleted), 1);
}

/// A float32 tensor of `shape` on CUDA device 1 at an address no host code may read: the first
/// page is never mapped, so a dereference would crash the test.
fn on_cuda(shape: &[i64]) -> Spec {
    with(shape, |s| {
        s.device.device_type = DLDeviceType::CUDA;
        s.device.device_id = 1;
        s.data = Data::Address(0x100);
    })
}

fn any_device() -> arrow_dlpack_tensor::ImportOptions {
    arrow_dlpack_tensor::ImportOptions { any_device: true }
}

#[test]
fn device_tensors_are_refused_by_default_and_kept_when_allowed() {
    let spec = on_cuda(&[2, 3]);
    let (raw, deleted) = versioned(&spec);
    // SAFETY: freshly built and owned; the data is never read.
    let refused = unsafe { Tensor::from_raw_versioned(raw) }.unwrap_err();
    assert!(matches!(
        refused,
        Error::UnsupportedDevice {
            device_type: 2,
            device_id: 1,
            ..
        }
    ));
    assert_eq!(count(&deleted), 1);

    let (raw, deleted) = versioned(&spec);
    // SAFETY: as above.
    let tensor = unsafe { Tensor::from_raw_versioned_with(raw, any_device()) }.unwrap();
    assert_eq!(
        tensor.device(),
        arrow_dlpack_tensor::Device {
            device_type: 2,
            device_id: 1
        }
    );
    assert_eq!(tensor.shape(), &[2, 3]);
    assert_eq!(tensor.strides(), &[3, 1]);
    assert_eq!(tensor.data_ptr() as usize, 0x100);
    assert!(tensor.is_row_major());
    drop(tensor);
    assert_eq!(count(&deleted), 1);
}

#[test]
fn device_tensors_are_exported_again_zero_copy_with_their_device() {
    let (raw, deleted) = legacy(&on_cuda(&[4]));
    // SAFETY: freshly built and owned; the data is never read.
    let tensor = unsafe { Tensor::from_raw_legacy_with(raw, any_device()) }.unwrap();
    let exported = tensor
        .to_dlpack_versioned(arrow_dlpack_tensor::ExportOptions::default())
        .unwrap();
    // SAFETY: `exported` is a live managed tensor made just above.
    let raw = unsafe { exported.tensor() };
    assert_eq!(raw.device.device_type, DLDeviceType::CUDA);
    assert_eq!(raw.device.device_id, 1);
    assert_eq!(raw.data as usize, 0x100);
    let again = Tensor::from_managed_with(exported, any_device()).unwrap();
    assert_eq!(again.device(), tensor.device());
    assert_eq!(again.data_ptr(), tensor.data_ptr());
    drop((tensor, again));
    assert_eq!(count(&deleted), 1);
}

#[test]
fn nothing_reads_device_memory() {
    let (raw, deleted) = versioned(&on_cuda(&[2, 3]));
    // SAFETY: freshly built and owned; the data is never read.
    let tensor = unsafe { Tensor::from_raw_versioned_with(raw, any_device()) }.unwrap();
    let transposed = tensor.permuted(&[1, 0]).unwrap();
    let copy = transposed.to_contiguous().unwrap_err();
    assert_eq!(
        copy.to_string(),
        "cannot copy the tensor: the memory is on CUDA device 1 (device_type 2), and only host \
         memory can be read"
    );
    assert!(matches!(
        tensor.as_slice::<f32>().unwrap_err(),
        Error::DeviceMemory {
            operation: "read the elements",
            ..
        }
    ));
    assert!(tensor.get::<f32>(&[0, 0]).is_err());
    assert!(tensor.iter::<f32>().is_err());
    let copied = tensor.to_dlpack_versioned(arrow_dlpack_tensor::ExportOptions::copy(Some(true)));
    assert!(matches!(copied, Err(Error::DeviceMemory { .. })));
    drop((tensor, transposed));
    assert_eq!(count(&deleted), 1);
}

#[test]
fn unknown_device_types_are_refused_even_when_devices_are_allowed() {
    let spec = with(&[2], |s| s.device.device_type = DLDeviceType(99));
    let (raw, deleted) = versioned(&spec);
    // SAFETY: freshly built and owned.
    let error = unsafe { Tensor::from_raw_versioned_with(raw, any_device()) }.unwrap_err();
    assert!(matches!(
        error,
        Error::UnsupportedDevice {
            device_type: 99,
            ..
        }
    ));
    assert_eq!(count(&deleted), 1);
}

/// A float32 tensor of `shape` on `device_type` (an OpenCL, Vulkan, Metal or WebGPU handle at
/// 0x100, never read), whose first element is `byte_offset` bytes into the buffer.
fn behind_handle(device_type: DLDeviceType, shape: &[i64], byte_offset: u64) -> Spec {
    with(shape, |s| {
        s.device.device_type = device_type;
        s.data = Data::Address(0x100);
        s.byte_offset = byte_offset;
    })
}

#[test]
fn opaque_handles_are_exported_as_they_came_with_the_offset_in_byte_offset() {
    for device_type in [
        DLDeviceType::OPENCL,
        DLDeviceType::VULKAN,
        DLDeviceType::METAL,
        DLDeviceType::WEBGPU,
    ] {
        let (raw, deleted) = versioned(&behind_handle(device_type, &[2, 3], 8));
        // SAFETY: freshly built and owned; the handle is never read.
        let tensor = unsafe { Tensor::from_raw_versioned_with(raw, any_device()) }.unwrap();
        assert!(tensor.device().has_opaque_handles());
        assert_eq!(tensor.offset(), 2);
        // A transposed view: other strides, the same handle and offset.
        let transposed = tensor.permuted(&[1, 0]).unwrap();
        for view in [&tensor, &transposed] {
            let exported = view
                .to_dlpack_versioned(arrow_dlpack_tensor::ExportOptions::default())
                .unwrap();
            // SAFETY: `exported` is a live managed tensor made just above.
            let raw = unsafe { exported.tensor() };
            assert_eq!(raw.device.device_type, device_type);
            assert_eq!(raw.data as usize, 0x100, "the handle, untouched");
            assert_eq!(raw.byte_offset, 8, "the offset, in byte_offset");
            // Imported again, the same handle and offset.
            let again = Tensor::from_managed_with(exported, any_device()).unwrap();
            assert_eq!(again.buffer().as_ptr() as usize, 0x100);
            assert_eq!(again.offset(), 2);
        }
        drop((tensor, transposed));
        assert_eq!(count(&deleted), 1);
    }
}

#[test]
fn addresses_keep_the_offset_folded_into_data() {
    let (raw, deleted) = versioned(&with(&[2, 3], |s| {
        s.device.device_type = DLDeviceType::CUDA;
        s.data = Data::Address(0x100);
        s.byte_offset = 8;
    }));
    // SAFETY: freshly built and owned; the data is never read.
    let tensor = unsafe { Tensor::from_raw_versioned_with(raw, any_device()) }.unwrap();
    let exported = tensor
        .to_dlpack_versioned(arrow_dlpack_tensor::ExportOptions::default())
        .unwrap();
    // SAFETY: as above.
    let raw = unsafe { exported.tensor() };
    assert_eq!((raw.data as usize, raw.byte_offset), (0x108, 0));
    drop((tensor, exported));
    assert_eq!(count(&deleted), 1);
}

#[test]
fn an_offset_into_a_handle_must_be_whole_elements() {
    let (raw, deleted) = versioned(&behind_handle(DLDeviceType::OPENCL, &[2], 6));
    // SAFETY: freshly built and owned; the handle is never read.
    let refused = unsafe { Tensor::from_raw_versioned_with(raw, any_device()) }.unwrap_err();
    assert!(
        matches!(refused, Error::Misaligned { .. } | Error::Overflow { .. }),
        "{refused}"
    );
    assert_eq!(count(&deleted), 1);
}
