//! Reading and filling the cache from the loader's runtime ([`RangeCache::get_async`],
//! [`RangeCache::get_or_fetch`]), with one fill of an entry at a time across the processes that
//! share the directory ([`claim`]): an exclusive `flock` on the entry's lock file in `tmp/`,
//! waited for at most [`FILL_WAIT`](super::FILL_WAIT), released (and the file removed) when the
//! [`FillClaim`] is dropped.

use std::fs::{self, File};
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;

use super::{CLAIM_PAUSES, CacheKey, FILL_WAIT, RangeCache, TMP_DIR};
use crate::Result;

impl RangeCache {
    /// [`RangeCache::get`] on the runtime's blocking threads (it reads a file).
    pub(crate) async fn get_async(self: &Arc<Self>, key: &CacheKey) -> Option<Bytes> {
        let (cache, key) = (self.clone(), key.clone());
        tokio::task::spawn_blocking(move || cache.get(&key))
            .await
            .ok()
            .flatten()
    }

    /// The bytes of `key`: the kept ones, else those `fetch` gives, kept then (bytes that
    /// cannot be kept are served all the same). Whoever misses `key` takes the right to fill it
    /// ([`claim`]) and looks again before it fetches, so that processes that miss one entry at
    /// once fetch it once: the others wait for the holder and read what it kept.
    pub(crate) async fn get_or_fetch(
        self: &Arc<Self>,
        key: CacheKey,
        fetch: impl Future<Output = Result<Bytes>>,
    ) -> Result<Bytes> {
        if let Some(bytes) = self.get_async(&key).await {
            return Ok(bytes);
        }
        let claim = claim(self, &key).await;
        if let Some(bytes) = self.get_async(&key).await {
            return Ok(bytes);
        }
        let bytes = fetch.await?;
        let (cache, kept) = (self.clone(), bytes.clone());
        // The right to fill the entry goes once it is in place.
        let _ = tokio::task::spawn_blocking(move || cache.put(&key, &kept)).await;
        drop(claim);
        Ok(bytes)
    }

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
pub(super) struct FillClaim {
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
pub(super) async fn claim(cache: &Arc<RangeCache>, key: &CacheKey) -> Option<FillClaim> {
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
