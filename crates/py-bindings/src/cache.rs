//! The one cache of the crate: a small, bounded map that keeps what a call would otherwise
//! rebuild each time (parsed schema fields, the protocol methods of a type, the pair a
//! `max_version` tuple reads as).
//!
//! Each cache is a `static` [`Cache`] of at most `N` entries, with one policy for all of them:
//!
//! - Every lookup and insertion takes a [`Python`] token: the calling thread holds the GIL, and
//!   the GIL is what serialises the threads that use a cache. No lock is taken: the entries live
//!   in a `RefCell`, borrowed only for the scan (or the push) and never while Python code can
//!   run, so no other thread can take the GIL while a borrow is held and no Python code (a
//!   `__del__`, a call that asks the same cache) can find the cache borrowed.
//! - A lookup scans the entries and hands out a clone of the value (an `Arc`, a `FieldRef`, a
//!   pair of integers); a hit writes nothing, allocates nothing and takes no lock (an uncontended
//!   mutex's two atomic operations cost the hot calls a few percent of PyArrow's time).
//! - A miss is computed by the caller outside the borrow (it may run Python code, which may
//!   import Arrow data and ask the same cache) and then inserted; an entry whose key an equal
//!   key already holds (another thread, or a re-entrant call, computed it meanwhile) is not
//!   added twice.
//! - Once `N` entries are held, a new entry replaces the oldest (first in, first out). The
//!   entries are never more than `N`, so nothing grows with the number of distinct keys a
//!   program uses; a program that cycles through more than `N` keys only pays the miss again.
//! - A replaced entry (and an entry refused as a duplicate) is dropped after the borrow ends:
//!   dropping a Python reference may run Python code (a type's last reference, a `__del__`),
//!   which may release the GIL or ask the same cache.
//!
//! The entries are owned by the cache and by nothing else: no value is leaked to give out
//! `'static` references. A Python object whose address is a key is held by the key itself
//! ([`HeldObject`]), so that while the entry lives the address cannot be reused by another
//! object; once the entry is replaced the reference is released and the object may go.
//!
//! The entries are a scanned vector rather than a hash map: every cache holds a few dozen entries
//! at most, compared by an address or a short key, where a scan of a contiguous array costs less
//! than hashing the key.
//!
//! The GIL serialises only where there is one: the module declares `gil_used = true`
//! (`lib.rs`), so a free-threaded CPython that imports it turns its GIL on, and pyo3 refuses
//! sub-interpreters (each of which could hold a GIL of its own).

use std::borrow::Borrow;
use std::cell::RefCell;

use pyo3::prelude::*;

/// A bounded map of at most `N` entries; see the module documentation for the policy.
pub(crate) struct Cache<K, V, const N: usize> {
    entries: RefCell<Entries<K, V>>,
}

// SAFETY: every access to `entries` goes through a method that takes a `Python<'_>` token, so
// the accessing thread holds the GIL, and on the interpreters this module runs on (GIL builds;
// a free-threaded build turns its GIL on when it imports the module, which declares
// `gil_used = true`; pyo3 refuses sub-interpreters) one thread at a time holds it. A borrow is
// held only across code that cannot release the GIL (key comparisons, the `matches` closures,
// which must not call Python, value clones, a push or a replacement), so no other thread
// attaches while one is held: the `RefCell`'s unsynchronised flag and entries are only ever
// touched by one thread at a time, with the GIL's acquire and release ordering the accesses of
// successive holders. `K: Send` and `V: Send` because an entry made on one thread may be cloned
// out and dropped on another, as with `Mutex<T>: Sync`.
unsafe impl<K: Send, V: Send, const N: usize> Sync for Cache<K, V, N> {}

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
            entries: RefCell::new(Entries {
                held: Vec::new(),
                oldest: 0,
            }),
        }
    }

    /// The value of the first entry that `matches`, cloned.
    ///
    /// `matches` runs while the entries are borrowed: it must not call Python or this cache.
    pub(crate) fn find(
        &self,
        _attached: Python<'_>,
        mut matches: impl FnMut(&K, &V) -> bool,
    ) -> Option<V> {
        // The entries are borrowed elsewhere only if Python code ran under a borrow, which the
        // policy rules out; should it happen, the lookup is a miss rather than a panic.
        let entries = self.entries.try_borrow().ok()?;
        entries
            .held
            .iter()
            .find(|(key, value)| matches(key, value))
            .map(|(_, value)| value.clone())
    }

    /// The value of `key`, cloned.
    pub(crate) fn get<Q>(&self, attached: Python<'_>, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: PartialEq + ?Sized,
    {
        self.find(attached, |held, _| held.borrow() == key)
    }

    /// Adds `value` under `key` and returns it; when an equal key is already held, its value is
    /// returned instead and `value` is dropped. A full cache replaces its oldest entry.
    pub(crate) fn insert(&self, _attached: Python<'_>, key: K, value: V) -> V
    where
        K: PartialEq,
    {
        // What leaves the cache (or never enters it) is dropped only after the borrow ends (see
        // the module documentation): it is moved out of the block that borrows.
        let (kept, dropped) = {
            let Ok(mut entries) = self.entries.try_borrow_mut() else {
                // Borrowed only if Python code ran under a borrow (ruled out by the policy):
                // the value is handed back unremembered rather than a panic.
                return value;
            };
            if let Some((_, held)) = entries.held.iter().find(|(held, _)| *held == key) {
                (held.clone(), Some((key, value)))
            } else if entries.held.len() < N {
                let kept = value.clone();
                entries.held.push((key, value));
                (kept, None)
            } else {
                let kept = value.clone();
                let oldest = entries.oldest;
                entries.oldest = (oldest + 1) % N;
                let replaced = std::mem::replace(&mut entries.held[oldest], (key, value));
                (kept, Some(replaced))
            }
        };
        drop(dropped);
        kept
    }

    /// How many entries are held.
    #[cfg(test)]
    pub(crate) fn len(&self, _attached: Python<'_>) -> usize {
        self.entries.borrow().held.len()
    }

    /// Whether the entries are free to borrow: nothing up the stack is inside a borrow.
    #[cfg(test)]
    fn is_free(&self, _attached: Python<'_>) -> bool {
        self.entries.try_borrow_mut().is_ok()
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
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use pyo3::types::{PyCFunction, PyDict, PyList};

    use super::*;

    /// Runs `f` attached to an interpreter, which the test process starts on first use.
    fn attached<R>(f: impl FnOnce(Python<'_>) -> R) -> R {
        Python::initialize();
        Python::attach(f)
    }

    /// The reference count of `object`.
    fn references(object: &Bound<'_, PyAny>) -> isize {
        // SAFETY: `object` is a live object and the thread is attached.
        unsafe { pyo3::ffi::Py_REFCNT(object.as_ptr()) }
    }

    #[test]
    fn never_holds_more_than_its_bound() {
        attached(|py| {
            let cache: Cache<u32, u32, 4> = Cache::new();
            for key in 0..100 {
                assert_eq!(cache.insert(py, key, key * 10), key * 10);
                assert!(cache.len(py) <= 4);
            }
            assert_eq!(cache.len(py), 4);
        });
    }

    #[test]
    fn a_full_cache_replaces_its_oldest_entry() {
        attached(|py| {
            let cache: Cache<u32, &str, 3> = Cache::new();
            cache.insert(py, 1, "one");
            cache.insert(py, 2, "two");
            cache.insert(py, 3, "three");
            cache.insert(py, 4, "four");
            assert_eq!(cache.get(py, &1), None);
            assert_eq!(cache.get(py, &2), Some("two"));
            assert_eq!(cache.get(py, &4), Some("four"));
            // The next oldest is 2, then 3: a hit does not make an entry younger.
            cache.insert(py, 5, "five");
            assert_eq!(cache.get(py, &2), None);
            assert_eq!(cache.get(py, &3), Some("three"));
            cache.insert(py, 6, "six");
            assert_eq!(cache.get(py, &3), None);
            assert_eq!(
                [4, 5, 6].map(|key| cache.get(py, &key)),
                [Some("four"), Some("five"), Some("six")]
            );
        });
    }

    #[test]
    fn a_hit_returns_the_value_inserted() {
        attached(|py| {
            let cache: Cache<String, Arc<Vec<u8>>, 8> = Cache::new();
            let value = Arc::new(vec![1, 2, 3]);
            let returned = cache.insert(py, "key".to_owned(), value.clone());
            assert!(Arc::ptr_eq(&returned, &value));
            let hit = cache.get(py, "key").expect("the key was inserted");
            assert!(Arc::ptr_eq(&hit, &value));
            assert_eq!(cache.get(py, "other"), None);
        });
    }

    #[test]
    fn an_equal_key_keeps_the_first_value() {
        attached(|py| {
            let cache: Cache<u32, Arc<u32>, 4> = Cache::new();
            let first = Arc::new(7);
            cache.insert(py, 1, first.clone());
            let second = Arc::new(7);
            let returned = cache.insert(py, 1, second.clone());
            assert!(Arc::ptr_eq(&returned, &first));
            assert_eq!(cache.len(py), 1);
            // The refused value was dropped: only this test holds `second` now.
            assert_eq!(Arc::strong_count(&second), 1);
        });
    }

    #[test]
    fn a_replaced_entry_is_dropped() {
        attached(|py| {
            let cache: Cache<u32, Arc<u32>, 2> = Cache::new();
            let values: Vec<Arc<u32>> = (0..3).map(Arc::new).collect();
            for (key, value) in values.iter().enumerate() {
                cache.insert(py, key as u32, value.clone());
            }
            assert_eq!(Arc::strong_count(&values[0]), 1);
            assert_eq!(Arc::strong_count(&values[1]), 2);
            assert_eq!(Arc::strong_count(&values[2]), 2);
        });
    }

    #[test]
    fn find_searches_keys_and_values() {
        attached(|py| {
            let cache: Cache<(u8, u8), u32, 4> = Cache::new();
            cache.insert(py, (1, 2), 12);
            cache.insert(py, (3, 4), 34);
            assert_eq!(cache.find(py, |&(a, b), _| a == 3 && b == 4), Some(34));
            assert_eq!(cache.find(py, |_, &value| value == 12), Some(12));
            assert_eq!(cache.find(py, |_, &value| value == 99), None);
        });
    }

    #[test]
    fn threads_share_one_bounded_cache() {
        static SHARED: Cache<u32, u32, 16> = Cache::new();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for key in 0..200 {
                        // Attached per operation, so that the threads take turns.
                        let value = attached(|py| SHARED.insert(py, key % 24, key % 24));
                        assert_eq!(value, key % 24);
                        if let Some(hit) = attached(|py| SHARED.get(py, &(key % 24))) {
                            assert_eq!(hit, key % 24);
                        }
                    }
                });
            }
        });
        attached(|py| assert!(SHARED.len(py) <= 16));
    }

    /// A value whose drop checks that the cache is not borrowed and, once, inserts into it.
    struct Reentrant {
        cache: &'static Cache<u32, Arc<Reentrant>, 2>,
        /// The key its drop inserts, if any.
        inserts: Option<u32>,
        drops: &'static AtomicUsize,
    }

    impl Drop for Reentrant {
        fn drop(&mut self) {
            attached(|py| {
                assert!(
                    self.cache.is_free(py),
                    "dropped while the entries are borrowed"
                );
                if let Some(key) = self.inserts {
                    let value = Arc::new(Reentrant {
                        cache: self.cache,
                        inserts: None,
                        drops: self.drops,
                    });
                    let kept = self.cache.insert(py, key, value.clone());
                    assert!(
                        Arc::ptr_eq(&kept, &value),
                        "the re-entrant insert was refused"
                    );
                }
            });
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_replaced_entry_is_dropped_after_the_borrow_and_may_insert() {
        static CACHE: Cache<u32, Arc<Reentrant>, 2> = Cache::new();
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        let value = |inserts| {
            Arc::new(Reentrant {
                cache: &CACHE,
                inserts,
                drops: &DROPS,
            })
        };
        attached(|py| {
            CACHE.insert(py, 1, value(Some(10)));
            CACHE.insert(py, 2, value(None));
            assert_eq!(DROPS.load(Ordering::SeqCst), 0);
            // Replaces 1, whose drop inserts 10, which replaces 2 (the oldest then).
            CACHE.insert(py, 3, value(None));
            assert_eq!(DROPS.load(Ordering::SeqCst), 2);
            assert!(CACHE.get(py, &1).is_none());
            assert!(CACHE.get(py, &2).is_none());
            assert!(CACHE.get(py, &3).is_some());
            assert!(CACHE.get(py, &10).is_some());
            assert_eq!(CACHE.len(py), 2);
            // A value refused for an equal key is dropped after the borrow too.
            CACHE.insert(py, 3, value(Some(20)));
            assert_eq!(DROPS.load(Ordering::SeqCst), 4);
            assert!(CACHE.get(py, &20).is_some());
        });
    }

    #[test]
    fn a_held_object_key_holds_a_reference_until_replaced() {
        attached(|py| {
            let cache: Cache<HeldObject, u32, 1> = Cache::new();
            let object = PyList::empty(py).into_any();
            let before = references(&object);
            cache.insert(py, HeldObject::new(&object), 1);
            assert_eq!(references(&object), before + 1);
            assert_eq!(cache.find(py, |held, _| held.is(&object)), Some(1));
            // An equal key is refused and its reference released.
            cache.insert(py, HeldObject::new(&object), 2);
            assert_eq!(references(&object), before + 1);
            cache.insert(py, HeldObject::new(PyList::empty(py).as_any()), 3);
            assert_eq!(references(&object), before);
            assert_eq!(cache.find(py, |held, _| held.is(&object)), None);
        });
    }

    #[test]
    fn a_del_run_by_a_replaced_key_may_ask_the_cache() {
        static CACHE: Cache<HeldObject, u32, 1> = Cache::new();
        static ASKED: AtomicBool = AtomicBool::new(false);
        attached(|py| {
            // `__del__` asks the cache and inserts into it, from Python, while the entry that
            // held its object is being replaced.
            let hook = PyCFunction::new_closure(py, None, None, |args, _| -> PyResult<()> {
                let py = args.py();
                let _ = CACHE.find(py, |_, _| true);
                let kept = CACHE.insert(py, HeldObject::new(&args.get_item(0)?), 99);
                assert_eq!(kept, 99);
                ASKED.store(true, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
            let globals = PyDict::new(py);
            globals.set_item("hook", hook).unwrap();
            py.run(
                c"class Dies:\n    def __del__(self):\n        hook(0)\nvictim = Dies()\n",
                Some(&globals),
                None,
            )
            .unwrap();
            let victim = globals.get_item("victim").unwrap().unwrap();
            CACHE.insert(py, HeldObject::new(&victim), 1);
            globals.del_item("victim").unwrap();
            drop(victim);
            // The cache now holds the last reference: replacing the entry runs `__del__`.
            assert!(!ASKED.load(Ordering::SeqCst));
            let other = PyList::empty(py).into_any();
            CACHE.insert(py, HeldObject::new(&other), 2);
            assert!(
                ASKED.load(Ordering::SeqCst),
                "__del__ did not reach the cache"
            );
            assert_eq!(CACHE.len(py), 1);
            assert_eq!(CACHE.find(py, |_, &value| value == 99), Some(99));
        });
    }
}
