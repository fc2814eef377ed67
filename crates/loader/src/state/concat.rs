//! What a saved state records of a `"concat"` sequence ([`ConcatPosition`]): the rows the
//! packer had not handed out ([`ConcatCarry`]) and how far into the next record batch of
//! documents it had read, so that a resumed run gives the rows an uninterrupted one would have.

use serde::{Deserialize, Serialize};

/// A row not yet handed out: its tokens, and the lengths of its documents' pieces in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CarriedRow {
    /// The tokens, at most `max_length`.
    pub tokens: Vec<i64>,
    /// The lengths of the segments (a document's piece each), summing to the tokens' count.
    pub segments: Vec<u32>,
}

/// The rows a [`ConcatPacker`](crate::ConcatPacker) holds between two batches, to resume it
/// with [`ConcatPacker::resume`](crate::ConcatPacker::resume).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConcatCarry {
    /// Rows that are complete and wait for a batch, in order.
    pub closed: Vec<CarriedRow>,
    /// Rows being filled, in the order they were opened: at most one with `split_documents`.
    pub open: Vec<CarriedRow>,
}

/// Where the concat packing of a loader stands after a batch: the documents of the next batch of
/// the underlying reading already packed, the packer's rows not yet handed out, and the type of
/// its tokens (a dtype name such as `"int32"`, known once a batch of documents was read).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConcatPosition {
    /// The documents of the next batch of the underlying reading that were already packed.
    pub documents: u64,
    /// The dtype of the tokens, when known.
    pub token_type: Option<String>,
    /// The rows not yet handed out.
    pub carry: ConcatCarry,
}
