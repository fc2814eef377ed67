//! `__dlpack__` of `Array` and `Tensor` as a raw `METH_FASTCALL | METH_KEYWORDS` method.
//!
//! The producer call is the package's most frequent, and every consumer passes keywords (numpy
//! three: `dl_device`, `copy`, `max_version`; torch and JAX `max_version`). pyo3's generated
//! wrapper matches each keyword by its UTF-8 text (`PyUnicode_AsUTF8AndSize` and `memcmp` per
//! name and parameter) and moves its results through several generic layers, a large share of
//! `Array.__dlpack__` with numpy's keywords (docs/benchmarks.md has the profile). This method is the same call
//! without those layers: keyword names are matched by pointer against interned names first
//! (CPython interns the keyword names of every call site, and numpy and torch pass interned
//! names), by value otherwise, and the values go straight to `dlpack_export`.
//!
//! Everything the pyo3 method did is kept: the same signature (`__text_signature__` included),
//! the same errors for positional arguments and unknown keywords, pyo3's own extraction (with its
//! "while processing" note) for `dl_device` and `copy` values other than `None`, `True` and
//! `False`, and no panic reaching Python (`errors::no_panic`).
//! `FixedShapeTensorArray` keeps its pyo3 method (already a twentieth of PyArrow's call), which
//! overrides this one in its class.

use std::ffi::CStr;

use pyo3::PyClass;
use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::pyclass::boolean_struct::True;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;

use crate::array::PyArray;
use crate::dlpack_export::{self, DlpackSource};
use crate::errors;
use crate::py_tensor::PyTensor;

/// Installs the method on `Array` and `Tensor`; call once the classes are registered.
pub(crate) fn install(py: Python<'_>) -> PyResult<()> {
    install_on::<PyArray>(
        py,
        c"__dlpack__($self, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n\
          Exports the array as a DLPack capsule: primitive arrays as 1-D tensors, fixed-size \
          lists\nas n-D tensors; booleans and several chunks are copied unless `copy=False`.",
    )?;
    install_on::<PyTensor>(
        py,
        c"__dlpack__($self, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n\
          Exports the tensor as a DLPack capsule.",
    )
}

/// The classes whose `__dlpack__` is this method: frozen pyo3 classes (read without a borrow
/// flag) that export through [`DlpackSource`].
trait Exporter: DlpackSource + PyClass<Frozen = True> + Sync {}

impl<T: DlpackSource + PyClass<Frozen = True> + Sync> Exporter for T {}

/// Sets `T.__dlpack__` to a method descriptor of [`dlpack_method::<T>`], documented by `doc`
/// (a text signature, `--`, then the docstring, as pyo3 writes them).
fn install_on<T: Exporter>(py: Python<'_>, doc: &'static CStr) -> PyResult<()> {
    let class = T::type_object(py);
    // The method table must outlive the class; the class lives as long as the process (it is
    // registered in the module), so one leaked table per class is the owner.
    let definition: &'static mut ffi::PyMethodDef = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: c"__dlpack__".as_ptr(),
        ml_meth: ffi::PyMethodDefPointer {
            PyCFunctionFastWithKeywords: dlpack_method::<T>,
        },
        ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
        ml_doc: doc.as_ptr(),
    }));
    // SAFETY: `class` is a live type object and `definition` a static method table whose
    // function has the `METH_FASTCALL | METH_KEYWORDS` signature its flags announce; the
    // descriptor checks that `self` is an instance of `class` before calling it.
    let descriptor = unsafe {
        Bound::from_owned_ptr_or_err(py, ffi::PyDescr_NewMethod(class.as_type_ptr(), definition))
    }?;
    class.setattr("__dlpack__", descriptor)
}

/// A keyword parameter of `__dlpack__`; its discriminant is its slot in [`Keywords`] and in
/// [`NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keyword {
    Stream,
    MaxVersion,
    DlDevice,
    Copy,
}

impl Keyword {
    /// Every keyword, each at its own slot.
    const ALL: [Keyword; KEYWORDS] = [
        Keyword::Stream,
        Keyword::MaxVersion,
        Keyword::DlDevice,
        Keyword::Copy,
    ];

    /// The parameter's name in the signature.
    const fn name(self) -> &'static str {
        match self {
            Keyword::Stream => "stream",
            Keyword::MaxVersion => "max_version",
            Keyword::DlDevice => "dl_device",
            Keyword::Copy => "copy",
        }
    }

    /// Where the keyword's value and interned name are kept.
    const fn slot(self) -> usize {
        self as usize
    }
}

/// How many keyword parameters `__dlpack__` has.
const KEYWORDS: usize = 4;

/// The keyword names, each at its keyword's slot: derived from [`Keyword`], so that the names and
/// the slots cannot drift apart when the keywords are reordered.
const NAMES: [&str; KEYWORDS] = {
    let mut names = [""; KEYWORDS];
    let mut index = 0;
    while index < KEYWORDS {
        let keyword = Keyword::ALL[index];
        names[keyword.slot()] = keyword.name();
        index += 1;
    }
    names
};

/// [`NAMES`], interned.
static INTERNED: PyOnceLock<[Py<PyString>; KEYWORDS]> = PyOnceLock::new();

/// The keyword arguments of one call, borrowed from the caller's argument vector (absent ones
/// `None`; a Python `None` is kept, and means the same).
#[derive(Default)]
struct Keywords<'a, 'py> {
    values: [Option<Borrowed<'a, 'py, PyAny>>; KEYWORDS],
}

impl<'a, 'py> Keywords<'a, 'py> {
    /// Reads the keywords of a vectorcall: `kwnames` (NULL or a tuple of `str`) names the values
    /// that follow the positional ones in `args`.
    ///
    /// # Safety
    ///
    /// `args`, `nargs` and `kwnames` are those CPython passed to a `METH_FASTCALL |
    /// METH_KEYWORDS` function: `args` holds `nargs` positional values, then one per name.
    unsafe fn read(
        py: Python<'py>,
        class: &str,
        args: *const *mut ffi::PyObject,
        nargs: usize,
        kwnames: *mut ffi::PyObject,
    ) -> PyResult<Self> {
        if nargs != 0 {
            let verb = if nargs == 1 { "was" } else { "were" };
            return Err(PyTypeError::new_err(format!(
                "{class}.__dlpack__() takes 0 positional arguments but {nargs} {verb} given"
            )));
        }
        let mut keywords = Keywords::default();
        // SAFETY: `kwnames` is NULL or a live tuple (the caller's guarantee).
        let Some(names) = (unsafe { Borrowed::from_ptr_or_opt(py, kwnames) }) else {
            return Ok(keywords);
        };
        let interned =
            INTERNED.get_or_init(py, || NAMES.map(|name| PyString::intern(py, name).unbind()));
        // SAFETY: `names` is a live tuple.
        let count = unsafe { ffi::PyTuple_Size(names.as_ptr()) };
        for index in 0..count.max(0) {
            // SAFETY: `index` is below the tuple's length, so the item is a borrowed reference
            // that the tuple keeps alive; CPython puts only `str` in `kwnames`.
            let name =
                unsafe { Borrowed::from_ptr(py, ffi::PyTuple_GetItem(names.as_ptr(), index)) };
            let keyword = Keywords::keyword(&name, interned)?.ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "{class}.__dlpack__() got an unexpected keyword argument '{}'",
                    &*name
                ))
            })?;
            if keywords.values[keyword.slot()].is_some() {
                return Err(PyTypeError::new_err(format!(
                    "{class}.__dlpack__() got multiple values for argument '{}'",
                    keyword.name()
                )));
            }
            // SAFETY: the value of keyword `index` follows the `nargs` (zero) positional values
            // (the caller's guarantee); the caller's vector keeps it alive during the call.
            keywords.values[keyword.slot()] =
                Some(unsafe { Borrowed::from_ptr(py, *args.add(nargs + index as usize)) });
        }
        Ok(keywords)
    }

    /// The parameter `name` is: by pointer against the interned names, then by value.
    fn keyword(
        name: &Borrowed<'_, 'py, PyAny>,
        interned: &[Py<PyString>; KEYWORDS],
    ) -> PyResult<Option<Keyword>> {
        if let Some(keyword) = Keyword::ALL
            .into_iter()
            .find(|keyword| interned[keyword.slot()].as_ptr() == name.as_ptr())
        {
            return Ok(Some(keyword));
        }
        for keyword in Keyword::ALL {
            if name.eq(interned[keyword.slot()].bind(name.py()))? {
                return Ok(Some(keyword));
            }
        }
        Ok(None)
    }

    /// The value of `keyword`, `None` when absent or `None`.
    fn given(&self, keyword: Keyword) -> Option<&Bound<'py, PyAny>> {
        self.values[keyword.slot()]
            .as_deref()
            .filter(|value| !value.is_none())
    }

    /// `copy`: `True` and `False` by pointer, anything else through pyo3's `bool` extraction
    /// (which takes `numpy.bool_` too).
    fn copy(&self) -> PyResult<Option<bool>> {
        let Some(copy) = self.given(Keyword::Copy) else {
            return Ok(None);
        };
        // SAFETY: `Py_True` and `Py_False` return the immortal singletons, only compared.
        let (yes, no) = unsafe { (ffi::Py_True(), ffi::Py_False()) };
        match copy.as_ptr() {
            pointer if pointer == yes => Ok(Some(true)),
            pointer if pointer == no => Ok(Some(false)),
            _ => copy
                .extract::<bool>()
                .map(Some)
                .map_err(|error| noted(copy.py(), error, Keyword::Copy)),
        }
    }

    /// `dl_device`, through pyo3's extraction of a `(u32, i32)` pair.
    fn dl_device(&self) -> PyResult<Option<(u32, i32)>> {
        self.given(Keyword::DlDevice)
            .map(|device| {
                device
                    .extract::<(u32, i32)>()
                    .map_err(|error| noted(device.py(), error, Keyword::DlDevice))
            })
            .transpose()
    }
}

/// `error` with the note pyo3 adds to a refused argument: "while processing 'name'".
fn noted(py: Python<'_>, error: PyErr, keyword: Keyword) -> PyErr {
    let _ = error.add_note(py, format!("while processing '{}'", keyword.name()));
    error
}

/// `__dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None)` of `T`, as
/// CPython calls a `METH_FASTCALL | METH_KEYWORDS` method.
///
/// # Safety
///
/// Called by CPython only, with the GIL held, through the method descriptor made by
/// [`install_on::<T>`], which has checked that `slf` is an instance of `T`.
unsafe extern "C" fn dlpack_method<T: Exporter>(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls methods with the GIL held.
    let py = unsafe { Python::assume_attached() };
    // The top bit, `PY_VECTORCALL_ARGUMENTS_OFFSET` (the caller lets us use `args[-1]`), is not
    // part of the count.
    let nargs = (nargsf as usize) & (usize::MAX >> 1);
    let result = errors::no_panic("exporting a DLPack tensor", || {
        // SAFETY: the descriptor checked that `slf`, a live object, is an instance of `T`.
        let source = unsafe { Borrowed::from_ptr(py, slf).cast_unchecked::<T>() };
        // SAFETY: CPython's vectorcall arguments (this function's own guarantee).
        let keywords = unsafe { Keywords::read(py, T::NAME, args, nargs, kwnames) }?;
        // In pyo3's order: `dl_device` and `copy` are extracted first, `max_version` next.
        let dl_device = keywords.dl_device()?;
        let copy = keywords.copy()?;
        let max_version = dlpack_export::max_version_argument(keywords.given(Keyword::MaxVersion))?;
        dlpack_export::export(
            py,
            source.get(),
            keywords.given(Keyword::Stream),
            max_version,
            dl_device,
            copy,
        )
    });
    match result {
        Ok(capsule) => capsule.into_ptr(),
        Err(error) => {
            error.restore(py);
            std::ptr::null_mut()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_keyword_has_its_own_slot_and_name() {
        for (index, keyword) in Keyword::ALL.into_iter().enumerate() {
            assert_eq!(keyword.slot(), index, "{keyword:?} is not at its own slot");
            assert_eq!(NAMES[keyword.slot()], keyword.name());
        }
        assert_eq!(NAMES, ["stream", "max_version", "dl_device", "copy"]);
    }
}
