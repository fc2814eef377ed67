//! Digests that identify a source's data in a saved state without reading the data: the bytes
//! of a file's footer (a Parquet footer, an IPC file's footer with its schema and block table),
//! and an Arrow schema in a canonical encoding (for streams and readers, whose bytes cannot be
//! read twice).
//!
//! XXH3-128 (the `twox-hash` crate, already compiled for Parquet's bloom filters): a change of a
//! footer is found with certainty for any practical purpose; the digest is no defence against
//! someone who forges a file to collide with another, which a saved state does not need.

use arrow_schema::{DataType, Field, Schema};

/// The prefix of every digest, naming the function so that another one can follow.
const PREFIX: &str = "xxh3-128:";

/// The digest of `bytes`, as `xxh3-128:` and 32 hexadecimal digits.
pub(crate) fn of_bytes(bytes: &[u8]) -> String {
    format!("{PREFIX}{:032x}", twox_hash::XxHash3_128::oneshot(bytes))
}

/// The digest of `schema`: its fields (names, types, nullability, metadata, nested fields) and
/// metadata, in an encoding of this module's own whose maps are sorted, so that one schema has
/// one digest in every process (Arrow keeps metadata in hash maps, and its IPC encoding writes
/// them in the map's order).
pub(crate) fn of_schema(schema: &Schema) -> String {
    let mut out = Vec::new();
    put_metadata(&mut out, schema.metadata().iter());
    put_len(&mut out, schema.fields().len());
    for field in schema.fields() {
        put_field(&mut out, field);
    }
    of_bytes(&out)
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    out.extend_from_slice(&(len as u64).to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, text: &str) {
    put_len(out, text.len());
    out.extend_from_slice(text.as_bytes());
}

fn put_metadata<'a>(out: &mut Vec<u8>, entries: impl Iterator<Item = (&'a String, &'a String)>) {
    let mut entries: Vec<_> = entries.collect();
    entries.sort();
    put_len(out, entries.len());
    for (key, value) in entries {
        put_str(out, key);
        put_str(out, value);
    }
}

fn put_field(out: &mut Vec<u8>, field: &Field) {
    put_str(out, field.name());
    out.push(u8::from(field.is_nullable()));
    put_metadata(out, field.metadata().iter());
    put_type(out, field.data_type());
}

/// A type: nested types with their child fields (whose metadata the `Debug` text would print in
/// a hash map's order), every other type as its `Debug` text, which names the variant and its
/// parameters.
fn put_type(out: &mut Vec<u8>, data_type: &DataType) {
    match data_type {
        DataType::List(child)
        | DataType::LargeList(child)
        | DataType::ListView(child)
        | DataType::LargeListView(child) => {
            put_str(out, variant_name(data_type));
            put_field(out, child);
        }
        DataType::FixedSizeList(child, size) => {
            put_str(out, "FixedSizeList");
            out.extend_from_slice(&size.to_le_bytes());
            put_field(out, child);
        }
        DataType::Map(entries, sorted) => {
            put_str(out, "Map");
            out.push(u8::from(*sorted));
            put_field(out, entries);
        }
        DataType::Struct(fields) => {
            put_str(out, "Struct");
            put_len(out, fields.len());
            for field in fields {
                put_field(out, field);
            }
        }
        DataType::Union(fields, mode) => {
            put_str(out, &format!("Union({mode:?})"));
            put_len(out, fields.len());
            for (type_id, field) in fields.iter() {
                out.extend_from_slice(&type_id.to_le_bytes());
                put_field(out, field);
            }
        }
        DataType::Dictionary(key, value) => {
            put_str(out, "Dictionary");
            put_type(out, key);
            put_type(out, value);
        }
        DataType::RunEndEncoded(run_ends, values) => {
            put_str(out, "RunEndEncoded");
            put_field(out, run_ends);
            put_field(out, values);
        }
        other => put_str(out, &format!("{other:?}")),
    }
}

/// The name of a list type's variant.
fn variant_name(data_type: &DataType) -> &'static str {
    match data_type {
        DataType::LargeList(_) => "LargeList",
        DataType::ListView(_) => "ListView",
        DataType::LargeListView(_) => "LargeListView",
        _ => "List",
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use arrow_schema::{DataType, Field, Schema};

    use super::{of_bytes, of_schema};

    #[test]
    fn bytes_have_a_stable_named_digest() {
        let digest = of_bytes(b"PAR1");
        assert!(digest.starts_with("xxh3-128:"), "{digest}");
        assert_eq!(digest.len(), "xxh3-128:".len() + 32);
        assert_eq!(digest, of_bytes(b"PAR1"));
        assert_ne!(digest, of_bytes(b"PAR2"));
    }

    #[test]
    fn a_schema_digest_ignores_metadata_order_and_sees_every_other_change() {
        let metadata = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let item = |nested: HashMap<String, String>| {
            Arc::new(Field::new("item", DataType::Int32, true).with_metadata(nested))
        };
        let schema = |nested, top, nullable| {
            Schema::new(vec![
                Field::new("id", DataType::Int64, nullable),
                Field::new("tokens", DataType::List(item(nested)), true).with_metadata(top),
            ])
        };
        let many: Vec<(String, String)> =
            (0..32).map(|i| (format!("k{i}"), i.to_string())).collect();
        let forward: HashMap<String, String> = many.iter().cloned().collect();
        let backward: HashMap<String, String> = many.iter().rev().cloned().collect();
        let a = of_schema(&schema(forward.clone(), forward.clone(), false));
        assert_eq!(a, of_schema(&schema(backward.clone(), backward, false)));
        assert_ne!(
            a,
            of_schema(&schema(forward.clone(), forward.clone(), true))
        );
        assert_ne!(
            a,
            of_schema(&schema(metadata(&[("k0", "x")]), forward.clone(), false))
        );
        let renamed = Schema::new(vec![Field::new("ID", DataType::Int64, false)]);
        let retyped = Schema::new(vec![Field::new("ID", DataType::Int32, false)]);
        assert_ne!(of_schema(&renamed), of_schema(&retyped));
    }
}
