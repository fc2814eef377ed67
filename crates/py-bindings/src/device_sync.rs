//! Stream ordering for device tensors: `__dlpack__(stream=...)` makes the consumer's stream wait on
//! the producer's sync event before the capsule is handed out.
//!
//! The stream values follow the Python array API's `__dlpack__` table:
//!
//! | device | `None` | `-1` | `0` | `1` | `2` | `> 2` |
//! |---|---|---|---|---|---|---|
//! | CUDA (2) | legacy default stream (1) | no synchronisation | refused (ambiguous) | legacy default stream | per-thread default stream | a `cudaStream_t` |
//! | ROCm (10) | default stream (0) | no synchronisation | default stream | refused | refused | a `hipStream_t` |
//! | CPU and the rest | accepted | refused | refused | refused | refused | refused |
//!
//! A tensor imported through the Arrow C Device Data Interface keeps the producer's sync event
//! (a `cudaEvent_t*` or `hipEvent_t*`, [`SyncEvent`]). With an event, the consumer's stream is
//! made to wait on it through the device runtime ([`DeviceRuntime`]), which is loaded at run
//! time, the first time it is needed (`libcuda.so.1`, `libamdhip64.so`): nothing in the build or
//! on the CPU path needs a driver, and a missing driver is a `BufferError` when the wait is asked.
//! Without an event (a tensor imported through DLPack, whose producer ordered its work before the
//! legacy default stream when it handed the capsule out), only the streams that this ordering
//! already covers are accepted: `None`, `-1` and the legacy default stream.
//!
//! Tests replace the runtime with a recording fake: `_testing_record_device_runtime()` installs
//! it, and returns the list to which every `stream_wait_event` call appends
//! `(device_type, device_id, stream, event)`.

use std::ffi::{c_int, c_uint, c_void};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, OnceLock};

use arrow_dlpack_tensor::Device;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::errors;

/// The DLPack device types with streams.
const CUDA: u32 = 2;
const ROCM: u32 = 10;

/// A producer's sync event, as the Arrow C Device Data Interface hands it over: NULL, or a
/// pointer to the device runtime's event handle (`cudaEvent_t*`, `hipEvent_t*`), valid as long
/// as the producer's array is not released (its owner keeps it alive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SyncEvent(Option<NonNull<c_void>>);

// SAFETY: the pointer is an opaque handle that this crate only reads (the event handle behind it)
// while the array that owns it is alive; any thread may do that, as any thread may call the
// device runtime with the handle.
unsafe impl Send for SyncEvent {}
// SAFETY: as for `Send`: shared references only copy the pointer.
unsafe impl Sync for SyncEvent {}

impl SyncEvent {
    /// No event: the data is ready (CPU data, or data ordered when it was imported).
    pub(crate) const NONE: SyncEvent = SyncEvent(None);

    pub(crate) fn from_ptr(pointer: *mut c_void) -> SyncEvent {
        SyncEvent(NonNull::new(pointer))
    }

    pub(crate) fn as_ptr(self) -> *mut c_void {
        self.0.map_or(std::ptr::null_mut(), NonNull::as_ptr)
    }

    pub(crate) fn is_none(self) -> bool {
        self.0.is_none()
    }
}

/// The device runtime calls that stream ordering needs.
pub(crate) trait DeviceRuntime: Send + Sync {
    /// Makes `stream` (a runtime stream handle, `0`, `1` and `2` included) wait on `event` (an
    /// event handle, already read from the producer's `sync_event` pointer) on `device`.
    fn stream_wait_event(&self, device: Device, stream: usize, event: usize) -> Result<(), String>;
}

/// The runtime in use: the test fake when one is installed, else the real one, loaded lazily.
static TEST_RUNTIME: Mutex<Option<Arc<RecordingRuntime>>> = Mutex::new(None);

/// Orders the consumer's `stream` after the producer's `event` for data on `device`, following
/// the array API's stream table (see the module documentation); `BufferError` for a stream the
/// table refuses, or one that would need a runtime this data cannot be ordered with.
pub(crate) fn order_consumer_stream(
    stream: Option<&Bound<'_, PyAny>>,
    device: Device,
    event: SyncEvent,
) -> PyResult<()> {
    let Some(handle) = consumer_stream(stream, device, event)? else {
        return Ok(());
    };
    // SAFETY: a non-NULL sync event points to the producer's event handle (Arrow C Device Data
    // Interface), a host-memory pointer-sized value that lives as long as the array, which the
    // tensor holding `event` keeps alive; `read_unaligned` spares an alignment precondition.
    let event_handle = unsafe { event.as_ptr().cast::<usize>().read_unaligned() };
    let test_runtime = TEST_RUNTIME
        .lock()
        .map_err(|_| errors::buffer_error("the device runtime lock is poisoned"))?
        .clone();
    let result = match test_runtime {
        Some(fake) => fake.stream_wait_event(device, handle, event_handle),
        None => match real_runtime(device) {
            Ok(runtime) => runtime.stream_wait_event(device, handle, event_handle),
            Err(message) => Err(message),
        },
    };
    result.map_err(|message| {
        errors::buffer_error(format!(
            "cannot order stream {handle:#x} after the producer's sync event on {} device {}: \
             {message}",
            device.type_name(),
            device.device_id
        ))
    })
}

/// The stream handle the consumer's `stream` argument names, or `None` where no wait is needed.
fn consumer_stream(
    stream: Option<&Bound<'_, PyAny>>,
    device: Device,
    event: SyncEvent,
) -> PyResult<Option<usize>> {
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
    let handle = match (device.device_type, value) {
        (_, Some(-1)) => return Ok(None),
        (CUDA, None) => 1,
        (CUDA, Some(0)) => {
            return Err(errors::buffer_error(
                "stream=0 is ambiguous for CUDA data and the array API disallows it; expected \
                 None or 1 (the legacy default stream), 2 (the per-thread default stream), -1 or \
                 a cudaStream_t",
            ));
        }
        (ROCM, None) => 0,
        (ROCM, Some(1 | 2)) => {
            return Err(errors::buffer_error(format!(
                "stream={} is not supported for ROCm data (the array API reserves 1 and 2 for \
                 CUDA); expected None or 0 (the default stream), -1 or a hipStream_t",
                repr()
            )));
        }
        (CUDA | ROCM, Some(stream)) if stream >= 0 => stream as usize,
        (CUDA | ROCM, Some(_)) => {
            return Err(errors::buffer_error(format!(
                "stream={} is not a stream; expected None, -1 or a non-negative stream handle",
                repr()
            )));
        }
        (_, None) => return Ok(None),
        (_, Some(_)) => {
            return Err(errors::buffer_error(format!(
                "stream={} is not supported for data on {} device {}: the array API defines \
                 streams for CUDA and ROCm only; expected None or -1",
                repr(),
                device.type_name(),
                device.device_id
            )));
        }
    };
    if event.is_none() {
        // The producer ordered its work before the legacy default stream (CUDA) or the default
        // stream (ROCm) when it handed its DLPack capsule out.
        let already_ordered = match device.device_type {
            CUDA => handle == 1,
            _ => handle == 0,
        };
        if already_ordered {
            return Ok(None);
        }
        return Err(errors::buffer_error(format!(
            "stream={} cannot be ordered: the data has no producer sync event (it came through \
             DLPack, ordered before the {} default stream); expected None, -1 or {}",
            repr(),
            if device.device_type == CUDA {
                "legacy"
            } else {
                "ROCm"
            },
            if device.device_type == CUDA { 1 } else { 0 }
        )));
    }
    Ok(Some(handle))
}

/// The recording fake the tests install.
struct RecordingRuntime {
    recorded: Py<PyList>,
}

impl DeviceRuntime for RecordingRuntime {
    fn stream_wait_event(&self, device: Device, stream: usize, event: usize) -> Result<(), String> {
        let call = (device.device_type, device.device_id, stream, event);
        Python::attach(|py| self.recorded.bind(py).append(call)).map_err(|error| error.to_string())
    }
}

/// Installs a recording fake device runtime (for tests) and returns the list to which each
/// `stream_wait_event` call appends `(device_type, device_id, stream, event)`; `enable=False`
/// puts the real runtime back.
#[pyfunction]
#[pyo3(signature = (enable = true))]
pub(crate) fn _testing_record_device_runtime(py: Python<'_>, enable: bool) -> PyResult<Py<PyList>> {
    let list = PyList::empty(py).unbind();
    let mut runtime = TEST_RUNTIME
        .lock()
        .map_err(|_| errors::buffer_error("the device runtime lock is poisoned"))?;
    *runtime = enable.then(|| {
        Arc::new(RecordingRuntime {
            recorded: list.clone_ref(py),
        })
    });
    Ok(list)
}

/// The real runtime for `device`, loaded the first time it is asked for.
fn real_runtime(device: Device) -> Result<&'static dyn DeviceRuntime, String> {
    static CUDA_RUNTIME: OnceLock<Result<CudaDriver, String>> = OnceLock::new();
    static ROCM_RUNTIME: OnceLock<Result<HipRuntime, String>> = OnceLock::new();
    match device.device_type {
        CUDA => match CUDA_RUNTIME.get_or_init(CudaDriver::load) {
            Ok(runtime) => Ok(runtime),
            Err(message) => Err(message.clone()),
        },
        ROCM => match ROCM_RUNTIME.get_or_init(HipRuntime::load) {
            Ok(runtime) => Ok(runtime),
            Err(message) => Err(message.clone()),
        },
        _ => Err(format!(
            "arrow_dlpack has no runtime for {} devices",
            device.type_name()
        )),
    }
}

type CuInit = unsafe extern "C" fn(c_uint) -> c_int;
type CuCtxGetCurrent = unsafe extern "C" fn(*mut *mut c_void) -> c_int;
type CuDeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
type CuDevicePrimaryCtxRetain = unsafe extern "C" fn(*mut *mut c_void, c_int) -> c_int;
type CuCtxSetCurrent = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `cuStreamWaitEvent` and `hipStreamWaitEvent` have the same signature.
type StreamWaitEvent = unsafe extern "C" fn(*mut c_void, *mut c_void, c_uint) -> c_int;

/// The CUDA driver (`libcuda.so.1`), of which six entry points are used.
struct CudaDriver {
    ctx_get_current: CuCtxGetCurrent,
    device_get: CuDeviceGet,
    primary_ctx_retain: CuDevicePrimaryCtxRetain,
    ctx_set_current: CuCtxSetCurrent,
    stream_wait_event: StreamWaitEvent,
    /// Keeps the library loaded (the function pointers above point into it).
    _library: libloading::Library,
}

/// Loads `names` in order, returning the first library that loads.
fn load_library(names: &[&str], what: &str) -> Result<libloading::Library, String> {
    let mut last = String::new();
    for name in names {
        // SAFETY: loading the driver runs its initialisers, which is what the driver is for; no
        // other library of that name is expected in the process with other semantics.
        match unsafe { libloading::Library::new(name) } {
            Ok(library) => return Ok(library),
            Err(error) => last = error.to_string(),
        }
    }
    Err(format!("no {what} could be loaded ({last})"))
}

/// The function `name` of `library`, typed `T`.
///
/// # Safety
///
/// `T` must be the C signature of the symbol.
unsafe fn symbol<T: Copy>(library: &libloading::Library, name: &[u8]) -> Result<T, String> {
    // SAFETY: the caller guarantees the signature; the pointer is copied out while `library`
    // (kept alongside it by the caller) stays loaded.
    unsafe { library.get::<T>(name) }
        .map(|symbol| *symbol)
        .map_err(|error| error.to_string())
}

impl CudaDriver {
    fn load() -> Result<CudaDriver, String> {
        let library = load_library(&["libcuda.so.1", "libcuda.so", "nvcuda.dll"], "CUDA driver")?;
        // SAFETY: the signatures are those of the CUDA driver API (`cuda.h`).
        let driver = unsafe {
            let init: CuInit = symbol(&library, b"cuInit\0")?;
            let status = init(0);
            if status != 0 {
                return Err(format!("cuInit failed with CUresult {status}"));
            }
            CudaDriver {
                ctx_get_current: symbol(&library, b"cuCtxGetCurrent\0")?,
                device_get: symbol(&library, b"cuDeviceGet\0")?,
                primary_ctx_retain: symbol(&library, b"cuDevicePrimaryCtxRetain\0")?,
                ctx_set_current: symbol(&library, b"cuCtxSetCurrent\0")?,
                stream_wait_event: symbol(&library, b"cuStreamWaitEvent\0")?,
                _library: library,
            }
        };
        Ok(driver)
    }
}

impl DeviceRuntime for CudaDriver {
    fn stream_wait_event(&self, device: Device, stream: usize, event: usize) -> Result<(), String> {
        let mut context = std::ptr::null_mut();
        // SAFETY: driver API calls with out-pointers to locals; a thread without a current
        // context gets the device's primary context (the one the CUDA runtime, and so torch and
        // CuPy, use).
        unsafe {
            let status = (self.ctx_get_current)(&mut context);
            if status != 0 {
                return Err(format!("cuCtxGetCurrent failed with CUresult {status}"));
            }
            if context.is_null() {
                let mut handle = 0;
                let status = (self.device_get)(&mut handle, device.device_id);
                if status != 0 {
                    return Err(format!("cuDeviceGet failed with CUresult {status}"));
                }
                let status = (self.primary_ctx_retain)(&mut context, handle);
                if status != 0 {
                    return Err(format!(
                        "cuDevicePrimaryCtxRetain failed with CUresult {status}"
                    ));
                }
                let status = (self.ctx_set_current)(context);
                if status != 0 {
                    return Err(format!("cuCtxSetCurrent failed with CUresult {status}"));
                }
            }
        }
        // SAFETY: the handles come from the consumer (a stream it owns, or a special stream
        // value) and the producer (an event it keeps alive with its array).
        let status =
            unsafe { (self.stream_wait_event)(stream as *mut c_void, event as *mut c_void, 0) };
        if status != 0 {
            return Err(format!("cuStreamWaitEvent failed with CUresult {status}"));
        }
        Ok(())
    }
}

/// The HIP runtime (`libamdhip64.so`), of which one entry point is used.
struct HipRuntime {
    stream_wait_event: StreamWaitEvent,
    _library: libloading::Library,
}

impl HipRuntime {
    fn load() -> Result<HipRuntime, String> {
        let library = load_library(
            &["libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.7"],
            "HIP runtime",
        )?;
        // SAFETY: the signature of `hipStreamWaitEvent` (`hip_runtime_api.h`).
        let stream_wait_event = unsafe { symbol(&library, b"hipStreamWaitEvent\0")? };
        Ok(HipRuntime {
            stream_wait_event,
            _library: library,
        })
    }
}

impl DeviceRuntime for HipRuntime {
    fn stream_wait_event(
        &self,
        _device: Device,
        stream: usize,
        event: usize,
    ) -> Result<(), String> {
        // SAFETY: as for CUDA: the consumer's stream and the producer's live event.
        let status =
            unsafe { (self.stream_wait_event)(stream as *mut c_void, event as *mut c_void, 0) };
        if status != 0 {
            return Err(format!(
                "hipStreamWaitEvent failed with hipError_t {status}"
            ));
        }
        Ok(())
    }
}
