//! What a saved state records of a loader: its [`Settings`], made from the spec, and its
//! source's identity, made from the files as they were planned (sizes, modification times or
//! ETags, footer digests) or from a stream's schema.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use arrow_schema::Schema;

use crate::digest;
use crate::file::PlannedFile;
use crate::ipc::{IpcFile, StreamInput};
use crate::parquet::ParquetFile;
#[cfg(feature = "object-store")]
use crate::remote::RemoteObject;
use crate::sequences::{Sequence, SequenceMode};
use crate::state::{FileIdentity, SequenceSettings, Settings, SourceIdentity, SourceKind};
use crate::{BatchSpec, Error, Result};

/// The settings of `spec` that fix the batches, over the source `source`.
pub(super) fn settings(spec: &BatchSpec, source: SourceIdentity) -> Settings {
    Settings {
        source,
        batch_size: spec.batch_size as u64,
        drop_last: spec.drop_last,
        columns: spec.columns.clone(),
        groups: spec
            .groups
            .iter()
            .map(|group| (group.name.clone(), group.columns.clone()))
            .collect(),
        masks: spec.masks.clone(),
        sequences: spec
            .sequences
            .iter()
            .map(|sequence| (sequence.column.clone(), sequence_settings(sequence)))
            .collect(),
        shuffle: spec.shuffle,
        seed: spec.seed,
        buffer_size: spec.buffer_size as u64,
        max_tokens: spec.max_tokens.map(|n| n as u64),
        bucket_by_length: spec.bucket_by_length,
        images: spec
            .images
            .iter()
            .map(|image| (image.column.clone(), image.spec_value()))
            .collect(),
    }
}

/// What a saved state records of `sequence`.
pub(crate) fn sequence_settings(sequence: &Sequence) -> SequenceSettings {
    let concat = sequence.mode == SequenceMode::Concat;
    SequenceSettings {
        mode: sequence.mode.as_str().to_string(),
        max_length: sequence.max_length.map(|n| n as u64),
        pad_to_multiple_of: sequence.pad_to_multiple_of.map(|n| n as u64),
        tokenizer: (sequence.tokenizer.as_ref()).map(|tokenizer| tokenizer.digest().to_string()),
        add_special_tokens: (sequence.tokenizer.as_ref())
            .map(|tokenizer| tokenizer.add_special_tokens),
        bos_token_id: sequence.bos_token_id,
        eos_token_id: sequence.eos_token_id,
        split_documents: concat.then_some(sequence.split_documents),
    }
}

/// Parquet files as planned.
pub(super) fn parquet_files(files: &[ParquetFile]) -> SourceIdentity {
    SourceIdentity {
        kind: SourceKind::ParquetFiles,
        files: files
            .iter()
            .map(|file| {
                #[cfg(feature = "object-store")]
                if let Some(object) = file.object() {
                    return of_object(object, Some(file.footer_digest()));
                }
                of_planned(file.planned(), file.path(), file.footer_digest())
            })
            .collect(),
        schema: None,
    }
}

/// IPC files as planned.
pub(super) fn ipc_files(files: &[IpcFile]) -> SourceIdentity {
    SourceIdentity {
        kind: SourceKind::IpcFiles,
        files: files
            .iter()
            .map(|file| {
                #[cfg(feature = "object-store")]
                if let Some(object) = file.object() {
                    return of_object(object, Some(file.footer_digest()));
                }
                of_planned(file.planned(), file.path(), file.footer_digest())
            })
            .collect(),
        schema: None,
    }
}

/// The identity of the local stream `path` of `size` bytes, modified at `modified`.
fn local_stream(path: &Path, size: u64, modified: Option<SystemTime>) -> FileIdentity {
    FileIdentity {
        name: file_name(path),
        size,
        modified_ns: modified.and_then(nanoseconds),
        e_tag: None,
        last_modified_ms: None,
        digest: None,
    }
}

/// IPC streams, in the order given, whose first stream has the schema `schema`: a local
/// stream's size and modification time are read here (streams are read by path later).
pub(super) fn ipc_streams(
    inputs: &[StreamInput],
    schema: Option<&Schema>,
) -> Result<SourceIdentity> {
    let files = inputs
        .iter()
        .map(|input| match input {
            StreamInput::Path(path) => {
                let metadata = std::fs::metadata(path).map_err(|error| Error::io(path, error))?;
                Ok(local_stream(path, metadata.len(), metadata.modified().ok()))
            }
            // As it was when its headers were read.
            StreamInput::Planned(planned) => Ok(local_stream(
                planned.path(),
                planned.size(),
                planned.modified(),
            )),
            #[cfg(feature = "object-store")]
            StreamInput::Remote(object) => Ok(of_object(object, None)),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(SourceIdentity {
        kind: SourceKind::IpcStreams,
        files,
        schema: schema.map(digest::of_schema),
    })
}

/// A reader of record batches with the schema `schema`.
pub(super) fn reader(schema: &Schema) -> SourceIdentity {
    SourceIdentity {
        kind: SourceKind::Reader,
        files: Vec::new(),
        schema: Some(digest::of_schema(schema)),
    }
}

/// A local file as planned (the path only when the plan is missing, which a local file always
/// has).
fn of_planned(planned: Option<&PlannedFile>, path: &Path, digest: &str) -> FileIdentity {
    FileIdentity {
        name: file_name(path),
        size: planned.map_or(0, PlannedFile::size),
        modified_ns: planned
            .and_then(PlannedFile::modified)
            .and_then(nanoseconds),
        e_tag: None,
        last_modified_ms: None,
        digest: Some(digest.to_string()),
    }
}

/// An object as planned: its URL (as the remote module names objects, its userinfo hidden), its
/// size, ETag and last-modified time.
#[cfg(feature = "object-store")]
fn of_object(object: &RemoteObject, digest: Option<&str>) -> FileIdentity {
    let name = object.name().to_string_lossy().into_owned();
    FileIdentity {
        name,
        size: object.size(),
        modified_ns: None,
        e_tag: object.e_tag().map(str::to_string),
        last_modified_ms: Some(object.last_modified_ms()),
        digest: digest.map(str::to_string),
    }
}

/// The name of a file without its folder: names are informative, and a folder may hold a user
/// name.
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |name| name.to_string_lossy().into_owned(),
    )
}

/// A time in nanoseconds since the Unix epoch (negative before it), when it fits in 64 bits.
fn nanoseconds(time: SystemTime) -> Option<i64> {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_nanos()).ok(),
        Err(before) => i64::try_from(before.duration().as_nanos())
            .ok()
            .map(|ns| -ns),
    }
}
