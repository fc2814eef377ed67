//! The C Device Data Interface: device arrays built by hand imported as device tensors (never
//! read) with their device and event, refused with the right kind of error and released once,
//! and tensors exported again.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow_array::Array;
use arrow_array::ffi::FFI_ArrowArray;
use arrow_dlpack::EXTENSION_NAME;
use arrow_dlpack_c::{
    ArrowCError, ArrowDeviceArray, DeviceImported, DeviceTensor, export_tensor, import_device_array,
};
use arrow_dlpack_tensor::Device;
use arrow_schema::{DataType, Field};

use crate::hand_built::{Releases, build, pointer};

const CUDA_3: Device = Device {
    device_type: 2,
    device_id: 3,
};

/// Imports four `float`s "on" `device` (host memory standing for it: nothing reads it), with
/// `null_count` and a validity bitmap when `bitmap`, carrying `event`.
fn import_floats(
    device_type: i32,
    device_id: i64,
    null_count: i64,
    bitmap: bool,
    event: *mut c_void,
) -> (Result<DeviceImported, ArrowCError>, Releases, Vec<f32>) {
    let values = vec![1.0f32, 2.0, 3.0, 4.0];
    let validity = [0b1111u8];
    let validity = if bitmap {
        pointer(&validity)
    } else {
        std::ptr::null()
    };
    let (array, releases) = build(4, null_count, &[validity, pointer(&values)], |_| {});
    let mut device_array = ArrowDeviceArray::new(array, Device::CPU, event);
    // The device fields as the producer wrote them, through the struct's C layout.
    // SAFETY: `ArrowDeviceArray` is `repr(C)` with `device_id` at byte 80 and `device_type` at
    // 88 (asserted by the crate).
    unsafe {
        let base = (&raw mut device_array).cast::<u8>();
        base.add(80).cast::<i64>().write(device_id);
        base.add(88).cast::<i32>().write(device_type);
    }
    let field = Arc::new(Field::new("x", DataType::Float32, false));
    (import_device_array(field, device_array), releases, values)
}

fn device_tensor(imported: Result<DeviceImported, ArrowCError>) -> DeviceTensor {
    match imported {
        Ok(DeviceImported::Device(tensor)) => tensor,
        Ok(DeviceImported::Host(_)) => panic!("imported as host data"),
        Err(error) => panic!("refused: {error}"),
    }
}

#[test]
fn a_device_array_becomes_a_tensor_on_its_device_with_its_event_and_is_released_once() {
    let mut event_handle = 0xE7u64;
    let event = (&raw mut event_handle).cast::<c_void>();
    let (imported, releases, values) = import_floats(2, 3, 0, false, event);
    let DeviceTensor { tensor, sync_event } = device_tensor(imported);
    assert_eq!(tensor.device(), CUDA_3);
    assert_eq!(tensor.shape(), &[4]);
    assert_eq!(tensor.data_ptr(), values.as_ptr().cast());
    assert_eq!(sync_event.map(|event| event.as_ptr()), Some(event));
    let view = tensor.clone();
    drop(tensor);
    assert_eq!(releases.count(), 0);
    drop(view);
    assert_eq!(releases.count(), 1);
}

#[test]
fn cpu_device_arrays_are_ordinary_arrow_arrays() {
    for device_id in [-1, 0] {
        let (imported, releases, values) =
            import_floats(1, device_id, 0, false, std::ptr::null_mut());
        let Ok(DeviceImported::Host(imported)) = imported else {
            panic!("CPU data is imported as Arrow chunks");
        };
        assert_eq!(imported.chunks.len(), 1);
        assert_eq!(
            imported.chunks[0].to_data().buffers()[0].as_ptr(),
            values.as_ptr().cast()
        );
        drop(imported);
        assert_eq!(releases.count(), 1);
    }
}

/// Whether an error is the one a case expects.
type Expected = fn(&ArrowCError) -> bool;

#[test]
fn bad_device_fields_nulls_and_unknown_null_counts_are_refused_and_released_once() {
    let cases: [(i32, i64, i64, bool, Expected); 6] = [
        // Device types Arrow does not define, and device ids out of range.
        (17, 0, 0, false, |e| {
            (matches!(e, ArrowCError::Malformed { .. })
                && e.to_string().contains("does not define"))
        }),
        (5, 0, 0, false, |e| {
            (matches!(e, ArrowCError::Malformed { .. }) && e.to_string().contains("no device type"))
        }),
        (1, 4, 0, false, |e| {
            (matches!(e, ArrowCError::Malformed { .. })
                && e.to_string().contains("-1 or 0 for the CPU"))
        }),
        (2, -1, 0, false, |e| {
            (matches!(e, ArrowCError::Malformed { .. }) && e.to_string().contains("device index"))
        }),
        // Nulls a tensor cannot hold, and nulls only device memory could count.
        (2, 0, 1, true, |e| {
            (matches!(e, ArrowCError::Nulls { .. })
                && e.to_string().contains("1 nulls on CUDA device 0"))
        }),
        (2, 0, -1, true, |e| {
            (matches!(e, ArrowCError::DeviceNullCount { .. })
                && e.to_string().contains("null_count is -1"))
        }),
    ];
    for (device_type, device_id, null_count, bitmap, expected) in cases {
        let (imported, releases, _values) = import_floats(
            device_type,
            device_id,
            null_count,
            bitmap,
            std::ptr::null_mut(),
        );
        let error = imported.unwrap_err();
        assert!(expected(&error), "({device_type}, {device_id}): {error}");
        assert_eq!(releases.count(), 1, "({device_type}, {device_id}): {error}");
    }
    // An unknown null count without a bitmap has no nulls to count.
    let (imported, releases, _values) = import_floats(13, 0, -1, false, std::ptr::null_mut());
    drop(device_tensor(imported));
    assert_eq!(releases.count(), 1);
}

#[test]
fn fixed_shape_tensors_on_a_device_keep_their_shape_and_come_back_with_it() {
    let values: Vec<f64> = (0..12).map(f64::from).collect();
    let tensor_type = arrow_dlpack::FixedShapeTensorType::try_new(
        DataType::Float64,
        vec![2, 3],
        None,
        Some(vec!["h".into(), "w".into()]),
    )
    .unwrap();
    let storage = arrow_array::FixedSizeListArray::new(
        Arc::new(Field::new("item", DataType::Float64, false)),
        6,
        Arc::new(arrow_array::Float64Array::from(values)),
        None,
    );
    let data = storage.values().to_data().buffers()[0].as_ptr();
    let array = FFI_ArrowArray::new(&storage.to_data());
    let field = Arc::new(tensor_type.to_field("t", false));
    assert_eq!(field.extension_type_name(), Some(EXTENSION_NAME));
    let imported = import_device_array(
        field,
        ArrowDeviceArray::new(array, CUDA_3, std::ptr::null_mut()),
    );
    let DeviceTensor { tensor, .. } = device_tensor(imported);
    assert_eq!(tensor.shape(), &[2, 2, 3]);
    assert_eq!(tensor.device(), CUDA_3);
    assert_eq!(
        tensor.dim_names().unwrap(),
        &[String::new(), "h".into(), "w".into()]
    );

    /// Counts its drops: stands for the event an export records and must keep alive.
    struct Kept(Arc<AtomicUsize>);
    impl Drop for Kept {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let mut event_handle = 7u64;
    let event = (&raw mut event_handle).cast::<c_void>();
    let (field, exported) = export_tensor(&tensor, event, Some(Kept(drops.clone()))).unwrap();
    assert_eq!(field.extension_type_name(), Some(EXTENSION_NAME));
    assert_eq!((exported.device_type(), exported.device_id()), (2, 3));
    assert_eq!(exported.sync_event(), event);
    assert_eq!(exported.array().len(), 2);
    assert_eq!(tensor.data_ptr(), data);
    assert_eq!(exported.array().child(0).buffer(1), data);
    drop(tensor);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        0,
        "the export keeps what it was given"
    );
    drop(exported);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn tensors_that_are_not_row_major_are_not_exported() {
    let storage = arrow_array::FixedSizeListArray::new(
        Arc::new(Field::new("item", DataType::Float32, false)),
        2,
        Arc::new(arrow_array::Float32Array::from(vec![1.0, 2.0, 3.0, 4.0])),
        None,
    );
    let field = Arc::new(Field::new("x", storage.data_type().clone(), false));
    let array = FFI_ArrowArray::new(&storage.to_data());
    let imported = import_device_array(
        field,
        ArrowDeviceArray::new(array, CUDA_3, std::ptr::null_mut()),
    );
    let DeviceTensor { tensor, .. } = device_tensor(imported);
    assert_eq!(tensor.shape(), &[2, 2]);
    let transposed = tensor.permuted(&[1, 0]).unwrap();
    let error = export_tensor(&transposed, std::ptr::null_mut(), None::<()>).unwrap_err();
    assert!(
        (matches!(&error, ArrowCError::DeviceNotRowMajor { .. })
            && error.to_string().contains("row-major")),
        "{error}"
    );
}

#[test]
fn opaque_handles_travel_untouched_with_the_offset_in_the_array() {
    // An OpenCL array whose first element is 1 into the buffer: the buffer pointer is a
    // `cl_mem` handle (here host memory standing for one), on which no arithmetic is done.
    let values = [0.0f32, 1.0, 2.0, 3.0];
    let (array, releases) = build(3, 0, &[std::ptr::null(), pointer(&values)], |raw| {
        raw.offset = 1;
    });
    let opencl = Device {
        device_type: 4,
        device_id: 0,
    };
    let field = Arc::new(Field::new("x", DataType::Float32, false));
    let imported = import_device_array(
        field,
        ArrowDeviceArray::new(array, opencl, std::ptr::null_mut()),
    );
    let DeviceTensor { tensor, .. } = device_tensor(imported);
    assert_eq!(tensor.shape(), &[3]);
    assert_eq!(tensor.buffer().as_ptr(), pointer(&values).cast());
    assert_eq!(tensor.offset(), 1);
    let (_, exported) = export_tensor(&tensor, std::ptr::null_mut(), None::<()>).unwrap();
    assert_eq!(exported.device_type(), 4);
    assert_eq!(
        exported.array().buffer(1),
        pointer(&values).cast(),
        "the handle, untouched"
    );
    assert_eq!(exported.array().offset(), 1);
    assert_eq!(exported.array().len(), 3);
    drop((tensor, exported));
    assert_eq!(releases.count(), 1);
}
