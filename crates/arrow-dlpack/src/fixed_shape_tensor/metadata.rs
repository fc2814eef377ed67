//! `FixedShapeTensorMetadata`: the extension's JSON metadata, written as the specification and
//! PyArrow write it.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The JSON metadata of `arrow.fixed_shape_tensor`, stored under `ARROW:extension:metadata`.
///
/// Serialized with the keys in the order `shape`, `permutation`, `dim_names`, and with absent
/// optional keys omitted, as PyArrow writes it: `{"shape":[2,3]}`,
/// `{"shape":[2,3],"permutation":[1,0],"dim_names":["x","y"]}`.
/// Reading accepts explicit `null`s for the optional keys, ignores unknown keys, and also accepts
/// the key `permutations` that arrow-rs writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixedShapeTensorMetadata {
    /// The physical shape of each tensor (the row-major layout of its storage).
    pub shape: Vec<usize>,
    /// Logical dimension `i` is physical dimension `permutation[i]`; absent means the identity.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "permutations"
    )]
    pub permutation: Option<Vec<usize>>,
    /// Names of the physical dimensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dim_names: Option<Vec<String>>,
}

impl FixedShapeTensorMetadata {
    /// Parses the JSON metadata.
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json).map_err(|error| Error::InvalidExtension {
            reason: format!(
                "metadata {json:?} does not parse ({error}); expected a JSON object such as \
                 {{\"shape\":[2,3]}}"
            ),
        })
    }

    /// The JSON metadata, compact, absent keys omitted.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("serializing vectors of numbers and strings cannot fail")
    }
}
