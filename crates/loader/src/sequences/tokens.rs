//! Token budgets and length buckets: the lengths of the rows of the sequence columns, and the
//! rule by which [`BatchSpec::max_tokens`](crate::BatchSpec) cuts batches of whole rows.
//!
//! A batch's tokens are those of its largest sequence tensor: `B * L` for a padded `(B, L)`
//! tensor (`L` the longest kept row, rounded up to `pad_to_multiple_of`), `N` for packed or
//! jagged values `(N,)`. Adding a row never lowers that count, so a batch is cut greedily: rows
//! are added while the count stays within the budget and the rows within `batch_size`.

use arrow_array::{Array, RecordBatch, cast::AsArray};

use super::{Sequence, SequenceMode};
use crate::{Error, Result};

/// How batches are cut: by rows, or by tokens within a budget; what
/// [`BatchSpec::cutting`](crate::BatchSpec) gives of a spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cutting {
    /// The token budget of a batch, if batches are cut by tokens.
    pub(crate) max_tokens: Option<usize>,
    /// The rows of a batch (at most, with a token budget).
    pub(crate) batch_size: usize,
    /// Whether rows are sorted by length within windows.
    pub(crate) bucket_by_length: bool,
}

/// The kept lengths (after truncation to `max_length`; 0 for a null row) of the rows of one
/// record batch, per sequence column: `lengths[column][row]`.
#[derive(Debug, Clone, Default)]
pub(crate) struct RowLengths {
    lengths: Vec<Vec<usize>>,
}

impl RowLengths {
    /// The lengths of the rows of `batch` in the columns `sequences` (with their indices in the
    /// batch), or empty lengths when no budget or bucket needs them.
    pub(crate) fn of(
        cutting: Cutting,
        sequences: &[(usize, Sequence)],
        batch: &RecordBatch,
    ) -> Result<Self> {
        if cutting.max_tokens.is_none() && !cutting.bucket_by_length {
            return Ok(RowLengths::default());
        }
        let lengths = sequences
            .iter()
            .map(|(index, sequence)| kept_lengths(sequence, batch.column(*index).as_ref()))
            .collect::<Result<Vec<_>>>()?;
        Ok(RowLengths { lengths })
    }

    /// The kept length of `row` in sequence column `column`.
    pub(crate) fn get(&self, column: usize, row: usize) -> usize {
        self.lengths[column][row]
    }

    /// The longest kept length of `row` over the sequence columns: its bucketing key.
    pub(crate) fn longest(&self, row: usize) -> usize {
        self.lengths
            .iter()
            .map(|lengths| lengths[row])
            .max()
            .unwrap_or(0)
    }
}

/// The kept lengths of the rows of the list array `array`.
fn kept_lengths(sequence: &Sequence, array: &dyn Array) -> Result<Vec<usize>> {
    Ok(raw_lengths(sequence, array)?
        .into_iter()
        .map(|length| sequence.kept(length))
        .collect())
}

/// The lengths of the rows of the list array `array` of `sequence`'s column before truncation,
/// 0 for a null row (a null row is refused, or loaded empty, when its batch is made).
pub(crate) fn raw_lengths(sequence: &Sequence, array: &dyn Array) -> Result<Vec<usize>> {
    let nulls = array.logical_nulls();
    let is_null = |row: usize| nulls.as_ref().is_some_and(|nulls| nulls.is_null(row));
    let raw: Vec<usize> = if let Some(list) = array.as_list_opt::<i32>() {
        let offsets = list.value_offsets();
        (0..list.len())
            .map(|row| (offsets[row + 1] - offsets[row]).max(0) as usize)
            .collect()
    } else if let Some(list) = array.as_list_opt::<i64>() {
        let offsets = list.value_offsets();
        (0..list.len())
            .map(|row| usize::try_from((offsets[row + 1] - offsets[row]).max(0)).unwrap_or(0))
            .collect()
    } else if let Some(list) = array.as_list_view_opt::<i32>() {
        let sizes = list.value_sizes();
        sizes.iter().map(|&size| size.max(0) as usize).collect()
    } else if let Some(list) = array.as_list_view_opt::<i64>() {
        let sizes = list.value_sizes();
        sizes
            .iter()
            .map(|&size| usize::try_from(size.max(0)).unwrap_or(0))
            .collect()
    } else {
        return Err(Error::InvalidSpec {
            reason: format!(
                "sequence {:?} has type {}; expected a list, large_list or one of their views",
                sequence.column,
                array.data_type()
            ),
        });
    };
    Ok(raw
        .into_iter()
        .enumerate()
        .map(|(row, length)| if is_null(row) { 0 } else { length })
        .collect())
}

/// The batch being cut: its rows so far and, per sequence column, their longest kept length and
/// their total.
pub(crate) struct Budget<'a> {
    sequences: &'a [(usize, Sequence)],
    max_tokens: Option<usize>,
    max_rows: usize,
    rows: usize,
    longest: Vec<usize>,
    total: Vec<usize>,
}

/// Whether a row joins the batch being cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// The row is in the batch.
    Added,
    /// The batch is full: the row starts the next one.
    Full,
}

impl<'a> Budget<'a> {
    /// An empty batch cut as `cutting` says, whose sequence columns are `sequences`.
    pub(crate) fn new(cutting: Cutting, sequences: &'a [(usize, Sequence)]) -> Self {
        Budget {
            sequences,
            max_tokens: cutting.max_tokens,
            max_rows: cutting.batch_size,
            rows: 0,
            longest: vec![0; sequences.len()],
            total: vec![0; sequences.len()],
        }
    }

    /// The rows in the batch.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Whether the batch has as many rows as a batch may have.
    pub(crate) fn is_full(&self) -> bool {
        self.rows == self.max_rows
    }

    /// The tokens of the batch so far: those of its largest sequence tensor.
    pub(crate) fn tokens(&self) -> usize {
        self.sequences
            .iter()
            .enumerate()
            .map(|(c, (_, sequence))| match sequence.mode {
                SequenceMode::Pad => self
                    .rows
                    .saturating_mul(sequence.padded_length(self.longest[c])),
                SequenceMode::Pack | SequenceMode::Jagged | SequenceMode::Concat => self.total[c],
            })
            .max()
            .unwrap_or(0)
    }

    /// Adds the row whose kept length in sequence column `c` is `length(c)`, unless the batch is
    /// full; a row that alone exceeds the budget is an error.
    pub(crate) fn add(&mut self, length: impl Fn(usize) -> usize) -> Result<Fit> {
        if self.rows == self.max_rows {
            return Ok(Fit::Full);
        }
        if let Some(max_tokens) = self.max_tokens {
            let mut tokens = 0;
            let mut largest = 0;
            for (c, (_, sequence)) in self.sequences.iter().enumerate() {
                let cost = self.cost_with(c, sequence, length(c));
                if cost > tokens {
                    tokens = cost;
                    largest = c;
                }
            }
            if tokens > max_tokens {
                if self.rows > 0 {
                    return Ok(Fit::Full);
                }
                let (_, sequence) = &self.sequences[largest];
                return Err(Error::InvalidSpec {
                    reason: format!(
                        "a row of {} values in sequence {:?} needs {tokens} tokens alone, more \
                         than max_tokens ({max_tokens}); expected max_tokens of at least the \
                         longest row, or a max_length that cuts rows to fit",
                        length(largest),
                        sequence.column,
                    ),
                });
            }
        }
        for c in 0..self.sequences.len() {
            let kept = length(c);
            self.longest[c] = self.longest[c].max(kept);
            self.total[c] = self.total[c].saturating_add(kept);
        }
        self.rows += 1;
        Ok(Fit::Added)
    }

    /// The tokens of column `c`'s tensor with a row of `kept` more values.
    fn cost_with(&self, c: usize, sequence: &Sequence, kept: usize) -> usize {
        match sequence.mode {
            SequenceMode::Pad => {
                let longest = self.longest[c].max(kept);
                (self.rows + 1).saturating_mul(sequence.padded_length(longest))
            }
            // A concat sequence is read as a jagged one (its packing comes after the cut), and
            // refuses a budget.
            SequenceMode::Pack | SequenceMode::Jagged | SequenceMode::Concat => {
                self.total[c].saturating_add(kept)
            }
        }
    }
}

/// The rows of a batch cut from the end of `rows` (each `(piece, row)`, with its lengths
/// in `lengths[piece]`): the index where the batch starts, or `None` when `rows` runs out
/// before the batch is full (the rows then wait for more, or end the stream as a short batch).
pub(crate) fn cut_from_end(
    cutting: Cutting,
    sequences: &[(usize, Sequence)],
    rows: &[(usize, usize)],
    lengths: &[RowLengths],
) -> Result<Option<usize>> {
    cut_from_end_by(cutting, sequences, rows.len(), |at, c| {
        let (piece, row) = rows[at];
        lengths[piece].get(c, row)
    })
}

/// [`cut_from_end`] of `len` rows whose kept length in sequence column `c` is `length(at, c)`
/// for the row at index `at`.
pub(crate) fn cut_from_end_by(
    cutting: Cutting,
    sequences: &[(usize, Sequence)],
    len: usize,
    length: impl Fn(usize, usize) -> usize,
) -> Result<Option<usize>> {
    if cutting.max_tokens.is_none() {
        return Ok(len.checked_sub(cutting.batch_size));
    }
    let mut budget = Budget::new(cutting, sequences);
    for at in (0..len).rev() {
        if budget.add(|c| length(at, c))? == Fit::Full {
            return Ok(Some(at + 1));
        }
    }
    Ok(budget.is_full().then_some(0))
}
