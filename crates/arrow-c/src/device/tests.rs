//! Unit tests of the device interface: the device fields and the CPU device stream.

use arrow_array::ArrayRef;
use arrow_schema::{DataType, Field, FieldRef};

use std::sync::Arc;

use arrow_array::{Array, Int32Array};

use super::export::{cpu_device_stream, device_stream_get_next, device_stream_get_schema};
use super::*;

#[test]
fn device_fields_are_checked() {
    assert_eq!(device_of(1, -1, "x").unwrap(), Device::CPU);
    assert_eq!(device_of(1, 0, "x").unwrap(), Device::CPU);
    assert_eq!(
        device_of(2, 3, "x").unwrap(),
        Device {
            device_type: 2,
            device_id: 3
        }
    );
    for (device_type, device_id) in [
        (5, 0),
        (6, 0),
        (0, 0),
        (-2, 0),
        (1, 4),
        (2, -1),
        (17, 0),
        (18, 0),
    ] {
        assert!(
            matches!(
                device_of(device_type, device_id, "x"),
                Err(ArrowCError::Malformed { .. })
            ),
            "({device_type}, {device_id}) was accepted"
        );
    }
    assert!(device_of(10, i64::from(i32::MAX) + 1, "x").is_err());
}

#[test]
fn cpu_device_stream_hands_out_every_chunk_then_ends_and_releases_once() {
    let field: FieldRef = Arc::new(Field::new("x", DataType::Int32, true));
    let chunks: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(vec![1, 2, 3])),
        Arc::new(Int32Array::from(vec![Some(4), None])),
    ];
    let mut stream = cpu_device_stream(&field, &chunks);
    assert_eq!(stream.device_type, 1);
    let mut schema = FFI_ArrowSchema::empty();
    // SAFETY: our live stream and a released schema to fill.
    let status = unsafe { device_stream_get_schema(&mut stream, &mut schema) };
    assert_eq!(status, 0);
    assert_eq!(
        Field::try_from(&schema).unwrap().data_type(),
        &DataType::Int32
    );
    for chunk in &chunks {
        let mut out = ArrowDeviceArray::released();
        // SAFETY: our live stream and a released device array to fill.
        assert_eq!(unsafe { device_stream_get_next(&mut stream, &mut out) }, 0);
        assert_eq!((out.device_type, out.device_id), (1, -1));
        assert!(out.sync_event.is_null());
        assert_eq!(out.array.len(), chunk.len());
        assert_eq!(out.array.buffer(1), chunk.to_data().buffers()[0].as_ptr());
    }
    let mut end = ArrowDeviceArray::released();
    // SAFETY: as above.
    assert_eq!(unsafe { device_stream_get_next(&mut stream, &mut end) }, 0);
    assert!(end.array.is_released());
    assert_eq!(Arc::strong_count(&chunks[0]), 2);
    drop(stream);
    assert_eq!(Arc::strong_count(&chunks[0]), 1);
}

#[test]
fn released_structs_release_nothing() {
    drop(ArrowDeviceArray::released());
    drop(ArrowDeviceArrayStream::released());
}
