//! Variable-length list columns as sequence tensors: what a [`Sequence`] asks for (here), the
//! tensors of a batch made from its runs of rows (`tensors.rs`), and the token cost of a batch,
//! against which [`BatchSpec::max_tokens`](crate::BatchSpec) cuts (`tokens.rs`).

use std::fmt;

pub(crate) mod tensors;
pub(crate) mod tokens;

pub use arrow_dlpack::Side;

/// How the rows of a variable-length list column become tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
}

impl SequenceMode {
    /// The mode's name, as the Python keyword spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SequenceMode::Pad => "pad",
            SequenceMode::Pack => "pack",
            SequenceMode::Jagged => "jagged",
        }
    }

    /// The suffixes of the tensors that this mode adds next to the column's own.
    pub(crate) fn suffixes(self) -> &'static [&'static str] {
        match self {
            SequenceMode::Pad => &["_lengths"],
            SequenceMode::Pack => &["_cu_seqlens", "_position_ids", "_max_seqlen"],
            SequenceMode::Jagged => &["_offsets"],
        }
    }
}

impl fmt::Display for SequenceMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The value written into the padding of a padded sequence, converted to the column's type.
#[derive(Debug, Clone, Copy)]
pub enum PadValue {
    /// An integer, exact for integer columns.
    Int(i64),
    /// A float, for float columns.
    Float(f64),
}

impl Default for PadValue {
    fn default() -> Self {
        PadValue::Int(0)
    }
}

// Pad values are compared by their bits, so that a spec equals itself even with a NaN pad.
impl PartialEq for PadValue {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (PadValue::Int(a), PadValue::Int(b)) => a == b,
            (PadValue::Float(a), PadValue::Float(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

impl Eq for PadValue {}

/// One list column loaded as a sequence: its layout, and for `"pad"` how rows are padded and
/// truncated.
///
/// The padding fields apply to [`SequenceMode::Pad`] only; a spec that sets them for another
/// mode is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequence {
    /// The list column (`list` or `large_list`), also the name of its tensor.
    pub column: String,
    /// The layout of its tensors.
    pub mode: SequenceMode,
    /// The value of the padding.
    pub pad_value: PadValue,
    /// Truncate longer rows to this many values; the padded length is at most this.
    pub max_length: Option<usize>,
    /// Round the padded length up to a multiple of this.
    pub pad_to_multiple_of: Option<usize>,
    /// Where the padding goes.
    pub padding_side: Side,
    /// Which end of a row longer than `max_length` is cut off.
    pub truncation_side: Side,
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
        }
    }

    /// Whether any padding field differs from its default.
    pub(crate) fn sets_padding(&self) -> bool {
        let default = Sequence::new(self.column.clone(), self.mode);
        self.pad_value != default.pad_value
            || self.max_length.is_some()
            || self.pad_to_multiple_of.is_some()
            || self.padding_side != default.padding_side
            || self.truncation_side != default.truncation_side
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
