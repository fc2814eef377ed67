//! Unit tests of the chunk stream that exports a column.

use std::sync::Arc;

use arrow_array::ffi_stream::ArrayStreamReader;
use arrow_array::{Array, Int32Array};
use arrow_schema::{DataType, Field};

use super::*;

fn chunks() -> (FieldRef, Vec<ArrayRef>) {
    let field = Arc::new(Field::new("x", DataType::Int32, true));
    let chunks: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(vec![1, 2, 3])),
        Arc::new(Int32Array::from(vec![Some(4), None])),
    ];
    (field, chunks)
}

#[test]
fn exported_stream_hands_out_every_chunk_zero_copy_then_ends() {
    let (field, chunks) = chunks();
    let reader = ArrayStreamReader::try_new(export_stream(&field, &chunks)).unwrap();
    assert_eq!(
        arrow_array::ArrayReader::field(&reader).as_ref(),
        field.as_ref()
    );
    let read: Vec<ArrayRef> = reader.collect::<Result<_, _>>().unwrap();
    assert_eq!(read.len(), 2);
    for (read, chunk) in read.iter().zip(&chunks) {
        assert_eq!(read.to_data(), chunk.to_data());
        assert_eq!(
            read.to_data().buffers()[0].as_ptr(),
            chunk.to_data().buffers()[0].as_ptr()
        );
    }
}

#[test]
fn release_frees_the_chunks_once_and_a_second_release_does_nothing() {
    let (field, chunks) = chunks();
    let mut stream = export_stream(&field, &chunks);
    assert_eq!(Arc::strong_count(&chunks[0]), 2);
    let release = stream.release().unwrap();
    // SAFETY: `stream` is a live stream made by `export_stream`.
    unsafe { release(&mut stream) };
    assert!(stream.release().is_none());
    assert!(stream.private_data().is_null());
    assert_eq!(Arc::strong_count(&chunks[0]), 1);
    // SAFETY: calling the saved callback again on the released stream must be harmless.
    unsafe { release(&mut stream) };
    assert_eq!(Arc::strong_count(&chunks[0]), 1);
    drop(stream);
    assert_eq!(Arc::strong_count(&chunks[0]), 1);
}

#[test]
fn dropping_an_unread_stream_releases_it() {
    let (field, chunks) = chunks();
    let stream = export_stream(&field, &chunks);
    assert_eq!(Arc::strong_count(&chunks[1]), 2);
    drop(stream);
    assert_eq!(Arc::strong_count(&chunks[1]), 1);
}
