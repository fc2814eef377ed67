//! What an object read whole by URL (an image row's) was when its bytes were kept in the
//! loader's cache: a fixed-size record of its size, last-modified time and strong ETag, kept
//! under its URL, by which the next read asks the store whether it changed (`If-None-Match`) and
//! finds the kept bytes.

use super::cache::CacheKey;

/// What an object read whole was when its bytes were kept: its size, last-modified time and
/// strong ETag, kept as a record of [`RECORD_BYTES`] bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Kept {
    pub(super) size: u64,
    pub(super) last_modified_ms: i64,
    pub(super) e_tag: String,
}

/// The longest ETag a record keeps (S3's are about 34 bytes; an object whose ETag is longer is
/// read every time, not kept).
const RECORD_E_TAG_BYTES: usize = 256;

/// The bytes of a record: the size and the time (8 bytes each), the ETag's length (2) and the
/// ETag, padded with zeros.
pub(super) const RECORD_BYTES: u64 = (8 + 8 + 2 + RECORD_E_TAG_BYTES) as u64;

impl Kept {
    /// What `meta` says, when its ETag is a strong one that a record holds.
    pub(super) fn of(meta: &object_store::ObjectMeta) -> Option<Kept> {
        let e_tag = meta.e_tag.clone()?;
        let usable = meta.size > 0 && is_strong_e_tag(&e_tag);
        usable.then(|| Kept {
            size: meta.size,
            last_modified_ms: meta.last_modified.timestamp_millis(),
            e_tag,
        })
    }

    /// The key of the object's bytes in the cache: all of them, as a range.
    pub(super) fn key(&self, url: &str) -> CacheKey {
        CacheKey::new(
            url,
            self.size,
            Some(&self.e_tag),
            self.last_modified_ms,
            &(0..self.size),
        )
    }

    pub(super) fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(RECORD_BYTES as usize);
        bytes.extend_from_slice(&self.size.to_le_bytes());
        bytes.extend_from_slice(&self.last_modified_ms.to_le_bytes());
        bytes.extend_from_slice(&(self.e_tag.len() as u16).to_le_bytes());
        bytes.extend_from_slice(self.e_tag.as_bytes());
        bytes.resize(RECORD_BYTES as usize, 0);
        bytes
    }

    /// The record in `bytes`, when they hold one (the cache checked their checksum; this checks
    /// their shape).
    pub(super) fn decode(bytes: &[u8]) -> Option<Kept> {
        let size = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
        let last_modified_ms = i64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?);
        let len = usize::from(u16::from_le_bytes(bytes.get(16..18)?.try_into().ok()?));
        let e_tag = std::str::from_utf8(bytes.get(18..18 + len)?).ok()?;
        // A record planted with an ETag that is no header value (a line break, a NUL) would
        // make the request of `If-None-Match` invalid: `object_store` panics on those.
        is_strong_e_tag(e_tag).then(|| Kept {
            size,
            last_modified_ms,
            e_tag: e_tag.to_string(),
        })
    }
}

/// Whether `e_tag` is one a record keeps: strong (not `W/"..."`), not empty, at most
/// [`RECORD_E_TAG_BYTES`] bytes, and visible ASCII (what a header value holds).
fn is_strong_e_tag(e_tag: &str) -> bool {
    !e_tag.is_empty()
        && !e_tag.starts_with("W/")
        && e_tag.len() <= RECORD_E_TAG_BYTES
        && e_tag.bytes().all(|byte| (0x20..0x7f).contains(&byte))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record reads back as written; records of another shape (a cut one, an ETag past its
    /// bound or empty, bytes that are not UTF-8) are none, and only strong ETags are kept.
    #[test]
    fn records_round_trip_and_refuse_what_is_not_one() {
        let kept = Kept {
            size: 123_456,
            last_modified_ms: -5,
            e_tag: "\"abc-1\"".to_string(),
        };
        let bytes = kept.encode();
        assert_eq!(bytes.len() as u64, RECORD_BYTES);
        assert_eq!(Kept::decode(&bytes), Some(kept.clone()));
        assert_eq!(Kept::decode(&bytes[..17]), None);
        let mut long = bytes.clone();
        long[16..18].copy_from_slice(&(RECORD_E_TAG_BYTES as u16 + 1).to_le_bytes());
        assert_eq!(Kept::decode(&long), None);
        let mut empty = bytes.clone();
        empty[16..18].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(Kept::decode(&empty), None);
        let mut invalid = bytes;
        invalid[18] = 0xff;
        assert_eq!(Kept::decode(&invalid), None);

        let meta = |e_tag: Option<&str>| object_store::ObjectMeta {
            location: object_store::path::Path::from("a.png"),
            last_modified: Default::default(),
            size: 10,
            e_tag: e_tag.map(str::to_string),
            version: None,
        };
        assert_eq!(
            Kept::of(&meta(Some("\"x\""))).map(|kept| kept.e_tag),
            Some("\"x\"".to_string())
        );
        assert_eq!(Kept::of(&meta(Some("W/\"x\""))), None);
        assert_eq!(Kept::of(&meta(None)), None);
        assert_eq!(Kept::of(&meta(Some(""))), None);
        assert_eq!(Kept::of(&meta(Some("\"a\r\nb\""))), None);
        // A planted record whose ETag holds a line break or a NUL is none (as a request header
        // it would make `object_store` panic).
        let mut planted = Kept {
            e_tag: "\"ab\"".to_string(),
            ..kept
        }
        .encode();
        assert!(Kept::decode(&planted).is_some());
        planted[19] = b'\n';
        assert_eq!(Kept::decode(&planted), None);
        planted[19] = 0;
        assert_eq!(Kept::decode(&planted), None);
        assert_eq!(
            Kept::of(&meta(Some(&"e".repeat(RECORD_E_TAG_BYTES + 1)))),
            None
        );
    }
}
