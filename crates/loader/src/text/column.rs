//! [`tokenize_column`]: a column of texts to a list column of token ids, tokenized on several
//! threads.
//!
//! The rows are cut into chunks that the threads take in turn (a shared counter), so that long
//! and short documents even out; each chunk's ids are kept apart and joined in row order at the
//! end, one copy of four bytes per token, small beside the tokenizer's own work.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, GenericListArray, OffsetSizeTrait, PrimitiveArray,
};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, Field};

use super::Tokenizer;
use crate::memory::reserve;
use crate::quiet_panic::catch_quietly;
use crate::{Error, Result};

/// What the texts of a column may be (the `expected` of an error about a column to tokenize).
pub const TEXT_TYPES: &str = "utf8, large_utf8 or utf8_view text";

/// How [`tokenize_column`] tokenizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenizeOptions {
    /// Adds the tokenizer's special tokens (its post-processor's, such as BERT's `[CLS]` and
    /// `[SEP]`), as `add_special_tokens=True` does in Python. Default `true`.
    pub add_special_tokens: bool,
    /// Tokenizes a null text as an empty row; without it a null text is
    /// [`Error::NullText`]. Default `false`.
    pub allow_nulls: bool,
    /// The number of threads that tokenize, the calling one included; 0 (the default) is one
    /// per core ([`arrow_dlpack::available_cores`]).
    pub threads: usize,
    /// Gives a `LargeListArray` (int64 offsets) instead of a `ListArray` (int32 offsets, at most
    /// `i32::MAX` tokens per call). Default `false`.
    pub large_offsets: bool,
}

impl Default for TokenizeOptions {
    fn default() -> Self {
        TokenizeOptions {
            add_special_tokens: true,
            allow_nulls: false,
            threads: 0,
            large_offsets: false,
        }
    }
}

impl TokenizeOptions {
    /// The number of threads [`TokenizeOptions::threads`] stands for.
    pub fn thread_count(&self) -> usize {
        if self.threads > 0 {
            return self.threads;
        }
        arrow_dlpack::available_cores().get()
    }
}

/// The token ids of every text of `column` (`utf8`, `large_utf8` or `utf8_view`): one row of
/// ids per text, a `ListArray` (or `LargeListArray` with [`TokenizeOptions::large_offsets`]) of
/// the tokenizer's [`id_type`](Tokenizer::id_type), int32 unless its vocabulary needs int64.
///
/// Row `i` holds the ids that Python's `tokenizers` gives for text `i` (see [`Tokenizer`]).
/// A null text is [`Error::NullText`] naming its row, unless
/// [`TokenizeOptions::allow_nulls`]; then its row is empty (not null).
pub fn tokenize_column(
    column: &dyn Array,
    tokenizer: &Tokenizer,
    options: &TokenizeOptions,
) -> Result<ArrayRef> {
    tokenize_rows(column, tokenizer, options, 0)
}

/// [`tokenize_column`], with row numbers in errors counted from `first_row`.
pub(crate) fn tokenize_rows(
    column: &dyn Array,
    tokenizer: &Tokenizer,
    options: &TokenizeOptions,
    first_row: u64,
) -> Result<ArrayRef> {
    let texts = Texts::of(column)?;
    let chunks = encode_chunks(&texts, tokenizer, options, first_row)?;
    match (tokenizer.id_type(), options.large_offsets) {
        (DataType::Int32, false) => assemble::<i32, Int32Type>(&chunks),
        (DataType::Int32, true) => assemble::<i64, Int32Type>(&chunks),
        (_, false) => assemble::<i32, Int64Type>(&chunks),
        (_, true) => assemble::<i64, Int64Type>(&chunks),
    }
}

/// The texts of a string column of any of Arrow's three layouts.
enum Texts<'a> {
    Utf8(&'a arrow_array::StringArray),
    LargeUtf8(&'a arrow_array::LargeStringArray),
    View(&'a arrow_array::StringViewArray),
}

impl<'a> Texts<'a> {
    fn of(column: &'a dyn Array) -> Result<Self> {
        Ok(match column.data_type() {
            DataType::Utf8 => Texts::Utf8(column.as_string::<i32>()),
            DataType::LargeUtf8 => Texts::LargeUtf8(column.as_string::<i64>()),
            DataType::Utf8View => Texts::View(column.as_string_view()),
            other => {
                return Err(Error::UnsupportedValues {
                    data_type: other.clone(),
                    expected: TEXT_TYPES,
                });
            }
        })
    }

    fn len(&self) -> usize {
        match self {
            Texts::Utf8(array) => array.len(),
            Texts::LargeUtf8(array) => array.len(),
            Texts::View(array) => array.len(),
        }
    }

    /// Text `i`, or `None` when it is null.
    fn get(&self, i: usize) -> Option<&'a str> {
        match self {
            Texts::Utf8(array) => array.is_valid(i).then(|| array.value(i)),
            Texts::LargeUtf8(array) => array.is_valid(i).then(|| array.value(i)),
            Texts::View(array) => array.is_valid(i).then(|| array.value(i)),
        }
    }
}

/// The ids of a run of consecutive rows: all their ids, and each row's count.
#[derive(Default)]
struct Chunk {
    ids: Vec<u32>,
    lengths: Vec<usize>,
}

/// The rows each thread takes at a time: small enough that threads finish together, large
/// enough that the shared counter is rarely touched.
fn chunk_rows(rows: usize, threads: usize) -> usize {
    (rows / (threads * 16)).clamp(1, 256)
}

/// Encodes every text of `texts`, in chunks of rows shared among the threads.
fn encode_chunks(
    texts: &Texts<'_>,
    tokenizer: &Tokenizer,
    options: &TokenizeOptions,
    first_row: u64,
) -> Result<Vec<Chunk>> {
    let rows = texts.len();
    let threads = options.thread_count().max(1);
    let size = chunk_rows(rows, threads);
    let count = rows.div_ceil(size);
    let encode = |index: usize| -> Result<Chunk> {
        let start = index * size;
        let end = (start + size).min(rows);
        catch_quietly(|| encode_rows(texts, start..end, tokenizer, options, first_row))
            .unwrap_or_else(|payload| Err(Error::from_panic(payload)))
    };
    if threads == 1 || count <= 1 {
        return (0..count).map(encode).collect();
    }
    let next = AtomicUsize::new(0);
    // The first chunk that failed: chunks after it are not started, and every chunk before it
    // was handed out before it and runs to its end, so the error reported is always that of
    // the first failing row, whatever the timing.
    let failed = AtomicUsize::new(usize::MAX);
    let done: Mutex<Vec<Option<Result<Chunk>>>> = Mutex::new((0..count).map(|_| None).collect());
    let work = || {
        loop {
            let index = next.fetch_add(1, Ordering::Relaxed);
            if index >= count || index > failed.load(Ordering::Relaxed) {
                break;
            }
            let result = encode(index);
            if result.is_err() {
                failed.fetch_min(index, Ordering::Relaxed);
            }
            done.lock().unwrap_or_else(|p| p.into_inner())[index] = Some(result);
        }
    };
    std::thread::scope(|scope| -> Result<()> {
        let mut helpers = Vec::with_capacity(threads - 1);
        for _ in 1..threads.min(count) {
            let helper = std::thread::Builder::new()
                .name("arrow-dlpack-tokenize".to_string())
                .spawn_scoped(scope, work)
                .map_err(|source| Error::Thread { source })?;
            helpers.push(helper);
        }
        work();
        for helper in helpers {
            helper.join().map_err(Error::from_panic)?;
        }
        Ok(())
    })?;
    let done = done.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut chunks = Vec::with_capacity(count);
    for result in done {
        match result {
            Some(Ok(chunk)) => chunks.push(chunk),
            Some(Err(error)) => return Err(error),
            // Only chunks after a failed one are left out, and the failed one comes first.
            None => break,
        }
    }
    Ok(chunks)
}

/// The ids of the texts of `rows`.
fn encode_rows(
    texts: &Texts<'_>,
    rows: std::ops::Range<usize>,
    tokenizer: &Tokenizer,
    options: &TokenizeOptions,
    first_row: u64,
) -> Result<Chunk> {
    let mut chunk = Chunk {
        ids: Vec::new(),
        lengths: Vec::with_capacity(rows.len()),
    };
    for row in rows {
        let at = first_row + row as u64;
        let Some(text) = texts.get(row) else {
            if options.allow_nulls {
                chunk.lengths.push(0);
                continue;
            }
            return Err(Error::NullText { row: at });
        };
        let encoding = tokenizer
            .encoding(text, options.add_special_tokens)
            .map_err(|source| Error::Tokenize { row: at, source })?;
        let ids = encoding.get_ids();
        chunk.ids.extend_from_slice(ids);
        chunk.lengths.push(ids.len());
    }
    Ok(chunk)
}

/// The list array of `chunks`, in order, with offsets `O` and ids of type `T`.
fn assemble<O, T>(chunks: &[Chunk]) -> Result<ArrayRef>
where
    O: OffsetSizeTrait,
    T: ArrowPrimitiveType,
    T::Native: TryFrom<u32>,
{
    let total: usize = chunks.iter().map(|chunk| chunk.ids.len()).sum();
    let rows: usize = chunks.iter().map(|chunk| chunk.lengths.len()).sum();
    let mut values: Vec<T::Native> = Vec::new();
    reserve(&mut values, total)?;
    let mut offsets: Vec<O> = Vec::new();
    reserve(&mut offsets, rows + 1)?;
    offsets.push(O::usize_as(0));
    let mut end = 0usize;
    for chunk in chunks {
        for &id in &chunk.ids {
            let id = T::Native::try_from(id).map_err(|_| {
                ArrowError::InvalidArgumentError(format!(
                    "token id {id} does not fit in {}; expected ids below the vocabulary size",
                    T::DATA_TYPE
                ))
            })?;
            values.push(id);
        }
        for &length in &chunk.lengths {
            end += length;
            offsets.push(O::from_usize(end).ok_or(ArrowError::OffsetOverflowError(end))?);
        }
    }
    // Nullable items, as PyArrow's `pa.list_(pa.int32())` and Hugging Face datasets declare
    // them, so that the column's type equals theirs.
    let field = Arc::new(Field::new_list_field(T::DATA_TYPE, true));
    let values = PrimitiveArray::<T>::new(ScalarBuffer::from(values), None);
    // The offsets start at 0, never decrease and end at the values' length: `new` cannot panic.
    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
    let list = GenericListArray::<O>::try_new(field, offsets, Arc::new(values), None)?;
    Ok(Arc::new(list))
}
