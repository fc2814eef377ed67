//! Panics caught on loader threads without a word on stderr.
//!
//! Corrupt files can reach assertions inside arrow-rs and the parquet crate. The loader catches
//! those panics and reports them as errors naming the file and unit, so the default hook's
//! message and backtrace on stderr would only repeat the error, out of order. A wrapper around
//! the process's panic hook, installed once and chained to the hook it replaces, stays silent
//! while the panicking thread is inside [`catch_quietly`] and calls the previous hook otherwise.

use std::any::Any;
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

thread_local! {
    /// Whether this thread is inside [`catch_quietly`].
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

static INSTALL: Once = Once::new();

/// Wraps the current panic hook, once per process, so that panics on threads inside
/// [`catch_quietly`] are not printed.
fn install() {
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info);
            }
        }));
    });
}

/// Runs `work`, returning a panic's payload instead of unwinding, and without printing it.
pub(crate) fn catch_quietly<R>(work: impl FnOnce() -> R) -> Result<R, Box<dyn Any + Send>> {
    install();
    let outer = QUIET.with(|quiet| quiet.replace(true));
    let result = catch_unwind(AssertUnwindSafe(work));
    QUIET.with(|quiet| quiet.set(outer));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caught_panic_returns_its_payload_and_restores_loudness() {
        let payload = catch_quietly(|| panic!("inside")).unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"inside"));
        assert!(!QUIET.with(Cell::get));
        assert_eq!(catch_quietly(|| 7).unwrap(), 7);
    }
}
