//! What a batch holds and how the stream is cut, shuffled and sharded: [`BatchSpec`].

use crate::{Error, Result};

/// Named numeric columns that become one 2-D tensor of shape `(B, k)`.
///
/// The columns are copied in one pass with PyArrow's type promotion (see
/// [`arrow_dlpack::columns_to_tensor`]), so a group of float32 and int16 columns gives float32.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnGroup {
    /// The name of the tensor in the [`TensorBatch`](crate::TensorBatch).
    pub name: String,
    /// The columns, in the order of the tensor's second dimension.
    pub columns: Vec<String>,
}

impl ColumnGroup {
    /// A group named `name` of `columns`.
    pub fn new<S: Into<String>>(
        name: impl Into<String>,
        columns: impl IntoIterator<Item = S>,
    ) -> Self {
        ColumnGroup {
            name: name.into(),
            columns: columns.into_iter().map(Into::into).collect(),
        }
    }
}

/// What each batch holds and how the source is cut into batches.
///
/// Every field has a default ([`BatchSpec::default`]): batches of 1,024 rows of every column,
/// the remainder kept, nulls refused, no shuffling, one shard, a prefetch depth of 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSpec {
    /// Rows per batch; every batch has exactly this many rows except possibly the last.
    pub batch_size: usize,
    /// Drop the last batch when it has fewer than `batch_size` rows; otherwise yield it short.
    pub drop_last: bool,
    /// Columns that each become one tensor named after the column: primitive columns `(B,)`,
    /// fixed-size lists and `arrow.fixed_shape_tensor` columns `(B, *shape)`, booleans `(B,)` of
    /// dtype bool (a copy).
    /// When both `columns` and `groups` are empty, every column of the source is loaded.
    pub columns: Vec<String>,
    /// Column groups that each become one 2-D tensor.
    pub groups: Vec<ColumnGroup>,
    /// Columns whose validity is also given, as a bool tensor `(B,)` (1 = valid) in
    /// [`TensorBatch::mask`](crate::TensorBatch::mask).
    pub masks: Vec<String>,
    /// Accept nulls in single columns; the null slots then hold unspecified values (ask for a
    /// mask to know which).
    pub allow_nulls: bool,
    /// Write nulls as NaN in groups and in primitive single columns; integer columns are then
    /// promoted to a float type, as PyArrow's `to_tensor(null_to_nan=True)` does.
    pub null_to_nan: bool,
    /// Lay column groups out row-major (`(B, k)` with strides `(k, 1)`); otherwise column-major.
    pub row_major: bool,
    /// Shuffle the order of files and row groups (record batches for IPC files), and the rows
    /// within windows of `buffer_size` rows.
    pub shuffle: bool,
    /// The seed of the shuffle: the same seed gives the same order on every run.
    pub seed: u64,
    /// Rows shuffled together when `shuffle` is on.
    pub buffer_size: usize,
    /// Which shard this loader reads, in `0..num_shards`.
    pub shard_index: usize,
    /// How many disjoint shards the source is split into (files and row groups dealt round-robin).
    pub num_shards: usize,
    /// Batches made ahead of the consumer (the bound of the channel between the threads).
    pub prefetch: usize,
    /// Threads decoding Parquet row groups in parallel; 0 chooses the available parallelism,
    /// at most 4.
    pub decode_threads: usize,
}

impl Default for BatchSpec {
    fn default() -> Self {
        BatchSpec {
            batch_size: 1024,
            drop_last: false,
            columns: Vec::new(),
            groups: Vec::new(),
            masks: Vec::new(),
            allow_nulls: false,
            null_to_nan: false,
            row_major: true,
            shuffle: false,
            seed: 0,
            buffer_size: 65_536,
            shard_index: 0,
            num_shards: 1,
            prefetch: 2,
            decode_threads: 0,
        }
    }
}

impl BatchSpec {
    /// Checks the fields that do not depend on the source.
    pub(crate) fn validate(&self) -> Result<()> {
        let invalid = |reason: String| Err(Error::InvalidSpec { reason });
        if self.batch_size == 0 {
            return invalid("batch_size is 0; expected at least 1".to_string());
        }
        if self.num_shards == 0 {
            return invalid("num_shards is 0; expected at least 1".to_string());
        }
        if self.shard_index >= self.num_shards {
            return invalid(format!(
                "shard_index is {}; expected less than num_shards ({})",
                self.shard_index, self.num_shards
            ));
        }
        if self.shuffle && self.buffer_size == 0 {
            return invalid("buffer_size is 0 with shuffle on; expected at least 1".to_string());
        }
        let mut names: Vec<&str> = self.columns.iter().map(String::as_str).collect();
        for group in &self.groups {
            if group.columns.is_empty() {
                return invalid(format!(
                    "group {:?} has no columns; expected at least one",
                    group.name
                ));
            }
            names.push(&group.name);
        }
        names.sort_unstable();
        if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
            return invalid(format!(
                "output name {:?} is given twice; expected each column and group name once",
                pair[0]
            ));
        }
        Ok(())
    }

    /// The number of Parquet decoding threads to start.
    pub(crate) fn decode_threads(&self) -> usize {
        if self.decode_threads > 0 {
            return self.decode_threads;
        }
        std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
    }
}
