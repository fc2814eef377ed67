//! Checks of the Arrow C Data Interface structs that a producer hands us, run before arrow-rs
//! reads them.
//!
//! arrow-rs imports `ArrowSchema` and `ArrowArray` trusting them: it dereferences `format`,
//! `buffers` and `children` without looking, indexes buffers by the count its data type expects,
//! and builds the `ArrayData` with validation skipped. A malformed struct therefore panics inside
//! arrow-rs, or reads memory that is not there. This module walks each struct first, field by
//! field and recursively, against the layout its format prescribes
//! (<https://arrow.apache.org/docs/format/CDataInterface.html>), and refuses a mismatch with an
//! error that names the field by its path (`ArrowArray.children[1].n_buffers`): an [`ArrowCError::Malformed`], or an
//! [`ArrowCError::Unsupported`] for a well-formed type this crate cannot import.
//!
//! What cannot be checked here is the memory behind the pointers: the interface carries no buffer
//! sizes, so a buffer shorter than its length says is the producer's lie that no consumer can see.
//! What can be checked after arrow-rs has built the `ArrayData` (child lengths, offsets, UTF-8,
//! dictionary keys) is checked by [`validate_imported`].
//!
//! | module | what it checks |
//! |---|---|
//! | `schema` | an `ArrowSchema`: release, format, name, metadata, children, dictionary |
//! | `array` | an `ArrowArray` against its data type: release, lengths, buffers, children, dictionary |
//! | `layout` | the buffers each data type has in C Data Interface order, and their sizes |

use arrow_data::ArrayData;

#[cfg(doc)]
use crate::ArrowCError;
use crate::error::invalid_values;
use arrow_schema::DataType;

mod array;
mod layout;
mod schema;
#[cfg(test)]
mod tests;

pub use array::check_array;
pub use schema::check_schema;

/// Nesting deeper than this is refused: it protects the recursion (and arrow-rs's) from a schema
/// whose children point back at their parent.
pub(super) const MAX_DEPTH: usize = 64;

pub(super) use crate::error::{Result, malformed};

/// The `n_children` child pointers at `children`, each checked to be non-NULL.
///
/// # Safety
///
/// `count` is not negative; a non-NULL `children` must be readable for `count` pointers.
pub(super) unsafe fn children<'a, T>(
    children: *const *const T,
    count: i64,
    path: &str,
) -> Result<&'a [*const T]> {
    if count == 0 {
        return Ok(&[]);
    }
    if children.is_null() {
        return Err(malformed(
            format!("{path}.children"),
            format!("is NULL but n_children is {count}"),
        ));
    }
    let count = usize::try_from(count).map_err(|_| {
        malformed(
            format!("{path}.n_children"),
            format!("is {count}, more than this platform can address"),
        )
    })?;
    // SAFETY: the caller guarantees `count` readable pointers at the non-NULL `children`.
    let pointers = unsafe { std::slice::from_raw_parts(children, count) };
    if let Some(index) = pointers.iter().position(|child| child.is_null()) {
        return Err(malformed(format!("{path}.children[{index}]"), "is NULL"));
    }
    Ok(pointers)
}

/// Validates what arrow-rs built from checked structs, where its layout makes values matter:
/// offsets, UTF-8, views, dictionary keys, union type ids and run ends are checked in full, while
/// fixed-width data (the DLPack case) costs nothing per element.
pub fn validate_imported(data: &ArrayData, path: &str) -> Result {
    let failed = |error: arrow_schema::ArrowError| invalid_values(path, error);
    data.validate().map_err(failed)?;
    let values_matter = matches!(
        data.data_type(),
        DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::Utf8View
            | DataType::BinaryView
            | DataType::List(_)
            | DataType::LargeList(_)
            | DataType::ListView(_)
            | DataType::LargeListView(_)
            | DataType::Map(..)
            | DataType::Union(..)
            | DataType::Dictionary(..)
            | DataType::RunEndEncoded(..)
    );
    if values_matter {
        data.validate_values().map_err(failed)?;
    }
    for (index, child) in data.child_data().iter().enumerate() {
        validate_imported(child, &format!("{path}.children[{index}]"))?;
    }
    Ok(())
}
