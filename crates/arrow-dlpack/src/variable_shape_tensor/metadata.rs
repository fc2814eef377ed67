//! `VariableShapeTensorMetadata`: the extension's JSON metadata, written as the specification
//! says and read in every form that producers write.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The JSON metadata of `arrow.variable_shape_tensor`, stored under `ARROW:extension:metadata`.
///
/// Every key is optional; absent keys are omitted when writing (`{}` when there are none), and
/// the keys come in the order `dim_names`, `permutation`, `uniform_shape`:
/// `{"permutation":[1,0],"uniform_shape":[null,3]}`.
/// Reading accepts explicit `null`s, ignores unknown keys, and also accepts the key
/// `permutations` that arrow-rs writes (the specification's key is `permutation`, and PyArrow
/// ignores the other one).
///
/// The metadata is not checked against a rank here; [`VariableShapeTensorType`] does that.
///
/// [`VariableShapeTensorType`]: super::VariableShapeTensorType
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VariableShapeTensorMetadata {
    /// Names of the physical dimensions (the row-major layout of each tensor's data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dim_names: Option<Vec<String>>,
    /// Logical dimension `i` is physical dimension `permutation[i]`; absent means the identity.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "permutations"
    )]
    pub permutation: Option<Vec<usize>>,
    /// For each physical dimension, its extent in every tensor of the column, or `None` where
    /// it varies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uniform_shape: Option<Vec<Option<i32>>>,
}

impl VariableShapeTensorMetadata {
    /// Parses the JSON metadata; an empty string is the metadata without keys.
    pub fn from_json(json: &str) -> Result<Self> {
        if json.trim().is_empty() {
            return Ok(Self::default());
        }
        serde_json::from_str(json).map_err(|error| Error::InvalidVariableShapeTensor {
            reason: format!(
                "metadata {json:?} does not parse ({error}); expected a JSON object such as \
                 {{\"permutation\":[1,0],\"uniform_shape\":[null,3]}} or {{}}"
            ),
        })
    }

    /// The JSON metadata, compact, absent keys omitted.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("serializing vectors of numbers and strings cannot fail")
    }
}
