//! Stream ordering for device tensors: what a tensor's consumers must wait for before they touch
//! its memory ([`SyncEvent`]), and how a consumer's `__dlpack__(stream=...)` or an Arrow C Device
//! export is made to wait for it.
//!
//! The stream values follow the Python array API's `__dlpack__` table; CUDA host and CUDA managed
//! memory take CUDA's row and ROCm host memory ROCm's, as CuPy does for managed memory:
//!
//! | device | `None` | `-1` | `0` | `1` | `2` | `> 2` |
//! |---|---|---|---|---|---|---|
//! | CUDA (2, 3, 13) | legacy default stream (1) | no stream | refused (ambiguous) | legacy default stream | per-thread default stream | a `cudaStream_t` |
//! | ROCm (10, 11) | default stream (0) | no stream | default stream | refused | refused | a `hipStream_t` |
//! | CPU and the rest | accepted | accepted (other devices) | refused | refused | refused | refused |
//!
//! What is waited for depends on how the tensor came in:
//! - a producer's sync event (Arrow C Device Data Interface): the consumer's stream waits on it,
//!   or, for `-1`, the calling thread does, so that the event is waited on whatever is asked;
//! - a DLPack import that passed its consumer stream (the default stream of the device): the
//!   producer ordered its work before that stream, so another consumer stream waits on an event
//!   recorded on it;
//! - a DLPack import whose producer refused the `stream` keyword, or a bare capsule: the
//!   ordering is unknown, and only `-1` (the consumer takes the ordering on itself) is accepted.
//!
//! Every call runs with the tensor's device current, and the caller's device current again
//! afterwards (`runtime::in_device`). The runtimes are loaded the first time they are needed
//! (`runtime`); tests replace them with a recording fake (`fake`).

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::{Arc, OnceLock};

use arrow_dlpack_tensor::Device;
use pyo3::prelude::*;

use crate::errors;

mod fake;
mod runtime;

pub(crate) use fake::_testing_record_device_runtime;
use runtime::{CudaDriver, DeviceRuntime, HipRuntime, in_device};

/// What a tensor's consumers must wait for before they touch its memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum SyncEvent {
    /// Nothing: CPU data, data of a device without streams, or an Arrow device array whose sync
    /// event was NULL (the Arrow C Device Data Interface's "no synchronisation needed").
    #[default]
    Ready,
    /// The producer's sync event, as the Arrow C Device Data Interface hands it over: a pointer
    /// to the runtime's event handle (`cudaEvent_t*`, `hipEvent_t*`), valid as long as the
    /// producer's array is not released (the tensor's memory owner keeps it alive).
    Event(NonNull<c_void>),
    /// The producer ordered its work before the default stream of the tensor's device (the
    /// legacy default stream for CUDA, the null stream for ROCm), as a DLPack producer does when
    /// it is passed that stream.
    DefaultStream,
    /// The producer ordered its work before nothing known (its `__dlpack__` took no `stream`).
    Unknown,
}

// SAFETY: the event pointer is an opaque handle that this crate only reads (the event handle
// behind it) while the array that owns it is alive; any thread may do that, as any thread may
// call the device runtime with the handle.
unsafe impl Send for SyncEvent {}
// SAFETY: as for `Send`: shared references only copy the pointer.
unsafe impl Sync for SyncEvent {}

impl SyncEvent {
    /// Ready: nothing to wait for.
    pub(crate) const NONE: SyncEvent = SyncEvent::Ready;

    /// An Arrow device array's `sync_event`: NULL is ready.
    pub(crate) fn from_ptr(pointer: *mut c_void) -> SyncEvent {
        NonNull::new(pointer).map_or(SyncEvent::Ready, SyncEvent::Event)
    }

    /// Whether nothing is to be waited for.
    pub(crate) fn is_ready(self) -> bool {
        self == SyncEvent::Ready
    }
}

/// The runtimes that order work on streams, by the device types whose memory they own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Cuda,
    Rocm,
}

impl Family {
    fn of(device: Device) -> Option<Family> {
        match device.device_type {
            2 | 3 | 13 => Some(Family::Cuda),
            10 | 11 => Some(Family::Rocm),
            _ => None,
        }
    }

    /// The stream a consumer without streams of its own uses, and `stream=None` names.
    fn default_stream(self) -> usize {
        match self {
            Family::Cuda => 1,
            Family::Rocm => 0,
        }
    }
}

/// The `stream` an importer passes to a producer's `__dlpack__` for data on `device`: the
/// device's default stream for CUDA and ROCm (the array API's recommendation for a consumer
/// without streams of its own), nothing for the CPU and devices without streams.
pub(crate) fn import_stream(device: Device) -> Option<i64> {
    Family::of(device).map(|family| family.default_stream() as i64)
}

/// What a DLPack import of a tensor on `device` must record: ordered before the default stream
/// when the producer was passed [`import_stream`] (`stream_passed`), unknown when not; devices
/// without streams are ready.
pub(crate) fn after_dlpack_import(device: Device, stream_passed: bool) -> SyncEvent {
    match Family::of(device) {
        None => SyncEvent::Ready,
        Some(_) if stream_passed => SyncEvent::DefaultStream,
        Some(_) => SyncEvent::Unknown,
    }
}

/// Refuses a non-NULL sync event on a device whose event type arrow_dlpack does not know: it
/// could never be waited on, and the data must not be handed out unordered.
pub(crate) fn check_event_device(device: Device, event: SyncEvent) -> PyResult<()> {
    if matches!(event, SyncEvent::Event(_)) && Family::of(device).is_none() {
        return Err(errors::buffer_error(format!(
            "the producer's sync_event for {} device {} cannot be waited on: arrow_dlpack knows \
             the event types of CUDA (2, 3, 13) and ROCm (10, 11) only; expected a NULL \
             sync_event for this device type",
            device.type_name(),
            device.device_id
        )));
    }
    Ok(())
}

/// What a consumer's `stream` argument asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Consumer {
    /// `-1`: no stream; the consumer orders its own work.
    NoStream,
    /// A stream handle (`0`, `1` and `2` are special streams).
    Stream(usize),
}

/// One runtime operation that orders the consumer after the producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ordering {
    WaitEvent { stream: usize, event: usize },
    SynchronizeEvent { event: usize },
    WaitDefaultStream { stream: usize, default: usize },
}

/// Orders the consumer's `stream` after what the tensor on `device` must wait for (`event`),
/// following the array API's stream table (see the module documentation); `BufferError` for a
/// stream the table refuses, for an ordering that cannot be established, or a runtime failure.
pub(crate) fn order_consumer_stream(
    stream: Option<&Bound<'_, PyAny>>,
    device: Device,
    event: SyncEvent,
) -> PyResult<()> {
    let Some(consumer) = consumer_stream(stream, device)? else {
        return Ok(());
    };
    let Some(family) = Family::of(device) else {
        return Ok(());
    };
    let ordering = match (event, consumer) {
        (SyncEvent::Ready, _) => return Ok(()),
        (SyncEvent::Event(pointer), consumer) => {
            // SAFETY: a non-NULL sync event points to the producer's event handle (Arrow C Device
            // Data Interface), a host-memory pointer-sized value that lives as long as the array,
            // which the tensor holding `event` keeps alive; `read_unaligned` spares an alignment
            // precondition.
            let event = unsafe { pointer.as_ptr().cast::<usize>().read_unaligned() };
            match consumer {
                Consumer::NoStream => Ordering::SynchronizeEvent { event },
                Consumer::Stream(stream) => Ordering::WaitEvent { stream, event },
            }
        }
        (SyncEvent::DefaultStream, Consumer::NoStream) => return Ok(()),
        (SyncEvent::DefaultStream, Consumer::Stream(stream)) => {
            let default = family.default_stream();
            if stream == default {
                return Ok(());
            }
            Ordering::WaitDefaultStream { stream, default }
        }
        (SyncEvent::Unknown, Consumer::NoStream) => return Ok(()),
        (SyncEvent::Unknown, Consumer::Stream(stream)) => {
            return Err(errors::buffer_error(format!(
                "stream {stream:#x} cannot be ordered after the data on {} device {}: its \
                 producer took no stream when it was imported, so when its work is done is \
                 unknown; expected stream=-1 (no synchronisation, the consumer's own \
                 responsibility)",
                device.type_name(),
                device.device_id
            )));
        }
    };
    run(device, |runtime| match ordering {
        Ordering::WaitEvent { stream, event } => runtime.stream_wait_event(stream, event),
        Ordering::SynchronizeEvent { event } => runtime.synchronize_event(event),
        Ordering::WaitDefaultStream { stream, default } => {
            let marker = runtime.record_event(default)?;
            let waited = runtime.stream_wait_event(stream, marker);
            let destroyed = runtime.destroy_event(marker);
            waited.and(destroyed)
        }
    })
    .map_err(|message| {
        errors::buffer_error(format!(
            "cannot order the consumer after the producer on {} device {}: {message}",
            device.type_name(),
            device.device_id
        ))
    })
}

/// The consumer's `stream` argument, read with the array API's table for `device`; `None` where
/// nothing is to be ordered (the CPU and devices without streams, which accept no stream).
fn consumer_stream(
    stream: Option<&Bound<'_, PyAny>>,
    device: Device,
) -> PyResult<Option<Consumer>> {
    let stream = stream.filter(|stream| !stream.is_none());
    let repr = || {
        stream.map_or_else(
            || "None".to_string(),
            |stream| {
                stream
                    .repr()
                    .map_or_else(|_| "?".into(), |repr| repr.to_string())
            },
        )
    };
    let value = match stream {
        None => None,
        Some(stream) => Some(stream.extract::<i64>().map_err(|_| {
            errors::buffer_error(format!(
                "stream={} is not supported; expected None or an integer",
                repr()
            ))
        })?),
    };
    if device.is_cpu() {
        return match value {
            None => Ok(None),
            Some(_) => Err(errors::buffer_error(format!(
                "stream={} is not supported for CPU data; expected stream=None",
                repr()
            ))),
        };
    }
    let Some(family) = Family::of(device) else {
        return match value {
            None | Some(-1) => Ok(None),
            Some(_) => Err(errors::buffer_error(format!(
                "stream={} is not supported for data on {} device {}: the array API defines \
                 streams for CUDA and ROCm only; expected None or -1",
                repr(),
                device.type_name(),
                device.device_id
            ))),
        };
    };
    let consumer = match (family, value) {
        (_, Some(-1)) => Consumer::NoStream,
        (_, None) => Consumer::Stream(family.default_stream()),
        (Family::Cuda, Some(0)) => {
            return Err(errors::buffer_error(
                "stream=0 is ambiguous for CUDA data and the array API disallows it; expected \
                 None or 1 (the legacy default stream), 2 (the per-thread default stream), -1 or \
                 a cudaStream_t",
            ));
        }
        (Family::Rocm, Some(1 | 2)) => {
            return Err(errors::buffer_error(format!(
                "stream={} is not supported for ROCm data (the array API reserves 1 and 2 for \
                 CUDA); expected None or 0 (the default stream), -1 or a hipStream_t",
                repr()
            )));
        }
        (_, Some(stream)) if stream >= 0 => Consumer::Stream(stream as usize),
        (_, Some(_)) => {
            return Err(errors::buffer_error(format!(
                "stream={} is not a stream; expected None, -1 or a non-negative stream handle",
                repr()
            )));
        }
    };
    Ok(Some(consumer))
}

/// An event this package recorded for an Arrow C Device export, destroyed (in its device's
/// context) when the exported array releases it; its handle lives at a stable heap address,
/// which the array's `sync_event` points to.
pub(crate) struct ExportedEvent {
    handle: Box<usize>,
    device: Device,
    runtime: Arc<dyn DeviceRuntime>,
}

impl ExportedEvent {
    /// The `sync_event` pointer: a pointer to the event handle, as the interface asks.
    pub(crate) fn as_sync_event(&self) -> *mut c_void {
        std::ptr::from_ref::<usize>(&self.handle).cast_mut().cast()
    }
}

impl Drop for ExportedEvent {
    fn drop(&mut self) {
        let handle = *self.handle;
        // A failure cannot be reported from a release callback; the event is then leaked, which
        // costs a handle, never a wrong ordering.
        let _ = in_device(&*self.runtime, self.device, |runtime| {
            runtime.destroy_event(handle)
        });
    }
}

/// The `sync_event` of an Arrow C Device export of a tensor on `device`: NULL when it is ready,
/// the producer's own event, or an event recorded now on the default stream before which the
/// producer ordered its work (owned by the returned [`ExportedEvent`], which the exported array
/// must keep); `BufferError` when the ordering is unknown.
pub(crate) fn export_event(
    device: Device,
    event: SyncEvent,
) -> PyResult<(*mut c_void, Option<ExportedEvent>)> {
    match (event, Family::of(device)) {
        (SyncEvent::Ready, _) | (_, None) => Ok((std::ptr::null_mut(), None)),
        (SyncEvent::Event(pointer), _) => Ok((pointer.as_ptr(), None)),
        (SyncEvent::Unknown, _) => Err(errors::buffer_error(format!(
            "the data on {} device {} cannot be handed out through the Arrow C Device Data \
             Interface: its producer took no stream when it was imported, so no sync_event can \
             say when its work is done",
            device.type_name(),
            device.device_id
        ))),
        (SyncEvent::DefaultStream, Some(family)) => {
            let runtime = runtime_for(device).map_err(|message| {
                errors::buffer_error(format!(
                    "cannot record a sync_event on {} device {}: {message}",
                    device.type_name(),
                    device.device_id
                ))
            })?;
            let handle = in_device(&*runtime, device, |runtime| {
                runtime.record_event(family.default_stream())
            })
            .map_err(|message| {
                errors::buffer_error(format!(
                    "cannot record a sync_event on {} device {}: {message}",
                    device.type_name(),
                    device.device_id
                ))
            })?;
            let exported = ExportedEvent {
                handle: Box::new(handle),
                device,
                runtime,
            };
            Ok((exported.as_sync_event(), Some(exported)))
        }
    }
}

/// Runs `work` with `device` current, on the runtime of its family.
fn run(
    device: Device,
    work: impl FnOnce(&dyn DeviceRuntime) -> Result<(), String>,
) -> Result<(), String> {
    let runtime = runtime_for(device)?;
    in_device(&*runtime, device, work)
}

/// The runtime for `device`: the test fake when one is installed, else the real one, loaded the
/// first time it is asked for.
fn runtime_for(device: Device) -> Result<Arc<dyn DeviceRuntime>, String> {
    let fake = fake::TEST_RUNTIME
        .lock()
        .map_err(|_| "the device runtime lock is poisoned".to_string())?
        .clone();
    if let Some(fake) = fake {
        return Ok(fake);
    }
    static CUDA_RUNTIME: OnceLock<Result<Arc<CudaDriver>, String>> = OnceLock::new();
    static ROCM_RUNTIME: OnceLock<Result<Arc<HipRuntime>, String>> = OnceLock::new();
    match Family::of(device) {
        Some(Family::Cuda) => match CUDA_RUNTIME.get_or_init(|| CudaDriver::load().map(Arc::new)) {
            Ok(runtime) => Ok(runtime.clone()),
            Err(message) => Err(message.clone()),
        },
        Some(Family::Rocm) => match ROCM_RUNTIME.get_or_init(|| HipRuntime::load().map(Arc::new)) {
            Ok(runtime) => Ok(runtime.clone()),
            Err(message) => Err(message.clone()),
        },
        None => Err(format!(
            "arrow_dlpack has no runtime for {} devices",
            device.type_name()
        )),
    }
}
