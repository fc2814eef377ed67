//! Chunked columns: several arrays of one type that together form one logical column.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef};

use crate::{Error, Result};

/// Whether [`concat_chunks`] copies these chunks: more than one of them holds elements.
///
/// Otherwise it returns one of the chunks itself, whose memory is shared with whoever made it;
/// a caller that hands the result on must not call it a fresh copy.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{ArrayRef, Int64Array};
/// use arrow_dlpack::chunks_need_copy;
///
/// let empty: ArrayRef = Arc::new(Int64Array::from(Vec::<i64>::new()));
/// let full: ArrayRef = Arc::new(Int64Array::from(vec![7, 8, 9]));
/// assert!(!chunks_need_copy(&[empty.clone(), full.clone(), empty]));
/// assert!(chunks_need_copy(&[full.clone(), full]));
/// ```
pub fn chunks_need_copy(chunks: &[ArrayRef]) -> bool {
    chunks
        .iter()
        .filter(|chunk| !chunk.is_empty())
        .nth(1)
        .is_some()
}

/// What [`concat_chunks`] may do beyond returning one of the chunks.
///
/// The default allows no copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConcatOptions {
    /// Accept concatenating several non-empty chunks into fresh buffers.
    /// Without it they are refused with [`Error::CopyRequired`].
    pub allow_copy: bool,
}

/// Turns the chunks of a column into one array: zero-copy when at most one chunk holds elements,
/// a concatenation (a copy) otherwise, only with [`allow_copy`](ConcatOptions::allow_copy).
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
/// use arrow_dlpack::{ConcatOptions, concat_chunks};
///
/// let chunks: Vec<ArrayRef> = vec![
///     Arc::new(Int64Array::from(vec![1, 2])),
///     Arc::new(Int64Array::from(vec![3])),
/// ];
/// assert!(concat_chunks(&chunks, ConcatOptions::default()).is_err());
/// assert_eq!(concat_chunks(&chunks, ConcatOptions { allow_copy: true })?.len(), 3);
/// assert!(Arc::ptr_eq(&concat_chunks(&chunks[..1], ConcatOptions::default())?, &chunks[0]));
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
pub fn concat_chunks(chunks: &[ArrayRef], options: ConcatOptions) -> Result<ArrayRef> {
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
    let mut non_empty = chunks.iter().filter(|chunk| !chunk.is_empty());
    if !chunks_need_copy(chunks) {
        return Ok(Arc::clone(non_empty.next().unwrap_or(first)));
    }
    let several: Vec<&dyn Array> = non_empty.map(|chunk| chunk.as_ref()).collect();
    if !options.allow_copy {
        return Err(Error::CopyRequired {
            reason: format!("concatenating {} chunks", several.len()),
            options: "ConcatOptions",
        });
    }
    Ok(arrow_select::concat::concat(&several)?)
}
