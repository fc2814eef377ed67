//! The range cache on a real directory: entries read back for their key only, damage and foreign
//! files as misses, eviction of the least recently used, threads and links.

use std::sync::Arc;

use super::*;

fn settings(dir: &Path, limit: u64) -> CacheSettings {
    CacheSettings {
        dir: dir.to_path_buf(),
        limit,
    }
}

fn key(e_tag: &str, range: Range<u64>) -> CacheKey {
    CacheKey::new("s3://bucket/a.parquet", 1 << 20, Some(e_tag), 7, &range)
}

fn bytes_of(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A runtime of two threads, as the loader's, for the cache's async side.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Two handles of the cache at `dir`, as two processes would have (each opens its own lock
/// files).
fn two_handles(dir: &Path) -> (Arc<RangeCache>, Arc<RangeCache>) {
    let open = || Arc::new(RangeCache::open(&settings(dir, 1 << 30)).unwrap());
    (open(), open())
}

/// The bytes every entry of the cache at `dir` holds, headers included.
fn stored(dir: &Path) -> u64 {
    let cache = RangeCache::open(&settings(dir, u64::MAX)).unwrap();
    cache.list().iter().map(|entry| entry.1).sum()
}

#[test]
fn a_kept_range_is_read_back_for_its_key_only() {
    let dir = tempfile::tempdir().unwrap();
    let cache = RangeCache::open(&settings(dir.path(), 1 << 30)).unwrap();
    let data = bytes_of(5000, 1);
    let kept = key("\"v1\"", 100..5100);
    assert_eq!(cache.get(&kept), None);
    cache.put(&kept, &data);
    assert_eq!(cache.get(&kept).as_deref(), Some(&data[..]));
    // Another ETag, range or object is another entry.
    assert_eq!(cache.get(&key("\"v2\"", 100..5100)), None);
    assert_eq!(cache.get(&key("\"v1\"", 100..5101)), None);
    let other = CacheKey::new(
        "s3://bucket/b.parquet",
        1 << 20,
        Some("\"v1\""),
        7,
        &(100..5100),
    );
    assert_eq!(cache.get(&other), None);
    // Bytes of the wrong length for the key are not kept.
    cache.put(&key("\"v1\"", 0..10), &data[..9]);
    assert_eq!(cache.get(&key("\"v1\"", 0..10)), None);
    // A second process (here a second handle) reads what the first wrote.
    let again = RangeCache::open(&settings(dir.path(), 1 << 30)).unwrap();
    assert_eq!(again.get(&kept).as_deref(), Some(&data[..]));
}

#[test]
fn an_altered_truncated_or_foreign_entry_is_a_miss_and_written_over() {
    let dir = tempfile::tempdir().unwrap();
    let cache = RangeCache::open(&settings(dir.path(), 1 << 30)).unwrap();
    let data = bytes_of(4096, 2);
    let kept = key("\"v1\"", 0..4096);
    cache.put(&kept, &data);
    let path = cache.entry_path(&kept);
    let whole = fs::read(&path).unwrap();

    let mut altered = whole.clone();
    let last = altered.len() - 1;
    altered[last] ^= 1;
    fs::write(&path, &altered).unwrap();
    assert_eq!(cache.get(&kept), None, "a flipped bit");

    fs::write(&path, &whole[..whole.len() - 1]).unwrap();
    assert_eq!(cache.get(&kept), None, "a truncated entry");

    // An entry of another key under this key's name (as two keys of one hash would leave).
    let other = key("\"v9\"", 0..4096);
    cache.put(&other, &data);
    fs::copy(cache.entry_path(&other), &path).unwrap();
    assert_eq!(cache.get(&kept), None, "another key's entry");

    let mut wrong_magic = whole.clone();
    wrong_magic[0] = b'X';
    fs::write(&path, &wrong_magic).unwrap();
    assert_eq!(cache.get(&kept), None, "another format");

    cache.put(&kept, &data);
    assert_eq!(cache.get(&kept).as_deref(), Some(&data[..]));
}

#[test]
fn the_least_recently_used_entries_go_when_the_limit_is_passed() {
    let dir = tempfile::tempdir().unwrap();
    let entry = 10_000;
    // Ranges of as many digits, so that every entry has the same size.
    let keys: Vec<CacheKey> = (0..12u64)
        .map(|i| key("\"v1\"", 100_000 + i * entry..100_000 + (i + 1) * entry))
        .collect();
    let total_of = |count: u64| count * (keys[0].header_len() as u64 + entry);
    // Room for ten entries.
    let cache = RangeCache::open(&settings(dir.path(), total_of(10))).unwrap();
    let old = SystemTime::now() - Duration::from_secs(1000);
    for (i, key) in keys[..10].iter().enumerate() {
        cache.put(key, &bytes_of(entry as usize, i as u8));
        // Each older than the next, as if written a second apart.
        let file = File::options()
            .write(true)
            .open(cache.entry_path(key))
            .unwrap();
        file.set_modified(old + Duration::from_secs(i as u64))
            .unwrap();
    }
    assert_eq!(stored(dir.path()), total_of(10));
    // A hit renews the oldest entry, which then outlives the next ones.
    assert!(cache.get(&keys[0]).is_some());
    cache.put(&keys[10], &bytes_of(entry as usize, 10));
    // Past the limit: entries go, oldest first, until 90% of it is left.
    assert!(stored(dir.path()) <= total_of(10) / 10 * 9);
    assert!(
        cache.get(&keys[0]).is_some(),
        "the entry a hit renewed stays"
    );
    assert!(cache.get(&keys[10]).is_some(), "the newest entry stays");
    assert_eq!(
        cache.get(&keys[1]),
        None,
        "the least recently used entry went"
    );
    // An entry larger than the whole cache is never written.
    let huge = key("\"v1\"", 0..total_of(11));
    cache.put(&huge, &vec![0; total_of(11) as usize]);
    assert_eq!(cache.get(&huge), None);
    // A cache opened with a smaller limit evicts at once.
    drop(cache);
    RangeCache::open(&settings(dir.path(), total_of(2))).unwrap();
    assert!(stored(dir.path()) <= total_of(2));
}

#[test]
fn threads_writing_and_reading_one_entry_never_see_part_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(RangeCache::open(&settings(dir.path(), 1 << 30)).unwrap());
    let data = Arc::new(bytes_of(1 << 20, 3));
    let kept = key("\"v1\"", 0..1 << 20);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (cache, data, kept) = (cache.clone(), data.clone(), kept.clone());
            std::thread::spawn(move || {
                for _ in 0..20 {
                    match cache.get(&kept) {
                        Some(read) => assert_eq!(&read[..], &data[..]),
                        None => cache.put(&kept, &data),
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(cache.get(&kept).as_deref(), Some(&data[..]));
    // No writer left a file behind in tmp/.
    let left = fs::read_dir(dir.path().join(VERSION_DIR).join(TMP_DIR))
        .unwrap()
        .count();
    assert_eq!(left, 0);
}

#[test]
fn an_unusable_directory_is_refused_and_stale_writes_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    fs::write(&file, b"x").unwrap();
    let error = RangeCache::open(&settings(&file, 1 << 30)).unwrap_err();
    assert!(matches!(&error, Error::InvalidSpec { .. }), "{error:?}");
    let expected = format!("cache_dir {file:?} cannot be used (");
    assert!(error.to_string().contains(&expected), "{error}");

    let tmp = dir.path().join("cache").join(VERSION_DIR).join(TMP_DIR);
    fs::create_dir_all(&tmp).unwrap();
    // An old file, a file of this (living) process, and one of a process that has ended.
    let (stale, fresh) = (
        tmp.join("1-0"),
        tmp.join(format!("{}-999999", std::process::id())),
    );
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let ended = child.id();
    child.wait().unwrap();
    let orphan = tmp.join(format!("{ended}-0"));
    fs::write(&stale, b"half an entry").unwrap();
    fs::write(&fresh, b"being written").unwrap();
    fs::write(&orphan, b"a killed worker's entry").unwrap();
    let long_ago = SystemTime::now() - STALE_TMP - Duration::from_secs(60);
    File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(long_ago)
        .unwrap();
    RangeCache::open(&settings(&dir.path().join("cache"), 1 << 30)).unwrap();
    assert!(
        !stale.exists(),
        "a write no process can still finish is removed"
    );
    assert!(fresh.exists(), "a write in progress is left alone");
    #[cfg(target_os = "linux")]
    assert!(
        !orphan.exists(),
        "the write of a process that ended is removed"
    );
}

/// A folder outside the cache holding one file, `precious`, of `contents`: what a planted link
/// points at, which the cache must never write, read or remove.
#[cfg(unix)]
fn file_outside(contents: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
    let outside = tempfile::tempdir().unwrap();
    let precious = outside.path().join("precious");
    fs::write(&precious, contents).unwrap();
    (outside, precious)
}

#[cfg(unix)]
#[test]
fn names_taken_in_tmp_are_passed_over_and_nothing_outside_is_written_or_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let (_outside, precious) = file_outside(b"not the cache's");
    let cache = RangeCache::open(&settings(dir.path(), 1 << 30)).unwrap();
    let tmp = dir.path().join(VERSION_DIR).join(TMP_DIR);
    // A process's names cannot be foreseen: two differ beyond their counter.
    let (first, second) = (cache.tmp_path(), cache.tmp_path());
    let random = |path: &Path| {
        path.to_str()
            .unwrap()
            .rsplit('-')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_ne!(random(&first), random(&second));
    // Names taken by a link out of the cache, a FIFO with no reader (a plain open for writing
    // would wait forever), a folder, a hard link and a file are passed over.
    let names: Vec<PathBuf> = (0..6).map(|n| tmp.join(format!("taken-{n}"))).collect();
    std::os::unix::fs::symlink(&precious, &names[0]).unwrap();
    let fifo = std::ffi::CString::new(names[1].as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `fifo` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    fs::create_dir(&names[2]).unwrap();
    fs::hard_link(&precious, &names[3]).unwrap();
    fs::write(&names[4], b"someone else's").unwrap();
    let (mut file, made) = create_new(names.iter().cloned()).unwrap();
    assert_eq!(made, names[5]);
    file.write_all(b"the cache's").unwrap();
    assert_eq!(fs::read(&precious).unwrap(), b"not the cache's");
    assert_eq!(fs::read(&names[4]).unwrap(), b"someone else's");
    // Every name taken: an error, nothing written.
    assert_eq!(
        create_new(names[..5].iter().cloned()).unwrap_err().kind(),
        io::ErrorKind::AlreadyExists
    );
    // And a kept range is written through a name of its own.
    let kept = key("\"v1\"", 0..1000);
    let data = bytes_of(1000, 6);
    cache.put(&kept, &data);
    assert_eq!(cache.get(&kept).as_deref(), Some(&data[..]));
    // Names of writers: a process id no system gives (past Linux's largest), with and without
    // the random part, is gone; a name of another shape or of this process is not judged so.
    let gone = |name: &str| writer_is_gone(std::ffi::OsStr::new(name));
    #[cfg(target_os = "linux")]
    {
        assert!(gone("4000000000-1-0123456789abcdef"));
        assert!(gone("4000000000-1"));
    }
    assert!(!gone("4000000000-1-not-hex"));
    assert!(!gone("0123456789abcdef0123456789abcdef.lock"));
    assert!(!gone(&format!("{}-1-0123456789abcdef", std::process::id())));
}

#[cfg(unix)]
#[test]
fn links_fifos_and_foreign_files_are_never_read_counted_or_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (outside, precious) = file_outside(&[7u8; 50_000]);
    let kept = key("\"v1\"", 0..1000);
    let data = bytes_of(1000, 5);
    {
        let cache = RangeCache::open(&settings(dir.path(), 1 << 30)).unwrap();
        cache.put(&kept, &data);
        let entry = cache.entry_path(&kept);
        // A link in place of the entry, to a copy of it: not followed.
        let copy = outside.path().join("copy");
        fs::copy(&entry, &copy).unwrap();
        fs::remove_file(&entry).unwrap();
        std::os::unix::fs::symlink(&copy, &entry).unwrap();
        assert_eq!(cache.get(&kept), None, "a symbolic link");
        // A FIFO in place of the entry: a miss at once, not a wait for a writer.
        fs::remove_file(&entry).unwrap();
        let fifo = std::ffi::CString::new(entry.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `fifo` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert_eq!(cache.get(&kept), None, "a FIFO");
        fs::remove_file(&entry).unwrap();
    }
    // A link to another directory planted as a folder of the cache, and files not named as
    // entries: an eviction neither counts nor removes them.
    let root = dir.path().join(VERSION_DIR);
    std::os::unix::fs::symlink(outside.path(), root.join("ab")).unwrap();
    fs::write(root.join("cd-not-an-entry"), vec![0u8; 50_000]).unwrap();
    let cache = RangeCache::open(&settings(dir.path(), 10_000)).unwrap();
    assert_eq!(cache.list().len(), 0);
    cache.put(&kept, &data);
    cache.evict();
    assert!(
        precious.exists(),
        "a file behind a planted link survives an eviction"
    );
    assert!(root.join("cd-not-an-entry").exists());
    assert_eq!(cache.get(&kept).as_deref(), Some(&data[..]));
}

#[test]
fn two_caches_of_one_process_writing_one_directory_keep_every_entry_whole() {
    // Two loaders of one process open the same directory: their files in `tmp/` must not share
    // a name, or one write would cut the other's short.
    let dir = tempfile::tempdir().unwrap();
    let caches: Vec<Arc<RangeCache>> = (0..2)
        .map(|_| Arc::new(RangeCache::open(&settings(dir.path(), 1 << 30)).unwrap()))
        .collect();
    let threads: Vec<_> = (0..8u64)
        .map(|i| {
            let cache = caches[i as usize % 2].clone();
            std::thread::spawn(move || {
                let kept = key("\"v1\"", i << 20..(i + 1) << 20);
                cache.put(&kept, &bytes_of(1 << 20, i as u8));
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    for i in 0..8u64 {
        let kept = key("\"v1\"", i << 20..(i + 1) << 20);
        let read = caches[0].get(&kept).expect("every entry whole");
        assert_eq!(&read[..], &bytes_of(1 << 20, i as u8)[..]);
    }
}

#[test]
fn threads_putting_entries_at_once_keep_the_cache_within_its_limit() {
    // An eviction sets the count to what it listed: an entry put in place after its listing
    // and counted before its end was lost from the count, and the directory grew past the limit.
    // The race is narrow (before the fix this test failed in one run of five, and the Python
    // test of the cache's size under load): several rounds, each in a directory of its own.
    for _ in 0..8 {
        let dir = tempfile::tempdir().unwrap();
        let limit = 40_000;
        let cache = Arc::new(RangeCache::open(&settings(dir.path(), limit)).unwrap());
        let threads: Vec<_> = (0..4u64)
            .map(|thread| {
                let cache = Arc::clone(&cache);
                std::thread::spawn(move || {
                    for entry in 0..60u64 {
                        let start = (thread * 60 + entry) * 1000;
                        let data = bytes_of(1000, entry as u8);
                        cache.put(&key("\"v1\"", start..start + 1000), &data);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let held = stored(dir.path());
        assert!(
            0 < held && held <= limit,
            "{held} bytes held; the limit is {limit}"
        );
    }
}

#[test]
fn loaders_of_one_process_share_one_cache_per_directory_and_count_each_others_entries() {
    let dir = tempfile::tempdir().unwrap();
    let limit = 40_000;
    let first = RangeCache::open_shared(&settings(dir.path(), limit)).unwrap();
    let again = RangeCache::open_shared(&settings(&dir.path().join("."), limit)).unwrap();
    assert!(Arc::ptr_eq(&first, &again), "one directory, one cache");
    // Another process (a cache opened apart) writes behind this one's back: this one lists the
    // directory again after writing a tenth of its limit, and evicts what both wrote.
    let other = RangeCache::open(&settings(dir.path(), limit)).unwrap();
    for entry in 0..60u64 {
        let start = entry * 1000;
        other.put(&key("\"v2\"", start..start + 1000), &bytes_of(1000, 1));
        first.put(&key("\"v1\"", start..start + 1000), &bytes_of(1000, 2));
    }
    drop(other);
    // Each counted only its own writes between listings: the directory stays within the limit
    // plus what one of them wrote since its last listing.
    let held = stored(dir.path());
    assert!(
        held <= limit + limit / 10 + 2_000,
        "{held} bytes held; the limit is {limit}"
    );
    drop((first, again));
    // Once every loader has dropped it, a new one opens afresh.
    let fresh = RangeCache::open_shared(&settings(dir.path(), limit)).unwrap();
    assert_eq!(Arc::strong_count(&fresh), 1);
}

#[test]
fn one_process_fills_an_entry_at_a_time_and_the_one_that_waited_reads_what_it_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = two_handles(dir.path());
    let kept = key("\"v1\"", 0..4096);
    let data = bytes_of(4096, 9);
    let runtime = runtime();
    runtime.block_on(async {
        let held = claim(&first, &kept)
            .await
            .expect("the right to fill a missing entry");
        let waiter = {
            let (second, kept) = (second.clone(), kept.clone());
            tokio::spawn(async move {
                let claimed = claim(&second, &kept).await;
                (claimed.is_some(), second.get(&kept))
            })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !waiter.is_finished(),
            "the second took the right while the first held it"
        );
        first.put(&kept, &data);
        drop(held);
        let (claimed, read) = waiter.await.unwrap();
        assert!(claimed);
        assert_eq!(read.as_deref(), Some(&data[..]));
        // Another entry's right is another lock: taken at once.
        let other = key("\"v1\"", 4096..8192);
        assert!(claim(&second, &other).await.is_some());
    });
    // Every right was dropped, and each removed its lock file.
    let left: Vec<_> = fs::read_dir(dir.path().join(VERSION_DIR).join(TMP_DIR))
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[cfg(unix)]
#[test]
fn a_link_planted_as_a_lock_file_is_not_followed_and_the_range_is_fetched_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(RangeCache::open(&settings(dir.path(), 1 << 30)).unwrap());
    let kept = key("\"v1\"", 0..4096);
    let outside = dir.path().join("outside");
    fs::write(&outside, b"not the cache's").unwrap();
    let lock = dir
        .path()
        .join(VERSION_DIR)
        .join(TMP_DIR)
        .join(format!("{}.lock", kept.file_name()));
    std::os::unix::fs::symlink(&outside, &lock).unwrap();
    let runtime = runtime();
    let started = std::time::Instant::now();
    assert!(runtime.block_on(claim(&cache, &kept)).is_none());
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(fs::read(&outside).unwrap(), b"not the cache's");
}

#[test]
fn two_handles_that_miss_one_entry_at_once_fetch_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = two_handles(dir.path());
    let kept = key("\"v1\"", 0..4096);
    let data = Bytes::from(bytes_of(4096, 4));
    let fetched = Arc::new(AtomicU64::new(0));
    let runtime = runtime();
    let read = runtime.block_on(async {
        let reads = [first, second].map(|cache| {
            let (kept, data, fetched) = (kept.clone(), data.clone(), fetched.clone());
            tokio::spawn(async move {
                let fetch = async move {
                    fetched.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    Ok(data)
                };
                cache.get_or_fetch(kept, fetch).await.unwrap()
            })
        });
        let mut read = Vec::new();
        for handle in reads {
            read.push(handle.await.unwrap());
        }
        read
    });
    assert_eq!(fetched.load(Ordering::Relaxed), 1, "one of the two fetched");
    assert!(read.iter().all(|bytes| *bytes == data));
}
