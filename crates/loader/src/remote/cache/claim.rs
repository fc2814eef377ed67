//! One fill of a cache entry at a time across the processes that share the directory
//! ([`claim`]): an exclusive `flock` on the entry's lock file in `tmp/`, waited for at most
//! [`FILL_WAIT`](super::FILL_WAIT), released (and the file removed) when the [`FillClaim`] is
//! dropped.

use std::fs::{self, File};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use super::{CLAIM_PAUSES, CacheKey, FILL_WAIT, RangeCache, TMP_DIR};

impl RangeCache {
    /// The lock file of the entry of `key`, opened (created if missing) for [`claim`]; `None`
    /// where none can be made or what is there is not a regular file.
    fn lock_file(&self, key: &CacheKey) -> Option<(File, PathBuf)> {
        let path = self
            .root
            .join(TMP_DIR)
            .join(format!("{}.lock", key.file_name()));
        let mut options = File::options();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
        }
        let file = options.open(&path).ok()?;
        file.metadata().ok()?.is_file().then_some((file, path))
    }
}

/// The right to fill one entry of the cache, held by one process (and one loader thread) at a
/// time; dropping it removes the lock file and then releases the lock.
///
/// A process that waited on the lock file removed here takes its lock after the holder, finds
/// the entry the holder kept, and reads it; one that opens the path after the removal makes a
/// new lock file. Either way the worst case is a range fetched twice, never a torn entry: the
/// entries themselves are renamed into place whole.
#[derive(Debug)]
pub(crate) struct FillClaim {
    _file: File,
    path: PathBuf,
}

impl Drop for FillClaim {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Takes the right to fill the entry of `key` in `cache`, waiting while another process (or
/// loader) holds it, for at most [`FILL_WAIT`]; `None` when no lock file can be made there
/// (or off Unix), or the wait ran out: the caller then fetches without it. The caller looks
/// for the entry again once it holds the right, since the holder it waited for kept it.
pub(crate) async fn claim(cache: &Arc<RangeCache>, key: &CacheKey) -> Option<FillClaim> {
    let opened = {
        let (cache, key) = (cache.clone(), key.clone());
        tokio::task::spawn_blocking(move || cache.lock_file(&key))
            .await
            .ok()??
    };
    let (file, path) = opened;
    let started = std::time::Instant::now();
    let mut pause = CLAIM_PAUSES.0;
    loop {
        if try_lock(&file)? {
            return Some(FillClaim { _file: file, path });
        }
        if started.elapsed() >= FILL_WAIT {
            return None;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(CLAIM_PAUSES.1);
    }
}

/// Takes an exclusive `flock` on `file` without waiting: `Some(true)` when taken,
/// `Some(false)` while another open file holds it, `None` when the file system refuses locks.
#[cfg(unix)]
fn try_lock(file: &File) -> Option<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: `flock` reads only the descriptor, which `file` keeps open for the call.
    let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    if taken {
        return Some(true);
    }
    (io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)).then_some(false)
}

#[cfg(not(unix))]
fn try_lock(_file: &File) -> Option<bool> {
    None
}
