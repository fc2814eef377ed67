//! The checks of a [`BatchSpec`]: its fields alone ([`BatchSpec::validate`], before any work),
//! and against the columns of the source ([`BatchSpec::check_schema`], when the source's schema
//! is known); each error names the field or the column.

use std::collections::BTreeSet;

use arrow_schema::Schema;

use super::{BatchSpec, MAX_DECODE_THREADS, MAX_PREFETCH, OptionType, OptionValue};
use crate::images::ImageColumn;
use crate::sequences::{Sequence, SequenceMode};
use crate::{Error, Result};

impl BatchSpec {
    /// Checks the fields that do not depend on the source, as [`batches`](crate::batches) does
    /// before anything else; each error names the field.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSpec`] for a field out of its bounds (a batch size of 0, a prefetch depth
    /// beyond [`MAX_PREFETCH`], a shard index not below the number of shards, ...), padding
    /// options for a mode that does not pad, a token budget without sequences, or an output
    /// name claimed twice.
    pub fn validate(&self) -> Result<()> {
        // The options declared as counts of at least 1.
        for option in Self::OPTIONS {
            if option.option_type == OptionType::Count
                && self.option(option.name) == Some(OptionValue::Usize(0))
            {
                return invalid(format!("{} is 0; expected at least 1", option.name));
            }
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
        if self.cache_dir.as_deref() == Some("") {
            return invalid(
                "cache_dir is empty; expected a directory (None keeps nothing)".to_string(),
            );
        }
        if self.shard_index >= self.num_shards {
            return invalid(format!(
                "shard_index is {}; expected less than num_shards ({})",
                self.shard_index, self.num_shards
            ));
        }
        if self.num_ranks != 0 && !self.num_shards.is_multiple_of(self.num_ranks) {
            return invalid(format!(
                "num_ranks is {}; expected 0 or a divisor of num_shards ({})",
                self.num_ranks, self.num_shards
            ));
        }
        if let Some(group) = self.groups.iter().find(|group| group.columns.is_empty()) {
            return invalid(format!(
                "group {:?} has no columns; expected at least one",
                group.name
            ));
        }
        self.validate_sequences()?;
        self.validate_images()?;
        let Some(columns) = &self.columns else {
            // Every column is loaded: the names are claimed against the source's schema.
            return Ok(());
        };
        let mut claims = Claims::default();
        for column in columns {
            if self.sequence_of(column).is_none() && self.image_of(column).is_none() {
                claims.add(column, format!("column {column:?}"));
            }
        }
        for group in &self.groups {
            claims.add(&group.name, format!("group {:?}", group.name));
        }
        claims.add_masks(&self.masks);
        claims.add_sequences(&self.sequences, |_| true);
        claims.add_images(&self.images, |_| true);
        claims.check()
    }

    /// Checks `images` and `image_root`: each column once, not also a sequence or in a group,
    /// each spec valid, and rows skipped only where batches are cut in order by rows.
    fn validate_images(&self) -> Result<()> {
        for (index, image) in self.images.iter().enumerate() {
            let column = &image.column;
            if self.images[..index].iter().any(|i| &i.column == column) {
                return invalid(format!(
                    "images names column {column:?} twice; expected each column once"
                ));
            }
            if self.sequence_of(column).is_some() {
                return invalid(format!(
                    "column {column:?} is both an image column and a sequence; expected one"
                ));
            }
            if self
                .groups
                .iter()
                .any(|group| group.columns.contains(column))
            {
                return invalid(format!(
                    "image column {column:?} is also in a group; encoded images cannot be \
                     stacked into a group"
                ));
            }
            image.validate()?;
        }
        if self.image_root.as_deref() == Some("") {
            return invalid("image_root is empty; expected a directory or a prefix".to_string());
        }
        if let Some(root) = self
            .image_root
            .as_deref()
            .filter(|root| root.contains("://"))
        {
            check_image_root_url(root)?;
        }
        Ok(())
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
            if sequence.mode == SequenceMode::Concat {
                Self::validate_concat(sequence)?;
            } else if sequence.sets_concat() {
                return invalid(format!(
                    "sequence {column:?} is in mode {:?} and sets bos_token_id, eos_token_id or \
                     split_documents; they apply to mode \"concat\" only",
                    sequence.mode.as_str()
                ));
            } else if sequence.mode != SequenceMode::Pad && sequence.sets_padding() {
                return invalid(format!(
                    "sequence {column:?} is in mode {:?} and sets padding options; pad_value, \
                     pad_to_multiple_of and padding_side apply to mode \"pad\" only \
                     (max_length and truncation_side cut the rows of every mode)",
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
        // A plan keeps rows' lengths in 32 bits, a longer row as u32::MAX: a budget below it
        // holds no such row, whatever its true length.
        if let Some(budget) = self
            .max_tokens
            .filter(|&budget| budget as u64 >= u64::from(u32::MAX))
        {
            return invalid(format!(
                "max_tokens is {budget}; expected at most {} (a batch of 2^32 tokens or more \
                 is not planned)",
                u32::MAX - 1
            ));
        }
        if let Some(concat) = self.concat_sequence() {
            let column = &concat.column;
            let alone = [
                ("another sequence", self.sequences.len() > 1),
                ("groups", !self.groups.is_empty()),
                ("masks", !self.masks.is_empty()),
                (
                    "columns",
                    self.columns.as_ref().is_some_and(|c| !c.is_empty()),
                ),
                ("max_tokens", self.max_tokens.is_some()),
                ("bucket_by_length", self.bucket_by_length),
            ];
            if let Some((what, _)) = alone.iter().find(|(_, set)| *set) {
                return invalid(format!(
                    "sequence {column:?} is in mode \"concat\", whose rows mix documents, so \
                     it is the batch's only output; expected no {what} beside it"
                ));
            }
        }
        Ok(())
    }

    /// The sequence in mode [`SequenceMode::Concat`], if any.
    pub(crate) fn concat_sequence(&self) -> Option<&Sequence> {
        self.sequences
            .iter()
            .find(|s| s.mode == SequenceMode::Concat)
    }

    /// The options of a sequence in mode `"concat"`: `max_length` is required, and of the
    /// padding options only `pad_value` applies (to the padding of best-fit rows).
    fn validate_concat(sequence: &Sequence) -> Result<()> {
        let column = &sequence.column;
        if sequence.max_length.is_none() {
            return invalid(format!(
                "sequence {column:?} is in mode \"concat\" without max_length; expected the \
                 length of its rows"
            ));
        }
        for (field, id) in [
            ("bos_token_id", sequence.bos_token_id),
            ("eos_token_id", sequence.eos_token_id),
        ] {
            if let Some(id) = id.filter(|id| *id < 0) {
                return invalid(format!(
                    "{field} of sequence {column:?} is {id}; expected a token id, at least 0"
                ));
            }
        }
        let default = Sequence::new(column.clone(), SequenceMode::Concat);
        if sequence.pad_to_multiple_of.is_some()
            || sequence.padding_side != default.padding_side
            || sequence.truncation_side != default.truncation_side
        {
            return invalid(format!(
                "sequence {column:?} is in mode \"concat\" and sets pad_to_multiple_of, \
                 padding_side or truncation_side; its rows are exactly max_length tokens"
            ));
        }
        Ok(())
    }

    /// The sequence spec of `column`, if it is a sequence column.
    pub(crate) fn sequence_of(&self, column: &str) -> Option<&Sequence> {
        self.sequences.iter().find(|s| s.column == column)
    }

    /// The single columns of a source whose columns are `source`, in order: the spec's
    /// [`columns`](BatchSpec::columns), or every column not in a group when it is `None`.
    /// Sequence columns not among them are not added here.
    pub(crate) fn single_columns<'a>(&'a self, source: &[&'a str]) -> Vec<&'a str> {
        match &self.columns {
            Some(columns) => columns.iter().map(String::as_str).collect(),
            None => {
                let grouped: BTreeSet<&str> = self
                    .groups
                    .iter()
                    .flat_map(|group| group.columns.iter().map(String::as_str))
                    .collect();
                source
                    .iter()
                    .copied()
                    .filter(|name| !grouped.contains(name))
                    .collect()
            }
        }
    }

    /// Checks the spec against the columns of the source: every column the spec reads by name
    /// must be there once, and when every column is loaded, no output name may be claimed twice.
    pub(crate) fn check_schema(&self, schema: &Schema) -> Result<()> {
        let source_names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        // A name the source lacks is reported first, before the types of the columns that
        // `columns: None` loads: a misspelt image or sequence column is named as missing rather
        // than leaving its real column to be refused as every other column.
        let asked = self.columns.iter().flatten();
        let named_anywhere = asked
            .chain(self.groups.iter().flat_map(|group| &group.columns))
            .chain(self.sequences.iter().map(|s| &s.column))
            .chain(self.images.iter().map(|image| &image.column))
            .chain(self.masks.iter());
        for name in named_anywhere {
            if !source_names.contains(&name.as_str()) {
                return Err(Error::MissingColumn {
                    column: name.clone(),
                    available: source_names.iter().map(|s| s.to_string()).collect(),
                });
            }
        }
        let singles = self.single_columns(&source_names);
        let grouped = self.groups.iter().flat_map(|group| &group.columns);
        let sequences = self.sequences.iter().map(|s| &s.column);
        let images = self.images.iter().map(|image| &image.column);
        let masks = self.masks.iter();
        let named = grouped
            .chain(sequences)
            .chain(images)
            .chain(masks)
            .map(String::as_str);
        for name in singles.iter().copied().chain(named) {
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
        if self.columns.is_none() {
            let mut claims = Claims::default();
            for column in singles {
                claims.add(
                    column,
                    format!("column {column:?} (every column not in a group is loaded)"),
                );
            }
            for group in &self.groups {
                claims.add(&group.name, format!("group {:?}", group.name));
            }
            claims.add_masks(&self.masks);
            // A sequence column that is a source column claimed its name above.
            claims.add_sequences(&self.sequences, |column| !source_names.contains(&column));
            claims.add_images(&self.images, |column| !source_names.contains(&column));
            claims.check()?;
        }
        Ok(())
    }

    /// The number of Parquet decoding threads to start.
    pub(crate) fn decode_thread_count(&self) -> usize {
        if self.decode_threads > 0 {
            return self.decode_threads;
        }
        arrow_dlpack::available_cores().get().min(4)
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

    /// A sequence claims the names of the tensors its mode adds, and its own name where
    /// `own_name` says so (not where a source column already claimed it).
    fn add_sequences(&mut self, sequences: &[Sequence], own_name: impl Fn(&str) -> bool) {
        for sequence in sequences {
            let column = &sequence.column;
            let by = || format!("sequence {column:?} ({})", sequence.mode);
            if own_name(column) {
                self.add(column, by());
            }
            for suffix in sequence.mode.suffixes() {
                self.add(&format!("{column}{suffix}"), by());
            }
        }
    }

    /// An image column claims `"<column>_sizes"`, and its own name where `own_name` says so.
    fn add_images(&mut self, images: &[ImageColumn], own_name: impl Fn(&str) -> bool) {
        for image in images {
            let column = &image.column;
            let by = || format!("image column {column:?} (images)");
            if own_name(column) {
                self.add(column, by());
            }
            self.add(&image.sizes_name(), by());
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

/// Refuses an `image_root` URL that no row could be read under: an unknown scheme, a URL that
/// does not parse, a bucket or host missing, or (without the feature `object-store`) any URL,
/// so that an epoch of `on_error="skip"` does not come out empty.
fn check_image_root_url(root: &str) -> Result<()> {
    #[cfg(feature = "object-store")]
    {
        let shown = crate::remote::redacted_text(root);
        if !crate::remote::is_object_url(root) {
            return invalid(format!(
                "image_root is {shown:?}, not a URL of object storage; expected a directory, or \
                 a prefix under s3://, gs://, az://, abfs://, abfss://, http:// or https://"
            ));
        }
        match url::Url::parse(root) {
            Ok(url) if url.host_str().is_some_and(|host| !host.is_empty()) => Ok(()),
            Ok(_) => invalid(format!(
                "image_root is {shown:?}, which names no bucket, container or host"
            )),
            Err(error) => invalid(format!("image_root is {shown:?}, not a valid URL: {error}")),
        }
    }
    #[cfg(not(feature = "object-store"))]
    invalid(format!(
        "image_root is {root:?}, a URL; reading images from object storage needs the \
         object-store feature of arrow-dlpack-loader"
    ))
}
