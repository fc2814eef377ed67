//! The device runtime calls that stream ordering needs, and the real runtimes behind them: the
//! CUDA driver (`libcuda.so.1`) and the HIP runtime (`libamdhip64.so.*`), loaded at run time the
//! first time they are needed, so that nothing in the build or on the CPU path needs a driver.
//!
//! Every call that names a stream runs between [`DeviceRuntime::enter_device`] and
//! [`DeviceRuntime::exit_device`] ([`in_device`]): the special streams (CUDA's legacy and
//! per-thread default streams, HIP's null stream) belong to the current device, so the tensor's
//! device is made current for the call and the caller's device is current again afterwards.

use std::ffi::{c_int, c_uint, c_void};

use arrow_dlpack_tensor::Device;

/// What [`DeviceRuntime::exit_device`] needs to put the caller's state back: the `CUdevice`
/// whose primary context was retained and pushed (CUDA), or the device that was current (HIP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeviceScope {
    pub(crate) device: Device,
    pub(crate) restore: i32,
}

/// The calls of one device runtime; handles are passed as integers (streams `0`, `1` and `2`
/// are the special streams of the array API's table).
pub(crate) trait DeviceRuntime: Send + Sync {
    /// Makes `device` current on this thread, whatever was current before.
    fn enter_device(&self, device: Device) -> Result<DeviceScope, String>;
    /// Makes current again what was current before `enter_device`, and releases what it held.
    fn exit_device(&self, scope: DeviceScope) -> Result<(), String>;
    /// Makes `stream` wait (on the device) for `event`.
    fn stream_wait_event(&self, stream: usize, event: usize) -> Result<(), String>;
    /// Blocks the calling thread until `event` has completed.
    fn synchronize_event(&self, event: usize) -> Result<(), String>;
    /// Creates an event and records it on `stream`: it completes once the work enqueued on
    /// `stream` so far has.
    fn record_event(&self, stream: usize) -> Result<usize, String>;
    /// Destroys an event made by `record_event` (work already waiting on it is unaffected).
    fn destroy_event(&self, event: usize) -> Result<(), String>;
}

/// Runs `work` with `device` current, and makes the caller's device current again afterwards,
/// also when `work` fails (its error is the one reported).
pub(crate) fn in_device<T>(
    runtime: &dyn DeviceRuntime,
    device: Device,
    work: impl FnOnce(&dyn DeviceRuntime) -> Result<T, String>,
) -> Result<T, String> {
    let scope = runtime.enter_device(device)?;
    let result = work(runtime);
    let exited = runtime.exit_device(scope);
    let value = result?;
    exited?;
    Ok(value)
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

/// A status of 0 is success; anything else names the call that failed.
fn check(status: c_int, call: &str, kind: &str) -> Result<(), String> {
    if status == 0 {
        Ok(())
    } else {
        Err(format!("{call} failed with {kind} {status}"))
    }
}

type Status = c_int;
type Handle = *mut c_void;
/// `cuStreamWaitEvent` and `hipStreamWaitEvent` have the same signature.
type StreamWaitEvent = unsafe extern "C" fn(Handle, Handle, c_uint) -> Status;
type EventOf = unsafe extern "C" fn(Handle) -> Status;
type EventRecord = unsafe extern "C" fn(Handle, Handle) -> Status;
type EventCreate = unsafe extern "C" fn(*mut Handle, c_uint) -> Status;

/// `CU_EVENT_DISABLE_TIMING` and `hipEventDisableTiming`: the events only order work.
const EVENT_DISABLE_TIMING: c_uint = 0x2;

/// The CUDA driver (`libcuda.so.1`).
pub(crate) struct CudaDriver {
    device_get: unsafe extern "C" fn(*mut c_int, c_int) -> Status,
    primary_ctx_retain: unsafe extern "C" fn(*mut Handle, c_int) -> Status,
    primary_ctx_release: unsafe extern "C" fn(c_int) -> Status,
    ctx_push_current: unsafe extern "C" fn(Handle) -> Status,
    ctx_pop_current: unsafe extern "C" fn(*mut Handle) -> Status,
    stream_wait_event: StreamWaitEvent,
    event_synchronize: EventOf,
    event_create: EventCreate,
    event_record: EventRecord,
    event_destroy: EventOf,
    /// Keeps the library loaded (the function pointers above point into it).
    _library: libloading::Library,
}

impl CudaDriver {
    pub(crate) fn load() -> Result<CudaDriver, String> {
        let library = load_library(&["libcuda.so.1", "libcuda.so", "nvcuda.dll"], "CUDA driver")?;
        // SAFETY: the signatures are those of the CUDA driver API (`cuda.h`), under the names
        // its macros give them (`_v2` where `cuda.h` redefines the name).
        unsafe {
            let init: unsafe extern "C" fn(c_uint) -> Status = symbol(&library, b"cuInit\0")?;
            check(init(0), "cuInit", "CUresult")?;
            Ok(CudaDriver {
                device_get: symbol(&library, b"cuDeviceGet\0")?,
                primary_ctx_retain: symbol(&library, b"cuDevicePrimaryCtxRetain\0")?,
                primary_ctx_release: symbol(&library, b"cuDevicePrimaryCtxRelease_v2\0")?,
                ctx_push_current: symbol(&library, b"cuCtxPushCurrent_v2\0")?,
                ctx_pop_current: symbol(&library, b"cuCtxPopCurrent_v2\0")?,
                stream_wait_event: symbol(&library, b"cuStreamWaitEvent\0")?,
                event_synchronize: symbol(&library, b"cuEventSynchronize\0")?,
                event_create: symbol(&library, b"cuEventCreate\0")?,
                event_record: symbol(&library, b"cuEventRecord\0")?,
                event_destroy: symbol(&library, b"cuEventDestroy_v2\0")?,
                _library: library,
            })
        }
    }
}

impl DeviceRuntime for CudaDriver {
    fn enter_device(&self, device: Device) -> Result<DeviceScope, String> {
        let mut handle: c_int = 0;
        // SAFETY: an out-pointer to a local.
        let status = unsafe { (self.device_get)(&mut handle, device.device_id) };
        check(status, "cuDeviceGet", "CUresult")?;
        let mut context = std::ptr::null_mut();
        // SAFETY: an out-pointer to a local and a device handle from `cuDeviceGet`; the primary
        // context is the one the CUDA runtime (and so torch and CuPy) uses for the device.
        let status = unsafe { (self.primary_ctx_retain)(&mut context, handle) };
        check(status, "cuDevicePrimaryCtxRetain", "CUresult")?;
        // SAFETY: a context just retained, pushed on this thread's context stack.
        let pushed = unsafe { (self.ctx_push_current)(context) };
        if pushed != 0 {
            // SAFETY: balances the retain above.
            unsafe { (self.primary_ctx_release)(handle) };
            return Err(format!("cuCtxPushCurrent failed with CUresult {pushed}"));
        }
        Ok(DeviceScope {
            device,
            restore: handle,
        })
    }

    fn exit_device(&self, scope: DeviceScope) -> Result<(), String> {
        let mut popped = std::ptr::null_mut();
        // SAFETY: pops the context `enter_device` pushed on this thread (the calls between them
        // push nothing), which leaves current what was current before.
        let status = unsafe { (self.ctx_pop_current)(&mut popped) };
        // SAFETY: balances the retain of `enter_device`; the CUDA runtime holds its own
        // reference to the primary context, so this does not destroy it under torch or CuPy.
        let released = unsafe { (self.primary_ctx_release)(scope.restore) };
        check(status, "cuCtxPopCurrent", "CUresult")?;
        check(released, "cuDevicePrimaryCtxRelease", "CUresult")
    }

    fn stream_wait_event(&self, stream: usize, event: usize) -> Result<(), String> {
        // SAFETY: the consumer's stream (or a special stream of the current context) and an
        // event that its owner keeps alive.
        let status = unsafe { (self.stream_wait_event)(stream as Handle, event as Handle, 0) };
        check(status, "cuStreamWaitEvent", "CUresult")
    }

    fn synchronize_event(&self, event: usize) -> Result<(), String> {
        // SAFETY: an event that its owner keeps alive.
        let status = unsafe { (self.event_synchronize)(event as Handle) };
        check(status, "cuEventSynchronize", "CUresult")
    }

    fn record_event(&self, stream: usize) -> Result<usize, String> {
        let mut event = std::ptr::null_mut();
        // SAFETY: an out-pointer to a local, in the current context.
        let status = unsafe { (self.event_create)(&mut event, EVENT_DISABLE_TIMING) };
        check(status, "cuEventCreate", "CUresult")?;
        // SAFETY: the event just made and a stream of the current context.
        let status = unsafe { (self.event_record)(event, stream as Handle) };
        if status != 0 {
            // SAFETY: the event just made, destroyed once.
            unsafe { (self.event_destroy)(event) };
            return Err(format!("cuEventRecord failed with CUresult {status}"));
        }
        Ok(event as usize)
    }

    fn destroy_event(&self, event: usize) -> Result<(), String> {
        // SAFETY: an event made by `record_event`, destroyed once by its owner.
        let status = unsafe { (self.event_destroy)(event as Handle) };
        check(status, "cuEventDestroy", "CUresult")
    }
}

/// The HIP runtime (`libamdhip64.so.*`).
pub(crate) struct HipRuntime {
    get_device: unsafe extern "C" fn(*mut c_int) -> Status,
    set_device: unsafe extern "C" fn(c_int) -> Status,
    stream_wait_event: StreamWaitEvent,
    event_synchronize: EventOf,
    event_create: EventCreate,
    event_record: EventRecord,
    event_destroy: EventOf,
    _library: libloading::Library,
}

impl HipRuntime {
    pub(crate) fn load() -> Result<HipRuntime, String> {
        // The versioned names first: the unversioned one is a development symlink, which may
        // point to another ROCm install than the one torch or CuPy loaded, and two HIP runtimes
        // in one process do not share streams or events.
        let library = load_library(
            &[
                "libamdhip64.so.7",
                "libamdhip64.so.6",
                "libamdhip64.so.5",
                "libamdhip64.so",
            ],
            "HIP runtime",
        )?;
        // SAFETY: the signatures of `hip_runtime_api.h` (`hipEventCreateWithFlags` takes the
        // flags as `unsigned`).
        unsafe {
            Ok(HipRuntime {
                get_device: symbol(&library, b"hipGetDevice\0")?,
                set_device: symbol(&library, b"hipSetDevice\0")?,
                stream_wait_event: symbol(&library, b"hipStreamWaitEvent\0")?,
                event_synchronize: symbol(&library, b"hipEventSynchronize\0")?,
                event_create: symbol(&library, b"hipEventCreateWithFlags\0")?,
                event_record: symbol(&library, b"hipEventRecord\0")?,
                event_destroy: symbol(&library, b"hipEventDestroy\0")?,
                _library: library,
            })
        }
    }
}

impl DeviceRuntime for HipRuntime {
    fn enter_device(&self, device: Device) -> Result<DeviceScope, String> {
        let mut current: c_int = 0;
        // SAFETY: an out-pointer to a local.
        let status = unsafe { (self.get_device)(&mut current) };
        check(status, "hipGetDevice", "hipError_t")?;
        // SAFETY: a plain call; a bad index is an error status.
        let status = unsafe { (self.set_device)(device.device_id) };
        check(status, "hipSetDevice", "hipError_t")?;
        Ok(DeviceScope {
            device,
            restore: current,
        })
    }

    fn exit_device(&self, scope: DeviceScope) -> Result<(), String> {
        // SAFETY: a plain call, back to the device that was current.
        let status = unsafe { (self.set_device)(scope.restore) };
        check(status, "hipSetDevice", "hipError_t")
    }

    fn stream_wait_event(&self, stream: usize, event: usize) -> Result<(), String> {
        // SAFETY: as for CUDA: the consumer's stream and a live event.
        let status = unsafe { (self.stream_wait_event)(stream as Handle, event as Handle, 0) };
        check(status, "hipStreamWaitEvent", "hipError_t")
    }

    fn synchronize_event(&self, event: usize) -> Result<(), String> {
        // SAFETY: a live event.
        let status = unsafe { (self.event_synchronize)(event as Handle) };
        check(status, "hipEventSynchronize", "hipError_t")
    }

    fn record_event(&self, stream: usize) -> Result<usize, String> {
        let mut event = std::ptr::null_mut();
        // SAFETY: an out-pointer to a local, on the current device.
        let status = unsafe { (self.event_create)(&mut event, EVENT_DISABLE_TIMING) };
        check(status, "hipEventCreateWithFlags", "hipError_t")?;
        // SAFETY: the event just made and a stream of the current device.
        let status = unsafe { (self.event_record)(event, stream as Handle) };
        if status != 0 {
            // SAFETY: the event just made, destroyed once.
            unsafe { (self.event_destroy)(event) };
            return Err(format!("hipEventRecord failed with hipError_t {status}"));
        }
        Ok(event as usize)
    }

    fn destroy_event(&self, event: usize) -> Result<(), String> {
        // SAFETY: an event made by `record_event`, destroyed once by its owner.
        let status = unsafe { (self.event_destroy)(event as Handle) };
        check(status, "hipEventDestroy", "hipError_t")
    }
}
