//! Planning a loader that Ctrl-C can interrupt.
//!
//! Planning a source in object storage lists prefixes and fetches footers over the network,
//! which a slow or hostile server can make last as long as its timeouts. Python only runs its
//! signal handlers between bytecodes, so a thread blocked in Rust ignores Ctrl-C for that long.
//! Here the planning runs on its own thread while the calling thread, the GIL released between
//! looks, asks Python every [`SIGNAL_POLL`] whether a signal arrived; on `KeyboardInterrupt` (or
//! any exception a handler raises) it stops the planning through the source's
//! [`StopHandle`](arrow_dlpack_loader::StopHandle), waits the few milliseconds that takes, and
//! raises the exception.
//!
//! Local files are planned the same way, on a thread of their own: their footers are read at
//! disk speed, but an epoch planned over many rows lists the shard's rows, which takes seconds
//! for hundreds of millions of rows. Planning them has no stop: on a signal the exception is
//! raised at once and the planning thread, which holds nothing of Python's, ends alone and
//! drops its result.

use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use arrow_dlpack_loader::Source;
use pyo3::prelude::*;

/// How often the calling thread looks for a signal.
pub(super) const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Runs `plan` on `source` so that a signal interrupts it: for a source in object storage on a
/// thread of its own, polling for signals; for any other source with the GIL released, as
/// before. A panic in `plan` resumes on the calling thread.
pub(super) fn plan_interruptibly<T: Send + 'static>(
    py: Python<'_>,
    source: Source,
    plan: impl FnOnce(Source) -> T + Send + 'static,
) -> PyResult<T> {
    if matches!(
        source,
        Source::ParquetFiles(_) | Source::IpcFiles(_) | Source::IpcStreams(_)
    ) {
        return plan_files_interruptibly(py, source, plan);
    }
    let Source::Objects(objects) = &source else {
        return Ok(py.detach(|| plan(source)));
    };
    let stop = objects.stop_handle();
    let ended = Ended::default();
    std::thread::scope(|scope| {
        let planning = std::thread::Builder::new()
            .name("arrow-dlpack-plan".to_string())
            .spawn_scoped(scope, || {
                // Marks the end when dropped: at the end, or in a panic's unwinding.
                let _mark = EndMark(&ended);
                plan(source)
            })
            .map_err(|error| pyo3::exceptions::PyOSError::new_err(error.to_string()))?;
        while !py.detach(|| ended.wait(SIGNAL_POLL)) {
            if let Err(error) = py.check_signals() {
                stop.stop();
                let _ = py.detach(|| planning.join());
                return Err(error);
            }
        }
        match planning.join() {
            Ok(planned) => Ok(planned),
            Err(payload) => std::panic::resume_unwind(payload),
        }
    })
}

/// Plans local files (`source`) on a thread of their own while the calling thread looks for a
/// signal every [`SIGNAL_POLL`]; on one, the exception is raised at once, and the thread ends
/// alone (it reads files and holds nothing of Python's). A panic in `plan` resumes here.
fn plan_files_interruptibly<T: Send + 'static>(
    py: Python<'_>,
    source: Source,
    plan: impl FnOnce(Source) -> T + Send + 'static,
) -> PyResult<T> {
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("arrow-dlpack-plan".to_string())
        .spawn(move || {
            let planned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| plan(source)));
            // The caller may have gone (a signal): the result is then dropped here.
            let _ = sender.send(planned);
        })
        .map_err(|error| pyo3::exceptions::PyOSError::new_err(error.to_string()))?;
    // Behind a mutex, so that the wait without the GIL can borrow it (a receiver is not Sync).
    let receiver = Mutex::new(receiver);
    loop {
        let next = py.detach(|| {
            receiver
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .recv_timeout(SIGNAL_POLL)
        });
        match next {
            Ok(Ok(planned)) => return Ok(planned),
            Ok(Err(payload)) => std::panic::resume_unwind(payload),
            Err(RecvTimeoutError::Timeout) => py.check_signals()?,
            Err(RecvTimeoutError::Disconnected) => {
                return Err(pyo3::exceptions::PyRuntimeError::new_err(
                    "the thread that planned the loader ended without a plan",
                ));
            }
        }
    }
}

/// Whether the planning ended, and the wake-up of the thread that waits for it.
#[derive(Default)]
struct Ended {
    done: Mutex<bool>,
    changed: Condvar,
}

impl Ended {
    /// Waits until the planning ended, at most `limit`; whether it ended.
    fn wait(&self, limit: Duration) -> bool {
        let done = self
            .done
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let (done, _) = self
            .changed
            .wait_timeout_while(done, limit, |done| !*done)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *done
    }
}

/// Marks the planning as ended when dropped.
struct EndMark<'a>(&'a Ended);

impl Drop for EndMark<'_> {
    fn drop(&mut self) {
        *self
            .0
            .done
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = true;
        self.0.changed.notify_all();
    }
}
