//! The Arrow and DLPack protocol methods of a producer, found once per type where the type alone
//! decides them (`arrow_ffi` and `arrow_device` ask the Arrow ones, `dlpack_import` the DLPack
//! ones).
//!
//! `obj.__arrow_c_array__()` asked through `getattr` costs a bound-method object, and a name that
//! is not interned misses CPython's type attribute cache (a walk of the whole MRO, a large share
//! of `ad.array(pa_arr)`); the import asks up to five such names per call. For a
//! type whose attributes are fixed by the type (`protocols::attributes_fixed_by_type`: immutable,
//! generic attribute lookup, no instance `__dict__`) and whose protocol attributes are all method
//! descriptors (`Py_TPFLAGS_METHOD_DESCRIPTOR`: Python functions, builtin methods, Cython
//! functions; `__dlpack_c_exchange_api__`, a capsule, is only asked whether it exists),
//! `type.__arrow_c_array__(obj)` is what `obj.__arrow_c_array__()` calls. Such types
//! (pyarrow's, nanoarrow's, polars') get a table of those functions, built once from their MRO;
//! every other object is asked through `getattr` each time, as before.

use std::cell::OnceCell;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};

use crate::cache::{Cache, HeldObject};
use crate::protocols;

/// A protocol attribute the Arrow and DLPack imports may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    ArrowCStream,
    ArrowCArray,
    ArrowCDeviceArray,
    ArrowCDeviceStream,
    DlpackDevice,
    Dlpack,
    /// `__dlpack_c_exchange_api__`: a capsule on the type, whose presence alone is asked here.
    DlpackExchangeApi,
}

impl Protocol {
    const ALL: [Protocol; COUNT] = [
        Protocol::ArrowCStream,
        Protocol::ArrowCArray,
        Protocol::ArrowCDeviceArray,
        Protocol::ArrowCDeviceStream,
        Protocol::DlpackDevice,
        Protocol::Dlpack,
        Protocol::DlpackExchangeApi,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Protocol::ArrowCStream => "__arrow_c_stream__",
            Protocol::ArrowCArray => "__arrow_c_array__",
            Protocol::ArrowCDeviceArray => "__arrow_c_device_array__",
            Protocol::ArrowCDeviceStream => "__arrow_c_device_stream__",
            Protocol::DlpackDevice => "__dlpack_device__",
            Protocol::Dlpack => "__dlpack__",
            Protocol::DlpackExchangeApi => dlpack_sys::DLPACK_EXCHANGE_API_ATTRIBUTE,
        }
    }

    /// Whether the attribute is a method called through the table (the others are only asked
    /// whether they exist).
    fn is_method(self) -> bool {
        self != Protocol::DlpackExchangeApi
    }
}

const COUNT: usize = 7;

/// The protocol functions of one type, indexed like [`Protocol::ALL`]; `None` where the type
/// lacks the attribute.
struct TypeMethods {
    functions: [Option<Py<PyAny>>; COUNT],
}

/// The remembered types, each held by its key (so that its address is never another type's
/// while it is remembered), with its table, `None` for an immutable type whose protocol
/// attributes are not all method descriptors (asked through `getattr` each time).
static TYPES: Cache<HeldObject, Option<Arc<TypeMethods>>, 64> = Cache::new();

/// The protocol methods of one producer, for one import.
pub(crate) struct Methods<'a, 'py> {
    object: &'a Bound<'py, PyAny>,
    table: Option<Arc<TypeMethods>>,
    /// Without a table: each attribute asked of the object, once per import.
    fetched: [OnceCell<Option<Bound<'py, PyAny>>>; COUNT],
}

impl<'a, 'py> Methods<'a, 'py> {
    /// The methods of `object`: from its type's table where there is one (built on first use),
    /// else through `getattr` on each question.
    pub(crate) fn of(object: &'a Bound<'py, PyAny>) -> Self {
        Methods {
            object,
            table: type_table(object),
            fetched: Default::default(),
        }
    }

    /// The object the methods belong to.
    pub(crate) fn object(&self) -> &'a Bound<'py, PyAny> {
        self.object
    }

    /// Whether the object has `protocol`.
    pub(crate) fn has(&self, protocol: Protocol) -> PyResult<bool> {
        match &self.table {
            Some(table) => Ok(table.functions[protocol as usize].is_some()),
            None => Ok(self.attribute(protocol)?.is_some()),
        }
    }

    /// `object.protocol()`, or `None` when the object lacks `protocol`.
    pub(crate) fn call0(&self, protocol: Protocol) -> PyResult<Option<Bound<'py, PyAny>>> {
        match &self.table {
            Some(table) => match &table.functions[protocol as usize] {
                Some(function) => call_with(function.bind(self.object.py()), self.object).map(Some),
                None => Ok(None),
            },
            None => match self.attribute(protocol)? {
                Some(method) => method.call0().map(Some),
                None => Ok(None),
            },
        }
    }

    /// Whether the object is known, without asking Python, to lack `protocol`.
    pub(crate) fn known_absent(&self, protocol: Protocol) -> bool {
        match &self.table {
            Some(table) => table.functions[protocol as usize].is_none(),
            None => protocols::known_absent(self.object, protocol.name()),
        }
    }

    /// `object.protocol(name=value, ...)` for the keyword `names` (a tuple of strings) and as
    /// many `values` (at most [`MAX_KEYWORDS`]), or `None` when the object lacks `protocol`.
    ///
    /// The call is a vectorcall with the names as `kwnames`: a keyword dict made CPython unpack
    /// it into a fresh names tuple and argument array on every call (`_PyStack_UnpackDict`, with
    /// pyo3's argument tuple a fifth of `Array.from_dlpack(np_array)`, perf).
    pub(crate) fn call_keywords(
        &self,
        protocol: Protocol,
        names: &Bound<'py, PyTuple>,
        values: &[&Bound<'py, PyAny>],
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        match &self.table {
            Some(table) => match &table.functions[protocol as usize] {
                Some(function) => vectorcall(
                    function.bind(self.object.py()),
                    Some(self.object),
                    names,
                    values,
                )
                .map(Some),
                None => Ok(None),
            },
            None => match self.attribute(protocol)? {
                Some(method) => vectorcall(method, None, names, values).map(Some),
                None => Ok(None),
            },
        }
    }

    /// `getattr(object, protocol)`, asked once per import (absence on an immutable type is
    /// remembered by `protocols`).
    fn attribute(&self, protocol: Protocol) -> PyResult<&Option<Bound<'py, PyAny>>> {
        let cell = &self.fetched[protocol as usize];
        if let Some(fetched) = cell.get() {
            return Ok(fetched);
        }
        let fetched = protocols::optional_attribute(self.object, protocol.name())?;
        Ok(cell.get_or_init(|| fetched))
    }
}

/// The table of `object`'s type: remembered, or built now when the type qualifies; `None` for
/// types that are asked through `getattr`.
fn type_table(object: &Bound<'_, PyAny>) -> Option<Arc<TypeMethods>> {
    let class = object.get_type();
    if let Some(methods) = TYPES.find(object.py(), |held, _| held.is(class.as_any())) {
        return methods;
    }
    if !protocols::attributes_fixed_by_type(&class) {
        return None;
    }
    // Built outside the cache's borrow: reading the MRO runs Python code, which may import Arrow
    // data too.
    let methods = build_table(&class).map(Arc::new);
    TYPES.insert(object.py(), HeldObject::new(class.as_any()), methods)
}

/// The protocol functions of `class`, found as CPython's attribute lookup finds them (the first
/// class of the MRO whose `__dict__` has the name); `None` when one of them is not a method
/// descriptor, or when the MRO cannot be read.
fn build_table(class: &Bound<'_, PyType>) -> Option<TypeMethods> {
    let mro = class.getattr("__mro__").ok()?;
    let mut functions: [Option<Py<PyAny>>; COUNT] = Default::default();
    for protocol in Protocol::ALL {
        let mut found = None;
        for base in mro.try_iter().ok()? {
            let namespace = base.ok()?.getattr("__dict__").ok()?;
            if let Ok(value) = namespace.get_item(protocol.name()) {
                found = Some(value);
                break;
            }
        }
        if let Some(function) = found.as_ref().filter(|_| protocol.is_method()) {
            // SAFETY: a live type object, which is all `PyType_GetFlags` requires.
            let flags = unsafe { pyo3::ffi::PyType_GetFlags(function.get_type().as_ptr().cast()) };
            if flags & pyo3::ffi::Py_TPFLAGS_METHOD_DESCRIPTOR == 0 {
                return None;
            }
        }
        functions[protocol as usize] = found.map(Bound::unbind);
    }
    Some(TypeMethods { functions })
}

/// The most keyword arguments [`Methods::call_keywords`] passes (`__dlpack__`'s `stream`,
/// `max_version` and `copy`).
pub(crate) const MAX_KEYWORDS: usize = 3;

#[cfg(not(windows))]
unsafe extern "C" {
    /// CPython's vectorcall entry point: exported by every CPython since 3.9 and part of the
    /// stable ABI since 3.12; pyo3 declares it for the stable ABI only from 3.12, and this wheel
    /// is built for 3.11 and later (on Windows, where `python3.dll` of 3.11 lacks it, the
    /// keywords go through a dict instead).
    fn PyObject_Vectorcall(
        callable: *mut pyo3::ffi::PyObject,
        args: *const *mut pyo3::ffi::PyObject,
        nargsf: usize,
        kwnames: *mut pyo3::ffi::PyObject,
    ) -> *mut pyo3::ffi::PyObject;
}

/// `callable(first, name=value, ...)` (or `callable(name=value, ...)` without `first`).
fn vectorcall<'py>(
    callable: &Bound<'py, PyAny>,
    first: Option<&Bound<'py, PyAny>>,
    names: &Bound<'py, PyTuple>,
    values: &[&Bound<'py, PyAny>],
) -> PyResult<Bound<'py, PyAny>> {
    // Checked in every build, not only with debug assertions: CPython reads one argument per
    // name from the array below, so a longer call would read past it.
    if values.len() > MAX_KEYWORDS || values.len() != names.len() {
        return Err(pyo3::exceptions::PySystemError::new_err(format!(
            "internal error: {} keyword values for {} names (at most {MAX_KEYWORDS})",
            values.len(),
            names.len()
        )));
    }
    #[cfg(not(windows))]
    {
        let mut args = [std::ptr::null_mut(); 1 + MAX_KEYWORDS];
        let positional = usize::from(first.is_some());
        if let Some(first) = first {
            args[0] = first.as_ptr();
        }
        for (slot, value) in args[positional..].iter_mut().zip(values) {
            *slot = value.as_ptr();
        }
        // SAFETY: `callable`, every argument and `names` (a tuple of strings, one per value) are
        // live objects borrowed for the call; `args` holds the positional arguments followed by
        // the keyword values, as the vectorcall protocol lays them out; the result is a new
        // reference or NULL with an exception set, which `from_owned_ptr_or_err` takes over.
        unsafe {
            let result =
                PyObject_Vectorcall(callable.as_ptr(), args.as_ptr(), positional, names.as_ptr());
            Bound::from_owned_ptr_or_err(callable.py(), result)
        }
    }
    #[cfg(windows)]
    {
        let kwargs = pyo3::types::PyDict::new(callable.py());
        for (name, value) in names.iter().zip(values) {
            kwargs.set_item(name, value)?;
        }
        match first {
            Some(first) => callable.call((first,), Some(&kwargs)),
            None => callable.call((), Some(&kwargs)),
        }
    }
}

/// `function(object)`, without the argument tuple that pyo3's `call1` builds under the limited
/// API of Python 3.11: a vectorcall (`PyObject_CallFunctionObjArgs` on Windows, which passes the
/// arguments on the C stack, through vectorcall too, after counting its `va_list`).
fn call_with<'py>(
    function: &Bound<'py, PyAny>,
    object: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    #[cfg(not(windows))]
    {
        let args = [object.as_ptr()];
        // SAFETY: both are live objects, borrowed for the call; `args` holds the one positional
        // argument and there are no keywords (NULL `kwnames`); the result is a new reference or
        // NULL with an exception set, which `from_owned_ptr_or_err` takes over.
        unsafe {
            let result =
                PyObject_Vectorcall(function.as_ptr(), args.as_ptr(), 1, std::ptr::null_mut());
            Bound::from_owned_ptr_or_err(function.py(), result)
        }
    }
    #[cfg(windows)]
    {
        let null = std::ptr::null_mut::<pyo3::ffi::PyObject>();
        // SAFETY: both are live objects, borrowed for the call; the argument list ends with
        // NULL, as `PyObject_CallFunctionObjArgs` requires, and it returns a new reference or
        // NULL with an exception set, which `from_owned_ptr_or_err` takes over.
        unsafe {
            let result =
                pyo3::ffi::PyObject_CallFunctionObjArgs(function.as_ptr(), object.as_ptr(), null);
            Bound::from_owned_ptr_or_err(function.py(), result)
        }
    }
}
