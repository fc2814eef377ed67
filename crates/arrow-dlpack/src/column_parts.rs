//! [`FixedShapeTensorArray`] as the `(Field, ArrayRef)` pair that arrow-rs schemas and record
//! batches take.

use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_schema::Field;

use crate::FixedShapeTensorArray;

impl FixedShapeTensorArray {
    /// The field (named `name`, with the extension name and metadata) and the storage array,
    /// ready for a [`RecordBatch`](arrow_array::RecordBatch) or a schema; the storage is moved,
    /// not copied.
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use arrow_array::RecordBatch;
    /// use arrow_dlpack::{FixedShapeTensorArray, Tensor, TensorToArrayOptions};
    /// use arrow_schema::Schema;
    ///
    /// let images = Tensor::from_vec((0..12u8).collect(), vec![3, 2, 2])?;
    /// let (field, array) = FixedShapeTensorArray::from_tensor(&images, TensorToArrayOptions::default())?
    ///     .into_field_and_array("images");
    /// let batch = RecordBatch::try_new(Arc::new(Schema::new(vec![field])), vec![array])?;
    /// assert_eq!(batch.num_rows(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_field_and_array(self, name: &str) -> (Field, ArrayRef) {
        let field = self.field(name);
        let (_, storage) = self.into_parts();
        (field, Arc::new(storage))
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::Array;

    use super::*;
    use crate::{EXTENSION_NAME, Tensor, TensorToArrayOptions};

    #[test]
    fn the_pair_carries_the_extension_and_shares_the_storage() {
        let tensor = Tensor::from_vec((0..6i32).collect(), vec![3, 2]).unwrap();
        let column =
            FixedShapeTensorArray::from_tensor(&tensor, TensorToArrayOptions::default()).unwrap();
        let values = column.storage().values().to_data().buffers()[0].as_ptr();
        let (field, array) = column.into_field_and_array("x");
        assert_eq!(field.name(), "x");
        assert_eq!(field.extension_type_name(), Some(EXTENSION_NAME));
        assert_eq!(field.data_type(), array.data_type());
        let back = FixedShapeTensorArray::try_from_field_and_array(&field, array).unwrap();
        assert_eq!(
            back.storage().values().to_data().buffers()[0].as_ptr(),
            values
        );
    }
}
