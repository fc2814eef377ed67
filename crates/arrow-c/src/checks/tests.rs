//! Unit tests of the Arrow C checks on arrow-rs's own exports and hand-altered structs.

use std::sync::Arc;

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{Array, Int32Array, StringArray};
use arrow_schema::{DataType, Field};

use super::schema::schema_children;
use super::*;
use crate::ArrowCError;

#[test]
fn a_well_formed_export_of_arrow_rs_passes_every_check() {
    let array = StringArray::from(vec![Some("a"), None, Some("ccc")]);
    let schema = FFI_ArrowSchema::try_from(array.data_type()).unwrap();
    let ffi = FFI_ArrowArray::new(&array.to_data());
    // SAFETY: both structs are live exports of arrow-rs.
    unsafe { check_schema(&schema, "ArrowSchema", &mut Vec::new()) }.unwrap();
    // SAFETY: as above.
    unsafe { check_array(&ffi, array.data_type(), "ArrowArray") }.unwrap();
}

#[test]
fn a_released_schema_is_refused_before_anything_else_is_read() {
    let mut schema = FFI_ArrowSchema::try_from(&DataType::Int32).unwrap();
    let release = schema.release();
    assert!(release.is_some());
    // SAFETY: `schema` is a live schema made above; releasing it is allowed once.
    unsafe { release.unwrap()(&mut schema) };
    // SAFETY: the struct is readable; released, so `check_schema` must read no further.
    let error = unsafe { check_schema(&schema, "ArrowSchema", &mut Vec::new()) }.unwrap_err();
    assert_eq!(
        error.to_string(),
        "malformed Arrow C data: ArrowSchema.release is NULL: the schema has already been \
         released or moved"
    );
}

#[test]
fn wrong_buffer_and_child_counts_name_the_field() {
    let int32 = Int32Array::from(vec![1, 2, 3]);
    let ffi = FFI_ArrowArray::new(&int32.to_data());
    let struct_type = DataType::Struct(vec![Field::new("a", DataType::Int32, true)].into());
    // SAFETY: a live export of arrow-rs, checked against another type on purpose.
    let error = unsafe { check_array(&ffi, &struct_type, "ArrowArray") }.unwrap_err();
    assert_eq!(
        error.to_string(),
        "malformed Arrow C data: ArrowArray.n_buffers is 2; expected 1 for Struct(\"a\": \
         Int32)"
    );
    let list_type = DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Int32, true)), 2);
    let fsl = FFI_ArrowArray::new(
        &arrow_array::FixedSizeListArray::new(
            Arc::new(Field::new("item", DataType::Int32, true)),
            2,
            Arc::new(Int32Array::from(vec![1, 2, 3, 4])),
            None,
        )
        .to_data(),
    );
    // SAFETY: a live export of arrow-rs.
    unsafe { check_array(&fsl, &list_type, "ArrowArray") }.unwrap();
}

#[test]
fn negative_fixed_size_list_sizes_are_refused() {
    assert!(matches!(
        schema_children("+w:-1", "ArrowSchema").unwrap_err(),
        ArrowCError::Malformed { field, problem }
            if field == "ArrowSchema.format" && problem == "\"+w:-1\" has a negative size -1"
    ));
    assert_eq!(schema_children("+ud:0,1,5", "S").unwrap(), Some(3));
    assert_eq!(schema_children("+s", "S").unwrap(), None);
    assert_eq!(schema_children("i", "S").unwrap(), Some(0));
}
