//! The text module's [`Tokenizer`] as the tokenizer of a sequence: it encodes a column for the
//! loader (the sequences' `EncodeColumn`), and [`SequenceTokenizer::new`] wraps it.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef};

use super::column::{TokenizeOptions, tokenize_rows};
use super::tokenizer::Tokenizer;
use crate::Result;
use crate::SequenceTokenizer;
use crate::sequences::text::{Encode, EncodeColumn};

impl EncodeColumn for Tokenizer {
    fn encode_column(&self, column: &dyn Array, how: &Encode, first_row: u64) -> Result<ArrayRef> {
        let options = TokenizeOptions {
            add_special_tokens: how.add_special_tokens,
            allow_nulls: how.allow_nulls,
            threads: how.threads,
            large_offsets: false,
        };
        tokenize_rows(column, self, &options, first_row)
    }

    fn digest(&self) -> &str {
        Tokenizer::digest(self)
    }
}

impl SequenceTokenizer {
    /// The sequence tokenizer of `tokenizer`, adding its special tokens.
    pub fn new(tokenizer: Tokenizer) -> Self {
        SequenceTokenizer {
            encoder: Arc::new(tokenizer),
            add_special_tokens: true,
        }
    }
}
