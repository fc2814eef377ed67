//! What a batch holds and how the stream is cut, shuffled and sharded: [`BatchSpec`].

use arrow_schema::Schema;

use crate::sequences::{Sequence, SequenceMode};
use crate::state::LoaderState;
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
/// the remainder kept, nulls refused, no shuffling, one shard, a prefetch depth of 2, views
/// handed out read-only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSpec {
    /// Rows per batch; every batch has exactly this many rows except possibly the last.
    ///
    /// Default: 1,024.
    pub batch_size: usize,
    /// Drop the last batch when it has fewer than `batch_size` rows; otherwise yield it short.
    ///
    /// Default: `false`.
    pub drop_last: bool,
    /// Columns that each become one tensor named after the column: primitive columns `(B,)`,
    /// fixed-size lists and `arrow.fixed_shape_tensor` columns `(B, *shape)`, booleans `(B,)` of
    /// dtype bool (a copy).
    /// When both `columns` and `groups` are empty, every column of the source is loaded.
    ///
    /// Default: empty.
    pub columns: Vec<String>,
    /// Column groups that each become one 2-D tensor.
    ///
    /// Default: empty.
    pub groups: Vec<ColumnGroup>,
    /// Columns whose validity is also given, as a bool tensor `(B,)` (1 = valid) in
    /// [`TensorBatch::mask`](crate::TensorBatch::mask).
    ///
    /// Default: empty.
    pub masks: Vec<String>,
    /// Accept nulls in single columns; the null slots then hold unspecified values (ask for a
    /// mask to know which).
    ///
    /// Default: `false`.
    pub allow_nulls: bool,
    /// Write nulls as NaN in groups and in primitive single columns; integer columns are then
    /// promoted to a float type, as PyArrow's `to_tensor(null_to_nan=True)` does.
    ///
    /// Default: `false`.
    pub null_to_nan: bool,
    /// Lay column groups out row-major (`(B, k)` with strides `(k, 1)`); otherwise column-major.
    ///
    /// Default: `true`.
    pub row_major: bool,
    /// Shuffle the order of files and row groups (record batches for IPC files), and the rows
    /// within windows of `buffer_size` rows.
    ///
    /// Default: `false`.
    pub shuffle: bool,
    /// The seed of the shuffle: the same seed gives the same order on every run.
    ///
    /// Default: 0.
    pub seed: u64,
    /// Rows shuffled together when `shuffle` is on; at least 1.
    ///
    /// Default: 65,536.
    pub buffer_size: usize,
    /// Which shard this loader reads, in `0..num_shards`.
    ///
    /// Default: 0.
    pub shard_index: usize,
    /// How many disjoint shards the source is split into (files and row groups dealt round-robin).
    ///
    /// Default: 1.
    pub num_shards: usize,
    /// Batches made ahead of the consumer (the bound of the channel between the threads), from 1
    /// to [`MAX_PREFETCH`].
    ///
    /// Default: 2.
    pub prefetch: usize,
    /// Threads decoding Parquet row groups in parallel, at most [`MAX_DECODE_THREADS`]; 0
    /// chooses the available parallelism, at most 4.
    ///
    /// Default: 0.
    pub decode_threads: usize,
    /// Hand out batches whose every tensor is private, writable memory: the zero-copy views of
    /// a batch (which share the source's memory, a caller's table or a memory-mapped file, and
    /// are flagged read-only) are copied as the batch is handed out.
    /// Consumers such as `torch.from_dlpack` ignore the read-only flag, so without this an
    /// in-place operation on a view rewrites the source.
    ///
    /// Default: `false`.
    pub writable: bool,
    /// Variable-length list columns (`list`, `large_list`) loaded as sequences, each padded,
    /// packed or jagged (see [`SequenceMode`]); a sequence column needs no entry in `columns`.
    /// A list column that is loaded and not named here is refused.
    ///
    /// Default: empty.
    pub sequences: Vec<Sequence>,
    /// Cut batches by tokens rather than rows: each batch takes whole rows, in order, while its
    /// largest sequence tensor holds at most this many tokens (values of the list columns):
    /// `B * L` for a padded `(B, L)` tensor, `N` for packed or jagged values `(N,)`.
    /// `batch_size` then bounds the rows of a batch; the row count varies, the number of
    /// batches is not known in advance, and a row that alone exceeds the budget (after
    /// truncation to `max_length`) is an error. Needs `sequences`. With `drop_last`, the last
    /// batch is dropped when the end of the data cut it short of the budget and of `batch_size`.
    ///
    /// Default: `None` (batches of `batch_size` rows).
    pub max_tokens: Option<usize>,
    /// Sort the rows of each window of `buffer_size` rows by length (the longest of their
    /// sequence columns) before cutting batches, so that a batch holds rows of similar length
    /// and pads little; with `shuffle`, the rows are shuffled before the sort (ties stay
    /// random) and the order of the window's batches is shuffled after it. Needs `sequences`.
    ///
    /// Default: `false`.
    pub bucket_by_length: bool,
    /// The epoch: with `shuffle`, epoch `e` is shuffled with the seed `seed + e` (modulo
    /// 2^64), so that one seed gives a new, reproducible order each epoch; recorded in the
    /// [`LoaderState`].
    ///
    /// Default: 0.
    pub epoch: u64,
    /// Continue from a saved position, as [`Batches::state`](crate::Batches::state) gave it:
    /// the batches that follow are those an uninterrupted run with the same source and spec
    /// gives after that point, batch for batch and byte for byte. A state saved with other
    /// arguments (source, batch size, columns, seed, epoch, shard, ...) is refused, naming what
    /// differs; a state made by [`merge_states`](crate::merge_states) resumes with any shard
    /// layout.
    ///
    /// Default: `None` (the start of the epoch).
    pub state: Option<LoaderState>,
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
            writable: false,
            sequences: Vec::new(),
            max_tokens: None,
            bucket_by_length: false,
            epoch: 0,
            state: None,
        }
    }
}

/// Builder methods: each sets one field and returns the spec, so that a spec reads as one
/// expression; the fields stay public, and `..BatchSpec::default()` works as well.
///
/// ```
/// use arrow_dlpack_loader::BatchSpec;
///
/// let spec = BatchSpec::new(256)
///     .columns(["label"])
///     .group("features", ["x0", "x1"])
///     .shuffle(7)
///     .drop_last(true);
/// assert_eq!(spec.batch_size, 256);
/// assert_eq!(spec.groups[0].columns, ["x0", "x1"]);
/// assert!(spec.shuffle && spec.seed == 7);
/// ```
impl BatchSpec {
    /// The default spec with batches of `batch_size` rows.
    pub fn new(batch_size: usize) -> Self {
        BatchSpec {
            batch_size,
            ..BatchSpec::default()
        }
    }

    /// Sets [`columns`](BatchSpec::columns), the single columns to load.
    pub fn columns<S: Into<String>>(mut self, columns: impl IntoIterator<Item = S>) -> Self {
        self.columns = columns.into_iter().map(Into::into).collect();
        self
    }

    /// Adds a [`ColumnGroup`] named `name` of `columns` to [`groups`](BatchSpec::groups).
    pub fn group<S: Into<String>>(
        mut self,
        name: impl Into<String>,
        columns: impl IntoIterator<Item = S>,
    ) -> Self {
        self.groups.push(ColumnGroup::new(name, columns));
        self
    }

    /// Sets [`masks`](BatchSpec::masks), the columns whose validity is also given.
    pub fn masks<S: Into<String>>(mut self, columns: impl IntoIterator<Item = S>) -> Self {
        self.masks = columns.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`drop_last`](BatchSpec::drop_last).
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Sets [`allow_nulls`](BatchSpec::allow_nulls).
    pub fn allow_nulls(mut self, allow_nulls: bool) -> Self {
        self.allow_nulls = allow_nulls;
        self
    }

    /// Sets [`null_to_nan`](BatchSpec::null_to_nan).
    pub fn null_to_nan(mut self, null_to_nan: bool) -> Self {
        self.null_to_nan = null_to_nan;
        self
    }

    /// Sets [`row_major`](BatchSpec::row_major).
    pub fn row_major(mut self, row_major: bool) -> Self {
        self.row_major = row_major;
        self
    }

    /// Turns [`shuffle`](BatchSpec::shuffle) on with [`seed`](BatchSpec::seed) `seed`.
    pub fn shuffle(mut self, seed: u64) -> Self {
        self.shuffle = true;
        self.seed = seed;
        self
    }

    /// Sets [`buffer_size`](BatchSpec::buffer_size), the rows shuffled together.
    pub fn buffer_size(mut self, buffer_size: usize) -> Self {
        self.buffer_size = buffer_size;
        self
    }

    /// Reads shard [`shard_index`](BatchSpec::shard_index) of
    /// [`num_shards`](BatchSpec::num_shards).
    pub fn shard(mut self, shard_index: usize, num_shards: usize) -> Self {
        self.shard_index = shard_index;
        self.num_shards = num_shards;
        self
    }

    /// Sets [`prefetch`](BatchSpec::prefetch).
    pub fn prefetch(mut self, prefetch: usize) -> Self {
        self.prefetch = prefetch;
        self
    }

    /// Sets [`decode_threads`](BatchSpec::decode_threads).
    pub fn decode_threads(mut self, decode_threads: usize) -> Self {
        self.decode_threads = decode_threads;
        self
    }

    /// Sets [`writable`](BatchSpec::writable).
    pub fn writable(mut self, writable: bool) -> Self {
        self.writable = writable;
        self
    }

    /// Adds `sequence` to [`sequences`](BatchSpec::sequences): a list column loaded as
    /// sequence tensors.
    pub fn sequence(mut self, sequence: Sequence) -> Self {
        self.sequences.push(sequence);
        self
    }

    /// Sets [`max_tokens`](BatchSpec::max_tokens): batches cut by tokens.
    pub fn max_tokens(mut self, max_tokens: usize) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Sets [`bucket_by_length`](BatchSpec::bucket_by_length).
    pub fn bucket_by_length(mut self, bucket_by_length: bool) -> Self {
        self.bucket_by_length = bucket_by_length;
        self
    }

    /// Sets [`epoch`](BatchSpec::epoch).
    pub fn epoch(mut self, epoch: u64) -> Self {
        self.epoch = epoch;
        self
    }

    /// Sets [`state`](BatchSpec::state): continue from a saved position.
    pub fn state(mut self, state: LoaderState) -> Self {
        self.state = Some(state);
        self
    }

    /// The seed of this epoch's shuffle: `seed + epoch`, modulo 2^64.
    pub(crate) fn epoch_seed(&self) -> u64 {
        self.seed.wrapping_add(self.epoch)
    }
}

/// The most batches [`BatchSpec::prefetch`] may hold ready: the channel reserves a slot per
/// batch up front, so an unbounded depth would reserve memory before the first batch.
pub const MAX_PREFETCH: usize = 1024;

/// The most Parquet decoding threads that [`BatchSpec`]`.decode_threads` may ask for: each holds a
/// decoded row group and an open file, and more threads than cores only add memory.
pub const MAX_DECODE_THREADS: usize = 64;

impl BatchSpec {
    /// Checks the fields that do not depend on the source; each error names the field.
    pub(crate) fn validate(&self) -> Result<()> {
        let at_least_one = [
            ("batch_size", self.batch_size),
            ("buffer_size", self.buffer_size),
            ("prefetch", self.prefetch),
            ("num_shards", self.num_shards),
        ];
        if let Some((field, _)) = at_least_one.iter().find(|(_, value)| *value == 0) {
            return invalid(format!("{field} is 0; expected at least 1"));
        }
        if self.prefetch > MAX_PREFETCH {
            return invalid(format!(
                "prefetch is {}; expected at most {MAX_PREFETCH}",
                self.prefetch
            ));
        }
        if self.decode_threads > MAX_DECODE_THREADS {
            return invalid(format!(
                "decode_threads is {}; expected at most {MAX_DECODE_THREADS} (0 chooses the \
                 available parallelism)",
                self.decode_threads
            ));
        }
        if self.shard_index >= self.num_shards {
            return invalid(format!(
                "shard_index is {}; expected less than num_shards ({})",
                self.shard_index, self.num_shards
            ));
        }
        if let Some(group) = self.groups.iter().find(|group| group.columns.is_empty()) {
            return invalid(format!(
                "group {:?} has no columns; expected at least one",
                group.name
            ));
        }
        self.validate_sequences()?;
        let mut claims = Claims::default();
        for column in &self.columns {
            if self.sequence_of(column).is_none() {
                claims.add(column, format!("column {column:?}"));
            }
        }
        for group in &self.groups {
            claims.add(&group.name, format!("group {:?}", group.name));
        }
        claims.add_masks(&self.masks);
        claims.add_sequences(&self.sequences, true);
        claims.check()
    }

    /// Checks `sequences`, `max_tokens` and `bucket_by_length`.
    fn validate_sequences(&self) -> Result<()> {
        for (index, sequence) in self.sequences.iter().enumerate() {
            let column = &sequence.column;
            if self.sequences[..index].iter().any(|s| &s.column == column) {
                return invalid(format!(
                    "sequences names column {column:?} twice; expected each column once"
                ));
            }
            if sequence.mode != SequenceMode::Pad && sequence.sets_padding() {
                return invalid(format!(
                    "sequence {column:?} is in mode {:?} and sets padding options; pad_value, \
                     max_length, pad_to_multiple_of, padding_side and truncation_side apply \
                     to mode \"pad\" only",
                    sequence.mode.as_str()
                ));
            }
            for (field, value) in [
                ("max_length", sequence.max_length),
                ("pad_to_multiple_of", sequence.pad_to_multiple_of),
            ] {
                if value == Some(0) {
                    return invalid(format!(
                        "{field} of sequence {column:?} is 0; expected at least 1"
                    ));
                }
            }
            if self
                .groups
                .iter()
                .any(|group| group.columns.contains(column))
            {
                return invalid(format!(
                    "sequence {column:?} is also in a group; a list column cannot be stacked \
                     into a group"
                ));
            }
        }
        let needs_sequences = [
            ("max_tokens", self.max_tokens.is_some()),
            ("bucket_by_length", self.bucket_by_length),
        ];
        for (field, set) in needs_sequences {
            if set && self.sequences.is_empty() {
                return invalid(format!(
                    "{field} counts the tokens of sequence columns, and sequences is empty; \
                     expected at least one list column in sequences"
                ));
            }
        }
        if self.max_tokens == Some(0) {
            return invalid("max_tokens is 0; expected at least 1".to_string());
        }
        Ok(())
    }

    /// The sequence spec of `column`, if it is a sequence column.
    pub(crate) fn sequence_of(&self, column: &str) -> Option<&Sequence> {
        self.sequences.iter().find(|s| s.column == column)
    }

    /// Checks the spec against the columns of the source: every column the spec reads by name
    /// must be there once, and when every column is loaded, no mask may take a column's name.
    pub(crate) fn check_schema(&self, schema: &Schema) -> Result<()> {
        let loads_all = self.columns.is_empty() && self.groups.is_empty();
        let source_names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        let mut read: Vec<&str> = if loads_all {
            source_names.clone()
        } else {
            let grouped = self.groups.iter().flat_map(|group| &group.columns);
            let sequences = self.sequences.iter().map(|s| &s.column);
            self.columns
                .iter()
                .chain(grouped)
                .chain(sequences)
                .map(String::as_str)
                .collect()
        };
        read.extend(self.masks.iter().map(String::as_str));
        for name in read {
            let count = source_names
                .iter()
                .filter(|&&source| source == name)
                .count();
            if count > 1 {
                return invalid(format!(
                    "the source has {count} columns named {name:?}; a column read by name must \
                     be unique, so rename the duplicates first"
                ));
            }
        }
        if loads_all {
            let mut claims = Claims::default();
            for column in source_names {
                claims.add(
                    column,
                    format!("column {column:?} (every column is loaded)"),
                );
            }
            claims.add_masks(&self.masks);
            claims.add_sequences(&self.sequences, false);
            claims.check()?;
        }
        Ok(())
    }

    /// The number of Parquet decoding threads to start.
    pub(crate) fn decode_thread_count(&self) -> usize {
        if self.decode_threads > 0 {
            return self.decode_threads;
        }
        std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
    }
}

fn invalid(reason: String) -> Result<()> {
    Err(Error::InvalidSpec { reason })
}

/// The names of a batch's tensors, each with what claims it, so that a name claimed twice is
/// refused with both claimants rather than one tensor silently replacing the other.
#[derive(Default)]
struct Claims {
    names: Vec<(String, String)>,
}

impl Claims {
    fn add(&mut self, name: &str, by: String) {
        self.names.push((name.to_string(), by));
    }

    /// A mask is the tensor `"<column>_mask"`.
    fn add_masks(&mut self, masks: &[String]) {
        for column in masks {
            self.add(
                &format!("{column}_mask"),
                format!("the mask of {column:?} (masks)"),
            );
        }
    }

    /// A sequence claims its own name (unless a source column already did, when every column
    /// is loaded) and those of the tensors its mode adds.
    fn add_sequences(&mut self, sequences: &[Sequence], own_name: bool) {
        for sequence in sequences {
            let column = &sequence.column;
            let by = || format!("sequence {column:?} ({})", sequence.mode);
            if own_name {
                self.add(column, by());
            }
            for suffix in sequence.mode.suffixes() {
                self.add(&format!("{column}{suffix}"), by());
            }
        }
    }

    fn check(mut self) -> Result<()> {
        // A stable sort keeps the claims of one name in the order they were made.
        self.names.sort_by(|a, b| a.0.cmp(&b.0));
        match self.names.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            Some(pair) => invalid(format!(
                "the output name {:?} is claimed twice, by {} and by {}; expected each column, \
                 group and mask name once",
                pair[0].0, pair[0].1, pair[1].1
            )),
            None => Ok(()),
        }
    }
}
