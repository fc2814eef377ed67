//! The hand-over of batches between the loader's thread and its consumer: a bounded channel
//! whose two ends wait for each other by spinning briefly before they sleep.
//!
//! Where the loader's thread makes a batch in a few microseconds (views over a memory-mapped
//! IPC file), the consumer finds the channel empty on almost every batch and sleeps, and the
//! thread's next send must wake it: a `futex` call and a switch of threads, several microseconds
//! on a virtual machine, the largest share of such a pass (a `perf` profile of the criterion
//! bench's ordered IPC pass at B = 1,024 had 40% of its samples in waking and switching). A
//! side that spins for up to [`SPIN`] first finds most such items without sleeping, and the
//! other side then has no one to wake.
//!
//! Spinning costs a core while it lasts, which the Parquet decoding threads may need: each end
//! therefore spins only while spinning pays. A spin that ends without its item doubles the
//! number of later waits that go straight to sleep (up to [`MAX_SKIPPED`]); one that ends with
//! its item spins again next time. A consumer that waits for decoding (tens of microseconds a
//! batch or more) thus spins on about one wait in 64, and one that gets its batches as fast as
//! it asks spins on every wait.
//!
//! The loader's thread waits for room by parking rather than in a blocking `send`, so that a
//! stop request reaches it while the channel is full (a consumer that holds its iterator and
//! takes nothing, a binding stopping the loader at interpreter exit): the consumer's end wakes it
//! after every item it takes ([`Waker`]), and so do a stop request and the consumer's end going
//! away.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How long one end spins for its item before it sleeps.
pub(crate) const SPIN: Duration = Duration::from_micros(20);

/// The most waits in a row that skip the spin after spins that did not pay.
const MAX_SKIPPED: u32 = 64;

/// The longest the loader's thread stays parked without a wake before it looks for room again
/// and at its stop flag: a bound for a stop that comes without a wake (a source's own stop
/// handle, set from outside the loader), not the way room is found. Every other change wakes
/// it, so an idle loader wakes once a second at most.
const PARKED_AT_MOST: Duration = Duration::from_secs(1);

/// Whether the ends of a loader that runs `helpers` busy threads besides its own thread and
/// the consumer's (Parquet's, images' or tokenizing's decoding threads) spin at all: only where
/// the machine has a core for each of those threads, so that a spinning end never takes a core
/// from decoding.
pub(crate) fn spins(helpers: usize) -> bool {
    2 + helpers <= arrow_dlpack::available_cores().get()
}

/// One end's record of whether spinning pays.
#[derive(Debug, Default)]
pub(crate) struct Spinner {
    /// An end that never spins: every wait sleeps at once.
    never: bool,
    /// The waits to go straight to sleep before the next spin.
    skip: u32,
    /// What `skip` was set to after the last spin that did not pay (0 after one that did).
    backoff: u32,
}

impl Spinner {
    /// An end that spins before it sleeps when `spins` (see [`spins`]), else one that sleeps at
    /// once.
    pub(crate) fn new(spins: bool) -> Self {
        Spinner {
            never: !spins,
            ..Spinner::default()
        }
    }

    /// Whether this wait spins first.
    fn should_spin(&mut self) -> bool {
        if self.skip == 0 {
            return true;
        }
        self.skip -= 1;
        false
    }

    /// Records how the spin ended.
    fn spun(&mut self, paid: bool) {
        if paid {
            self.backoff = 0;
        } else {
            self.backoff = (self.backoff * 2 + 1).min(MAX_SKIPPED);
            self.skip = self.backoff;
        }
    }

    /// Calls `attempt` until it gives an answer or `limit` passes, when this wait spins at all;
    /// `None` when it did not answer.
    fn spin<T>(&mut self, limit: Duration, mut attempt: impl FnMut() -> Option<T>) -> Option<T> {
        if self.never || limit.is_zero() || !self.should_spin() {
            return None;
        }
        let start = Instant::now();
        loop {
            if let Some(answer) = attempt() {
                self.spun(true);
                return Some(answer);
            }
            // A pause between the looks, so that the spinning end does not take the channel's
            // cache line from the other end on every cycle.
            for _ in 0..32 {
                std::hint::spin_loop();
            }
            if start.elapsed() >= limit {
                self.spun(false);
                return None;
            }
        }
    }

    /// The channel's next item, waiting at most `limit`: `Err(Timeout)` when none came,
    /// `Err(Disconnected)` when the sender is gone.
    pub(crate) fn recv_timeout<T>(
        &mut self,
        receiver: &mpsc::Receiver<T>,
        limit: Duration,
    ) -> Result<T, RecvTimeoutError> {
        let spun = self.spin(SPIN.min(limit), || match receiver.try_recv() {
            Ok(item) => Some(Ok(item)),
            Err(TryRecvError::Disconnected) => Some(Err(RecvTimeoutError::Disconnected)),
            Err(TryRecvError::Empty) => None,
        });
        match spun {
            Some(answer) => answer,
            None => receiver.recv_timeout(limit),
        }
    }

    /// The channel's next item, waiting for it; `Err(())` when the sender is gone.
    pub(crate) fn recv<T>(&mut self, receiver: &mpsc::Receiver<T>) -> Result<T, ()> {
        let spun = self.spin(SPIN, || match receiver.try_recv() {
            Ok(item) => Some(Ok(item)),
            Err(TryRecvError::Disconnected) => Some(Err(())),
            Err(TryRecvError::Empty) => None,
        });
        match spun {
            Some(answer) => answer,
            None => receiver.recv().map_err(|_| ()),
        }
    }

    /// Spins for room to send `item`: `Ok(sent)` when the channel took it (`sent`) or is gone
    /// (`!sent`), `Err(item)` when the spin ended without room.
    fn try_send<T>(&mut self, sender: &SyncSender<T>, item: T) -> Result<bool, T> {
        let mut item = Some(item);
        let spun = self.spin(SPIN, || {
            match sender.try_send(item.take().expect("held until sent")) {
                Ok(()) => Some(true),
                Err(TrySendError::Disconnected(_)) => Some(false),
                Err(TrySendError::Full(back)) => {
                    item = Some(back);
                    None
                }
            }
        });
        match (spun, item) {
            (Some(sent), _) => Ok(sent),
            (None, Some(item)) => Err(item),
            (None, None) => unreachable!("an item not taken by the channel is given back"),
        }
    }
}

/// Wakes the loader's thread where it waits for room in the channel; clones share the thread.
#[derive(Debug, Clone, Default)]
pub(crate) struct Waker {
    thread: Arc<OnceLock<Thread>>,
}

impl Waker {
    /// Makes the calling thread the one that [`wake`](Waker::wake) wakes; the first call wins.
    fn register(&self) {
        if self.thread.get().is_none() {
            let _ = self.thread.set(std::thread::current());
        }
    }

    /// Wakes the registered thread if it is parked, or makes its next park return at once.
    pub(crate) fn wake(&self) {
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }
}

/// The loader thread's end of the channel, spinning as its [`Spinner`] says, then parked until
/// the consumer takes an item, `stop` is set or the consumer's end is gone.
pub(crate) struct Sender<T> {
    sender: SyncSender<T>,
    spinner: Spinner,
    stop: Arc<AtomicBool>,
    waker: Waker,
}

impl<T> Sender<T> {
    /// The end of `sender` that gives up waiting for room once `stop` is set; whoever sets it,
    /// and the consumer's end after every item it takes, calls `waker`'s
    /// [`wake`](Waker::wake).
    fn new(sender: SyncSender<T>, spinner: Spinner, stop: Arc<AtomicBool>, waker: Waker) -> Self {
        Sender {
            sender,
            spinner,
            stop,
            waker,
        }
    }

    /// Sends `item`, waiting for room; whether the receiver took it (`false` when it is gone,
    /// or when `stop` was set while the channel was full).
    pub(crate) fn send(&mut self, item: T) -> bool {
        let mut item = match self.spinner.try_send(&self.sender, item) {
            Ok(sent) => return sent,
            Err(item) => item,
        };
        // Registered before looking for room again: an item taken from here on wakes this
        // thread, and one taken before left the room that the next `try_send` finds.
        self.waker.register();
        loop {
            match self.sender.try_send(item) {
                Ok(()) => return true,
                Err(TrySendError::Disconnected(_)) => return false,
                Err(TrySendError::Full(back)) => item = back,
            }
            if self.stop.load(Ordering::Relaxed) {
                return false;
            }
            std::thread::park_timeout(PARKED_AT_MOST);
        }
    }
}

/// A bounded channel of `capacity` items between the loader's thread ([`Sender`], which gives
/// up waiting for room once `stop` is set) and its consumer ([`Receiver`]); both ends spin when
/// `spins` (see [`spins`]).
pub(crate) fn channel<T>(
    capacity: usize,
    spins: bool,
    stop: Arc<AtomicBool>,
) -> (Sender<T>, Receiver<T>) {
    let (sender, receiver) = mpsc::sync_channel(capacity);
    let waker = Waker::default();
    (
        Sender::new(sender, Spinner::new(spins), stop, waker.clone()),
        Receiver {
            receiver,
            spinner: Spinner::new(spins),
            waker: WakesOnDrop(waker),
        },
    )
}

/// The consumer's end of the channel: it wakes the loader's thread after every item it takes,
/// and when it is dropped.
pub(crate) struct Receiver<T> {
    /// Declared before `waker`, so dropped first: the channel is closed when the wake comes.
    receiver: mpsc::Receiver<T>,
    spinner: Spinner,
    waker: WakesOnDrop,
}

/// A [`Waker`] that wakes once more as it is dropped.
struct WakesOnDrop(Waker);

impl Drop for WakesOnDrop {
    /// Wakes the loader's thread if it waits for room: dropped after the channel's end, it finds
    /// the channel gone.
    fn drop(&mut self) {
        self.0.wake();
    }
}

impl<T> Receiver<T> {
    /// The channel's next item, waiting for it; `Err(())` when the sender is gone.
    pub(crate) fn recv(&mut self) -> Result<T, ()> {
        let item = self.spinner.recv(&self.receiver);
        if item.is_ok() {
            self.waker.0.wake();
        }
        item
    }

    /// The channel's next item, waiting at most `limit`: `Err(Timeout)` when none came,
    /// `Err(Disconnected)` when the sender is gone.
    pub(crate) fn recv_timeout(&mut self, limit: Duration) -> Result<T, RecvTimeoutError> {
        let item = self.spinner.recv_timeout(&self.receiver, limit);
        if item.is_ok() {
            self.waker.0.wake();
        }
        item
    }

    /// What wakes the loader's thread, for a stop request.
    pub(crate) fn waker(&self) -> Waker {
        self.waker.0.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spins_that_do_not_pay_are_skipped_for_longer_and_longer() {
        let mut spinner = Spinner::new(true);
        let mut skipped = Vec::new();
        for _ in 0..8 {
            assert_eq!(spinner.spin(Duration::from_micros(1), || None::<()>), None);
            let mut skips = 0;
            while !spinner.should_spin() {
                skips += 1;
            }
            skipped.push(skips);
            // `should_spin` said yes: this wait spins and fails again.
            spinner.skip = 0;
        }
        assert_eq!(skipped, [1, 3, 7, 15, 31, 63, 64, 64]);
    }

    #[test]
    fn a_spin_that_pays_makes_the_next_wait_spin_again() {
        let mut spinner = Spinner::default();
        assert_eq!(spinner.spin(Duration::from_micros(1), || None::<()>), None);
        assert!(!spinner.should_spin());
        assert_eq!(spinner.spin(Duration::from_secs(1), || Some(7)), Some(7));
        assert!(spinner.should_spin() && spinner.should_spin());
    }

    #[test]
    fn items_pass_in_order_whichever_end_waits() {
        let (mut sender, mut receiver) = channel(2, true, Arc::default());
        let producer = std::thread::spawn(move || (0..10_000u32).all(|i| sender.send(i)));
        for i in 0..10_000u32 {
            let item = if i % 2 == 0 {
                receiver.recv()
            } else {
                receiver
                    .recv_timeout(Duration::from_secs(10))
                    .map_err(|_| ())
            };
            assert_eq!(item, Ok(i));
        }
        assert!(producer.join().unwrap());
        assert_eq!(receiver.recv(), Err(()));
    }

    #[test]
    fn a_sender_waiting_for_room_gives_up_once_stopped() {
        let stop = Arc::new(AtomicBool::new(false));
        let (mut sender, receiver) = channel(1, false, stop.clone());
        let (done, outcome) = mpsc::channel();
        let producer = std::thread::spawn(move || {
            // The first item fills the channel; the second waits for room that never comes.
            let sent = (sender.send(1u8), sender.send(2));
            done.send(sent).unwrap();
        });
        std::thread::sleep(Duration::from_millis(20));
        stop.store(true, Ordering::Relaxed);
        receiver.waker().wake();
        assert_eq!(
            outcome.recv_timeout(Duration::from_secs(30)),
            Ok((true, false)),
            "the waiting send ended when stopped, with the consumer's end still open"
        );
        producer.join().unwrap();
        drop(receiver);
    }

    #[test]
    fn an_end_that_never_spins_sleeps_at_once() {
        let mut spinner = Spinner::new(false);
        let mut looked = 0;
        let answer = spinner.spin(Duration::from_secs(1), || {
            looked += 1;
            Some(())
        });
        assert_eq!((answer, looked), (None, 0));
        assert!(
            Spinner::new(true)
                .spin(Duration::from_secs(1), || Some(()))
                .is_some()
        );
    }

    #[test]
    fn a_send_to_a_dropped_receiver_fails_and_a_timeout_comes_back() {
        let (mut sender, mut receiver) = channel::<u8>(1, true, Arc::default());
        assert_eq!(
            receiver.recv_timeout(Duration::from_millis(1)),
            Err(RecvTimeoutError::Timeout)
        );
        assert!(sender.send(1));
        drop(receiver);
        assert!(!sender.send(2));
    }
}
