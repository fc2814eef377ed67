//! The cores this process may use, read once.

use std::num::NonZeroUsize;
use std::sync::OnceLock;

/// The cores this process may use ([`std::thread::available_parallelism`], at least 1), read
/// once per process and kept.
///
/// On Linux that function reads the process's cgroup files at every call (tens of
/// microseconds of system time): a loader that asked it for every record batch spent most of
/// a stream of one-row batches there. A change of the process's CPU affinity or cgroup limit
/// after the first call is not seen; a thread count given explicitly always wins over this.
pub fn available_cores() -> NonZeroUsize {
    static CORES: OnceLock<NonZeroUsize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN))
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;

    use super::available_cores;

    #[test]
    fn the_cores_are_those_the_standard_library_counts_and_are_kept() {
        let counted = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        assert_eq!(available_cores().get(), counted);
        assert_eq!(available_cores(), available_cores());
    }
}
