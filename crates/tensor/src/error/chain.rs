//! The chain of an error and its causes: [`error_messages`] lists it, [`Report`] prints it on
//! one line, [`check_error_chain`] holds it to the convention of these crates (a message
//! describes its own level; its cause comes from `source()` only), and
//! [`assert_every_variant_chains`] is the test every crate of the workspace runs on one sample of
//! each of its error's variants.

use std::fmt;

/// The message of `error` and of each of its causes ([`source`](std::error::Error::source)),
/// outermost first.
///
/// Every error of the arrow-dlpack crates describes its own level only and hands its cause out
/// through `source`, so these are the parts a report joins (`: ` between them gives one line).
///
/// ```
/// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; }
/// use arrow_dlpack::error_messages;
///
/// let error = std::io::Error::other("disk full");
/// assert_eq!(error_messages(&error), ["disk full"]);
/// ```
pub fn error_messages(error: &dyn std::error::Error) -> Vec<String> {
    let mut messages = vec![error.to_string()];
    let mut cause = error.source();
    while let Some(inner) = cause {
        messages.push(inner.to_string());
        cause = inner.source();
    }
    messages
}

/// Whether `error` keeps the convention of these crates: no message in its chain is empty, and
/// none repeats the text of a cause below it (a chain printer would show that text twice).
/// The error describes the first problem found.
///
/// ```
/// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; }
/// use arrow_dlpack::check_error_chain;
///
/// # #[derive(Debug)]
/// # struct Wrapper(std::io::Error);
/// # impl std::fmt::Display for Wrapper {
/// #     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
/// #         write!(f, "cannot read: {}", self.0)
/// #     }
/// # }
/// # impl std::error::Error for Wrapper {
/// #     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
/// #         Some(&self.0)
/// #     }
/// # }
/// // A wrapper that prints its cause and also returns it from `source()`:
/// let error = Wrapper(std::io::Error::other("disk full"));
/// assert!(check_error_chain(&error).is_err());
/// assert!(check_error_chain(&std::io::Error::other("disk full")).is_ok());
/// ```
pub fn check_error_chain(error: &dyn std::error::Error) -> std::result::Result<(), String> {
    let messages = error_messages(error);
    for (level, message) in messages.iter().enumerate() {
        if message.is_empty() {
            return Err(format!("level {level} of {error:?} has an empty message"));
        }
        if let Some(cause) = messages[level + 1..]
            .iter()
            .find(|cause| message.contains(cause.as_str()))
        {
            return Err(format!("{message:?} repeats its cause {cause:?}"));
        }
    }
    Ok(())
}

/// An error and its chain of causes, printed on one line: every message from the outermost to
/// the innermost cause, joined by `: ` (as anyhow's `{:#}` prints a chain).
///
/// Each crate's error has a `report()` method that makes one; this type prints any error.
/// A cause whose text its wrapper's message already ends with is printed once (errors of other
/// crates sometimes print their cause as well as return it).
///
/// ```
/// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; }
/// use arrow_dlpack::{Report, Tensor};
///
/// // Six values cannot fill a 4 x 2 tensor.
/// let error = Tensor::from_vec(vec![0f32; 6], vec![4, 2]).unwrap_err();
/// assert_eq!(
///     error.report().to_string(),
///     "element count mismatch: expected 8 values for shape [4, 2], found 6"
/// );
/// let io = std::io::Error::other("disk full");
/// assert_eq!(Report::new(&io).to_string(), "disk full");
/// ```
#[derive(Clone, Copy)]
pub struct Report<'a> {
    error: &'a (dyn std::error::Error + 'static),
}

impl<'a> Report<'a> {
    /// The report of `error` and its causes.
    pub fn new(error: &'a (dyn std::error::Error + 'static)) -> Report<'a> {
        Report { error }
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&join_messages(error_messages(self.error)))
    }
}

/// The messages of a chain, outermost first, on one line as [`Report`] prints them: joined by
/// `: `, a message that the line so far already ends with left out. For a caller that words
/// each level first (a binding that puts messages in its language's words).
///
/// ```
/// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; }
/// use arrow_dlpack::join_messages;
///
/// let messages = ["cannot read a.parquet: disk full", "disk full"].map(String::from);
/// assert_eq!(join_messages(messages), "cannot read a.parquet: disk full");
/// ```
pub fn join_messages(messages: impl IntoIterator<Item = String>) -> String {
    let mut messages = messages.into_iter();
    let mut line = messages.next().unwrap_or_default();
    for text in messages {
        if !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The test of an error type's chains, shared by every crate of the workspace: `samples` hold at
/// least one error of each of the `variants` variants (numbered by `index`, an exhaustive match,
/// so that a new variant does not compile until it has a number and a sample), and each sample's
/// chain keeps the convention that [`check_error_chain`] checks. Each chain is printed (shown by
/// `cargo test -- --nocapture`).
///
/// # Panics
///
/// When a variant has no sample, or a sample breaks the convention, naming which.
#[doc(hidden)]
pub fn assert_every_variant_chains<E: std::error::Error + 'static>(
    samples: &[E],
    index: fn(&E) -> usize,
    variants: usize,
) {
    let mut seen: Vec<usize> = samples.iter().map(index).collect();
    seen.sort_unstable();
    seen.dedup();
    let missing: Vec<usize> = (0..variants)
        .filter(|number| !seen.contains(number))
        .collect();
    assert!(
        missing.is_empty(),
        "the variants numbered {missing:?} have no sample"
    );
    for error in samples {
        println!("{}", error_messages(error).join("\n  caused by: "));
        if let Err(problem) = check_error_chain(error) {
            panic!("{problem}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wrapper that prints its cause and also returns it from `source()`, as the convention
    /// forbids.
    #[derive(Debug)]
    struct Repeating(std::io::Error);

    impl fmt::Display for Repeating {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "cannot read: {}", self.0)
        }
    }

    impl std::error::Error for Repeating {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    /// A wrapper that describes its own level only.
    #[derive(Debug)]
    struct Level(std::io::Error);

    impl fmt::Display for Level {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("cannot read data/nope.parquet")
        }
    }

    impl std::error::Error for Level {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_report_joins_the_chain_and_prints_a_repeated_cause_once() {
        let level = Level(std::io::Error::other("disk full"));
        assert_eq!(
            Report::new(&level).to_string(),
            "cannot read data/nope.parquet: disk full"
        );
        assert_eq!(
            format!("{:?}", Report::new(&level)),
            "cannot read data/nope.parquet: disk full"
        );
        let repeating = Repeating(std::io::Error::other("disk full"));
        assert_eq!(
            Report::new(&repeating).to_string(),
            "cannot read: disk full"
        );
    }

    #[test]
    fn every_variant_chains_passes_complete_samples_that_keep_the_convention() {
        let samples = [
            Level(std::io::Error::other("disk full")),
            Level(std::io::Error::other("no space")),
        ];
        assert_every_variant_chains(&samples, |_| 0, 1);
    }

    #[test]
    #[should_panic(expected = "the variants numbered [1] have no sample")]
    fn every_variant_chains_fails_on_a_variant_without_a_sample() {
        let samples = [Level(std::io::Error::other("disk full"))];
        assert_every_variant_chains(&samples, |_| 0, 2);
    }

    #[test]
    #[should_panic(expected = "repeats its cause \"disk full\"")]
    fn every_variant_chains_fails_on_a_message_that_repeats_its_cause() {
        let samples = [Repeating(std::io::Error::other("disk full"))];
        assert_every_variant_chains(&samples, |_| 0, 1);
    }
}
