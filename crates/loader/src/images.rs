//! Encoded image columns in batches ([`BatchSpec::images`](crate::BatchSpec::images), feature
//! `images`): each named column is decoded, resized and cropped by `arrow_dlpack::images` into
//! the tensors `name` and `name_sizes` of every batch.
//!
//! This file holds what the spec names ([`ImageColumn`]) and where a unit's rows lie in its file
//! ([`Locate`], for messages, default roots and the keys of random crops); `assemble/images.rs`
//! decodes the rows of one batch on the loader's threads and keeps, with `on_error="skip"`, the
//! rows that became images.
//!
//! A row's random crop and flip are drawn from the spec's seed and a key made of the epoch, the
//! file (its index among the source's files) and the row's index among the file's rows: the
//! same on every run, whatever the threads, the shards, the shuffle or the batch that holds the
//! row. Rows of a stream or a reader, whose files are not known, are keyed by their unit (in the
//! order the shard reads its units) and their row in it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

#[cfg(feature = "images")]
use arrow_dlpack::images::ImageSpec;

/// A column of encoded images and what its images become: one entry of
/// [`BatchSpec::images`](crate::BatchSpec::images).
///
/// The column is `binary`, `large_binary`, `binary_view`, or a struct with a `bytes` field of
/// one of these and an optional `path` string field (Hugging Face's `Image` feature). A batch
/// holds its images as the tensor named after the column, `(B, C, H, W)` or `(B, H, W, C)` by
/// the spec's layout, and their sizes as decoded (height, width, after the EXIF orientation) as
/// the `(B, 2)` int32 tensor `"<column>_sizes"`.
///
/// Without the `images` feature no value of this type can be made, so that
/// [`BatchSpec::images`](crate::BatchSpec::images) is always empty.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageColumn {
    /// The column's name, which is also the name of its tensor in a batch.
    pub column: String,
    /// What its images become.
    #[cfg(feature = "images")]
    pub spec: ImageSpec,
    #[cfg(not(feature = "images"))]
    never: std::convert::Infallible,
}

// The floating-point fields of a spec are validated finite before use (`ImageSpec::validate`),
// so that equality is an equivalence on every spec a loader runs with.
impl Eq for ImageColumn {}

impl ImageColumn {
    /// The images of `column`, made as `spec` says.
    #[cfg(feature = "images")]
    pub fn new(column: impl Into<String>, spec: ImageSpec) -> Self {
        ImageColumn {
            column: column.into(),
            spec,
        }
    }

    /// The name of the sizes tensor: `"<column>_sizes"`.
    pub fn sizes_name(&self) -> String {
        format!("{}_sizes", self.column)
    }

    /// Whether rows that cannot become images are dropped (`on_error="skip"`).
    pub(crate) fn skips(&self) -> bool {
        #[cfg(feature = "images")]
        {
            self.spec.on_error == arrow_dlpack::images::OnError::Skip
        }
        #[cfg(not(feature = "images"))]
        match self.never {}
    }

    /// The spec in its serde form, as a saved state records it.
    pub(crate) fn spec_value(&self) -> serde_json::Value {
        #[cfg(feature = "images")]
        {
            serde_json::to_value(&self.spec).unwrap_or(serde_json::Value::Null)
        }
        #[cfg(not(feature = "images"))]
        match self.never {}
    }

    /// Checks the spec alone.
    pub(crate) fn validate(&self) -> crate::Result<()> {
        #[cfg(feature = "images")]
        {
            self.spec
                .validate()
                .map_err(|error| crate::Error::column(&self.column, error))
        }
        #[cfg(not(feature = "images"))]
        match self.never {}
    }
}

/// Where one row lies in its file: the file, its index among the source's files, and the row's
/// index among the file's rows.
#[cfg_attr(not(feature = "images"), allow(dead_code))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowPlace {
    pub(crate) name: Arc<Path>,
    pub(crate) file: u64,
    pub(crate) row: u64,
}

/// One item of a shard of files: its file, the index of its unit's first row among the file's
/// rows, and the unit's rows it holds (`None` for all).
#[cfg_attr(not(feature = "images"), allow(dead_code))]
#[derive(Debug, Clone)]
struct ItemFile {
    file: usize,
    first_row: u64,
    rows: Option<Vec<[u64; 2]>>,
}

/// Where the rows of a loader come from, besides their record batches: the place of each row in
/// its file (for a source of files), and the reader of the objects that image rows name by URL
/// (with object storage).
#[derive(Debug, Clone, Default)]
pub(crate) struct Origins {
    pub(crate) locate: Option<Locate>,
    #[cfg(all(feature = "images", feature = "object-store"))]
    pub(crate) urls: Option<Arc<crate::remote::UrlReader>>,
}

/// The place in its file of each row of a shard of files, by the shard's item and the row's
/// index among the item's rows.
#[cfg_attr(not(feature = "images"), allow(dead_code))]
#[derive(Debug, Clone)]
pub(crate) struct Locate {
    names: Vec<Arc<Path>>,
    items: std::collections::BTreeMap<u64, ItemFile>,
}

impl Locate {
    /// The files `paths`, each with the rows of its units in order (`unit_rows[file]`), and
    /// the shard's items: each its number, its unit as `(file, unit within the file)` and the
    /// unit's rows it holds.
    pub(crate) fn new(
        paths: &[PathBuf],
        unit_rows: &[Vec<u64>],
        items: impl IntoIterator<Item = (u64, (usize, usize), Option<Vec<[u64; 2]>>)>,
    ) -> Self {
        let names = paths.iter().map(|path| Arc::from(path.as_path())).collect();
        let items = items
            .into_iter()
            .map(|(k, (file, unit), rows)| {
                let first_row = unit_rows
                    .get(file)
                    .map_or(0, |rows| rows.iter().take(unit).sum::<u64>());
                (
                    k,
                    ItemFile {
                        file,
                        first_row,
                        rows,
                    },
                )
            })
            .collect();
        Locate { names, items }
    }

    /// Where row `row` (among the item's rows) of item `item` lies.
    pub(crate) fn place(&self, item: u64, row: u64) -> Option<RowPlace> {
        let found = self.items.get(&item)?;
        let mut within = row;
        let unit_row = match &found.rows {
            None => within,
            Some(ranges) => {
                let mut at = None;
                for &[start, end] in ranges {
                    let len = end.saturating_sub(start);
                    if within < len {
                        at = Some(start + within);
                        break;
                    }
                    within -= len;
                }
                at?
            }
        };
        Some(RowPlace {
            name: self.names.get(found.file)?.clone(),
            file: found.file as u64,
            row: found.first_row + unit_row,
        })
    }
}
