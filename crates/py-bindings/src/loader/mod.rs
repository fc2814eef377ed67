//! `arrow_dlpack._Batches`: the loader layer (`arrow-dlpack-loader`) as a Python iterator of
//! batches, each a dict of `Tensor`s.
//!
//! The Python class `arrow_dlpack.Batches` (in `python/arrow_dlpack/_batches.py`, made by
//! `ad.batches`) is the public face: it works out the shard of a DataLoader worker or a
//! distributed rank and shows progress, and hands everything else to this class.
//!
//! Sources are paths of Arrow IPC or Parquet files, or URLs of such objects in object storage
//! (with `storage_options`), read by the loader's own threads, or objects with
//! `__arrow_c_stream__` (`source.rs`), read on the loader's thread.
//! `__next__` waits for the next batch with the GIL released: decoding, re-batching and copies
//! never hold it; it waits in slices of `interrupt::SIGNAL_POLL`, looking for signals between
//! them, so that Ctrl-C interrupts it.
//!
//! The options are the fields of [`BatchSpec`](arrow_dlpack_loader::BatchSpec), declared there
//! once (`BatchSpec::OPTIONS`): `_Batches` takes each as a keyword named after its field and
//! converts it by its type (`options.rs`), and `_Batches.OPTIONS` lists them for the Python
//! side, whose signatures the Python tests hold against it. `functions.rs` has the loader's
//! free functions: `_check_options`, `_collate` and `_merge_states`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, TryLockError};
use std::time::Duration;

use arrow_dlpack_loader::{Batches, LoaderState};
use pyo3::prelude::*;
use pyo3::types::PyDict;

mod functions;
mod interrupt;
mod options;
mod source;

use crate::errors;
use functions::batch_dict;
pub(crate) use functions::{check_options, collate_table, merge_states};
use options::spec_from_options;
pub(crate) use source::{Input, source_of};

/// How an iteration ended: a loader yields its batches once, and iterating it again after its
/// end is refused with an error that says which end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// Every batch was handed out.
    Exhausted,
    /// A batch failed, and the error was raised.
    Failed,
    /// `close()` ran.
    Closed,
    /// The interpreter's exit stopped it (and closed it, or its `next()` in another thread
    /// met the stop).
    StoppedAtExit,
}

/// The error of `next()` on a loader that the interpreter's exit stopped before its last batch.
fn stopped_at_exit() -> PyErr {
    errors::value_error(
        "this loader was stopped at interpreter exit before its last batch: a loop over it \
         stops here rather than end as if the epoch were whole",
    )
}

/// Batches of exactly `batch_size` rows from an Arrow source, made on background threads; each
/// is a dict from column (or group) name to `Tensor`.
#[pyclass(name = "_Batches", module = "arrow_dlpack", weakref)]
pub(crate) struct PyBatches {
    /// `None` once the iteration ended or `close()` ran: the threads are joined then.
    /// The lock is only ever tried, never waited for with the GIL held.
    batches: Mutex<Option<Batches>>,
    /// How the iteration ended, once it did.
    ended: Mutex<Option<Ended>>,
    /// The rows of this shard, where the source's metadata (or the in-memory source) tells.
    num_rows: Option<u64>,
    /// The number of batches, where the row count is known and batches are cut by rows.
    num_batches: Option<usize>,
    /// The epoch's rows that no rank reads without `drop_last`.
    rows_left_out: u64,
    /// The batches handed out so far.
    batches_yielded: AtomicUsize,
    /// The rows of the batches handed out so far.
    rows_yielded: AtomicU64,
    /// The state when the iteration ended or `close()` ran, for `state_dict()` afterwards.
    final_state: Mutex<Option<LoaderState>>,
    /// The process that made the loader: its threads live there only, so a child of `fork()`
    /// must neither wait for them nor join them.
    pid: u32,
    /// Stops the background thread without the `batches` lock, which a thread busy in
    /// `next()` holds (at interpreter exit, see `_stop_at_exit`).
    stopper: arrow_dlpack_loader::Stopper,
    /// A batch made for a `next()` that an interrupt stopped on its way out, with its rows:
    /// taken back from the loader's count and position, and handed out by the next call.
    kept: Mutex<Option<(Py<PyDict>, u64)>>,
    /// The last batch handed out and its rows, until the next call: what `_give_back` takes
    /// back when an interrupt stopped it on its way to the caller.
    handed: Mutex<Option<(Py<PyDict>, u64)>>,
}

impl PyBatches {
    /// Counts a batch of `rows` rows as handed out.
    fn count(&self, rows: u64) {
        self.batches_yielded.fetch_add(1, Ordering::Relaxed);
        self.rows_yielded.fetch_add(rows, Ordering::Relaxed);
    }

    /// The slot of the last batch handed out.
    fn handed(&self) -> std::sync::MutexGuard<'_, Option<(Py<PyDict>, u64)>> {
        self.handed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Keeps `batch` (of `rows` rows) for the next `next()`.
    fn keep(&self, batch: Py<PyDict>, rows: u64) {
        *self
            .kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some((batch, rows));
    }

    /// Records how the iteration ended (the first end only).
    fn end(&self, how: Ended) {
        let mut ended = self
            .ended
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        ended.get_or_insert(how);
    }

    /// How the iteration ended, if it did.
    fn ended(&self) -> Option<Ended> {
        *self
            .ended
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The batches left, where their number is known: 0 once the iteration ended.
    fn batches_left(&self) -> Option<usize> {
        if self.ended().is_some() {
            return Some(0);
        }
        let yielded = self.batches_yielded.load(Ordering::Relaxed);
        self.num_batches
            .map(|batches| batches.saturating_sub(yielded))
    }

    /// Keeps the state of `batches`, about to be dropped, for `state_dict()`.
    fn keep_state(&self, batches: Option<&Batches>) {
        if let Some(batches) = batches {
            let mut kept = self
                .final_state
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            *kept = Some(batches.state());
        }
    }

    /// Refuses a call from a child of `fork()`: the loader's threads were not copied into it,
    /// so a batch would never come.
    fn check_process(&self) -> PyResult<()> {
        let here = std::process::id();
        if here == self.pid {
            return Ok(());
        }
        Err(errors::value_error(format!(
            "this loader was made in process {} and is used in process {here}, a fork of it: \
             its threads did not survive the fork; make a new loader in this process",
            self.pid
        )))
    }
}

#[pymethods]
impl PyBatches {
    /// `source` read as the keywords say, one per option of
    /// [`BatchSpec`](arrow_dlpack_loader::BatchSpec), each at its default when absent.
    #[new]
    #[pyo3(signature = (source, *, storage_options=None, **options))]
    fn new(
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
        storage_options: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let spec = spec_from_options("_Batches", options, None)?;
        let Input { source, rows, .. } = errors::no_panic("reading an Arrow source", || {
            source_of(source, storage_options)
        })?;
        // The rows an in-memory source says it holds count where the loader cannot tell.
        let stated = rows.and_then(|rows| spec.rows_of_stream(rows));
        let stated_batches = stated.and_then(|rows| spec.batches_for(rows));
        // Opening files reads their metadata (footers a hostile file may have forged): I/O, done
        // without the GIL, and under `no_panic` like every read of foreign data.
        let batches = errors::no_panic("opening the loader's source", || {
            interrupt::plan_interruptibly(py, source, |source| Batches::new(source, spec))?
                .map_err(errors::loader_error)
        })?;
        Ok(PyBatches {
            num_rows: batches.num_rows().or(stated),
            num_batches: batches.num_batches().or(stated_batches),
            rows_left_out: batches.rows_left_out(),
            batches_yielded: AtomicUsize::new(0),
            rows_yielded: AtomicU64::new(0),
            ended: Mutex::new(None),
            final_state: Mutex::new(Some(batches.state())),
            stopper: batches.stopper(),
            kept: Mutex::new(None),
            handed: Mutex::new(None),
            batches: Mutex::new(Some(batches)),
            pid: std::process::id(),
        })
    }

    /// Every option (a field of [`BatchSpec`](arrow_dlpack_loader::BatchSpec)), in the order
    /// of declaration: a dict from its name to its `default` (as the Python signatures spell
    /// it), `annotation`, `scope` and `summary`.
    #[classattr]
    #[pyo3(name = "OPTIONS")]
    fn options(py: Python<'_>) -> PyResult<Py<PyDict>> {
        Ok(options::options_table(py)?.unbind())
    }

    /// The iterator itself; a loader that has ended (every batch handed out, an error raised,
    /// or `close()`) is refused: a loader is iterated once.
    fn __iter__(slf: PyRef<'_, Self>) -> PyResult<PyRef<'_, Self>> {
        slf.check_process()?;
        let why = match slf.ended() {
            None => return Ok(slf),
            Some(Ended::Exhausted) => "has given all its batches",
            Some(Ended::Failed) => "ended with an error",
            Some(Ended::Closed) => "was closed",
            Some(Ended::StoppedAtExit) => "was stopped at interpreter exit",
        };
        Err(errors::value_error(format!(
            "this loader {why}, and a loader is iterated once; make a new one with \
             ad.batches(...) for another pass, or use ad.BatchDataset, which makes a new loader \
             each time it is iterated"
        )))
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        // Before the lock: a thread of the parent may have held it at the fork, for ever here.
        self.check_process()?;
        let mut guard = match self.batches.try_lock() {
            Ok(guard) => guard,
            // Another thread is inside `__next__` (without the GIL): waiting for it here, with
            // the GIL, could deadlock, so refuse as a running generator does.
            Err(TryLockError::WouldBlock) => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "the batch iterator is already running in another thread",
                ));
            }
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        };
        // The caller has the last batch: it is no longer one to take back.
        let handed = self.handed().take();
        drop(handed);
        let Some(batches) = guard.as_mut() else {
            // Closed before its last batch (by another thread, or in the loop's body): the
            // loop must not end as if the epoch were whole, so the next batch is an error, as
            // reading a closed file is. An ended loader keeps raising StopIteration.
            match self.ended() {
                Some(Ended::Closed) => {
                    return Err(errors::value_error(
                        "this loader was closed (close(), or the end of its with block) before \
                         its last batch: a loop over it stops here rather than end as if the \
                         epoch were whole; make a new one with ad.batches(...) to read on",
                    ));
                }
                Some(Ended::StoppedAtExit) => return Err(stopped_at_exit()),
                _ => {}
            }
            return Ok(None);
        };
        // The batch an interrupt stopped last time comes first.
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some((batch, rows)) = kept {
            batches.give_again();
            drop(guard);
            self.count(rows);
            *self.handed() = Some((batch.clone_ref(py), rows));
            return Ok(Some(batch.into_bound(py)));
        }
        // Waited for in slices, the GIL released, with a look for signals between them: a
        // Ctrl-C raises `KeyboardInterrupt` here within a slice, and the loader stays as it was
        // (the item in flight is kept for the next call). A batch already waiting is taken
        // without letting go of the GIL (taking it back could cost a switch interval of
        // another busy thread).
        if !batches.wait(Duration::ZERO) {
            while !py.detach(|| batches.wait(interrupt::SIGNAL_POLL)) {
                py.check_signals()?;
            }
        }
        // A signal that came as the item did is raised now, while the item is still kept for
        // the next call: raised after the batch is taken, it would drop the batch on its way to
        // the caller.
        py.check_signals()?;
        let next = if batches.ready_at_once() {
            batches.next()
        } else {
            py.detach(|| batches.next())
        };
        let batch = match next {
            Some(Ok(batch)) => batch,
            Some(Err(error)) => {
                let ended = guard.take();
                self.keep_state(ended.as_ref());
                self.end(Ended::Failed);
                drop(guard);
                py.detach(move || drop(ended));
                return Err(errors::loader_error(error));
            }
            None => {
                let ended = guard.take();
                self.keep_state(ended.as_ref());
                let stopped = ended.as_ref().is_some_and(Batches::was_stopped);
                self.end(if stopped {
                    Ended::StoppedAtExit
                } else {
                    Ended::Exhausted
                });
                drop(guard);
                py.detach(move || drop(ended));
                if stopped {
                    // Stopped by the interpreter's exit while another thread iterated: the
                    // loop must not end as if the epoch were whole.
                    return Err(stopped_at_exit());
                }
                return Ok(None);
            }
        };
        let rows = batch.num_rows() as u64;
        let batch = batch_dict(py, batch)?;
        // A signal that came while the batch was made is raised with the batch kept (and taken
        // back from the loader's count and position) for the next call; one that comes after
        // this look is raised as the call returns, in the Python wrapper, which gives the batch
        // back (`_give_back`). A packed `"concat"` batch cannot be taken back: it is lost to
        // the interrupt, and counted as the loader counts it.
        if let Err(interrupt) = py.check_signals() {
            if batches.take_back() {
                self.keep(batch.unbind(), rows);
            } else {
                self.count(rows);
            }
            return Err(interrupt);
        }
        drop(guard);
        self.count(rows);
        *self.handed() = Some((batch.clone().unbind(), rows));
        Ok(Some(batch))
    }

    /// Takes back the last batch `next()` handed out, when the Python side could not hand it
    /// over (an interrupt came on its way, even as the call returned): the loader's counts and
    /// position are again as before it, and the next `next()` hands it out again. Nothing when
    /// the last call handed out no batch (it raised, or kept its batch itself); returns whether
    /// it took one back (not for a packed `"concat"` sequence, nor while another thread
    /// iterates).
    #[pyo3(name = "_give_back")]
    fn give_back(&self) -> bool {
        let Ok(mut guard) = self.batches.try_lock() else {
            return false;
        };
        let Some(batches) = guard.as_mut() else {
            return false;
        };
        let Some((batch, rows)) = self.handed().take() else {
            return false;
        };
        if !batches.take_back() {
            return false;
        }
        self.batches_yielded.fetch_sub(1, Ordering::Relaxed);
        self.rows_yielded.fetch_sub(rows, Ordering::Relaxed);
        self.keep(batch, rows);
        true
    }

    /// The number of batches left, where the row count is known (the files' metadata, or the
    /// rows an in-memory table says it holds) and batches are cut by rows; a `TypeError`
    /// otherwise, as `len()` of any iterator without a length.
    fn __len__(&self) -> PyResult<usize> {
        self.check_process()?;
        self.batches_left().ok_or_else(|| {
            pyo3::exceptions::PyTypeError::new_err(
                "the number of batches is not known in advance: the source does not say its \
                 rows (a reader, a stream in object storage), its record batches are dealt to \
                 several ranks as they come (a stream), batches are cut by tokens (max_tokens), \
                 documents are packed whole (a sequence in mode \"concat\"), or skipped images \
                 are replaced by the next rows (on_error=\"skip\", read in order)",
            )
        })
    }

    /// `operator.length_hint`'s estimate: the batches left, or `NotImplemented` when unknown.
    fn __length_hint__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.check_process()?;
        match self.batches_left() {
            Some(left) => Ok(left.into_pyobject(py)?.into_any().unbind()),
            None => Ok(py.NotImplemented()),
        }
    }

    /// The batches this iterator yields in all, or None when unknown.
    #[getter]
    fn num_batches(&self) -> Option<usize> {
        self.num_batches
    }

    /// The epoch's rows that no rank reads although `drop_last` is off (the epoch's last: too
    /// few rows for every rank to get as many batches of at least a row).
    #[getter]
    fn rows_left_out(&self) -> u64 {
        self.rows_left_out
    }

    /// The rows this iterator yields in all (after sharding, before `drop_last`), or None when
    /// the source does not say.
    #[getter]
    fn num_rows(&self) -> Option<u64> {
        self.num_rows
    }

    /// The rows of the batches handed out so far (a batch's tensors do not all have a row per
    /// row: packed sequences have a value per token).
    #[getter]
    fn rows_yielded(&self) -> u64 {
        self.rows_yielded.load(Ordering::Relaxed)
    }

    /// Where the stream stands after the batches handed out so far, as a dict of ints, strings
    /// and lists (JSON- and `torch.save`-able): `ad.batches(..., state=...)` with the same
    /// source and arguments continues from there.
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.check_process()?;
        let state = match self.batches.try_lock() {
            Ok(guard) => guard.as_ref().map(Batches::state),
            Err(TryLockError::WouldBlock) => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "the batch iterator is running in another thread; ask for its state there",
                ));
            }
            Err(TryLockError::Poisoned(poisoned)) => {
                poisoned.into_inner().as_ref().map(Batches::state)
            }
        };
        let state = match state {
            Some(state) => state,
            None => self
                .final_state
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .clone()
                .expect("kept when the loader was made"),
        };
        options::state_to_python(py, &state)
    }

    /// At interpreter exit: asks the background thread to stop and waits, without the GIL, at
    /// most `timeout` seconds for it to end, having dropped its source, and for any thread
    /// inside `next()` to leave it (that call raises that the loader was stopped), so that
    /// `close()` can take the loader. A thread that reads a Python source, or is inside the
    /// loader's native code, must not take the GIL back while the interpreter finalizes
    /// (CPython ends it with a forced unwinding that aborts the process). Returns whether both
    /// happened; Ctrl-C ends the wait.
    #[pyo3(name = "_stop_at_exit")]
    fn stop_at_exit(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        if std::process::id() != self.pid {
            return Ok(true);
        }
        self.stopper.stop();
        // Not a panic for a NaN or an infinity: no wait for those, at most an hour for others.
        let seconds = if timeout.is_finite() {
            timeout.clamp(0.0, 3600.0)
        } else {
            0.0
        };
        let limit = std::time::Duration::from_secs_f64(seconds);
        let started = std::time::Instant::now();
        // Waited for in slices without the GIL, with a look for signals between them.
        loop {
            let stopper = self.stopper.clone();
            let ended = py.detach(move || {
                let slice = std::time::Instant::now();
                while !stopper.has_ended() {
                    if started.elapsed() >= limit || slice.elapsed() >= interrupt::SIGNAL_POLL {
                        return false;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                true
            });
            let in_next = matches!(self.batches.try_lock(), Err(TryLockError::WouldBlock));
            if ended && !in_next {
                return Ok(true);
            }
            if started.elapsed() >= limit {
                return Ok(false);
            }
            if in_next {
                // The thread in `next()` needs the GIL to raise and leave.
                py.detach(|| std::thread::sleep(std::time::Duration::from_millis(1)));
            }
            py.check_signals()?;
        }
    }

    /// Stops the background threads and releases the source now, rather than when the iterator
    /// is garbage collected; `next()` afterwards ends the iteration, and a new `iter()` is
    /// refused.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.check_process()?;
        let batches = match self.batches.try_lock() {
            Ok(mut guard) => guard.take(),
            Err(TryLockError::WouldBlock) => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "the batch iterator is running in another thread; close it from there",
                ));
            }
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner().take(),
        };
        self.keep_state(batches.as_ref());
        // Closed by the exit hook, which stopped it first: a later `next()` says so.
        self.end(if batches.as_ref().is_some_and(Batches::was_stopped) {
            Ended::StoppedAtExit
        } else {
            Ended::Closed
        });
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        drop(kept);
        let handed = self.handed().take();
        drop(handed);
        // Joining the threads may wait for a decode in flight: without the GIL, so that a
        // producer that needs it (a Python generator behind a stream) can finish.
        py.detach(move || drop(batches));
        Ok(())
    }
}

impl Drop for PyBatches {
    fn drop(&mut self) {
        let batches = self
            .batches
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if std::process::id() != self.pid {
            // In a child of `fork()` the threads behind `batches` do not exist: joining them
            // would wait for ever or fail, so their handles, channel and buffers are forgotten
            // (the memory is the parent's copy, released when this process exits).
            std::mem::forget(batches);
            return;
        }
        if let Some(batches) = batches {
            // Collected without `close()`: the threads are joined without the GIL all the same,
            // so that a stream producer that needs it can finish its call.
            Python::attach(|py| py.detach(move || drop(batches)));
        }
    }
}
