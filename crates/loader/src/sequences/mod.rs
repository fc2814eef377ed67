//! Variable-length list columns as sequence tensors: what a [`Sequence`] asks for (here), the
//! tensors of a batch made from its runs of rows (`tensors.rs`), the token cost of a batch,
//! against which [`BatchSpec::max_tokens`](crate::BatchSpec) cuts (`tokens.rs`), and the plan of
//! an epoch's batches over several shards, cut from the rows' lengths alone (`plan/`).

use std::fmt;
use std::str::FromStr;

use crate::Error;

pub(crate) mod plan;
pub(crate) mod tensors;
pub(crate) mod text;
pub(crate) mod tokens;

pub use text::{SequenceTokenizer, TOKENIZED_TEXT_TYPES};

pub use arrow_dlpack::{PadValue, Side};

/// How the rows of a variable-length list column become tensors.
///
/// Its names ([`as_str`](SequenceMode::as_str), [`FromStr`]) are those of the Python keyword:
/// `"pad"`, `"pack"`, `"jagged"`; [`SequenceMode::ALL`] lists every mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum SequenceMode {
    /// A padded `(B, L, *inner)` tensor named after the column, and its rows' lengths
    /// `"<column>_lengths"` `(B,)` `int64`.
    #[default]
    Pad,
    /// The rows one after another, `(N, *inner)`, with `"<column>_cu_seqlens"` `(B + 1,)`
    /// `int32`, `"<column>_position_ids"` `(N,)` `int64` and `"<column>_max_seqlen"`, a 0-d
    /// `int64` tensor: the inputs of flash-attention's variable-length kernels.
    Pack,
    /// The rows one after another, `(N, *inner)`, with their offsets `"<column>_offsets"`
    /// `(B + 1,)` starting at 0, of the list's offset type: `torch.nested`'s jagged layout.
    Jagged,
    /// Documents concatenated and cut into rows of exactly `max_length` tokens, for pretraining:
    /// `(B, max_length)` with `"<column>_position_ids"` `(B, max_length)` int64,
    /// `"<column>_cu_seqlens"` int32 and `"<column>_max_seqlen"` (see
    /// [`ConcatPacker`](crate::ConcatPacker)); `batch_size` counts these rows, and the column
    /// is the batch's only output.
    Concat,
}

impl SequenceMode {
    /// Every mode, in the order of declaration.
    pub const ALL: &'static [SequenceMode] = &[
        SequenceMode::Pad,
        SequenceMode::Pack,
        SequenceMode::Jagged,
        SequenceMode::Concat,
    ];

    /// The mode's name: `"pad"`, `"pack"`, `"jagged"` or `"concat"`.
    pub fn as_str(self) -> &'static str {
        match self {
            SequenceMode::Pad => "pad",
            SequenceMode::Pack => "pack",
            SequenceMode::Jagged => "jagged",
            SequenceMode::Concat => "concat",
        }
    }

    /// The suffixes of the tensors that this mode adds next to the column's own.
    pub(crate) fn suffixes(self) -> &'static [&'static str] {
        match self {
            SequenceMode::Pad => &["_lengths"],
            SequenceMode::Pack => &["_cu_seqlens", "_position_ids", "_max_seqlen"],
            SequenceMode::Jagged => &["_offsets"],
            SequenceMode::Concat => &["_position_ids", "_cu_seqlens", "_max_seqlen"],
        }
    }
}

impl fmt::Display for SequenceMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode from its name ([`SequenceMode::as_str`]).
///
/// ```
/// use arrow_dlpack_loader::SequenceMode;
///
/// assert_eq!("pack".parse::<SequenceMode>()?, SequenceMode::Pack);
/// assert_eq!(
///     "padded".parse::<SequenceMode>().unwrap_err().to_string(),
///     "invalid batch spec: unknown sequence mode \"padded\"; expected \"pad\", \"pack\", \"jagged\" or \"concat\"",
/// );
/// # Ok::<(), arrow_dlpack_loader::Error>(())
/// ```
impl FromStr for SequenceMode {
    type Err = Error;

    fn from_str(name: &str) -> Result<Self, Error> {
        SequenceMode::ALL
            .iter()
            .copied()
            .find(|mode| mode.as_str() == name)
            .ok_or_else(|| Error::InvalidSpec {
                reason: format!(
                    "unknown sequence mode {name:?}; expected {}",
                    SequenceMode::names()
                ),
            })
    }
}

impl SequenceMode {
    /// The names of every mode, quoted, for messages: `"pad", "pack", "jagged" or "concat"`.
    pub fn names() -> String {
        let quoted: Vec<String> = SequenceMode::ALL
            .iter()
            .map(|mode| format!("{:?}", mode.as_str()))
            .collect();
        match quoted.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

/// One list column loaded as a sequence: its layout, and for `"pad"` how rows are padded and
/// truncated.
///
/// The padding fields apply to [`SequenceMode::Pad`] only; a spec that sets them for another
/// mode is refused. A sequence is made with [`Sequence::pad`], [`Sequence::pack`],
/// [`Sequence::jagged`] or [`Sequence::new`], and the padding set by the builder methods:
///
/// ```
/// use arrow_dlpack_loader::{BatchSpec, PadValue, Sequence, SequenceMode, Side};
///
/// let spec = BatchSpec::new(32)
///     .sequence(Sequence::pad("input_ids").max_length(512).padding_side(Side::Left))
///     .sequence(Sequence::pad("labels").pad_value(PadValue::Int(-100)))
///     .sequence(Sequence::pack("tokens"));
/// assert_eq!(spec.sequences[0].max_length, Some(512));
/// assert_eq!(spec.sequences[2].mode, SequenceMode::Pack);
/// // The fields are public too.
/// let labels = Sequence { pad_value: PadValue::Int(-1), ..Sequence::pad("labels") };
/// assert_eq!(labels.pad_value, PadValue::Int(-1));
/// ```
#[derive(Debug, Clone)]
pub struct Sequence {
    /// The list column (`list` or `large_list`), also the name of its tensor.
    pub column: String,
    /// The layout of its tensors.
    pub mode: SequenceMode,
    /// The value of the padding, converted to the column's element type (an error at the first
    /// batch when it does not fit, such as -1 in `uint8`).
    pub pad_value: PadValue,
    /// Truncate longer rows to this many values; the padded length is at most this.
    pub max_length: Option<usize>,
    /// Round the padded length up to a multiple of this.
    pub pad_to_multiple_of: Option<usize>,
    /// Where the padding goes.
    pub padding_side: Side,
    /// Which end of a row longer than `max_length` is cut off.
    pub truncation_side: Side,
    /// Reads a text column (`utf8`, `large_utf8`, `utf8_view`) as its token ids, tokenized as
    /// each record batch arrives (feature `tokenizers`); `None` reads a list column.
    pub tokenizer: Option<SequenceTokenizer>,
    /// [`SequenceMode::Concat`]: a token put before every document.
    pub bos_token_id: Option<i64>,
    /// [`SequenceMode::Concat`]: a token put after every document.
    pub eos_token_id: Option<i64>,
    /// [`SequenceMode::Concat`]: a document that does not fit continues on the next row
    /// (`true`, the default); `false` fills rows best fit with whole documents, padded with
    /// `pad_value`.
    pub split_documents: bool,
}

impl Sequence {
    /// Column `column` in mode `mode`, with the default padding (zeros on the right, nothing
    /// truncated).
    pub fn new(column: impl Into<String>, mode: SequenceMode) -> Self {
        Sequence {
            column: column.into(),
            mode,
            pad_value: PadValue::default(),
            max_length: None,
            pad_to_multiple_of: None,
            padding_side: Side::Right,
            truncation_side: Side::Right,
            tokenizer: None,
            bos_token_id: None,
            eos_token_id: None,
            split_documents: true,
        }
    }

    /// Column `column`, padded ([`SequenceMode::Pad`]) with the default padding.
    pub fn pad(column: impl Into<String>) -> Self {
        Sequence::new(column, SequenceMode::Pad)
    }

    /// Column `column`, packed ([`SequenceMode::Pack`]).
    pub fn pack(column: impl Into<String>) -> Self {
        Sequence::new(column, SequenceMode::Pack)
    }

    /// Column `column`, concatenated into rows of exactly `max_length` tokens
    /// ([`SequenceMode::Concat`]).
    pub fn concat(column: impl Into<String>, max_length: usize) -> Self {
        Sequence::new(column, SequenceMode::Concat).max_length(max_length)
    }

    /// Sets [`bos_token_id`](Sequence::bos_token_id).
    pub fn bos_token_id(mut self, id: i64) -> Self {
        self.bos_token_id = Some(id);
        self
    }

    /// Sets [`eos_token_id`](Sequence::eos_token_id).
    pub fn eos_token_id(mut self, id: i64) -> Self {
        self.eos_token_id = Some(id);
        self
    }

    /// Sets [`split_documents`](Sequence::split_documents).
    pub fn split_documents(mut self, split: bool) -> Self {
        self.split_documents = split;
        self
    }

    /// Column `column`, jagged ([`SequenceMode::Jagged`]).
    pub fn jagged(column: impl Into<String>) -> Self {
        Sequence::new(column, SequenceMode::Jagged)
    }

    /// Sets [`pad_value`](Sequence::pad_value).
    pub fn pad_value(mut self, pad_value: PadValue) -> Self {
        self.pad_value = pad_value;
        self
    }

    /// Sets [`max_length`](Sequence::max_length): longer rows are cut to `max_length` values.
    pub fn max_length(mut self, max_length: usize) -> Self {
        self.max_length = Some(max_length);
        self
    }

    /// Sets [`pad_to_multiple_of`](Sequence::pad_to_multiple_of).
    pub fn pad_to_multiple_of(mut self, multiple: usize) -> Self {
        self.pad_to_multiple_of = Some(multiple);
        self
    }

    /// Sets [`padding_side`](Sequence::padding_side).
    pub fn padding_side(mut self, side: Side) -> Self {
        self.padding_side = side;
        self
    }

    /// Sets [`truncation_side`](Sequence::truncation_side).
    pub fn truncation_side(mut self, side: Side) -> Self {
        self.truncation_side = side;
        self
    }

    /// Sets [`tokenizer`](Sequence::tokenizer): the column is text, read as its token ids.
    pub fn tokenizer(mut self, tokenizer: SequenceTokenizer) -> Self {
        self.tokenizer = Some(tokenizer);
        self
    }

    /// Whether a field of the concat packing differs from its default.
    pub(crate) fn sets_concat(&self) -> bool {
        self.bos_token_id.is_some() || self.eos_token_id.is_some() || !self.split_documents
    }

    /// Whether a field that only padding reads differs from its default (`max_length` and
    /// `truncation_side` cut the rows of packed and jagged sequences too).
    pub(crate) fn sets_padding(&self) -> bool {
        let default = Sequence::new(self.column.clone(), self.mode);
        self.pad_value != default.pad_value
            || self.pad_to_multiple_of.is_some()
            || self.padding_side != default.padding_side
    }

    /// The length a row of `length` values has in the batch: cut to `max_length`.
    pub(crate) fn kept(&self, length: usize) -> usize {
        self.max_length.map_or(length, |max| length.min(max))
    }

    /// The padded length of a batch whose longest kept row has `longest` values.
    pub(crate) fn padded_length(&self, longest: usize) -> usize {
        match self.pad_to_multiple_of {
            Some(multiple) if multiple > 0 => longest.div_ceil(multiple) * multiple,
            _ => longest,
        }
    }
}

// Pad values are compared by their bits, so that a sequence (and a spec) equals itself even
// with a NaN pad value; the pattern names every field, so a new field fails to compile here
// until it is compared.
impl PartialEq for Sequence {
    fn eq(&self, other: &Self) -> bool {
        let Sequence {
            column,
            mode,
            pad_value,
            max_length,
            pad_to_multiple_of,
            padding_side,
            truncation_side,
            tokenizer,
            bos_token_id,
            eos_token_id,
            split_documents,
        } = self;
        let same_pad = match (pad_value, &other.pad_value) {
            (PadValue::Float(a), PadValue::Float(b)) => a.to_bits() == b.to_bits(),
            (a, b) => a == b,
        };
        same_pad
            && *column == other.column
            && *mode == other.mode
            && *max_length == other.max_length
            && *pad_to_multiple_of == other.pad_to_multiple_of
            && *padding_side == other.padding_side
            && *truncation_side == other.truncation_side
            && *tokenizer == other.tokenizer
            && *bos_token_id == other.bos_token_id
            && *eos_token_id == other.eos_token_id
            && *split_documents == other.split_documents
    }
}

impl Eq for Sequence {}
