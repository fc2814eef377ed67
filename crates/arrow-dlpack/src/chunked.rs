//! Chunked columns: several arrays of one type that together form one logical column.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef};

use crate::{Error, Result};

/// Turns the chunks of a column into one array: zero-copy when at most one chunk holds elements,
/// a concatenation (a copy) otherwise, only if `allow_copy`.
///
/// - Zero chunks: [`Error::NoChunks`], since the data type would be unknown.
/// - One chunk, or one non-empty chunk among empty ones: that chunk itself (the same
///   [`ArrayRef`]), without copying.
/// - All chunks empty: chunk 0.
/// - Several non-empty chunks: concatenated into fresh buffers when `allow_copy`, else
///   [`Error::CopyRequired`] saying how many chunks would be concatenated.
///
/// Every chunk must have the type of chunk 0 ([`Error::MixedChunkTypes`]).
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{ArrayRef, Int64Array};
/// use arrow_dlpack::concat_chunks;
///
/// let chunks: Vec<ArrayRef> = vec![
///     Arc::new(Int64Array::from(vec![1, 2])),
///     Arc::new(Int64Array::from(vec![3])),
/// ];
/// assert!(concat_chunks(&chunks, false).is_err());
/// assert_eq!(concat_chunks(&chunks, true)?.len(), 3);
/// assert!(Arc::ptr_eq(&concat_chunks(&chunks[..1], false)?, &chunks[0]));
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
pub fn concat_chunks(chunks: &[ArrayRef], allow_copy: bool) -> Result<ArrayRef> {
    let Some(first) = chunks.first() else {
        return Err(Error::NoChunks);
    };
    if let Some((index, chunk)) = chunks
        .iter()
        .enumerate()
        .find(|(_, chunk)| chunk.data_type() != first.data_type())
    {
        return Err(Error::MixedChunkTypes {
            index,
            expected: first.data_type().clone(),
            found: chunk.data_type().clone(),
        });
    }
    let non_empty: Vec<&ArrayRef> = chunks.iter().filter(|chunk| !chunk.is_empty()).collect();
    match non_empty.as_slice() {
        [] => Ok(first.clone()),
        [only] => Ok(Arc::clone(only)),
        several => {
            if !allow_copy {
                return Err(Error::CopyRequired {
                    reason: format!("concatenating {} chunks", several.len()),
                });
            }
            let arrays: Vec<&dyn Array> = several.iter().map(|chunk| chunk.as_ref()).collect();
            Ok(arrow_select::concat::concat(&arrays)?)
        }
    }
}
