//! [`Tokenizer`]: a Hugging Face `tokenizers` tokenizer, read from its `tokenizer.json`, that
//! encodes one text to its token ids exactly as the Python package's `encode_batch` does.

use std::path::Path;

use arrow_schema::DataType;

use crate::error::panic_message;
use crate::quiet_panic::catch_quietly;
use crate::{Error, Result};

/// A tokenizer of Hugging Face's `tokenizers` (the `tokenizer.json` format that
/// `tokenizers.Tokenizer.save` and `transformers`' fast tokenizers write).
///
/// Its ids are those of `tokenizers.Tokenizer.encode_batch(texts, add_special_tokens=...)`
/// (`.ids`) of the same `tokenizer.json` in the Python package whose version this crate pins,
/// with one difference: padding is never applied. `encode_batch` pads every text of a call to
/// the longest of that call when the file configures padding, which depends on how texts are
/// grouped into calls; the loader pads its own batches. Truncation, when the file configures
/// it, applies as in Python (the overflowing pieces are not kept).
///
/// Encoding one text runs on the calling thread: the `tokenizers` crate's own thread pool
/// (rayon, `TOKENIZERS_PARALLELISM`) is used only by its batch methods, which this type does
/// not call, so the threads of a tokenizing call are exactly those its caller asks for.
#[derive(Clone)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// One more than the largest id of the vocabulary, added tokens included.
    id_bound: u64,
    /// The digest of the tokenizer's JSON as the `tokenizers` crate writes it back (compact),
    /// so that a file and the same tokenizer's `to_str()` have one digest.
    digest: String,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("id_type", &self.id_type())
            .finish()
    }
}

impl Tokenizer {
    /// Reads the tokenizer of the `tokenizer.json` file at `path`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| Error::io(path, source))?;
        // A file that is not text is a tokenizer that does not parse, not a failed read.
        let json = String::from_utf8(bytes).map_err(|error| Error::Tokenizer {
            what: format!("{}", path.display()),
            source: Box::new(error.utf8_error()),
        })?;
        Self::parse(&json, || format!("{}", path.display()))
    }

    /// Reads a tokenizer from the text of a `tokenizer.json` (what Python's
    /// `tokenizers.Tokenizer.to_str()` gives).
    pub fn from_json(json: &str) -> Result<Self> {
        Self::parse(json, || "the JSON text".to_string())
    }

    fn parse(json: &str, what: impl Fn() -> String) -> Result<Self> {
        let refuse = |source: Box<dyn std::error::Error + Send + Sync>| Error::Tokenizer {
            what: what(),
            source,
        };
        // The tokenizers crate's own code runs on what the file says: a panic there is the
        // file's error, not the caller's.
        let parsed = catch_quietly(|| -> Result<_> {
            let mut inner: tokenizers::Tokenizer = json.parse().map_err(refuse)?;
            let vocab = inner.get_vocab(true);
            let id_bound = vocab
                .values()
                .map(|&id| u64::from(id) + 1)
                .max()
                .unwrap_or(0);
            // The crate writes a vocabulary back as a table of every id up to the largest: a
            // file of three tokens, one numbered 2^31, would allocate 16 GiB for the digest.
            let dense_bound = (vocab.len() as u64)
                .saturating_mul(2)
                .max(MIN_SPARSE_ID_BOUND);
            if id_bound > dense_bound {
                return Err(refuse(
                    format!(
                        "its largest id is {} for a vocabulary of {} tokens; expected ids \
                         numbered from 0 without large gaps (at most {dense_bound})",
                        id_bound - 1,
                        vocab.len()
                    )
                    .into(),
                ));
            }
            // The digest is taken of the tokenizer as read, before the padding is turned off.
            let canonical = inner.to_string(false).map_err(refuse)?;
            inner.with_padding(None);
            Ok((inner, id_bound, canonical))
        })
        .map_err(|payload| refuse(panic_message(payload.as_ref()).into()))?;
        let (inner, id_bound, canonical) = parsed?;
        let digest = crate::digest::of_bytes(canonical.as_bytes());
        Ok(Tokenizer {
            inner,
            id_bound,
            digest,
        })
    }

    /// The number of ids the tokenizer can give: one more than its largest id, added tokens
    /// included.
    pub fn vocab_size(&self) -> u64 {
        self.id_bound
    }

    /// The number of tokens of its vocabulary, added tokens included (the `tokenizers` crate's
    /// `get_vocab_size(true)`).
    pub fn token_count(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The identity of the tokenizer: a digest of its JSON, as `tokenizers` writes it back
    /// (`xxh3-128:` and 32 hexadecimal digits). A saved state records it, so that a run resumed
    /// with another tokenizer is refused.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The Arrow type of its ids: `Int32` when every id fits, `Int64` otherwise.
    pub fn id_type(&self) -> DataType {
        if self.id_bound <= i32::MAX as u64 + 1 {
            DataType::Int32
        } else {
            DataType::Int64
        }
    }

    /// The id of `token` (a token of the vocabulary or an added token such as `"</s>"`).
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The encoding of `text` (its ids, among others), with the tokenizer's special tokens (its
    /// post-processor's, such as BERT's `[CLS]` and `[SEP]`) when `add_special_tokens` is set;
    /// offsets are not computed.
    ///
    /// An error of the tokenizer is returned as it is, for the caller to say which text failed.
    pub(crate) fn encoding(
        &self,
        text: &str,
        add_special_tokens: bool,
    ) -> std::result::Result<tokenizers::Encoding, tokenizers::Error> {
        // The tokenizers crate holds about 190 bytes per byte of text while it encodes, with
        // allocations it does not check: a longer text is refused before it can abort the
        // process.
        if text.len() > MAX_TEXT_BYTES {
            return Err(format!(
                "text of {} bytes is longer than the {MAX_TEXT_BYTES} bytes a text may have; \
                 expected documents split into shorter texts",
                text.len()
            )
            .into());
        }
        self.inner.encode_fast(text, add_special_tokens)
    }
}

/// The longest text, in bytes, that is tokenized (8 MiB): the tokenizers crate's working memory
/// grows to about 190 times a text's length, and it does not report an allocation that fails.
pub(crate) const MAX_TEXT_BYTES: usize = 8 << 20;

/// The largest id bound a vocabulary of few tokens may have (a sparser one is refused, as its
/// writing back, which the digest needs, allocates a slot per id): 2^20, far above the ids of
/// a small test vocabulary and below the tokenizers crate's cost of a second.
const MIN_SPARSE_ID_BOUND: u64 = 1 << 20;
