//! [`NullToNan`]: where a batch writes nulls as NaN, the value of [`BatchSpec::null_to_nan`].

use std::fmt;

#[cfg(doc)]
use super::BatchSpec;

/// Where nulls become NaN: the value of [`BatchSpec::null_to_nan`].
///
/// A float column keeps its dtype (its nulls are NaN); an integer column that gets NaN is
/// promoted to a float type (`float64` for 32- and 64-bit integers, as PyArrow promotes), and
/// a column group's dtype is the group's promotion with NaN (as
/// [`arrow_dlpack::columns_to_tensor`] gives it). The dtype of a tensor is fixed when the
/// loader is planned, so it is the same in every batch and every shard.
///
/// ```
/// use arrow_dlpack_loader::{BatchSpec, NullToNan};
///
/// assert_eq!(BatchSpec::new(8).null_to_nan(true).null_to_nan, NullToNan::Auto);
/// let named = BatchSpec::new(8).null_to_nan(NullToNan::columns(["income"]));
/// assert_eq!(named.null_to_nan, NullToNan::Columns(vec!["income".to_string()]));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum NullToNan {
    /// Nowhere: nulls are refused (or, with [`BatchSpec::allow_nulls`], left as unspecified
    /// values).
    #[default]
    Off,
    /// Where nulls may be: every column group, every float single column, and each integer
    /// single column that may hold nulls as the source's metadata tells when the loader is
    /// planned (Parquet statistics' null counts, IPC record-batch headers' null counts, the
    /// null counts of record batches in memory; the schema's nullability where nothing else
    /// tells). An integer column without nulls keeps its dtype.
    Auto,
    /// In the single columns and groups of these names only, whether or not they hold nulls
    /// (an integer column named here is promoted); every other column keeps its dtype and its
    /// nulls are refused as without this option.
    Columns(Vec<String>),
}

impl NullToNan {
    /// [`NullToNan::Columns`] of `names`.
    pub fn columns<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        NullToNan::Columns(names.into_iter().map(Into::into).collect())
    }

    /// Whether nulls become NaN anywhere.
    pub fn is_on(&self) -> bool {
        *self != NullToNan::Off
    }
}

/// `true` is [`NullToNan::Auto`], `false` [`NullToNan::Off`].
impl From<bool> for NullToNan {
    fn from(on: bool) -> Self {
        if on { NullToNan::Auto } else { NullToNan::Off }
    }
}

impl fmt::Display for NullToNan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NullToNan::Off => f.write_str("off"),
            NullToNan::Auto => f.write_str("where nulls may be"),
            NullToNan::Columns(names) => write!(f, "in {names:?}"),
        }
    }
}
