//! Text columns of sequences: a [`Sequence`] with a [`SequenceTokenizer`] reads a string
//! column (`utf8`, `large_utf8`, `utf8_view`) as the list column of its token ids, made as
//! each record batch arrives, on the loader's threads, so that every layout, cut and budget of
//! a sequence applies to the ids as to any list column.
//!
//! The tokenizer is reached through `EncodeColumn`, which the `text` module's `Tokenizer`
//! implements (feature `tokenizers`), so that this module does not import the `text` module,
//! which reads sources and sits above the sequences.

use std::fmt;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, FieldRef, Schema};

use super::Sequence;
use crate::{Error, Result};

/// What an error says a tokenized column must be.
pub const TOKENIZED_TEXT_TYPES: &str =
    "utf8, large_utf8 or utf8_view text, for a sequence with a tokenizer";

/// A tokenizer as the loader uses it: a text column to the list column of its ids.
pub(crate) trait EncodeColumn: Send + Sync {
    /// The ids of every text of `column` (one row per text); row numbers in errors counted from
    /// `first_row`; a null text is an error unless `allow_nulls`, then an empty row.
    fn encode_column(
        &self,
        column: &dyn arrow_array::Array,
        how: &Encode,
        first_row: u64,
    ) -> Result<ArrayRef>;

    /// The tokenizer's identity, a digest of its JSON.
    fn digest(&self) -> &str;
}

/// How a column is encoded.
// Without the feature `tokenizers` no encoder exists to read it.
#[cfg_attr(not(feature = "tokenizers"), allow(dead_code))]
pub(crate) struct Encode {
    pub(crate) add_special_tokens: bool,
    pub(crate) allow_nulls: bool,
    pub(crate) threads: usize,
}

/// The tokenizer of a text column loaded as a sequence (made with `SequenceTokenizer::new`,
/// feature `tokenizers`), and whether it adds its special tokens.
///
/// Two are equal when their tokenizers have the same [`digest`](SequenceTokenizer::digest)
/// and they add special tokens alike.
#[derive(Clone)]
pub struct SequenceTokenizer {
    pub(crate) encoder: Arc<dyn EncodeColumn>,
    /// Adds the tokenizer's special tokens (its post-processor's), as `add_special_tokens=True`
    /// does in Python. Default `true`.
    pub add_special_tokens: bool,
}

impl SequenceTokenizer {
    /// Sets [`add_special_tokens`](SequenceTokenizer::add_special_tokens).
    pub fn add_special_tokens(mut self, add: bool) -> Self {
        self.add_special_tokens = add;
        self
    }

    /// The tokenizer's identity (`Tokenizer::digest`), which a saved state records.
    pub fn digest(&self) -> &str {
        self.encoder.digest()
    }
}

impl fmt::Debug for SequenceTokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SequenceTokenizer")
            .field("digest", &self.digest())
            .field("add_special_tokens", &self.add_special_tokens)
            .finish()
    }
}

impl PartialEq for SequenceTokenizer {
    fn eq(&self, other: &Self) -> bool {
        self.digest() == other.digest() && self.add_special_tokens == other.add_special_tokens
    }
}

impl Eq for SequenceTokenizer {}

/// `batch` with every text column that one of `sequences` tokenizes replaced by its token ids
/// (a `list` of the tokenizer's id type, int32 unless its vocabulary needs int64), tokenized on
/// `threads` threads; row numbers in errors are counted from `first_row`. A column the batch
/// does not have is left for the schema check to name; a column that is not text is
/// [`Error::UnsupportedColumn`] with [`TOKENIZED_TEXT_TYPES`] as what was expected.
pub(crate) fn tokenize_texts(
    sequences: &[Sequence],
    allow_nulls: bool,
    threads: usize,
    batch: RecordBatch,
    first_row: u64,
) -> Result<RecordBatch> {
    if sequences.iter().all(|s| s.tokenizer.is_none()) {
        return Ok(batch);
    }
    let schema = batch.schema();
    let mut fields: Vec<FieldRef> = schema.fields().iter().cloned().collect();
    let mut columns = batch.columns().to_vec();
    for sequence in sequences {
        let Some(tokenizer) = &sequence.tokenizer else {
            continue;
        };
        let Ok(index) = schema.index_of(&sequence.column) else {
            continue;
        };
        let field = schema.field(index);
        if !matches!(
            field.data_type(),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ) {
            return Err(Error::UnsupportedColumn {
                column: sequence.column.clone(),
                data_type: field.data_type().clone(),
                metadata: field.metadata().clone(),
                as_sequence: true,
                expected: TOKENIZED_TEXT_TYPES,
                every_column: false,
            });
        }
        let how = Encode {
            add_special_tokens: tokenizer.add_special_tokens,
            allow_nulls,
            threads,
        };
        let ids = (tokenizer.encoder).encode_column(columns[index].as_ref(), &how, first_row)?;
        fields[index] = Arc::new(Field::new(
            field.name(),
            ids.data_type().clone(),
            field.is_nullable(),
        ));
        columns[index] = ids;
    }
    let schema = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    Ok(RecordBatch::try_new(schema, columns)?)
}
