//! The checked import of `ArrowArray`s: zero-copy, every check naming the field, and the
//! producer's release called exactly once on success and on every error path.

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_dlpack_c::{ArrowCError, import_array};
use arrow_schema::DataType;

use crate::hand_built::{build, free_unreleased, pointer};

#[test]
fn a_hand_built_array_is_imported_zero_copy_and_released_once_by_its_last_buffer() {
    let values = [1i32, 2, 3, 4];
    let (array, releases) = build(4, 0, &[std::ptr::null(), pointer(&values)], |_| {});
    let imported = import_array(array, &DataType::Int32, "ArrowArray").unwrap();
    assert_eq!(imported.as_primitive::<Int32Type>().values(), &values);
    assert_eq!(
        imported.as_primitive::<Int32Type>().values().as_ptr(),
        values.as_ptr()
    );
    let shared = imported.slice(1, 2);
    drop(imported);
    assert_eq!(
        releases.count(),
        0,
        "a slice still shares the producer's memory"
    );
    drop(shared);
    assert_eq!(releases.count(), 1);
}

/// Imports an array altered by `edit` as `Int32`, expecting a malformed-data error that
/// contains `expected`, and the array released once by the time the error is returned.
fn refused(edit: impl FnOnce(&mut crate::hand_built::RawArray), expected: &str) {
    let values = [1i32, 2, 3, 4];
    let (array, releases) = build(4, 0, &[std::ptr::null(), pointer(&values)], edit);
    let error = import_array(array, &DataType::Int32, "ArrowArray").unwrap_err();
    assert!(
        (matches!(&error, ArrowCError::Malformed { .. }) && error.to_string().contains(expected)),
        "{error}"
    );
    assert_eq!(releases.count(), 1, "refused with: {error}");
}

#[test]
fn malformed_arrays_are_refused_by_field_path_and_released_once() {
    refused(
        |raw| raw.n_buffers = 1,
        "ArrowArray.n_buffers is 1; expected 2 for Int32",
    );
    refused(|raw| raw.length = -1, "ArrowArray.length is -1");
    refused(|raw| raw.offset = i64::MAX, "overflows");
    refused(
        |raw| raw.null_count = 5,
        "ArrowArray.null_count is 5, more than length 4",
    );
    refused(
        |raw| raw.null_count = 1,
        "ArrowArray.buffers[0] is NULL but Int32 needs 1 bytes there",
    );
    refused(
        // SAFETY: the array's own pointer array, which holds two pointers.
        |raw| unsafe { *raw.buffers.add(1) = std::ptr::null() },
        "ArrowArray.buffers[1] is NULL but Int32 needs 16 bytes there",
    );
    refused(
        |raw| raw.n_children = 1,
        "ArrowArray.n_children is 1; expected 0 for Int32",
    );
}

#[test]
fn a_released_array_is_refused_before_anything_else_is_read() {
    let mut private_data = std::ptr::null_mut();
    let (array, releases) = build(4, 0, &[std::ptr::null(), std::ptr::null()], |raw| {
        // Released, with garbage behind it.
        raw.n_buffers = 99;
        raw.release = None;
        private_data = raw.private_data;
    });
    let error = import_array(array, &DataType::Int32, "ArrowArray").unwrap_err();
    assert_eq!(
        error.to_string(),
        "malformed Arrow C data: ArrowArray.release is NULL: the array has already been \
         released or moved"
    );
    assert_eq!(
        releases.count(),
        0,
        "a released array is not released again"
    );
    free_unreleased(private_data);
}

#[test]
fn a_well_formed_array_of_an_unsupported_type_is_a_type_error_kind() {
    let values = [1i32, 2];
    let (array, releases) = build(2, 0, &[std::ptr::null(), pointer(&values)], |_| {});
    let error = import_array(
        array,
        &DataType::Dictionary(Box::new(DataType::Float32), Box::new(DataType::Int32)),
        "ArrowArray",
    )
    .unwrap_err();
    assert!(matches!(error, ArrowCError::Unsupported { .. }), "{error}");
    assert_eq!(releases.count(), 1);
}
