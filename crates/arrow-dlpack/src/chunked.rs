//! Chunked columns: several arrays of one type that together form one logical column.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, make_array};
use arrow_data::ArrayDataBuilder;
use arrow_dlpack_tensor::alloc::{UninitBuffer, copy_to_uninit};
use arrow_schema::DataType;

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
    /// Without it they are refused with [`Error::CopyRequired`]. Default `false`.
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
    if let Some(joined) = concat_primitive_values(&several)? {
        return Ok(joined);
    }
    Ok(arrow_select::concat::concat(&several)?)
}

/// Concatenates primitive chunks without nulls (the chunks DLPack exports) with one copy per
/// chunk (non-temporal stores when the output is large: `alloc::copy_to_uninit`) into memory
/// that is neither zeroed first nor faulted in 4 KiB pages
/// ([`UninitBuffer`]); `None` for other chunks, which `arrow_select` concatenates.
///
/// `arrow_select::concat` writes into a `MutableBuffer`, which gets no huge-page advice: on a
/// kernel with transparent huge pages on `madvise`, its 4 KiB page faults took most of the time
/// of a large concatenation (docs/benchmarks.md).
fn concat_primitive_values(chunks: &[&dyn Array]) -> Result<Option<ArrayRef>> {
    let Some(first) = chunks.first() else {
        return Ok(None);
    };
    let data_type = first.data_type();
    let Some(width) = data_type.primitive_width() else {
        return Ok(None);
    };
    if data_type == &DataType::Boolean || chunks.iter().any(|chunk| chunk.null_count() > 0) {
        return Ok(None);
    }
    let len: usize = chunks.iter().map(|chunk| chunk.len()).sum();
    let bytes = len
        .checked_mul(width)
        .ok_or(arrow_dlpack_tensor::Error::Overflow {
            what: "the byte size of the concatenation",
        })?;
    let mut out = UninitBuffer::try_new(bytes)?;
    let mut rest = out.as_uninit_mut();
    for chunk in chunks {
        let data = chunk.to_data();
        let start = data.offset() * width;
        let values = &data.buffers()[0].as_slice()[start..start + data.len() * width];
        let (run, after) = rest.split_at_mut(values.len());
        // Streamed past the cache when the whole output is large.
        copy_to_uninit(values, run, bytes);
        rest = after;
    }
    debug_assert!(rest.is_empty());
    // SAFETY: the runs of the loop, one per chunk, are consecutive from the start of `out` and
    // their lengths add up to `bytes`, so every byte was written.
    let values = unsafe { out.assume_init() };
    let data = ArrayDataBuilder::new(data_type.clone())
        .len(len)
        .add_buffer(values)
        .build()?;
    Ok(Some(make_array(data)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Float64Array, Int8Array, Int32Array};

    /// Chunks of the given lengths, each sliced by one element from a longer array so that every
    /// chunk has an offset.
    fn sliced_chunks<A: Array + 'static>(
        lens: &[usize],
        make: impl Fn(usize) -> A,
    ) -> Vec<ArrayRef> {
        lens.iter()
            .map(|&len| make(len + 2).slice(1, len))
            .collect()
    }

    #[test]
    fn primitive_concatenation_matches_arrow_select() {
        let shapes: [&[usize]; 5] = [&[0, 1], &[1, 1], &[7, 63, 64], &[65, 0, 3], &[1000, 1, 999]];
        for lens in shapes {
            let ints = sliced_chunks(lens, |len| {
                Int32Array::from_iter_values((0..len as i32).map(|i| i * 7 - 3))
            });
            let bytes = sliced_chunks(lens, |len| {
                Int8Array::from_iter_values((0..len).map(|i| i as i8))
            });
            let floats = sliced_chunks(lens, |len| {
                Float64Array::from_iter_values((0..len).map(|i| i as f64 / 3.0))
            });
            for chunks in [ints, bytes, floats] {
                let refs: Vec<&dyn Array> = chunks.iter().map(|chunk| chunk.as_ref()).collect();
                let expected = arrow_select::concat::concat(&refs).unwrap();
                let joined = concat_primitive_values(&refs)
                    .unwrap()
                    .expect("primitive without nulls");
                assert_eq!(joined.to_data(), expected.to_data(), "lens {lens:?}");
                assert_eq!(joined.to_data().offset(), 0);
            }
        }
    }

    /// Past `STREAM_THRESHOLD` the chunks are streamed with non-temporal stores: chunks of odd
    /// lengths (so that every run but the first starts off a cache line) still join exactly.
    #[test]
    fn large_concatenations_are_streamed_exactly() {
        let lens = [1_000_003usize, 777_777, 3, 1_500_001];
        assert!(lens.iter().sum::<usize>() * 8 >= arrow_dlpack_tensor::alloc::STREAM_THRESHOLD);
        let chunks = sliced_chunks(&lens, |len| {
            Float64Array::from_iter_values((0..len).map(|i| i as f64 * 1.5 - 7.0))
        });
        let refs: Vec<&dyn Array> = chunks.iter().map(|chunk| chunk.as_ref()).collect();
        let expected = arrow_select::concat::concat(&refs).unwrap();
        let joined = concat_primitive_values(&refs).unwrap().unwrap();
        assert_eq!(joined.to_data(), expected.to_data());
    }

    #[test]
    fn chunks_with_nulls_go_to_arrow_select() {
        let chunks: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![Some(1), None])),
            Arc::new(Int32Array::from(vec![Some(3)])),
        ];
        let refs: Vec<&dyn Array> = chunks.iter().map(|chunk| chunk.as_ref()).collect();
        assert!(concat_primitive_values(&refs).unwrap().is_none());
        let joined = concat_chunks(&chunks, ConcatOptions { allow_copy: true }).unwrap();
        assert_eq!(
            joined.to_data(),
            Int32Array::from(vec![Some(1), None, Some(3)]).to_data()
        );
    }
}
