//! [`Batches`]: the iterator the caller holds, and the background thread behind it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;

use crate::handoff::{self, Waker};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::images::Origins;
use crate::quiet_panic::catch_quietly;
use crate::rebatch::{Mark, Marked};
#[cfg(all(feature = "images", feature = "object-store"))]
use crate::remote::UrlReader;
use crate::source::{Source, plan};
use crate::state::{LoaderState, Position, STATE_VERSION, Settings, Work};
use crate::text::concat::stage::ConcatStage;
use crate::{BatchSpec, Error, Result, TensorBatch, rebatch};

/// Reads `source` into batches of tensors as `spec` says, on a background thread.
///
/// Metadata (IPC and Parquet footers) is read here, on the calling thread, so that a missing or
/// truncated file is an error now; data is read, decoded and copied on the background threads
/// while the caller consumes batches.
/// See [`Batches`].
pub fn batches(source: Source, spec: BatchSpec) -> Result<Batches> {
    Batches::new(source, spec)
}

/// What a loader over `source` with `spec` would read, worked out without reading any data and
/// without starting a thread: the spec checked alone and against the source's schema (the
/// files' footers are read, as [`batches`] reads them), and the numbers of rows and batches
/// where the metadata tells.
///
/// A reader is not read: only its schema is checked.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{ArrayRef, Int64Array, RecordBatch, RecordBatchIterator};
/// use arrow_dlpack_loader::{BatchSpec, Source, outline};
///
/// let batch = RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef)])?;
/// let reader = || Source::reader(RecordBatchIterator::new([Ok(batch.clone())], batch.schema()));
/// assert!(outline(reader(), &BatchSpec::new(2).columns(["x"])).is_ok());
/// let missing = outline(reader(), &BatchSpec::new(2).columns(["y"])).unwrap_err();
/// assert!(missing.to_string().contains("\"y\""));
/// # Ok::<(), arrow_dlpack_loader::Error>(())
/// ```
///
/// # Errors
///
/// What [`batches`] refuses before its first batch: an invalid spec, a missing or unreadable
/// file, a missing column or one without a tensor layout.
pub fn outline(source: Source, spec: &BatchSpec) -> Result<Outline> {
    spec.validate()?;
    // A "concat" sequence is planned as the reading of its documents.
    let documents = ConcatStage::split(spec)?.map(|(documents, _)| documents);
    let plan = plan(source, documents.as_ref().unwrap_or(spec))?;
    // The rows and batches of packed batches are not known in advance.
    let packed = documents.is_some();
    Ok(Outline {
        num_rows: plan.num_rows.filter(|_| !packed),
        num_batches: batch_count(&plan, spec).filter(|_| !packed),
        rows_left_out: plan.planned.as_ref().map_or(0, |planned| planned.left_out),
    })
}

/// The batches a loader of `spec` over `plan` yields, when known: a planned epoch's (see
/// [`BatchSpec::max_tokens`]), or those that the rows make when batches are cut by rows.
fn batch_count(plan: &crate::source::Plan, spec: &BatchSpec) -> Option<usize> {
    match &plan.planned {
        Some(batches) => Some(batches.len()),
        None => plan.num_rows.and_then(|rows| spec.batches_for(rows)),
    }
}

/// What [`outline`] finds: the numbers of rows and batches a loader would yield.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outline {
    /// The rows, as [`Batches::num_rows`] gives them.
    pub num_rows: Option<u64>,
    /// The batches, as [`Batches::num_batches`] gives them.
    pub num_batches: Option<usize>,
    /// The epoch's rows that no shard reads, as [`Batches::rows_left_out`] gives them.
    pub rows_left_out: u64,
}

/// An iterator of [`TensorBatch`]es made on a background thread.
///
/// Batches are made ahead of the consumer, at most [`BatchSpec::prefetch`] waiting in a bounded
/// channel. An error is yielded as an `Err` item at the batch where it happened, and the
/// iterator ends after it.
/// Dropping the iterator, at any point, stops the background threads and joins them before
/// `drop` returns; the source (a reader, memory maps, open files) is released with them.
///
/// `Batches` is `Send`, so that a binding can move it to where it is consumed, and
/// [`next`](Iterator::next) only waits on a channel, so a Python binding can release the GIL
/// around it.
pub struct Batches {
    /// Set by the background thread as it ends, after dropping what it held.
    ended: Arc<AtomicBool>,
    /// The channel's end, which wakes the background thread after every item it takes.
    receiver: Option<handoff::Receiver<Marked>>,
    /// Where the stream stood before and after the last batch of `next`, for
    /// [`take_back`](Batches::take_back).
    last: Option<LastBatch>,
    /// An item [`wait`](Batches::wait) received, handed out by the next receive.
    pending: Option<Marked>,
    thread: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    /// Wakes the background thread where it waits for room in the channel.
    waker: Waker,
    /// Set by a [`Stopper`]: the thread was asked to stop from outside ([`Batches::was_stopped`]).
    stopped: Arc<AtomicBool>,
    num_rows: Option<u64>,
    num_batches: Option<usize>,
    /// The epoch's rows that no shard reads without `drop_last`.
    rows_left_out: u64,
    yielded: usize,
    done: bool,
    writable: bool,
    /// What the state records besides the position.
    settings: Settings,
    epoch: u64,
    shard: [u64; 2],
    /// The ranks among the shards ([`BatchSpec::num_ranks`], resolved).
    ranks: u64,
    work: Work,
    /// Where the stream stands after the last batch handed out (before the first: where it
    /// started).
    position: Option<Position>,
    mark: Option<Mark>,
    /// The packing of a `"concat"` sequence, over the batches of its documents.
    concat: Option<ConcatStage>,
}

impl Batches {
    /// Plans `source` and starts the background thread; the same as [`batches`].
    pub fn new(source: Source, spec: BatchSpec) -> Result<Self> {
        spec.validate()?;
        // A "concat" sequence reads its documents as a jagged sequence and packs them here.
        let (mut spec, concat, outer) = match ConcatStage::split(&spec)? {
            Some((documents, stage)) => (documents, Some(stage), Some(spec)),
            None => (spec, None, None),
        };
        #[cfg(all(feature = "images", feature = "object-store"))]
        let url_options = match &source {
            Source::Objects(objects) if !spec.images.is_empty() => Some(objects.options.clone()),
            _ => None,
        };
        let mut plan = plan(source, &spec)?;
        if let (Some(stage), Some(outer)) = (&concat, &outer) {
            stage.outer_settings(outer, &mut plan.settings);
        }
        // Where nulls become NaN is decided once, from the whole source's metadata, so that a
        // column's dtype is the same in every batch.
        spec.null_to_nan = plan.null_to_nan.clone();
        // The rows and batches of packed batches are not known in advance.
        let num_rows = plan.num_rows.filter(|_| concat.is_none());
        let num_batches = batch_count(&plan, &spec).filter(|_| concat.is_none());
        let writable = spec.writable;
        let position = spec.state.as_ref().and_then(|state| {
            // A merged state gives no position: each shard starts at the start of its items.
            state.shard.and(state.position.clone())
        });
        let (settings, work, start) = (plan.settings, plan.work, plan.start);
        let epoch = spec.epoch;
        let shard = [spec.shard_index as u64, spec.num_shards as u64];
        let ranks = spec.ranks() as u64;
        // Both ends of the channel spin briefly before they sleep, unless decoding threads
        // would then lack a core (`handoff`).
        let decoding = plan.decoded
            || !spec.images.is_empty()
            || spec
                .sequences
                .iter()
                .any(|sequence| sequence.tokenizer.is_some());
        let spins = handoff::spins(if decoding {
            spec.decode_thread_count()
        } else {
            0
        });
        // The source's own flag, when it has one, is the loader's: setting it stops both.
        let stop = plan
            .stop
            .clone()
            .unwrap_or_else(|| Arc::new(AtomicBool::new(false)));
        let (mut sender, receiver) = handoff::channel(spec.prefetch, spins, stop.clone());
        let waker = receiver.waker();
        let thread_stop = stop.clone();
        let ended = Arc::new(AtomicBool::new(false));
        let thread_ended = ended.clone();
        let origins = Origins {
            locate: plan.locate,
            // Image rows that name objects by URL are read with the source's storage options
            // (the environment's for a local source), and kept in the `cache_dir` when there is
            // one; the reader starts nothing until its first URL.
            #[cfg(all(feature = "images", feature = "object-store"))]
            urls: if spec.images.is_empty() {
                None
            } else {
                let cache = crate::source::cache_settings(&spec);
                let reader = UrlReader::new(url_options, stop.clone(), cache.as_ref())?;
                Some(Arc::new(reader))
            },
        };
        let rows_left_out = plan.planned.as_ref().map_or(0, |planned| planned.left_out);
        let (pieces, planned) = (plan.pieces, plan.planned);
        let thread = std::thread::Builder::new()
            .name("arrow-dlpack-loader".to_string())
            .spawn(move || {
                let result = catch_quietly(|| {
                    rebatch::run(
                        &spec,
                        pieces,
                        origins,
                        &start,
                        planned.as_ref(),
                        &mut sender,
                        &thread_stop,
                    );
                });
                if let Err(payload) = result {
                    sender.send(Err(Error::from_panic(payload)));
                }
                // Everything the thread holds is dropped (the source went with `run`) before it
                // says that it has ended: a binding may then let the process exit.
                drop((spec, start, planned, sender, thread_stop));
                thread_ended.store(true, Ordering::Release);
            })
            .map_err(|source| Error::Thread { source })?;
        Ok(Batches {
            ended,
            receiver: Some(receiver),
            last: None,
            pending: None,
            thread: Some(thread),
            stop,
            waker,
            stopped: Arc::new(AtomicBool::new(false)),
            num_rows,
            num_batches,
            rows_left_out,
            yielded: 0,
            done: false,
            writable,
            settings,
            epoch,
            shard,
            ranks,
            work,
            position,
            mark: None,
            concat,
        })
    }

    /// Where the stream stands after the batches handed out so far: pass it as
    /// [`BatchSpec::state`] to a new loader with the same source and spec, and it continues
    /// with the batch that this one would give next. Cheap: a batch's position travels with it
    /// from the background thread, and only this call turns it into a value.
    pub fn state(&self) -> LoaderState {
        let (mark, concat) = match &self.concat {
            Some(stage) => {
                let (mark, position) = stage.position();
                (mark, Some(position))
            }
            None => (self.mark.as_ref(), None),
        };
        LoaderState {
            version: STATE_VERSION,
            settings: self.settings.clone(),
            epoch: self.epoch,
            shard: Some(self.shard),
            ranks: Some(self.ranks),
            work: self.work.clone(),
            position: match mark {
                Some(mark) => Some(mark.position()),
                None => self.position.clone(),
            },
            concat,
        }
    }

    /// The rows this loader yields in all (this shard's, before `drop_last`), when the source's
    /// metadata tells (IPC files, Parquet files); `None` for streams and readers.
    pub fn num_rows(&self) -> Option<u64> {
        self.num_rows
    }

    /// The batches this loader has left to yield (all of them before the first `next()`), when
    /// [`num_rows`](Batches::num_rows) is known and batches are cut by rows (not by
    /// [`BatchSpec::max_tokens`]), or the epoch is planned (several shards of files under a
    /// token budget or length buckets, or whose deal of units would leave their batch counts
    /// uneven); 0 once the iteration ended.
    pub fn len(&self) -> Option<usize> {
        if self.done {
            return Some(0);
        }
        self.num_batches
            .map(|batches| batches.saturating_sub(self.yielded))
    }

    /// A handle that stops the background thread from another thread and tells when it has
    /// ended, for a binding that must stop a loader whose owner is busy in `next()` (at
    /// interpreter exit, a loader iterated by a thread that will not return).
    pub fn stopper(&self) -> Stopper {
        Stopper {
            stop: self.stop.clone(),
            stopped: self.stopped.clone(),
            waker: self.waker.clone(),
            ended: self.ended.clone(),
        }
    }

    /// Whether a [`Stopper`] asked the background thread to stop: an iteration that then ends
    /// may have ended before the end of its source, and a binding reports it rather than end as
    /// if the epoch were whole.
    pub fn was_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// Whether the loader is known to yield no more batches.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// The batches this loader yields in all, where [`len`](Batches::len) is known.
    pub fn num_batches(&self) -> Option<usize> {
        self.num_batches
    }

    /// The epoch's rows that no shard reads although [`BatchSpec::drop_last`] is off (0 with
    /// it), the same for every shard: every rank gets as many batches and a batch holds at least
    /// a row, so with fewer rows than the ranks need, or in batches of one row whose rows are
    /// not a multiple of the ranks, the epoch's last rows are left out (rows are never read
    /// twice to fill the ranks). 0 where the ranks' batches are not planned, which then read
    /// every row.
    pub fn rows_left_out(&self) -> u64 {
        self.rows_left_out
    }

    /// Whether [`next`](Iterator::next) would return at once without copying or joining a
    /// thread: a batch is waiting (as [`wait`](Batches::wait) left it; not an error, after
    /// which `next` stops and joins the threads), and neither [`BatchSpec::writable`] nor a
    /// `"concat"` sequence has work to do for it. A binding can then take the batch without
    /// letting go of its interpreter's lock, which another thread could keep for a while.
    pub fn ready_at_once(&self) -> bool {
        matches!(self.pending, Some(Ok(_))) && !self.writable && self.concat.is_none()
    }

    /// Takes back the last batch of [`next`](Iterator::next) as far as the count and the
    /// position are concerned: [`state`](Batches::state) and [`len`](Batches::len) are again as
    /// they were before it, until [`give_again`](Batches::give_again). For a binding that could
    /// not hand the batch over (an interrupt came as it did) and keeps it to hand over on the
    /// next call, and calls [`give_again`](Batches::give_again) when it does, before any later
    /// `next()` (which would otherwise leave the batch out of the position). Returns whether it
    /// did: not for a `"concat"` sequence (whose packing has moved on), nor when the last batch
    /// was taken back already.
    pub fn take_back(&mut self) -> bool {
        match &mut self.last {
            Some(last) if !last.taken_back && self.concat.is_none() => {
                last.taken_back = true;
                self.mark = last.before.clone();
                self.yielded -= 1;
                true
            }
            _ => false,
        }
    }

    /// Counts again the batch that [`take_back`](Batches::take_back) took back, now handed
    /// over by the binding; nothing when none was taken back.
    pub fn give_again(&mut self) {
        if let Some(last) = &mut self.last
            && last.taken_back
        {
            last.taken_back = false;
            self.mark = Some(last.after.clone());
            self.yielded += 1;
        }
    }

    /// Waits at most `limit` for the background thread's next item; whether
    /// [`next`](Iterator::next) can now start without waiting for it (an item arrived, the thread
    /// ended, or the iteration did).
    /// A binding waits in such slices to look for signals in between; the item is kept for the
    /// next `next()`, so a wait cut short loses nothing.
    /// A `"concat"` sequence may need more than one item of the thread for one batch: only the
    /// first is waited for here.
    pub fn wait(&mut self, limit: Duration) -> bool {
        if self.done || self.pending.is_some() {
            return true;
        }
        let Some(receiver) = self.receiver.as_mut() else {
            return true;
        };
        match receiver.recv_timeout(limit) {
            Ok(item) => {
                self.pending = Some(item);
                true
            }
            Err(RecvTimeoutError::Timeout) => false,
            Err(RecvTimeoutError::Disconnected) => true,
        }
    }

    /// The next item of the background thread: the one [`wait`](Batches::wait) kept, else the
    /// channel's, waiting for it; `Err` when the thread has ended.
    fn recv(&mut self) -> Option<std::result::Result<Marked, ()>> {
        if let Some(item) = self.pending.take() {
            return Some(Ok(item));
        }
        Some(self.receiver.as_mut()?.recv())
    }

    /// The next batch of the background thread and where the stream stands after it; `None`
    /// when the thread has ended (at the end of the source), or the error of a panic it could
    /// not report.
    fn receive(&mut self) -> Option<Result<(TensorBatch, Mark)>> {
        match self.recv()? {
            Ok(item) => Some(item),
            Err(()) => self.shut_down().map(Err),
        }
    }

    /// Stops the threads and waits for them; what `drop` does.
    fn shut_down(&mut self) -> Option<Error> {
        self.stop.store(true, Ordering::Relaxed);
        // The thread, if it waits for room, wakes to find the channel gone (the receiving end
        // wakes it as it is dropped).
        self.receiver = None;
        self.pending = None;
        let thread = self.thread.take()?;
        if thread.thread().id() == std::thread::current().id() {
            // Dropped on its own thread (a garbage collection that ran inside a Python
            // source's call): joining would wait for itself. It ends by itself once that call
            // returns, finding the stop flag set and the channel gone.
            return None;
        }
        thread.join().err().map(Error::from_panic)
    }
}

impl Iterator for Batches {
    type Item = Result<TensorBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Some(mut stage) = self.concat.take() {
            let item = stage.next(|| self.receive());
            self.concat = Some(stage);
            match &item {
                Some(Ok(_)) => self.yielded += 1,
                Some(Err(_)) => {
                    self.done = true;
                    self.shut_down();
                }
                None => self.done = true,
            }
            return item.map(|batch| {
                batch.and_then(|batch| crate::assemble::writable::hand_out(batch, self.writable))
            });
        }
        match self.recv()? {
            Ok(Ok((batch, mark))) => {
                self.yielded += 1;
                let before = self.mark.replace(mark.clone());
                self.last = Some(LastBatch {
                    before,
                    after: mark,
                    taken_back: false,
                });
                Some(crate::assemble::writable::hand_out(batch, self.writable))
            }
            Ok(Err(error)) => {
                self.done = true;
                self.shut_down();
                Some(Err(error))
            }
            Err(_) => {
                // The thread has ended: at the end of the source, or by a panic the thread could
                // not report (it catches and sends its own).
                self.done = true;
                self.shut_down().map(Err)
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        // An error can end the iteration early, so the lower bound is 0.
        (0, self.len())
    }
}

impl Drop for Batches {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// The marks on either side of the last batch handed out, and whether it was taken back.
struct LastBatch {
    before: Option<Mark>,
    after: Mark,
    taken_back: bool,
}

/// Stops a [`Batches`]' background thread from any thread; see [`Batches::stopper`].
#[derive(Debug, Clone)]
pub struct Stopper {
    stop: Arc<AtomicBool>,
    stopped: Arc<AtomicBool>,
    waker: Waker,
    ended: Arc<AtomicBool>,
}

impl Stopper {
    /// Asks the background thread to stop: it ends after the read or batch it is in, or at
    /// once where it waits for room for its next batch (the consumer taking none).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.stop.store(true, Ordering::Relaxed);
        self.waker.wake();
    }

    /// Whether the background thread has ended, having dropped everything it held.
    pub fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }
}
