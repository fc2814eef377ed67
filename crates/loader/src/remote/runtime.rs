//! One loader's async runtime and the waits for its futures: every wait polls the loader's stop
//! flag, so that a loader dropped (or a planning interrupted) while a server stalls ends at
//! once instead of waiting for the server's timeout.

use std::fmt;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::{Error, Result};

/// Requests in flight at once for one loader, over all its decoding threads: enough for two
/// workers' row groups fetched ahead (32 each, `parquet/fetch_ahead.rs`) across
/// a round trip of tens of milliseconds, few enough for any server's connection limits.
pub(crate) const MAX_REQUESTS: usize = 32;

/// Threads of a loader's async runtime: they only wait on sockets and copy bodies.
const RUNTIME_THREADS: usize = 2;

/// How often a wait for a fetch looks at the loader's stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

/// The error of a wait ended by the stop flag, for the source named `name`.
pub(super) fn stopped(name: &Path) -> Error {
    Error::Io {
        path: name.to_path_buf(),
        source: io::Error::new(
            io::ErrorKind::Interrupted,
            "the loader was stopped while a request was in flight",
        ),
    }
}

/// One loader's async runtime, its bound on requests in flight and its stop flag.
pub(crate) struct Remote {
    /// `None` once dropped.
    runtime: Option<tokio::runtime::Runtime>,
    pub(super) requests: Arc<Semaphore>,
    /// Set when the loader stops or its planning is interrupted: a wait for a fetch then ends.
    pub(super) stop: Arc<AtomicBool>,
    /// The source, in words, for the error of a wait that `stop` ended.
    label: PathBuf,
}

impl Drop for Remote {
    fn drop(&mut self) {
        // Fetches in flight are cancelled without waiting for them (a server that stopped
        // answering must not hold up the loader's `drop`).
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl fmt::Debug for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Remote").finish_non_exhaustive()
    }
}

impl Remote {
    /// Starts the runtime of a source named `label` in errors, stopped by `stop`.
    pub(super) fn start(stop: Arc<AtomicBool>, label: PathBuf) -> Result<Arc<Self>> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(RUNTIME_THREADS)
            .thread_name("arrow-dlpack-fetch")
            .enable_all()
            .build()
            .map_err(|source| Error::Thread { source })?;
        Ok(Arc::new(Remote {
            runtime: Some(runtime),
            requests: Arc::new(Semaphore::new(MAX_REQUESTS)),
            stop,
            label,
        }))
    }

    /// Runs `future` on the runtime and waits for its output on the calling thread.
    pub(crate) fn run<T: Send + 'static>(
        &self,
        future: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        self.spawn(future).wait()
    }

    /// Starts `future` on the runtime; its output is waited for with [`Pending::wait`], and
    /// dropping the [`Pending`] cancels it.
    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        future: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Pending<T> {
        let (sender, receiver) = mpsc::sync_channel(1);
        let runtime = self
            .runtime
            .as_ref()
            .expect("the runtime lives until `drop`");
        let task = runtime.spawn(async move {
            let _ = sender.send(future.await);
        });
        Pending {
            receiver,
            task,
            stop: self.stop.clone(),
            label: self.label.clone(),
        }
    }
}

/// A future started on a loader's runtime.
pub(crate) struct Pending<T> {
    receiver: mpsc::Receiver<Result<T>>,
    task: tokio::task::JoinHandle<()>,
    stop: Arc<AtomicBool>,
    label: PathBuf,
}

impl<T> Pending<T> {
    /// Waits for the output, or until the loader stops.
    pub(crate) fn wait(self) -> Result<T> {
        loop {
            match self.receiver.recv_timeout(STOP_POLL) {
                Ok(result) => return result,
                Err(mpsc::RecvTimeoutError::Timeout) if !self.stop.load(Ordering::Relaxed) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => return Err(stopped(&self.label)),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Error::Panicked {
                        message: "a fetch of the loader's runtime ended without a result"
                            .to_string(),
                    });
                }
            }
        }
    }
}

impl<T> Drop for Pending<T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}
