//! A cache of fetched byte ranges on local disk ([`RangeCache`]), so that a second epoch over
//! objects in object storage reads what the first fetched from the machine's own disk.
//!
//! An entry is one range of one object, keyed by the object's URL (without userinfo), its size,
//! its validators (ETag and last-modified time) and the range: an object replaced in its store
//! has another ETag, size or time, so its old ranges are never read for it; they age out.
//!
//! Several processes may share a directory (the ranks and DataLoader workers of one machine):
//! an entry is written to a file of its own under `tmp/` and renamed into place, which is
//! atomic, so a reader sees a whole entry or none; two writers of one entry write the same
//! bytes. Every entry carries its key and an XXH3-128 checksum of its bytes (the `twox-hash`
//! crate the loader already uses for its digests), checked on every read: a torn,
//! truncated or altered file, or one of another key under the same name, is a miss, fetched
//! again and written over. Nothing here fails a read: an entry that cannot be written (a full
//! disk) is left out, and the range is served from the network.
//!
//! One process fills a range's entry at a time ([`RangeCache::get_or_fetch`]): a process that
//! misses a range takes the right to fill it (an exclusive `flock` on `tmp/<entry name>.lock`,
//! `claim.rs`) before it fetches, and one that
//! finds the right taken waits for it and reads what the holder kept, so that the ranks and
//! DataLoader workers that read one range at once fetch it once. The kernel releases the lock of
//! a process that dies; a holder that takes longer than [`FILL_WAIT`] (a store that stalls)
//! holds no one back past it, and where no lock file can be made (a read-only directory, a
//! planted link) a process fetches without one.
//!
//! The directory holds at most its limit in bytes, give or take the entries written while it is
//! evicted: when a process's count of the bytes passes the limit, it lists the entries and
//! removes the least recently used (by modification time, which a hit renews) until the cache
//! is at 90% of the limit.
//!
//! | file | what it is |
//! |---|---|
//! | `<dir>/v1/<2 hex digits>/<32 hex digits>` | one entry: the header, then the range's bytes |
//! | `<dir>/v1/tmp/<process id>-<number>-<16 random hex digits>` | an entry being written, renamed into place when whole |
//! | `<dir>/v1/tmp/<32 hex digits>.lock` | the lock file of an entry being fetched (`claim.rs`) |

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arrow_dlpack_tensor::alloc::{UninitBuffer, copy_to_uninit};
use bytes::Bytes;

use super::gather::PooledBytes;
use crate::{Error, Result};

/// The first bytes of every entry: the format's name and version.
const MAGIC: &[u8; 8] = b"ADLRC\x001\n";

/// The folder of this format's entries inside the cache directory.
const VERSION_DIR: &str = "v1";

/// Entries being written and the lock files of entries being fetched; a file left there by a
/// process that died is removed when a process opens the cache or evicts from it
/// ([`RangeCache::remove_stale_tmp`]).
const TMP_DIR: &str = "tmp";

/// The age after which a file in `tmp/` belongs to no living writer.
const STALE_TMP: Duration = Duration::from_secs(3600);

/// How long a process waits for another to fill an entry that both miss before it fetches the
/// range itself.
const FILL_WAIT: Duration = Duration::from_secs(30);

/// The pauses between tries to take the right to fill an entry: from the first to the last,
/// doubling.
const CLAIM_PAUSES: (Duration, Duration) = (Duration::from_millis(2), Duration::from_millis(50));

/// The names a process tries for a file of its own in `tmp/` before it leaves a range uncached.
const TMP_TRIES: usize = 16;

/// The longest key (a URL is at most 8 KiB; the rest is numbers).
const MAX_KEY_BYTES: usize = 16 << 10;

/// Where the cache lives and how large it may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CacheSettings {
    /// The directory, created if missing.
    pub(crate) dir: PathBuf,
    /// The most bytes its entries may hold.
    pub(crate) limit: u64,
}

/// What identifies one range of one object as it was planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CacheKey {
    text: String,
    /// The range's length: an entry of another length is not this range's.
    len: u64,
}

impl CacheKey {
    /// The key of `range` of the object at `url` (without userinfo) of `size` bytes, with its
    /// ETag and last-modified time (milliseconds since the Unix epoch, 0 when unknown).
    pub(crate) fn new(
        url: &str,
        size: u64,
        e_tag: Option<&str>,
        last_modified_ms: i64,
        range: &Range<u64>,
    ) -> Self {
        let text = format!(
            "{url}\nsize={size}\netag={}\nlast-modified={last_modified_ms}\nrange={}-{}",
            e_tag.unwrap_or(""),
            range.start,
            range.end
        );
        CacheKey {
            text,
            len: range.end - range.start,
        }
    }

    /// The key of the record of an object read whole by URL (an image row's), `len` bytes: what
    /// the object was when its bytes were last kept, by which the next read asks its store
    /// whether it changed (`If-None-Match`) and finds its entry.
    pub(crate) fn record(url: &str, len: u64) -> Self {
        CacheKey {
            text: format!("{url}\nrecord of the whole object"),
            len,
        }
    }

    /// The entry's file name: the key's XXH3-128 in hex (two keys that shared it would share a
    /// file, which holds one of them at a time: the key in the file decides).
    fn file_name(&self) -> String {
        format!("{:032x}", checksum(self.text.as_bytes()))
    }

    /// The bytes of the header before the range's bytes: the magic, the key's length and the
    /// key, the range's length and its checksum.
    fn header_len(&self) -> usize {
        MAGIC.len() + 4 + self.text.len() + 8 + 16
    }
}

/// Fetched ranges kept on local disk, shared by every loader and process that names the same
/// directory (see the module documentation).
#[derive(Debug)]
pub(crate) struct RangeCache {
    root: PathBuf,
    limit: u64,
    /// The bytes this process counts in the cache: listed when it was opened, grown by each
    /// entry it writes, listed again by each eviction.
    used: AtomicU64,
    /// The bytes this process wrote since it last listed the directory: past a tenth of the
    /// limit it lists again (and evicts if need be), so that what other processes sharing the
    /// directory wrote meanwhile is counted too.
    since_listing: AtomicU64,
    /// Held while this process puts an entry in place and counts it, or evicts: an eviction
    /// sets `used` to what it listed, so an entry renamed into place after its listing and
    /// counted before its end would be lost from the count, and the cache could grow past its
    /// limit unseen.
    evicting: Mutex<()>,
}

/// Numbers this process's files in `tmp/`, across every cache it opens (two loaders of one
/// process may write into one directory at once).
static NEXT_TMP: AtomicU64 = AtomicU64::new(0);

/// The caches this process has open, by directory and limit: the loaders of one process that
/// share a directory share one count and one lock, so that together they keep it within its
/// limit (each loader counting on its own, six of them held 2 to 3 times the limit at once).
static OPEN: Mutex<Vec<(PathBuf, u64, std::sync::Weak<RangeCache>)>> = Mutex::new(Vec::new());

impl RangeCache {
    /// The cache of `settings`, shared with the other loaders of this process that have it open
    /// (see [`OPEN`]), or opened ([`RangeCache::open`]).
    pub(crate) fn open_shared(settings: &CacheSettings) -> Result<Arc<Self>> {
        let root = settings.dir.join(VERSION_DIR);
        // A directory named two ways (a link, `..`) is one directory where it exists already.
        let key = fs::canonicalize(&root).unwrap_or_else(|_| root.clone());
        let mut open = OPEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        open.retain(|(_, _, cache)| cache.strong_count() > 0);
        let found = open
            .iter()
            .filter(|(dir, limit, _)| *dir == key && *limit == settings.limit)
            .find_map(|(_, _, cache)| cache.upgrade());
        if let Some(cache) = found {
            return Ok(cache);
        }
        let cache = Arc::new(RangeCache::open(settings)?);
        let key = fs::canonicalize(&root).unwrap_or(key);
        open.push((key, settings.limit, Arc::downgrade(&cache)));
        Ok(cache)
    }

    /// Opens (or creates) the cache of `settings`: its directory must be one this process can
    /// write, which is checked by writing a file there, so that a wrong path fails when the
    /// loader is made rather than leaving every range uncached.
    pub(crate) fn open(settings: &CacheSettings) -> Result<Self> {
        let root = settings.dir.join(VERSION_DIR);
        let unusable = |path: &Path, source: io::Error| Error::InvalidSpec {
            reason: format!(
                "cache_dir {:?} cannot be used ({:?}: {source}); expected a directory this \
                 process can create and write",
                settings.dir, path
            ),
        };
        let tmp = root.join(TMP_DIR);
        fs::create_dir_all(&tmp).map_err(|source| unusable(&tmp, source))?;
        let cache = RangeCache {
            root,
            limit: settings.limit,
            used: AtomicU64::new(0),
            since_listing: AtomicU64::new(0),
            evicting: Mutex::new(()),
        };
        let (_, probe) = cache
            .create_tmp()
            .map_err(|source| unusable(&tmp, source))?;
        let _ = fs::remove_file(&probe);
        cache.evict();
        Ok(cache)
    }

    /// The bytes of the range of `key`, when the cache holds a whole, unaltered entry of it.
    ///
    /// Only a regular file is read: the entry is opened without following a symbolic link and
    /// without waiting (a FIFO put in its place would block a plain open forever), and what was
    /// opened is checked to be a regular file of the entry's size before a byte is read.
    pub(crate) fn get(&self, key: &CacheKey) -> Option<Bytes> {
        let path = self.entry_path(key);
        if !in_real_folder(&path) {
            return None;
        }
        let file = open_entry(&path).ok()?;
        let total = key.header_len() as u64 + key.len;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() != total {
            return None;
        }
        let mut reader = &file;
        let mut header = vec![0; key.header_len()];
        reader.read_exact(&mut header).ok()?;
        let sum = parse_header(&header, key)?;
        let payload = read_payload(&mut reader, usize::try_from(key.len).ok()?, sum)?;
        // A hit renews the entry's place in the eviction order (best effort: a read-only
        // directory keeps its order).
        let _ = file_touch(&file);
        Some(payload)
    }

    /// Keeps `bytes`, the range of `key`, unless the entry could never fit the cache; a write
    /// that fails leaves nothing behind.
    pub(crate) fn put(&self, key: &CacheKey, bytes: &[u8]) {
        let total = key.header_len() as u64 + bytes.len() as u64;
        if bytes.len() as u64 != key.len || key.text.len() > MAX_KEY_BYTES || total > self.limit {
            return;
        }
        let Ok((file, tmp)) = self.create_tmp() else {
            return;
        };
        // Written outside the lock (the bytes may be many); put in place and counted under it.
        let written = write_entry(file, key, bytes).and_then(|()| {
            let path = self.entry_path(key);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
            // A folder that is a link (planted, or made by another program) is not the cache's:
            // an entry there would be neither counted nor evicted, and would lie elsewhere.
            if !in_real_folder(&path) {
                return Err(io::Error::other("the entry's folder is a symbolic link"));
            }
            Ok(path)
        });
        let _in_place = self.lock();
        let placed = written.and_then(|path| fs::rename(&tmp, &path));
        if placed.is_err() {
            let _ = fs::remove_file(&tmp);
            return;
        }
        let used = self.used.fetch_add(total, Ordering::Relaxed) + total;
        let since = self.since_listing.fetch_add(total, Ordering::Relaxed) + total;
        if used > self.limit || since > self.limit / 10 {
            self.evict_locked();
        }
    }

    /// The lock of [`RangeCache::evicting`].
    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.evicting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn entry_path(&self, key: &CacheKey) -> PathBuf {
        let name = key.file_name();
        self.root.join(&name[..2]).join(name)
    }

    /// A name for a file of this process in `tmp/`: `<process id>-<number>-<16 hex digits>`,
    /// the last part random, so that no other local user can plant something at the name a
    /// process will write next.
    fn tmp_path(&self) -> PathBuf {
        use std::hash::{BuildHasher, Hasher};
        let number = NEXT_TMP.fetch_add(1, Ordering::Relaxed);
        // `RandomState`'s keys come from the system's randomness, a fresh pair for each.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(number);
        let random = hasher.finish();
        self.root
            .join(TMP_DIR)
            .join(format!("{}-{number}-{random:016x}", std::process::id()))
    }

    /// A new file of this process's own in `tmp/`, at a name of [`RangeCache::tmp_path`]
    /// ([`create_new`]).
    fn create_tmp(&self) -> io::Result<(File, PathBuf)> {
        create_new((0..TMP_TRIES).map(|_| self.tmp_path()))
    }

    /// Removes the files of `tmp/` that no living writer can still be writing: those older than
    /// [`STALE_TMP`], and (on Linux) those named for a process that no longer exists, such as a
    /// DataLoader worker killed while it wrote an entry. A process of another PID namespace
    /// sharing the directory looks dead from here; removing its file only leaves its entry
    /// unwritten (its rename fails), never a torn entry.
    fn remove_stale_tmp(&self) {
        let Ok(entries) = fs::read_dir(self.root.join(TMP_DIR)) else {
            return;
        };
        let now = SystemTime::now();
        for entry in entries.flatten() {
            let old = entry
                .metadata()
                .and_then(|meta| meta.modified())
                .is_ok_and(|modified| now.duration_since(modified).unwrap_or_default() > STALE_TMP);
            if old || writer_is_gone(&entry.file_name()) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }

    /// Lists the entries, and when they hold more than the limit removes the least recently
    /// used until they hold at most 90% of it; the count of used bytes becomes what is left.
    fn evict(&self) {
        let _one_at_a_time = self.lock();
        self.evict_locked();
    }

    /// [`RangeCache::evict`], its lock held by the caller; the files of dead writers in `tmp/`
    /// go first.
    fn evict_locked(&self) {
        self.remove_stale_tmp();
        let mut entries = self.list();
        let mut total: u64 = entries.iter().map(|entry| entry.1).sum();
        if total > self.limit {
            entries.sort_by_key(|entry| entry.0);
            let target = self.limit / 10 * 9;
            for (_, size, path) in entries {
                if total <= target {
                    break;
                }
                // Another process may have removed it first; either way it is gone.
                let _ = fs::remove_file(&path);
                total = total.saturating_sub(size);
            }
        }
        self.used.store(total, Ordering::Relaxed);
        self.since_listing.store(0, Ordering::Relaxed);
    }

    /// Every entry: its modification time, size and path. Only what this cache writes is
    /// listed (and so ever removed): regular files named as entries, in real folders named as
    /// its folders; a symbolic link is never followed, so that a link planted in the directory
    /// cannot make an eviction count or remove files elsewhere.
    fn list(&self) -> Vec<(SystemTime, u64, PathBuf)> {
        let mut entries = Vec::new();
        let Ok(folders) = fs::read_dir(&self.root) else {
            return entries;
        };
        for folder in folders.flatten() {
            let is_dir = folder.file_type().is_ok_and(|kind| kind.is_dir());
            if !is_dir || !is_hex(&folder.file_name(), 2) {
                continue;
            }
            let Ok(files) = fs::read_dir(folder.path()) else {
                continue;
            };
            for file in files.flatten() {
                // `DirEntry::metadata` does not follow a symbolic link.
                let Ok(meta) = file.metadata() else { continue };
                if meta.is_file() && is_hex(&file.file_name(), 32) {
                    let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                    entries.push((modified, meta.len(), file.path()));
                }
            }
        }
        entries
    }
}

/// Whether `name` is `digits` lowercase hexadecimal digits, as the cache names its folders and
/// entries.
fn is_hex(name: &std::ffi::OsStr, digits: usize) -> bool {
    name.to_str().is_some_and(|name| {
        name.len() == digits
            && name
                .bytes()
                .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// Whether the folder of the entry at `path` is a real folder, not a symbolic link to one (the
/// folders [`RangeCache::list`] counts and evicts from).
fn in_real_folder(path: &Path) -> bool {
    path.parent()
        .and_then(|folder| fs::symlink_metadata(folder).ok())
        .is_some_and(|meta| meta.is_dir())
}

/// Opens the entry at `path` for reading, without following a symbolic link and without
/// blocking on a FIFO (on Unix; elsewhere as `File::open`).
fn open_entry(path: &Path) -> io::Result<File> {
    let mut options = File::options();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    options.open(path)
}

/// The first of `names` that no file holds, made there with `O_EXCL`, without following a link
/// and without waiting on a FIFO: a name that anything holds already (a link or a FIFO, a
/// folder, a file) is passed over for the next, so that no write of the cache lands outside it
/// or waits; the last error when every name is taken.
fn create_new(names: impl Iterator<Item = PathBuf>) -> io::Result<(File, PathBuf)> {
    let mut taken = None;
    for path in names {
        let mut options = File::options();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
        }
        match options.open(&path) {
            Ok(file) => return Ok((file, path)),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => taken = Some(error),
            Err(error) => return Err(error),
        }
    }
    Err(taken.unwrap_or_else(|| io::Error::other("no name was free")))
}

/// Whether `name`, a file of `tmp/` named `<process id>-<number>[-<hex>]` as
/// [`RangeCache::tmp_path`] names them (and earlier versions did, without the hex part), belongs
/// to a process that no longer exists (read from `/proc`, on Linux only; elsewhere no file is
/// judged so).
fn writer_is_gone(name: &std::ffi::OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    let mut parts = name.split('-');
    let (Some(pid), Some(number), random, None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let random_ok = random
        .is_none_or(|hex| hex.len() == 16 && hex.bytes().all(|byte| byte.is_ascii_hexdigit()));
    let named = pid.parse::<u32>().is_ok() && number.parse::<u64>().is_ok() && random_ok;
    if !named || pid == std::process::id().to_string() {
        return false;
    }
    cfg!(target_os = "linux")
        && Path::new("/proc/self").exists()
        && !Path::new("/proc").join(pid).exists()
}

/// Writes the entry of `key` holding `bytes` into `file`, a file of its own.
fn write_entry(mut file: File, key: &CacheKey, bytes: &[u8]) -> io::Result<()> {
    let mut header = Vec::with_capacity(key.header_len());
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&(key.text.len() as u32).to_le_bytes());
    header.extend_from_slice(key.text.as_bytes());
    header.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    header.extend_from_slice(&checksum(bytes).to_le_bytes());
    file.write_all(&header)?;
    file.write_all(bytes)?;
    Ok(())
}

/// The checksum of the range's bytes, when `header` (an entry's first
/// [`CacheKey::header_len`] bytes) is the header of an entry of `key`.
fn parse_header(header: &[u8], key: &CacheKey) -> Option<u128> {
    let rest = header.strip_prefix(MAGIC.as_slice())?;
    let (key_len, rest) = rest.split_first_chunk::<4>()?;
    let key_len = usize::try_from(u32::from_le_bytes(*key_len)).ok()?;
    if key_len != key.text.len() {
        return None;
    }
    let (text, rest) = rest.split_at_checked(key_len)?;
    if text != key.text.as_bytes() {
        return None;
    }
    let (len, rest) = rest.split_first_chunk::<8>()?;
    let (sum, rest) = rest.split_first_chunk::<16>()?;
    (u64::from_le_bytes(*len) == key.len && rest.is_empty()).then(|| u128::from_le_bytes(*sum))
}

/// The bytes of a read from the cache pass through a piece of this size, which the checksum
/// reads while it is in the processor's cache.
const READ_PIECE: usize = 256 << 10;

/// The `len` bytes of an entry after its header, read a piece at a time and checked against
/// `sum` as they pass, into memory of the warm-page pool (whose blocks were written before, so
/// no page of a large entry is faulted in and zeroed on each read); `None` when the file ends
/// first or the checksum differs.
fn read_payload(reader: &mut impl Read, len: usize, sum: u128) -> Option<Bytes> {
    let mut out = UninitBuffer::try_new(len).ok()?;
    let mut piece = vec![0; READ_PIECE.min(len)];
    let mut hasher = twox_hash::XxHash3_128::new();
    for slots in out.as_uninit_mut().chunks_mut(READ_PIECE) {
        let piece = &mut piece[..slots.len()];
        reader.read_exact(piece).ok()?;
        hasher.write(piece);
        copy_to_uninit(piece, slots, len);
    }
    if hasher.finish_128() != sum {
        return None;
    }
    // SAFETY: the pieces cover every slot of `out`, and `copy_to_uninit` wrote each of them.
    let buffer = unsafe { out.assume_init() };
    Some(Bytes::from_owner(PooledBytes(buffer)))
}

/// XXH3-128 of `bytes`.
fn checksum(bytes: &[u8]) -> u128 {
    twox_hash::XxHash3_128::oneshot(bytes)
}

/// Sets the modification time of `file` to now.
fn file_touch(file: &File) -> io::Result<()> {
    file.set_times(fs::FileTimes::new().set_modified(SystemTime::now()))
}

mod claim;

#[cfg(test)]
use claim::claim;

#[cfg(test)]
mod tests;
