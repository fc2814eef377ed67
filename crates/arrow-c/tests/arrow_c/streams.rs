//! Streams both ways: a column's chunks exported as an `ArrowArrayStream` (and as a CPU
//! `ArrowDeviceArrayStream`) and read back through the checked readers, each stream released
//! exactly once.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int32Array};
use arrow_dlpack_c::{
    CheckedStream, DeviceImported, cpu_device_stream, export_stream, field_of_schema,
    import_device_stream, import_stream,
};
use arrow_schema::{DataType, Field, FieldRef};

fn column() -> (FieldRef, Vec<ArrayRef>) {
    let field = Arc::new(Field::new("x", DataType::Int32, true));
    let chunks: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(vec![1, 2, 3])),
        Arc::new(Int32Array::from(vec![Some(4), None])),
    ];
    (field, chunks)
}

fn assert_same_chunks(read: &[ArrayRef], chunks: &[ArrayRef]) {
    assert_eq!(read.len(), chunks.len());
    for (read, chunk) in read.iter().zip(chunks) {
        assert_eq!(read.to_data(), chunk.to_data());
        assert_eq!(
            read.to_data().buffers()[0].as_ptr(),
            chunk.to_data().buffers()[0].as_ptr(),
            "zero-copy"
        );
    }
}

#[test]
fn an_exported_stream_is_read_back_zero_copy_and_releases_its_chunks() {
    let (field, chunks) = column();
    let imported = import_stream(export_stream(&field, &chunks)).unwrap();
    assert_eq!(imported.field.as_ref(), field.as_ref());
    assert_same_chunks(&imported.chunks, &chunks);
    drop(imported);
    assert_eq!(Arc::strong_count(&chunks[0]), 1);
}

#[test]
fn a_checked_stream_stops_where_it_is_dropped_and_releases_the_stream_once() {
    let (field, chunks) = column();
    let mut stream = CheckedStream::new(export_stream(&field, &chunks)).unwrap();
    assert_eq!(stream.field().data_type(), &DataType::Int32);
    let first = stream.next_chunk().unwrap().unwrap();
    assert_eq!(first.len(), 3);
    assert_eq!(
        Arc::strong_count(&chunks[1]),
        2,
        "the unread chunk is still the stream's"
    );
    drop(stream);
    assert_eq!(Arc::strong_count(&chunks[1]), 1);
}

#[test]
fn a_cpu_device_stream_is_read_back_as_host_chunks() {
    let (field, chunks) = column();
    let stream = cpu_device_stream(&field, &chunks);
    assert_eq!(stream.device_type(), 1);
    let Ok(DeviceImported::Host(imported)) = import_device_stream(stream, field_of_schema) else {
        panic!("a CPU device stream gives host chunks");
    };
    assert_same_chunks(&imported.chunks, &chunks);
    drop(imported);
    assert_eq!(Arc::strong_count(&chunks[0]), 1);
}

#[test]
fn released_streams_are_refused() {
    let (field, chunks) = column();
    let mut stream = export_stream(&field, &chunks);
    let release = stream.release().unwrap();
    // SAFETY: a live stream made by `export_stream`, released once here.
    unsafe { release(&mut stream) };
    let error = CheckedStream::new(stream).err().unwrap();
    assert!(
        error
            .to_string()
            .contains("ArrowArrayStream.release is NULL"),
        "{error}"
    );
    let error = import_device_stream(
        arrow_dlpack_c::ArrowDeviceArrayStream::released(),
        field_of_schema,
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("ArrowDeviceArrayStream.release is NULL"),
        "{error}"
    );
}
