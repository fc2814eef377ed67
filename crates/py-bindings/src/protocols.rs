//! Cheap answers to "does this object's type implement protocol X?".
//!
//! Asking Python for an attribute that is absent costs a formatted `AttributeError` (a large
//! share of a `from_dlpack` of a numpy array; docs/benchmarks.md has the profile), and producers usually lack
//! at least one of the optional protocols we probe (`__dlpack_c_exchange_api__`,
//! `__arrow_c_stream__`).
//! The answer "absent" is remembered per type only where the type alone decides it: an immutable
//! type (numpy's, pyarrow's and most other extension types), whose attributes never change, that
//! looks attributes up generically (no `__getattr__` or `__getattribute__` of its own) and whose
//! instances have no `__dict__` (where an instance could carry the attribute itself, as a
//! `types.SimpleNamespace` does). Every other type is asked each time.

use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::cache::{Cache, HeldObject};

/// `Py_TPFLAGS_IMMUTABLETYPE` (CPython 3.10 and later; older versions never set it, so nothing
/// is cached there).
const IMMUTABLE_TYPE: std::os::raw::c_ulong = 1 << 8;

/// Immutable types known to lack an attribute, keyed by the type (held, so that its address is
/// never another type's while it is remembered) and the attribute's name.
static LACKING: Cache<(HeldObject, &'static str), (), 64> = Cache::new();

/// Whether `object`'s type is known, without asking Python, to lack the attribute `name`.
///
/// `false` means "ask": the attribute may or may not exist.
pub(crate) fn known_absent(object: &Bound<'_, PyAny>, name: &'static str) -> bool {
    let class = object.get_type();
    LACKING
        .find(object.py(), |(held, lacking), ()| {
            held.is(class.as_any()) && *lacking == name
        })
        .is_some()
}

/// Whether every instance of `class` has exactly the attributes its type gives it: the type is
/// immutable, looks attributes up with `PyObject_GenericGetAttr`, and gives instances no
/// `__dict__`.
pub(crate) fn attributes_fixed_by_type(class: &Bound<'_, PyType>) -> bool {
    // SAFETY: `class` is a live type object, which is all `PyType_GetFlags` requires.
    let flags = unsafe { pyo3::ffi::PyType_GetFlags(class.as_ptr().cast()) };
    if flags & IMMUTABLE_TYPE == 0 {
        return false;
    }
    // SAFETY: `class` is a live type object; from Python 3.10 on (the wheel needs 3.11),
    // `PyType_GetSlot` answers for static types as well as heap types, NULL when unset.
    let getattro =
        unsafe { pyo3::ffi::PyType_GetSlot(class.as_ptr().cast(), pyo3::ffi::Py_tp_getattro) };
    if getattro != pyo3::ffi::PyObject_GenericGetAttr as *mut std::ffi::c_void {
        return false;
    }
    class
        .getattr("__dictoffset__")
        .and_then(|offset| offset.extract::<isize>())
        .is_ok_and(|offset| offset == 0)
}

/// Records that `object`'s type lacks `name`, when its type alone decides that (see the module
/// documentation).
pub(crate) fn remember_absent(object: &Bound<'_, PyAny>, name: &'static str) {
    let class = object.get_type();
    if !attributes_fixed_by_type(&class) {
        return;
    }
    LACKING.insert(object.py(), (HeldObject::new(class.as_any()), name), ());
}

/// `getattr(object, name)`, or `None` when the attribute is absent; absence on an immutable type
/// is remembered, so the next object of that type is answered without an `AttributeError`.
pub(crate) fn optional_attribute<'py>(
    object: &Bound<'py, PyAny>,
    name: &'static str,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    if known_absent(object, name) {
        return Ok(None);
    }
    match object.getattr(name) {
        Ok(value) => Ok(Some(value)),
        Err(error) if error.is_instance_of::<pyo3::exceptions::PyAttributeError>(object.py()) => {
            remember_absent(object, name);
            Ok(None)
        }
        Err(error) => Err(error),
    }
}

/// The two integers of a `__dlpack_device__` answer, read straight from an exact tuple of two
/// exact ints that fit `i64`; `None` for anything else, which the caller extracts through pyo3
/// (for its errors and for tuple subclasses or `__index__` objects).
///
/// pyo3's `extract::<(i64, i64)>` was half of the `__dlpack_device__` probe of
/// `ad.array(pa_arr)` and `Array.from_dlpack(np_array)` (perf): a type check, a length, and an
/// owned reference and an error check per item.
pub(crate) fn exact_int_pair(answer: &Bound<'_, PyAny>) -> Option<(i64, i64)> {
    use pyo3::ffi;
    let tuple = answer.as_ptr();
    // SAFETY: `answer` is a live object; the exact-type checks read its type only.
    if unsafe { ffi::PyTuple_CheckExact(tuple) } == 0 {
        return None;
    }
    // SAFETY: an exact tuple.
    if unsafe { ffi::PyTuple_Size(tuple) } != 2 {
        return None;
    }
    let item = |index| {
        // SAFETY: an exact tuple of two items, so the index is in range; the item is borrowed
        // from the tuple, which `answer` keeps alive while it is read.
        let item = unsafe { ffi::PyTuple_GetItem(tuple, index) };
        // SAFETY: a live object (a tuple's items are never NULL once built).
        if item.is_null() || unsafe { ffi::PyLong_CheckExact(item) } == 0 {
            return None;
        }
        // SAFETY: an exact int; -1 with an error set means it does not fit, which is cleared and
        // left to the caller's slower extraction.
        let value = unsafe { ffi::PyLong_AsLongLong(item) };
        if value == -1 && PyErr::occurred(answer.py()) {
            drop(PyErr::take(answer.py()));
            return None;
        }
        Some(value)
    };
    Some((item(0)?, item(1)?))
}
