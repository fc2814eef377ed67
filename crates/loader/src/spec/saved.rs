//! What a saved [`LoaderState`](crate::LoaderState) records of a [`BatchSpec`]: the settings
//! that fix the batches, which a resumed loader must share with the one that saved the state.

use std::collections::BTreeMap;

use super::BatchSpec;

impl BatchSpec {
    /// The arguments of the spec that fix the batches, by name; `source` describes the source.
    pub(crate) fn state_config(&self, source: String) -> BTreeMap<String, String> {
        let mut config = BTreeMap::new();
        let mut put = |name: &str, value: String| {
            config.insert(name.to_string(), value);
        };
        put("source", source);
        put("batch_size", self.batch_size.to_string());
        put("drop_last", self.drop_last.to_string());
        put("columns", format!("{:?}", self.columns));
        put(
            "groups",
            format!(
                "{:?}",
                self.groups
                    .iter()
                    .map(|group| (&group.name, &group.columns))
                    .collect::<Vec<_>>()
            ),
        );
        put("masks", format!("{:?}", self.masks));
        put(
            "sequences",
            format!(
                "{:?}",
                self.sequences
                    .iter()
                    .map(|s| (
                        &s.column,
                        s.mode.as_str(),
                        s.max_length,
                        s.pad_to_multiple_of,
                        format!("{:?}", s.truncation_side)
                    ))
                    .collect::<Vec<_>>()
            ),
        );
        put("shuffle", self.shuffle.to_string());
        put("seed", self.seed.to_string());
        put("buffer_size", self.buffer_size.to_string());
        put("max_tokens", format!("{:?}", self.max_tokens));
        put("bucket_by_length", self.bucket_by_length.to_string());
        config
    }

    /// Whether the loader draws rows from windows (shuffled or sorted by length) rather than
    /// in order.
    pub(crate) fn windowed(&self) -> bool {
        self.shuffle || self.bucket_by_length
    }
}
