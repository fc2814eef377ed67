//! What a Rust user does with arrow-dlpack alone: Arrow columns to tensors, typed values, DLPack
//! out and back in, ndarray views, fixed-shape tensor columns in a record batch, and a record
//! batch as one 2-D tensor.
//!
//! It depends on `arrow-dlpack` (with its `ndarray` feature) and arrow-rs, nothing else, and uses
//! no `unsafe`. Every step asserts its result, so running it is a test:
//!
//! ```text
//! cargo run -p arrow-dlpack --example rust_user --features ndarray
//! ```
//!
//! `cargo test -p arrow-dlpack --features ndarray` runs it too, as the test at the end.

use std::error::Error;
use std::sync::Arc;

use arrow_array::types::Float32Type;
use arrow_array::{Array, ArrayRef, FixedSizeListArray, Float64Array, Int32Array, RecordBatch};
use arrow_dlpack::ndarray::{Array2, Array3, Axis};
use arrow_dlpack::{
    ArrayToTensorOptions, DType, ExportOptions, FixedShapeTensorArray, Table, TableToTensorOptions,
    Tensor, TensorToArrayOptions, array_to_tensor, table_to_tensor, tensor_to_fixed_size_list,
};
use arrow_schema::{Field, Schema};

fn main() -> Result<(), Box<dyn Error>> {
    let embeddings = fixed_size_list_to_tensor()?;
    dlpack_round_trip(&embeddings)?;
    ndarray_view(&embeddings)?;
    fixed_shape_tensor_column()?;
    record_batch_as_one_tensor()?;
    println!("rust_user: every step passed");
    Ok(())
}

/// Three embeddings of width 4 as a `FixedSizeListArray`, viewed as a `[3, 4]` tensor without a
/// copy, and read back typed.
fn fixed_size_list_to_tensor() -> Result<Tensor, Box<dyn Error>> {
    let rows = (0..3).map(|row| Some((0..4).map(move |col| Some((row * 10 + col) as f32))));
    let list = FixedSizeListArray::from_iter_primitive::<Float32Type, _, _>(rows, 4);

    let tensor = array_to_tensor(&list, ArrayToTensorOptions::default())?;
    assert_eq!(tensor.dtype(), DType::Float32);
    assert_eq!(tensor.shape(), &[3, 4]);
    // Zero-copy: the tensor's first element is the list's first value.
    let values = list.values().to_data();
    assert_eq!(tensor.data_ptr(), values.buffers()[0].as_ptr());

    // Typed reads check the element type: a row-major slice, one element, every element.
    let slice = tensor.as_slice::<f32>()?;
    assert_eq!(&slice[4..8], &[10.0, 11.0, 12.0, 13.0]);
    assert_eq!(tensor.get::<f32>(&[2, 3])?, 23.0);
    assert!(tensor.get::<f64>(&[2, 3]).is_err(), "f32 data is not f64");
    assert!(
        tensor.get::<f32>(&[3, 0]).is_err(),
        "row 3 is out of bounds"
    );
    // The transpose shares the memory; `iter` walks it in logical order.
    let columns: Vec<f32> = tensor.permuted(&[1, 0])?.iter::<f32>()?.take(3).collect();
    assert_eq!(columns, [0.0, 10.0, 20.0]);
    println!(
        "FixedSizeListArray -> tensor {:?}, typed reads ok",
        tensor.shape()
    );
    Ok(tensor)
}

/// The tensor as a DLPack managed tensor (what a C library, candle or PyTorch takes) and back;
/// the memory is shared all the way, and read-only because Arrow owns it.
fn dlpack_round_trip(tensor: &Tensor) -> Result<(), Box<dyn Error>> {
    let managed = tensor.to_dlpack_versioned(ExportOptions::default())?;
    let imported = Tensor::from_managed(managed)?;
    assert_eq!(imported.shape(), tensor.shape());
    assert_eq!(imported.data_ptr(), tensor.data_ptr());
    assert!(imported.is_read_only());
    assert_eq!(imported.as_slice::<f32>()?, tensor.as_slice::<f32>()?);

    // The legacy ABI, for consumers such as JAX, works the same way.
    let legacy = tensor.to_dlpack_legacy(ExportOptions::default())?;
    let imported = Tensor::from_managed(legacy)?;
    assert_eq!(imported.get::<f32>(&[1, 1])?, 11.0);

    // And back to Arrow: a FixedSizeListArray over the same memory.
    let list = tensor_to_fixed_size_list(&imported, TensorToArrayOptions::default())?;
    assert_eq!(list.len(), 3);
    assert_eq!(list.value_length(), 4);
    println!("DLPack export and import share the memory");
    Ok(())
}

/// The tensor as an ndarray view, for any strides: no copy, no `unsafe`.
fn ndarray_view(tensor: &Tensor) -> Result<(), Box<dyn Error>> {
    let view = tensor.view::<f32>()?;
    assert_eq!(view.shape(), &[3, 4]);
    assert_eq!(view[[1, 2]], 12.0);
    let row_sums: Vec<f32> = view.sum_axis(Axis(1)).iter().copied().collect();
    assert_eq!(row_sums, [6.0, 46.0, 86.0]);

    let transposed = tensor.permuted(&[1, 0])?;
    let view = transposed.view::<f32>()?;
    assert_eq!(view[[3, 2]], 23.0);
    assert_eq!(view.as_ptr().cast::<u8>(), tensor.data_ptr());
    println!("ndarray views: row sums {row_sums:?}");
    Ok(())
}

/// Two 2x3 images from an ndarray as an `arrow.fixed_shape_tensor` column in a record batch, and
/// back to an ndarray.
fn fixed_shape_tensor_column() -> Result<(), Box<dyn Error>> {
    let images = Array3::<f64>::from_shape_fn((2, 2, 3), |(n, i, j)| (n * 100 + i * 10 + j) as f64);
    let column = FixedShapeTensorArray::from_ndarray(images.clone())?;
    assert_eq!(column.len(), 2);
    assert_eq!(column.extension_type().shape(), &[2, 3]);

    let ids: ArrayRef = Arc::new(Int32Array::from(vec![7, 8]));
    let (images_field, images_array) = column.into_field_and_array("images");
    let schema = Schema::new(vec![
        Field::new("id", ids.data_type().clone(), false),
        images_field,
    ]);
    let batch = RecordBatch::try_new(Arc::new(schema), vec![ids, images_array])?;
    assert_eq!(batch.num_rows(), 2);

    // Reading the column back from the batch: the field carries the extension type.
    let schema = batch.schema();
    let field = schema.field_with_name("images")?;
    let column = batch.column_by_name("images").ok_or("no images column")?;
    let column = FixedShapeTensorArray::try_from_field_and_array(field, column.clone())?;
    assert_eq!(column.to_ndarray::<f64>()?, images.clone().into_dyn());
    // Or zero-copy, through the tensor.
    let tensor = column.to_tensor(ArrayToTensorOptions::default())?;
    assert_eq!(tensor.view::<f64>()?[[1, 1, 2]], 112.0);
    println!(
        "fixed_shape_tensor column from ndarray {:?} in a record batch",
        images.shape()
    );
    Ok(())
}

/// A record batch of numeric columns as one 2-D tensor, row-major and column-major.
fn record_batch_as_one_tensor() -> Result<(), Box<dyn Error>> {
    let batch = RecordBatch::try_from_iter([
        ("a", Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef),
        (
            "b",
            Arc::new(Float64Array::from(vec![0.5, 1.5, 2.5])) as ArrayRef,
        ),
    ])?;

    let rows = table_to_tensor(&Table::from(&batch), TableToTensorOptions::default())?;
    assert_eq!(rows.dtype(), DType::Float64); // int32 and float64 promote to float64
    assert_eq!(rows.shape(), &[3, 2]);
    assert_eq!(rows.as_slice::<f64>()?, &[1.0, 0.5, 2.0, 1.5, 3.0, 2.5]);

    let options = TableToTensorOptions {
        row_major: false,
        ..TableToTensorOptions::default()
    };
    let columns = table_to_tensor(&Table::from(&batch), options)?;
    assert!(columns.is_column_major());
    // Not row-major, so no row-major slice; `get`, `iter` and `view` read any layout.
    assert!(columns.as_slice::<f64>().is_err());
    assert_eq!(columns.get::<f64>(&[2, 1])?, 2.5);
    let in_row_order: Vec<f64> = columns.iter::<f64>()?.collect();
    assert_eq!(in_row_order, rows.as_slice::<f64>()?);
    let view: Array2<f64> = columns.view::<f64>()?.into_dimensionality()?.to_owned();
    assert_eq!(view.column(0).to_vec(), [1.0, 2.0, 3.0]);
    println!(
        "record batch -> tensor {:?}, row- and column-major",
        rows.shape()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_step_passes() {
        super::main().unwrap();
    }
}
