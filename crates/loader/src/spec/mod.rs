//! What a batch holds and how the stream is cut, shuffled and sharded: [`BatchSpec`], whose
//! every field is an option declared once (`options.rs`: [`BatchSpec::OPTIONS`]).
//!
//! `mod.rs` is the API: the struct (declared through `options.rs`'s `batch_spec!`, which also
//! writes its `Default` and the table of options) and its builder methods; `validate.rs` checks
//! a spec alone and against a schema; `saved.rs` is what a saved state records of it.

use arrow_dlpack_tensor::DType;

use crate::images::ImageColumn;
use crate::sequences::Sequence;
use crate::sequences::plan::row_batches;
use crate::sequences::tokens::Cutting;
use crate::state::LoaderState;

mod nulls;
mod options;
mod validate;

pub use nulls::NullToNan;
pub use options::{OptionDecl, OptionScope, OptionType, OptionValue};
/// Named numeric or boolean columns that become one 2-D tensor of shape `(B, k)`.
///
/// The columns are copied in one pass with PyArrow's type promotion (see
/// [`arrow_dlpack::columns_to_tensor`]), so a group of float32 and int16 columns gives float32,
/// unless the group names its [`dtype`](ColumnGroup::dtype); booleans are 0 and 1 of that dtype
/// (a group of booleans alone is bool).
///
/// ```
/// use arrow_dlpack_loader::{ColumnGroup, DType};
///
/// // float32 features beside int64 counts: float32, where promotion would give float64.
/// let group = ColumnGroup::new("x", ["f0", "f1", "count"]).dtype(DType::Float32);
/// assert_eq!(group.dtype, Some(DType::Float32));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnGroup {
    /// The name of the tensor in the [`TensorBatch`](crate::TensorBatch).
    pub name: String,
    /// The columns, in the order of the tensor's second dimension.
    pub columns: Vec<String>,
    /// The tensor's dtype, each value converted as a Rust `as` cast does; `None` for the
    /// promotion of the columns' types (see
    /// [`TableToTensorOptions::dtype`](arrow_dlpack::TableToTensorOptions::dtype)).
    pub dtype: Option<DType>,
}

impl ColumnGroup {
    /// A group named `name` of `columns`, of the promotion of their types.
    pub fn new<S: Into<String>>(
        name: impl Into<String>,
        columns: impl IntoIterator<Item = S>,
    ) -> Self {
        ColumnGroup {
            name: name.into(),
            columns: columns.into_iter().map(Into::into).collect(),
            dtype: None,
        }
    }

    /// This group with the tensor's dtype `dtype`.
    pub fn dtype(self, dtype: DType) -> Self {
        ColumnGroup {
            dtype: Some(dtype),
            ..self
        }
    }
}

options::batch_spec! {
    /// What each batch holds and how the source is cut into batches.
    ///
    /// Every field has a default ([`BatchSpec::default`]): batches of 1,024 rows of every column,
    /// the remainder kept, nulls refused, no shuffling, one shard, a prefetch depth of 2, views
    /// handed out read-only.
    /// Every field is an option, listed with its type and default in [`BatchSpec::OPTIONS`] and
    /// read and written by name with [`BatchSpec::option`] and [`BatchSpec::set_option`]: a
    /// binding takes the options from there (the Python package's keyword arguments are these
    /// fields).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct BatchSpec {
        /// Rows per batch: every batch has exactly this many rows except possibly the last.
        #[option(Count, Stream, default = 1024)]
        pub batch_size: usize,
        /// Drop the last batch when it has fewer than `batch_size` rows; otherwise yield it short.
        #[option(Bool, Stream, default = false)]
        pub drop_last: bool,
        /// The single columns, each loaded as one tensor named after it.
        ///
        /// Primitive columns give `(B,)`, fixed-size lists and `arrow.fixed_shape_tensor`
        /// columns `(B, *shape)`, booleans `(B,)` of dtype bool (a copy).
        /// `None` loads every column of the source that no group names (a column named in
        /// [`sequences`](BatchSpec::sequences) as its sequence); `Some(vec![])` loads no single
        /// column, only what `groups`, `masks` and `sequences` name. A sequence column needs no
        /// entry here.
        #[option(Columns, Batch, default = None)]
        pub columns: Option<Vec<String>>,
        /// Column groups that each become one 2-D tensor (of its own dtype, if it names one).
        #[option(Groups, Batch, default = Vec::new())]
        pub groups: Vec<ColumnGroup>,
        /// Columns whose validity is also given, as a bool tensor `(B,)` (1 = valid).
        ///
        /// A batch holds it as [`TensorBatch::mask`](crate::TensorBatch::mask) (in Python, the
        /// tensor `"<column>_mask"`).
        #[option(Names, Batch, default = Vec::new())]
        pub masks: Vec<String>,
        /// Accept nulls in single columns and sequences.
        ///
        /// The null slots of a single column then hold unspecified values (ask for a mask to
        /// know which); a null row of a sequence is an empty row.
        #[option(Bool, Batch, default = false)]
        pub allow_nulls: bool,
        /// Write nulls as NaN where nulls may be, or in the named columns and groups.
        ///
        /// See [`NullToNan`]: a float column keeps its dtype; an integer column is promoted to
        /// a float type only where the source's metadata says it may hold nulls
        /// ([`NullToNan::Auto`], `true`), or where it is named ([`NullToNan::Columns`]); a
        /// column's dtype is fixed when the loader is planned, the same in every batch.
        #[option(NullToNan, Batch, default = NullToNan::Off)]
        pub null_to_nan: NullToNan,
        /// Lay column groups out row-major, `(B, k)` with strides `(k, 1)`; else column-major.
        #[option(Bool, Batch, default = true)]
        pub row_major: bool,
        /// Shuffle the order of the units and the rows within windows of `buffer_size` rows.
        ///
        /// The units are files and row groups (record batches for IPC files).
        #[option(Bool, Stream, default = false)]
        pub shuffle: bool,
        /// The seed of the shuffle: the same seed gives the same order on every run.
        #[option(Seed, Stream, default = 0)]
        pub seed: u64,
        /// Rows shuffled together when `shuffle` is on; at least 1.
        #[option(Count, Stream, default = 65_536)]
        pub buffer_size: usize,
        /// Which shard this loader reads, in `0..num_shards`.
        #[option(Usize, Stream, default = 0)]
        pub shard_index: usize,
        /// How many disjoint shards the source is split into.
        ///
        /// Files and row groups are dealt to the shards round-robin.
        #[option(Count, Stream, default = 1)]
        pub num_shards: usize,
        /// The ranks of a distributed run among the shards; 0 for one rank per shard.
        ///
        /// Shard `s` is rank `s % num_ranks`'s, its other shards being the rank's DataLoader
        /// workers (as the Python binding numbers them).
        ///
        /// A distributed run waits at every collective for its slowest rank, so its ranks must
        /// get as many batches each: when a deal of whole units would give them different
        /// counts, the epoch is planned by rows. A rank's own shards need not be even.
        #[option(Usize, Stream, default = 0)]
        pub num_ranks: usize,
        /// Batches made ahead of the consumer, from 1 to [`MAX_PREFETCH`].
        ///
        /// It is the bound of the channel between the threads.
        #[option(Count, Stream, default = 2)]
        pub prefetch: usize,
        /// Threads decoding Parquet row groups in parallel, at most [`MAX_DECODE_THREADS`].
        ///
        /// 0 chooses the available parallelism, at most 4. With [`images`](BatchSpec::images),
        /// as many threads decode the images of each batch.
        #[option(Usize, Stream, default = 0)]
        pub decode_threads: usize,
        /// A directory on local disk that keeps the byte ranges fetched from object storage.
        ///
        /// (Feature `object-store`.) The next loader with the same `cache_dir` (a later epoch,
        /// another rank or DataLoader worker on the machine) reads them from there instead of
        /// the network. Entries are keyed by the object's URL, size, ETag and last-modified
        /// time and the range, so that a replaced object is fetched again; each is checked
        /// against its checksum when read, written atomically, and the least recently used
        /// go when the cache passes [`cache_size`](BatchSpec::cache_size). Local sources read
        /// their files directly and ignore it, but for image rows that name URLs (with
        /// [`images`](BatchSpec::images)), which are kept whole and asked for again with
        /// `If-None-Match`. `None` keeps nothing.
        #[option(OptionalText, Stream, default = None)]
        pub cache_dir: Option<String>,
        /// The most bytes the cache of [`cache_dir`](BatchSpec::cache_dir) holds (10 GiB).
        #[option(Count, Stream, default = 10 << 30)]
        pub cache_size: usize,
        /// Hand out batches whose every tensor is private, writable memory.
        ///
        /// The zero-copy views of a batch (which share the source's memory, a caller's table
        /// or a memory-mapped file, and are flagged read-only) are copied as the batch is handed
        /// out. Consumers such as `torch.from_dlpack` ignore the read-only flag, so without this
        /// an in-place operation on a view rewrites the source.
        #[option(Bool, Batch, default = false)]
        pub writable: bool,
        /// Variable-length list columns loaded as sequences, each padded, packed or jagged.
        ///
        /// Each entry names a `list` or `large_list` column and its
        /// [`SequenceMode`](crate::SequenceMode); a sequence column needs no entry in `columns`.
        /// A list column that is loaded and not named here is refused.
        #[option(Sequences, Batch, default = Vec::new())]
        pub sequences: Vec<Sequence>,
        /// Columns of encoded images, each decoded, resized and cropped by its spec.
        ///
        /// (Feature `images`.) Each entry names a `binary`, `large_binary` or `binary_view`
        /// column, or a struct with a `bytes` field of one of these and an optional `path`
        /// string field (Hugging Face's `Image`), and its `ImageSpec`: a batch holds the images
        /// as the tensor named after the column and their sizes as decoded as
        /// `"<column>_sizes"` ([`ImageColumn`]); an image column needs no entry in `columns`.
        /// The rows of a batch are decoded on [`decode_threads`](BatchSpec::decode_threads)
        /// threads while the consumer works on earlier batches. With `on_error = Skip`, a row
        /// that is not an image is dropped: read in order by one rank, its batch is filled from
        /// the rows that follow (so the number of batches is not known in advance); shuffled,
        /// cut by a budget or buckets, or over several ranks, the batch loses the row (it may
        /// come out short, or empty), so that the batches are those cut in advance, as many on
        /// every rank.
        #[option(Images, Batch, default = Vec::new())]
        pub images: Vec<ImageColumn>,
        /// Where relative paths of image rows are read from: a directory or a prefix.
        ///
        /// `None` reads them from the directory of the row's file. A relative path of a stream
        /// or a reader, without a root, is an error naming the row. A path that is or resolves
        /// to a URL of object storage is read whole from its store (with the feature
        /// `object-store`): with the source's storage options when the source is in object
        /// storage, else with the environment's.
        #[option(OptionalText, Batch, default = None)]
        pub image_root: Option<String>,
        /// Cut batches by tokens rather than rows, at most this many tokens a batch.
        ///
        /// Each batch takes whole rows, in order, while its largest sequence tensor holds at
        /// most this many tokens (values of the list columns): `B * L` for a padded `(B, L)`
        /// tensor, `N` for packed or jagged values `(N,)`.
        /// `batch_size` then bounds the rows of a batch; the row count varies, the number of
        /// batches is not known in advance (unless the epoch is planned: over several shards of
        /// files, every shard gets as many batches, cut from the rows' lengths read first), and
        /// a row that alone exceeds the budget (after truncation to `max_length`) is an error.
        /// Needs `sequences`. With `drop_last`, the last batch is dropped when the end of the
        /// data cut it short of the budget and of `batch_size`.
        #[option(OptionalUsize, Stream, default = None)]
        pub max_tokens: Option<usize>,
        /// Sort the rows of each window of `buffer_size` rows by length before cutting batches.
        ///
        /// The length of a row is the longest of its sequence columns, so that a batch holds
        /// rows of similar length and pads little; with `shuffle`, the rows are shuffled before
        /// the sort (ties stay random) and the order of the window's batches is shuffled after
        /// it. Needs `sequences`. Over several shards of files the epoch is planned, as with
        /// `max_tokens`, so that every shard gets as many batches.
        #[option(Bool, Stream, default = false)]
        pub bucket_by_length: bool,
        /// The epoch: with `shuffle`, epoch `e` is shuffled with the seed `seed + e`.
        ///
        /// The sum is taken modulo 2^64, so that one seed gives a new, reproducible order each
        /// epoch; the epoch is recorded in the [`LoaderState`].
        #[option(U64, Stream, default = 0)]
        pub epoch: u64,
        /// Continue from a saved position, as [`Batches::state`](crate::Batches::state) gave it.
        ///
        /// The batches that follow are those an uninterrupted run with the same source and spec
        /// gives after that point, batch for batch and byte for byte. A state saved with other
        /// arguments (source, batch size, columns, seed, epoch, shard, ...) is refused, naming
        /// what differs; a state made by [`merge_states`](crate::merge_states) resumes with any
        /// shard layout. `None` starts at the start of the epoch.
        #[option(State, Stream, default = None)]
        pub state: Option<LoaderState>,
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

    /// Sets [`columns`](BatchSpec::columns), the single columns to load (an empty list loads
    /// none: only what groups, masks and sequences name).
    pub fn columns<S: Into<String>>(mut self, columns: impl IntoIterator<Item = S>) -> Self {
        self.columns = Some(columns.into_iter().map(Into::into).collect());
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

    /// Sets [`null_to_nan`](BatchSpec::null_to_nan): `true` ([`NullToNan::Auto`]), `false`, or
    /// a [`NullToNan`].
    pub fn null_to_nan(mut self, null_to_nan: impl Into<NullToNan>) -> Self {
        self.null_to_nan = null_to_nan.into();
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

    /// Sets [`num_ranks`](BatchSpec::num_ranks): the ranks of a distributed run among the
    /// shards, between which the batch counts must be even.
    pub fn num_ranks(mut self, num_ranks: usize) -> Self {
        self.num_ranks = num_ranks;
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

    /// Adds the image column `column`, decoded as `spec` says, to
    /// [`images`](BatchSpec::images) (feature `images`).
    ///
    /// ```
    /// use arrow_dlpack_loader::{BatchSpec, ImageSize, ImageSpec};
    ///
    /// let spec = BatchSpec::new(64)
    ///     .columns(["label"])
    ///     .image("image", ImageSpec::new(ImageSize::square(224)).resize(256));
    /// assert_eq!(spec.images[0].column, "image");
    /// assert_eq!(spec.images[0].sizes_name(), "image_sizes");
    /// ```
    #[cfg(feature = "images")]
    pub fn image(
        mut self,
        column: impl Into<String>,
        spec: arrow_dlpack::images::ImageSpec,
    ) -> Self {
        self.images.push(ImageColumn::new(column, spec));
        self
    }

    /// Sets [`image_root`](BatchSpec::image_root), where relative image paths are read from.
    pub fn image_root(mut self, root: impl Into<String>) -> Self {
        self.image_root = Some(root.into());
        self
    }

    /// The image spec of `column`, if it is an image column.
    pub(crate) fn image_of(&self, column: &str) -> Option<&ImageColumn> {
        self.images.iter().find(|image| image.column == column)
    }

    /// Whether a row that is not an image is dropped.
    pub(crate) fn skips_images(&self) -> bool {
        self.images.iter().any(ImageColumn::skips)
    }

    /// Whether a batch whose rows were skipped is filled from the rows that follow: where its
    /// batches are cut in order by rows for one rank. Elsewhere (a shuffle's windows, a token
    /// budget, length buckets, several ranks) a batch loses its skipped rows, so that the
    /// batches stay those cut in advance, as many on every rank, and resume exactly.
    pub(crate) fn fills_skipped_images(&self) -> bool {
        self.skips_images()
            && !self.shuffle
            && self.max_tokens.is_none()
            && !self.bucket_by_length
            && self.ranks() <= 1
    }

    /// The ranks of a distributed run among the shards: [`num_ranks`](BatchSpec::num_ranks),
    /// or one per shard when it is 0.
    pub(crate) fn ranks(&self) -> usize {
        match self.num_ranks {
            0 => self.num_shards,
            ranks => ranks,
        }
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

    /// How batches are cut: by rows, or by tokens.
    pub(crate) fn cutting(&self) -> Cutting {
        Cutting {
            max_tokens: self.max_tokens,
            batch_size: self.batch_size,
            bucket_by_length: self.bucket_by_length,
        }
    }

    /// The seed of this epoch's shuffle: `seed + epoch`, modulo 2^64.
    pub(crate) fn epoch_seed(&self) -> u64 {
        self.seed.wrapping_add(self.epoch)
    }

    /// The number of batches that `rows` rows give: `rows / batch_size`, rounded up unless
    /// [`drop_last`](BatchSpec::drop_last); `None` when batches are cut by tokens
    /// ([`max_tokens`](BatchSpec::max_tokens)), packed from documents (a sequence in mode
    /// `"concat"`), or batches whose rows that are not images were skipped are filled from the
    /// rows that follow ([`images`](BatchSpec::images) with `on_error = Skip`, read in order
    /// by one rank), whose count only the data tells.
    ///
    /// ```
    /// use arrow_dlpack_loader::BatchSpec;
    ///
    /// assert_eq!(BatchSpec::new(4).batches_for(10), Some(3));
    /// assert_eq!(BatchSpec::new(4).drop_last(true).batches_for(10), Some(2));
    /// ```
    pub fn batches_for(&self, rows: u64) -> Option<usize> {
        if self.max_tokens.is_some()
            || self.concat_sequence().is_some()
            || self.fills_skipped_images()
        {
            return None;
        }
        Some(row_batches(rows, self.batch_size, self.drop_last))
    }

    /// The rows a loader of this spec yields from a stream (a reader) of `total` rows, where
    /// the total alone tells: with one shard (several share the stream's record batches out
    /// by count, not by rows) and no saved [`state`](BatchSpec::state) to resume from.
    pub fn rows_of_stream(&self, total: u64) -> Option<u64> {
        (self.num_shards == 1 && self.state.is_none()).then_some(total)
    }
}

/// The most batches [`BatchSpec::prefetch`] may hold ready: the channel reserves a slot per
/// batch up front, so an unbounded depth would reserve memory before the first batch.
pub const MAX_PREFETCH: usize = 1024;

/// The most Parquet decoding threads that [`BatchSpec`]`.decode_threads` may ask for: each holds a
/// decoded row group and an open file, and more threads than cores only add memory.
pub const MAX_DECODE_THREADS: usize = 64;
