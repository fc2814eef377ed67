//! The one cache of the crate: a small, bounded, thread-safe map that keeps what a call would
//! otherwise rebuild each time (parsed schema fields, the protocol methods of a type, the pair a
//! `max_version` tuple reads as).
//!
//! Each cache is a `static` [`Cache`] of at most `N` entries, with one policy for all of them:
//!
//! - A lookup scans the entries under one uncontended lock and hands out a clone of the value (an
//!   `Arc`, a `FieldRef`, a pair of integers); a hit writes nothing and allocates nothing.
//! - A miss is computed by the caller outside the lock (it may run Python code, which may import
//!   Arrow data and ask the same cache) and then inserted; an entry whose key an equal key
//!   already holds (another thread computed it meanwhile) is not added twice.
//! - Once `N` entries are held, a new entry replaces the oldest (first in, first out). The
//!   entries are never more than `N`, so nothing grows with the number of distinct keys a
//!   program uses; a program that cycles through more than `N` keys only pays the miss again.
//! - A replaced entry is dropped after the lock is released: dropping a Python reference may run
//!   Python code (a type's last reference, a `__del__`), which must never run under the lock.
//!
//! The entries are owned by the cache and by nothing else: no value is leaked to give out
//! `'static` references. A Python object whose address is a key is held by the key itself
//! ([`HeldObject`]), so that while the entry lives the address cannot be reused by another
//! object; once the entry is replaced the reference is released and the object may go.
//!
//! The entries are a scanned vector rather than a hash map: every cache holds a few dozen entries
//! at most, compared by an address or a short key, where a scan of a contiguous array costs less
//! than hashing the key.

use std::borrow::Borrow;
use std::sync::{Mutex, MutexGuard};

use pyo3::prelude::*;

/// A bounded map of at most `N` entries; see the module documentation for the policy.
pub(crate) struct Cache<K, V, const N: usize> {
    entries: Mutex<Entries<K, V>>,
}

struct Entries<K, V> {
    /// The entries, at most `N`, in no particular order once full.
    held: Vec<(K, V)>,
    /// The entry the next insertion replaces once `held` is full: the oldest.
    oldest: usize,
}

impl<K, V: Clone, const N: usize> Cache<K, V, N> {
    /// An empty cache, for a `static`.
    pub(crate) const fn new() -> Self {
        const { assert!(N > 0, "a cache holds at least one entry") };
        Cache {
            entries: Mutex::new(Entries {
                held: Vec::new(),
                oldest: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Entries<K, V>> {
        // A panic while the lock was held left the entries whole (no entry is half written:
        // pushes and replacements are single moves), so a poisoned lock is still usable.
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The value of the first entry that `matches`, cloned.
    ///
    /// `matches` runs under the lock: it must not call Python or this cache.
    pub(crate) fn find(&self, mut matches: impl FnMut(&K, &V) -> bool) -> Option<V> {
        self.lock()
            .held
            .iter()
            .find(|(key, value)| matches(key, value))
            .map(|(_, value)| value.clone())
    }

    /// The value of `key`, cloned.
    pub(crate) fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: PartialEq + ?Sized,
    {
        self.find(|held, _| held.borrow() == key)
    }

    /// Adds `value` under `key` and returns it; when an equal key is already held, its value is
    /// returned instead and `value` is dropped. A full cache replaces its oldest entry.
    pub(crate) fn insert(&self, key: K, value: V) -> V
    where
        K: PartialEq,
    {
        // What leaves the cache is dropped only after the lock is released (see the module
        // documentation): these outlive the guard.
        let dropped: (K, V);
        let kept = {
            let mut entries = self.lock();
            if let Some((_, held)) = entries.held.iter().find(|(held, _)| *held == key) {
                let held = held.clone();
                drop(entries);
                drop((key, value));
                return held;
            }
            let kept = value.clone();
            if entries.held.len() < N {
                entries.held.push((key, value));
                return kept;
            }
            let oldest = entries.oldest;
            entries.oldest = (oldest + 1) % N;
            dropped = std::mem::replace(&mut entries.held[oldest], (key, value));
            kept
        };
        drop(dropped);
        kept
    }

    /// How many entries are held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().held.len()
    }
}

/// A Python object held by a cache key and compared by address: the strong reference keeps the
/// object alive while the entry lives, so its address is never another object's.
pub(crate) struct HeldObject {
    object: Py<PyAny>,
}

impl HeldObject {
    /// Holds a new reference to `object`.
    pub(crate) fn new(object: &Bound<'_, PyAny>) -> Self {
        HeldObject {
            object: object.clone().unbind(),
        }
    }

    /// Whether this is `object` (compared by address).
    pub(crate) fn is(&self, object: &Bound<'_, PyAny>) -> bool {
        self.object.as_ptr() == object.as_ptr()
    }
}

impl PartialEq for HeldObject {
    fn eq(&self, other: &Self) -> bool {
        self.object.as_ptr() == other.object.as_ptr()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn never_holds_more_than_its_bound() {
        let cache: Cache<u32, u32, 4> = Cache::new();
        for key in 0..100 {
            assert_eq!(cache.insert(key, key * 10), key * 10);
            assert!(cache.len() <= 4);
        }
        assert_eq!(cache.len(), 4);
    }

    #[test]
    fn a_full_cache_replaces_its_oldest_entry() {
        let cache: Cache<u32, &str, 3> = Cache::new();
        cache.insert(1, "one");
        cache.insert(2, "two");
        cache.insert(3, "three");
        cache.insert(4, "four");
        assert_eq!(cache.get(&1), None);
        assert_eq!(cache.get(&2), Some("two"));
        assert_eq!(cache.get(&4), Some("four"));
        // The next oldest is 2, then 3: a hit does not make an entry younger.
        cache.insert(5, "five");
        assert_eq!(cache.get(&2), None);
        assert_eq!(cache.get(&3), Some("three"));
        cache.insert(6, "six");
        assert_eq!(cache.get(&3), None);
        assert_eq!(
            [4, 5, 6].map(|key| cache.get(&key)),
            [Some("four"), Some("five"), Some("six")]
        );
    }

    #[test]
    fn a_hit_returns_the_value_inserted() {
        let cache: Cache<String, Arc<Vec<u8>>, 8> = Cache::new();
        let value = Arc::new(vec![1, 2, 3]);
        let returned = cache.insert("key".to_owned(), value.clone());
        assert!(Arc::ptr_eq(&returned, &value));
        let hit = cache.get("key").expect("the key was inserted");
        assert!(Arc::ptr_eq(&hit, &value));
        assert_eq!(cache.get("other"), None);
    }

    #[test]
    fn an_equal_key_keeps_the_first_value() {
        let cache: Cache<u32, Arc<u32>, 4> = Cache::new();
        let first = Arc::new(7);
        cache.insert(1, first.clone());
        let second = Arc::new(7);
        let returned = cache.insert(1, second.clone());
        assert!(Arc::ptr_eq(&returned, &first));
        assert_eq!(cache.len(), 1);
        // The refused value was dropped: only this test holds `second` now.
        assert_eq!(Arc::strong_count(&second), 1);
    }

    #[test]
    fn a_replaced_entry_is_dropped() {
        let cache: Cache<u32, Arc<u32>, 2> = Cache::new();
        let values: Vec<Arc<u32>> = (0..3).map(Arc::new).collect();
        for (key, value) in values.iter().enumerate() {
            cache.insert(key as u32, value.clone());
        }
        assert_eq!(Arc::strong_count(&values[0]), 1);
        assert_eq!(Arc::strong_count(&values[1]), 2);
        assert_eq!(Arc::strong_count(&values[2]), 2);
    }

    #[test]
    fn find_searches_keys_and_values() {
        let cache: Cache<(u8, u8), u32, 4> = Cache::new();
        cache.insert((1, 2), 12);
        cache.insert((3, 4), 34);
        assert_eq!(cache.find(|&(a, b), _| a == 3 && b == 4), Some(34));
        assert_eq!(cache.find(|_, &value| value == 12), Some(12));
        assert_eq!(cache.find(|_, &value| value == 99), None);
    }

    #[test]
    fn threads_share_one_bounded_cache() {
        static SHARED: Cache<u32, u32, 16> = Cache::new();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for key in 0..200 {
                        let value = SHARED.insert(key % 24, key % 24);
                        assert_eq!(value, key % 24);
                        if let Some(hit) = SHARED.get(&(key % 24)) {
                            assert_eq!(hit, key % 24);
                        }
                    }
                });
            }
        });
        assert!(SHARED.len() <= 16);
    }
}
