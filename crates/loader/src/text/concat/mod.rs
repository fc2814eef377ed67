//! The `"concat"` packing of token sequences for pretraining: documents concatenated in order
//! and cut into rows of exactly `max_length` tokens, with the document boundaries that
//! variable-length attention needs.
//!
//! [`ConcatPacker`] holds what the packing does, in its docs.

use std::collections::VecDeque;

use arrow_dlpack::RaggedTensor;
use arrow_dlpack_tensor::DType;

use crate::{Error, Result};

mod batch;
pub(crate) mod stage;

pub use crate::state::{CarriedRow, ConcatCarry};
pub use batch::ConcatBatch;

/// The number of rows kept open for best-fit packing when the options do not say.
pub const DEFAULT_OPEN_ROWS: usize = 64;

/// How [`ConcatPacker`] packs documents (see its docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConcatPackOptions {
    /// The tokens of every row.
    pub max_length: usize,
    /// The rows of every batch but the last.
    pub batch_size: usize,
    /// A token put before every document.
    pub bos_token_id: Option<i64>,
    /// A token put after every document.
    pub eos_token_id: Option<i64>,
    /// Continues a document that does not fit on the next row (`true`, the default); with
    /// `false`, rows are filled best fit with whole documents and padded.
    pub split_documents: bool,
    /// The id of padding tokens. Default 0.
    pub pad_value: i64,
    /// The rows kept open for best-fit packing (without `split_documents`).
    /// Default [`DEFAULT_OPEN_ROWS`].
    pub open_rows: usize,
    /// Drops the last batch when it is short of `batch_size` rows, and the short last row of
    /// `split_documents`. Default `false`: both are kept, the row padded.
    pub drop_last: bool,
}

impl ConcatPackOptions {
    /// Rows of `max_length` tokens in batches of `batch_size` rows, the other options at their
    /// defaults.
    pub fn new(max_length: usize, batch_size: usize) -> Self {
        ConcatPackOptions {
            max_length,
            batch_size,
            bos_token_id: None,
            eos_token_id: None,
            split_documents: true,
            pad_value: 0,
            open_rows: DEFAULT_OPEN_ROWS,
            drop_last: false,
        }
    }
}

/// Packs documents into rows of exactly `max_length` tokens.
///
/// The packer takes the documents of a list column (any integer element type; tokenized
/// text or not) as [`RaggedTensor`]s, and gives [`ConcatBatch`]es of `batch_size` rows:
///
/// - `ids` `(B, max_length)`, the documents' element type: each document is preceded by
///   `bos_token_id` and followed by `eos_token_id` when they are given (the tokenizer's own
///   special tokens are already in its ids when it added them);
/// - `position_ids` `(B, max_length)` int64, restarting at 0 at every document start and at
///   every row start;
/// - `cu_seqlens` int32 `(S + 1,)`: the boundaries of the `S` segments over the `B * max_length`
///   flattened tokens, from 0 to `B * max_length`; a segment is the part of a document inside
///   one row (so every row start is a boundary), or the padding of a row;
/// - `max_seqlen`, the longest segment.
///
/// These are what flash-attention's varlen kernels take with the ids flattened to
/// `(B * max_length,)`: attention never crosses a document boundary or a row start.
///
/// With `split_documents` (the default) a document that does not fit in the rest of a row
/// continues at the start of the next row, and only the last row of the data can be short.
/// Without it, documents are kept whole: each goes into the open row with the least room that
/// still holds it (best fit, among at most `open_rows` open rows), a new row is opened when none
/// does (closing the fullest one when `open_rows` are open), and the rest of each row is padding
/// (`pad_value`). A document longer than `max_length` cannot be kept whole: it fills rows of
/// its own, and only its last piece is placed best fit.
///
/// At the end of the data ([`ConcatPacker::finish`]), the short last row is padded, and the
/// last batch may hold fewer than `batch_size` rows; with `drop_last`, the last batch short of
/// `batch_size` rows is dropped, and so is the short last row of `split_documents`.
///
/// The rows not yet handed out (full rows waiting for a batch, the row being filled) are the
/// packer's [`ConcatCarry`], a serde value: a packer resumed from it with the same options and
/// fed the documents that follow gives the rows an uninterrupted one would have given.
#[derive(Debug, Clone)]
pub struct ConcatPacker {
    options: ConcatPackOptions,
    dtype: DType,
    closed: VecDeque<CarriedRow>,
    open: Vec<CarriedRow>,
    finished: bool,
}

impl ConcatPacker {
    /// A packer of documents whose tokens are of `dtype` (an integer type); the options are
    /// checked here: `max_length` and `batch_size` at least 1 and `batch_size * max_length` at
    /// most `i32::MAX` (the limit of int32 `cu_seqlens`), `open_rows` at least 1, and the
    /// special tokens and the pad value representable in `dtype`.
    pub fn new(options: ConcatPackOptions, dtype: DType) -> Result<Self> {
        check_options(&options, dtype)?;
        Ok(ConcatPacker {
            options,
            dtype,
            closed: VecDeque::new(),
            open: Vec::new(),
            finished: false,
        })
    }

    /// A packer that goes on from `carry`, taken from a packer with the same options and
    /// `dtype`; a carry that such a packer cannot hold is [`Error::InvalidState`].
    pub fn resume(options: ConcatPackOptions, dtype: DType, carry: ConcatCarry) -> Result<Self> {
        let mut packer = Self::new(options, dtype)?;
        packer.check_carry(&carry)?;
        packer.closed = carry.closed.into();
        packer.open = carry.open;
        Ok(packer)
    }

    /// The options.
    pub fn options(&self) -> &ConcatPackOptions {
        &self.options
    }

    /// The type of the tokens.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The rows not yet handed out, to resume from.
    pub fn carry(&self) -> ConcatCarry {
        ConcatCarry {
            closed: self.closed.iter().cloned().collect(),
            open: self.open.clone(),
        }
    }

    /// Whether a full batch is ready for [`next_batch`](Self::next_batch).
    pub fn batch_ready(&self) -> bool {
        self.closed.len() >= self.options.batch_size
    }

    /// Packs the documents of `documents` from row `start` on, one after another, until a full
    /// batch is ready or the documents end; returns the number of documents packed.
    ///
    /// Feeding a record batch's documents in a loop (`start += packed`, taking the batches
    /// ready after each call) keeps the carry small: at most a batch of rows, plus the rows of
    /// the document that completed it.
    pub fn push(&mut self, documents: &RaggedTensor, start: usize) -> Result<usize> {
        if self.finished {
            return Err(Error::InvalidSpec {
                reason: "documents pushed into a ConcatPacker after finish(); expected them \
                         before"
                    .to_string(),
            });
        }
        if documents.dtype() != self.dtype || !documents.inner_shape().is_empty() {
            return Err(Error::InvalidSpec {
                reason: format!(
                    "the documents are rows of {}{}; expected rows of {} tokens, the type the \
                     ConcatPacker was made for",
                    documents.dtype(),
                    if documents.inner_shape().is_empty() {
                        String::new()
                    } else {
                        format!(" elements of shape {:?}", documents.inner_shape())
                    },
                    self.dtype
                ),
            });
        }
        let offsets = match documents.offsets().dtype() {
            DType::Int32 => Offsets::Int32(documents.offsets().as_slice::<i32>()?),
            _ => Offsets::Int64(documents.offsets().as_slice::<i64>()?),
        };
        let values = documents.values();
        match self.dtype {
            DType::Int8 => self.push_typed(values.as_slice::<i8>()?, &offsets, start),
            DType::Int16 => self.push_typed(values.as_slice::<i16>()?, &offsets, start),
            DType::Int32 => self.push_typed(values.as_slice::<i32>()?, &offsets, start),
            DType::Int64 => self.push_typed(values.as_slice::<i64>()?, &offsets, start),
            DType::UInt8 => self.push_typed(values.as_slice::<u8>()?, &offsets, start),
            DType::UInt16 => self.push_typed(values.as_slice::<u16>()?, &offsets, start),
            DType::UInt32 => self.push_typed(values.as_slice::<u32>()?, &offsets, start),
            DType::UInt64 => self.push_typed(values.as_slice::<u64>()?, &offsets, start),
            // `new` accepts integer types only.
            other => Err(Error::InvalidSpec {
                reason: format!("concat packing takes integer tokens; the rows hold {other}"),
            }),
        }
    }

    /// [`push`](Self::push) for tokens of type `T`.
    fn push_typed<T: Token>(
        &mut self,
        values: &[T],
        offsets: &Offsets<'_>,
        start: usize,
    ) -> Result<usize> {
        let rows = offsets.len().saturating_sub(1);
        let mut packed = 0;
        let mut doc = Vec::new();
        for row in start..rows {
            if self.batch_ready() {
                break;
            }
            doc.clear();
            doc.extend(self.options.bos_token_id);
            for &token in &values[offsets.get(row)..offsets.get(row + 1)] {
                doc.push(token.to_i64().ok_or_else(|| Error::InvalidSpec {
                    reason: format!(
                        "document {row} holds the token {token:?}; expected tokens up to {}",
                        i64::MAX
                    ),
                })?);
            }
            doc.extend(self.options.eos_token_id);
            if self.options.split_documents {
                self.place_split(&doc);
            } else {
                self.place_best_fit(&doc);
            }
            packed += 1;
        }
        Ok(packed)
    }

    /// Ends the data: the rows being filled are closed (the short last row of
    /// `split_documents` dropped with `drop_last`), so that [`next_batch`](Self::next_batch)
    /// gives the rest, the last batch short of `batch_size` rows unless `drop_last`.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        let open = std::mem::take(&mut self.open);
        for row in open {
            if row.tokens.is_empty() || (self.options.split_documents && self.options.drop_last) {
                continue;
            }
            self.closed.push_back(row);
        }
    }

    /// The next batch: `batch_size` rows when that many are ready; after
    /// [`finish`](Self::finish), the rest (unless `drop_last`); `None` otherwise.
    pub fn next_batch(&mut self) -> Result<Option<ConcatBatch>> {
        let rows = if self.batch_ready() {
            self.options.batch_size
        } else if self.finished && !self.closed.is_empty() && !self.options.drop_last {
            self.closed.len()
        } else {
            return Ok(None);
        };
        let taken: Vec<CarriedRow> = self.closed.drain(..rows).collect();
        batch::build(&taken, &self.options, self.dtype).map(Some)
    }

    /// Places `doc` (special tokens included) at the end of the current row, continuing on new
    /// rows as long as it goes on.
    fn place_split(&mut self, mut doc: &[i64]) {
        let max = self.options.max_length;
        while !doc.is_empty() {
            if self.open.is_empty() {
                self.open.push(CarriedRow::default());
            }
            let row = &mut self.open[0];
            let take = (max - row.tokens.len()).min(doc.len());
            row.tokens.extend_from_slice(&doc[..take]);
            row.segments.push(take as u32);
            doc = &doc[take..];
            if row.tokens.len() == max {
                let full = self.open.pop().unwrap_or_default();
                self.closed.push_back(full);
            }
        }
    }

    /// Places `doc` whole in the open row with the least room that holds it (see the
    /// [`ConcatPacker`] docs); a document longer than a row fills rows of its own first.
    fn place_best_fit(&mut self, mut doc: &[i64]) {
        let max = self.options.max_length;
        while doc.len() >= max {
            self.closed.push_back(CarriedRow {
                tokens: doc[..max].to_vec(),
                segments: vec![max as u32],
            });
            doc = &doc[max..];
        }
        if doc.is_empty() {
            return;
        }
        let room = |row: &CarriedRow| max - row.tokens.len();
        // The row with the least room that still holds the document; the first of equals.
        let best = (0..self.open.len())
            .filter(|&i| room(&self.open[i]) >= doc.len())
            .min_by_key(|&i| (room(&self.open[i]), i));
        let index = match best {
            Some(index) => index,
            None => {
                if self.open.len() >= self.options.open_rows {
                    // The fullest open row is closed to make room: it has the least to gain.
                    let fullest = (0..self.open.len())
                        .min_by_key(|&i| (room(&self.open[i]), i))
                        .unwrap_or(0);
                    let row = self.open.remove(fullest);
                    self.closed.push_back(row);
                }
                self.open.push(CarriedRow::default());
                self.open.len() - 1
            }
        };
        let row = &mut self.open[index];
        row.tokens.extend_from_slice(doc);
        row.segments.push(doc.len() as u32);
        if row.tokens.len() == max {
            let row = self.open.remove(index);
            self.closed.push_back(row);
        }
    }

    /// Refuses a carry that a packer with these options could not have made.
    fn check_carry(&self, carry: &ConcatCarry) -> Result<()> {
        let max = self.options.max_length;
        let invalid = |reason: String| Err(Error::InvalidState { reason });
        let open_limit = if self.options.split_documents {
            1
        } else {
            self.options.open_rows
        };
        if carry.open.len() > open_limit {
            return invalid(format!(
                "the concat packing carries {} open rows; expected at most {open_limit}",
                carry.open.len()
            ));
        }
        let rows = carry.closed.iter().map(|row| (row, true));
        for (index, (row, closed)) in rows
            .chain(carry.open.iter().map(|row| (row, false)))
            .enumerate()
        {
            let what = if closed { "closed" } else { "open" };
            let sum: u64 = row.segments.iter().map(|&length| u64::from(length)).sum();
            let fits = row.tokens.len() <= max
                && (closed || row.tokens.len() < max)
                && (!closed || !self.options.split_documents || row.tokens.len() == max);
            if !fits || sum != row.tokens.len() as u64 || row.segments.contains(&0) {
                return invalid(format!(
                    "carried {what} row {index} holds {} tokens in segments {:?}; expected \
                     segments of at least 1 token that sum to the tokens' count, and rows of \
                     max_length = {max} tokens (shorter while open)",
                    row.tokens.len(),
                    row.segments
                ));
            }
            if let Some(&token) = row.tokens.iter().find(|&&t| !fits_dtype(t, self.dtype)) {
                return invalid(format!(
                    "carried {what} row {index} holds the token {token}; expected {} tokens",
                    self.dtype
                ));
            }
        }
        Ok(())
    }
}

/// Checks the options against each other and against `dtype`.
fn check_options(options: &ConcatPackOptions, dtype: DType) -> Result<()> {
    let invalid = |reason: String| Err(Error::InvalidSpec { reason });
    if !is_integer(dtype) {
        return invalid(format!(
            "concat packing takes rows of integer tokens; the rows hold {dtype}"
        ));
    }
    if options.max_length == 0 || options.batch_size == 0 || options.open_rows == 0 {
        return invalid(format!(
            "concat packing has max_length = {}, batch_size = {} and open_rows = {}; expected \
             each at least 1",
            options.max_length, options.batch_size, options.open_rows
        ));
    }
    if options
        .max_length
        .checked_mul(options.batch_size)
        .is_none_or(|tokens| tokens > i32::MAX as usize)
    {
        return invalid(format!(
            "concat packing has batch_size * max_length = {} * {} tokens per batch; expected at \
             most {} (int32 cu_seqlens)",
            options.batch_size,
            options.max_length,
            i32::MAX
        ));
    }
    let named = [
        ("bos_token_id", options.bos_token_id),
        ("eos_token_id", options.eos_token_id),
        ("pad_value", Some(options.pad_value)),
    ];
    for (name, value) in named {
        if let Some(value) = value
            && !fits_dtype(value, dtype)
        {
            return invalid(format!(
                "concat packing has {name} = {value}; expected a value that {dtype} tokens can \
                 hold"
            ));
        }
    }
    Ok(())
}

/// Whether `dtype` is one of the integer types.
fn is_integer(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::Int8
            | DType::Int16
            | DType::Int32
            | DType::Int64
            | DType::UInt8
            | DType::UInt16
            | DType::UInt32
            | DType::UInt64
    )
}

/// Whether `value` is representable in the integer type `dtype`.
pub(crate) fn fits_dtype(value: i64, dtype: DType) -> bool {
    let (low, high): (i128, i128) = match dtype {
        DType::Int8 => (i8::MIN.into(), i8::MAX.into()),
        DType::Int16 => (i16::MIN.into(), i16::MAX.into()),
        DType::Int32 => (i32::MIN.into(), i32::MAX.into()),
        DType::Int64 => (i64::MIN.into(), i64::MAX.into()),
        DType::UInt8 => (0, u8::MAX.into()),
        DType::UInt16 => (0, u16::MAX.into()),
        DType::UInt32 => (0, u32::MAX.into()),
        DType::UInt64 => (0, u64::MAX.into()),
        _ => return false,
    };
    (low..=high).contains(&i128::from(value))
}

/// An integer token type, read as and written from `i64`.
trait Token: arrow_dlpack_tensor::NativeDType {
    /// The value, or `None` for a uint64 above `i64::MAX`.
    fn to_i64(self) -> Option<i64>;

    /// The value of `value`, which the caller checked to fit (the options in
    /// [`check_options`], the tokens by the type they were read from).
    fn from_i64(value: i64) -> Self;
}

macro_rules! tokens {
    ($($t:ty),*) => {$(
        impl Token for $t {
            fn to_i64(self) -> Option<i64> {
                i64::try_from(self).ok()
            }

            fn from_i64(value: i64) -> Self {
                value as $t
            }
        }
    )*};
}

tokens!(i8, i16, i32, i64, u8, u16, u32, u64);

/// The offsets of a ragged tensor, of either width (from 0, checked by [`RaggedTensor`]).
enum Offsets<'a> {
    Int32(&'a [i32]),
    Int64(&'a [i64]),
}

impl Offsets<'_> {
    fn len(&self) -> usize {
        match self {
            Offsets::Int32(offsets) => offsets.len(),
            Offsets::Int64(offsets) => offsets.len(),
        }
    }

    fn get(&self, i: usize) -> usize {
        match self {
            Offsets::Int32(offsets) => offsets[i] as usize,
            Offsets::Int64(offsets) => offsets[i] as usize,
        }
    }
}
