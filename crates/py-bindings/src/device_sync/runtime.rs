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
/// `cuStreamWaitEvent` and `hipStreamWaitEvent` have the same signature, as have the other event
/// calls of the two APIs.
type StreamWaitEvent = unsafe extern "C" fn(Handle, Handle, c_uint) -> Status;
type EventOf = unsafe extern "C" fn(Handle) -> Status;
type EventRecord = unsafe extern "C" fn(Handle, Handle) -> Status;
type EventCreate = unsafe extern "C" fn(*mut Handle, c_uint) -> Status;

/// `CU_EVENT_DISABLE_TIMING` and `hipEventDisableTiming`: the events only order work.
const EVENT_DISABLE_TIMING: c_uint = 0x2;

/// How one runtime makes a device current and puts the caller's device back: the half of a
/// [`DeviceRuntime`] in which the CUDA driver (contexts) and HIP (a current device) differ.
pub(crate) trait DeviceSwitch: Send + Sync + Sized {
    /// The runtime's name in messages (`CUDA driver`) and the library names to try, in order.
    const LIBRARY: (&'static str, &'static [&'static str]);
    /// The names of the event calls, and of the status type, as the runtime's header spells them.
    const EVENT_NAMES: EventNames;

    /// Reads the runtime's own calls from `library` (and initialises it).
    ///
    /// # Safety
    ///
    /// `library` is the runtime's library, whose symbols have the C signatures of its header.
    unsafe fn load(library: &libloading::Library) -> Result<Self, String>;
    /// Makes `device` current on this thread, whatever was current before.
    fn enter(&self, device: Device) -> Result<DeviceScope, String>;
    /// Makes current again what was current before `enter`, and releases what it held.
    fn exit(&self, scope: DeviceScope) -> Result<(), String>;
}

/// The symbol names of one runtime's event calls, and of its status type.
pub(crate) struct EventNames {
    status: &'static str,
    stream_wait_event: &'static str,
    event_synchronize: &'static str,
    event_create: &'static str,
    event_record: &'static str,
    event_destroy: &'static str,
}

/// The event calls, which the two runtimes share in signature and meaning.
struct EventCalls {
    stream_wait_event: StreamWaitEvent,
    event_synchronize: EventOf,
    event_create: EventCreate,
    event_record: EventRecord,
    event_destroy: EventOf,
    names: &'static EventNames,
}

/// A real device runtime: the library, its device switching `S`, and the event calls.
pub(crate) struct NativeRuntime<S: DeviceSwitch> {
    switch: S,
    events: EventCalls,
    /// Keeps the library loaded (the function pointers above point into it).
    _library: libloading::Library,
}

/// The CUDA driver (`libcuda.so.1`).
pub(crate) type CudaDriver = NativeRuntime<CudaContexts>;
/// The HIP runtime (`libamdhip64.so.*`).
pub(crate) type HipRuntime = NativeRuntime<HipDevices>;

impl<S: DeviceSwitch> NativeRuntime<S> {
    pub(crate) fn load() -> Result<NativeRuntime<S>, String> {
        let (what, names) = S::LIBRARY;
        let library = load_library(names, what)?;
        let names = &S::EVENT_NAMES;
        // The symbol names with the terminating NUL that `dlsym` needs.
        let name = |name: &str| format!("{name}\0");
        // SAFETY: the library is the runtime's, and the signatures are its header's: the event
        // calls have the same signatures in `cuda.h` and `hip_runtime_api.h`.
        unsafe {
            let switch = S::load(&library)?;
            let events = EventCalls {
                stream_wait_event: symbol(&library, name(names.stream_wait_event).as_bytes())?,
                event_synchronize: symbol(&library, name(names.event_synchronize).as_bytes())?,
                event_create: symbol(&library, name(names.event_create).as_bytes())?,
                event_record: symbol(&library, name(names.event_record).as_bytes())?,
                event_destroy: symbol(&library, name(names.event_destroy).as_bytes())?,
                names,
            };
            Ok(NativeRuntime {
                switch,
                events,
                _library: library,
            })
        }
    }

    fn check(&self, status: Status, call: &str) -> Result<(), String> {
        check(status, call, self.events.names.status)
    }
}

impl<S: DeviceSwitch> DeviceRuntime for NativeRuntime<S> {
    fn enter_device(&self, device: Device) -> Result<DeviceScope, String> {
        self.switch.enter(device)
    }

    fn exit_device(&self, scope: DeviceScope) -> Result<(), String> {
        self.switch.exit(scope)
    }

    fn stream_wait_event(&self, stream: usize, event: usize) -> Result<(), String> {
        // SAFETY: the consumer's stream (or a special stream of the current device) and an
        // event that its owner keeps alive.
        let status =
            unsafe { (self.events.stream_wait_event)(stream as Handle, event as Handle, 0) };
        self.check(status, self.events.names.stream_wait_event)
    }

    fn synchronize_event(&self, event: usize) -> Result<(), String> {
        // SAFETY: an event that its owner keeps alive.
        let status = unsafe { (self.events.event_synchronize)(event as Handle) };
        self.check(status, self.events.names.event_synchronize)
    }

    fn record_event(&self, stream: usize) -> Result<usize, String> {
        let mut event = std::ptr::null_mut();
        // SAFETY: an out-pointer to a local, on the current device.
        let status = unsafe { (self.events.event_create)(&mut event, EVENT_DISABLE_TIMING) };
        self.check(status, self.events.names.event_create)?;
        // SAFETY: the event just made and a stream of the current device.
        let status = unsafe { (self.events.event_record)(event, stream as Handle) };
        if let Err(error) = self.check(status, self.events.names.event_record) {
            // SAFETY: the event just made, destroyed once.
            unsafe { (self.events.event_destroy)(event) };
            return Err(error);
        }
        Ok(event as usize)
    }

    fn destroy_event(&self, event: usize) -> Result<(), String> {
        // SAFETY: an event made by `record_event`, destroyed once by its owner.
        let status = unsafe { (self.events.event_destroy)(event as Handle) };
        self.check(status, self.events.names.event_destroy)
    }
}

/// The CUDA driver's device switching: the device's primary context retained and pushed.
pub(crate) struct CudaContexts {
    device_get: unsafe extern "C" fn(*mut c_int, c_int) -> Status,
    primary_ctx_retain: unsafe extern "C" fn(*mut Handle, c_int) -> Status,
    primary_ctx_release: unsafe extern "C" fn(c_int) -> Status,
    ctx_push_current: unsafe extern "C" fn(Handle) -> Status,
    ctx_pop_current: unsafe extern "C" fn(*mut Handle) -> Status,
}

impl DeviceSwitch for CudaContexts {
    const LIBRARY: (&'static str, &'static [&'static str]) =
        ("CUDA driver", &["libcuda.so.1", "libcuda.so", "nvcuda.dll"]);
    // `_v2` where `cuda.h` redefines the name.
    const EVENT_NAMES: EventNames = EventNames {
        status: "CUresult",
        stream_wait_event: "cuStreamWaitEvent",
        event_synchronize: "cuEventSynchronize",
        event_create: "cuEventCreate",
        event_record: "cuEventRecord",
        event_destroy: "cuEventDestroy_v2",
    };

    unsafe fn load(library: &libloading::Library) -> Result<CudaContexts, String> {
        // SAFETY: the signatures are those of the CUDA driver API (`cuda.h`), under the names
        // its macros give them (`_v2` where `cuda.h` redefines the name).
        unsafe {
            let init: unsafe extern "C" fn(c_uint) -> Status = symbol(library, b"cuInit\0")?;
            check(init(0), "cuInit", "CUresult")?;
            Ok(CudaContexts {
                device_get: symbol(library, b"cuDeviceGet\0")?,
                primary_ctx_retain: symbol(library, b"cuDevicePrimaryCtxRetain\0")?,
                primary_ctx_release: symbol(library, b"cuDevicePrimaryCtxRelease_v2\0")?,
                ctx_push_current: symbol(library, b"cuCtxPushCurrent_v2\0")?,
                ctx_pop_current: symbol(library, b"cuCtxPopCurrent_v2\0")?,
            })
        }
    }

    fn enter(&self, device: Device) -> Result<DeviceScope, String> {
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

    fn exit(&self, scope: DeviceScope) -> Result<(), String> {
        let mut popped = std::ptr::null_mut();
        // SAFETY: pops the context `enter` pushed on this thread (the calls between them push
        // nothing), which leaves current what was current before.
        let status = unsafe { (self.ctx_pop_current)(&mut popped) };
        // SAFETY: balances the retain of `enter`; the CUDA runtime holds its own reference to
        // the primary context, so this does not destroy it under torch or CuPy.
        let released = unsafe { (self.primary_ctx_release)(scope.restore) };
        check(status, "cuCtxPopCurrent", "CUresult")?;
        check(released, "cuDevicePrimaryCtxRelease", "CUresult")
    }
}

/// HIP's device switching: the current device set, and set back.
pub(crate) struct HipDevices {
    get_device: unsafe extern "C" fn(*mut c_int) -> Status,
    set_device: unsafe extern "C" fn(c_int) -> Status,
}

impl DeviceSwitch for HipDevices {
    // The versioned names first: the unversioned one is a development symlink, which may point
    // to another ROCm install than the one torch or CuPy loaded, and two HIP runtimes in one
    // process do not share streams or events.
    const LIBRARY: (&'static str, &'static [&'static str]) = (
        "HIP runtime",
        &[
            "libamdhip64.so.7",
            "libamdhip64.so.6",
            "libamdhip64.so.5",
            "libamdhip64.so",
        ],
    );
    // `hipEventCreateWithFlags` takes the flags as `unsigned`, as `cuEventCreate` does.
    const EVENT_NAMES: EventNames = EventNames {
        status: "hipError_t",
        stream_wait_event: "hipStreamWaitEvent",
        event_synchronize: "hipEventSynchronize",
        event_create: "hipEventCreateWithFlags",
        event_record: "hipEventRecord",
        event_destroy: "hipEventDestroy",
    };

    unsafe fn load(library: &libloading::Library) -> Result<HipDevices, String> {
        // SAFETY: the signatures of `hip_runtime_api.h`.
        unsafe {
            Ok(HipDevices {
                get_device: symbol(library, b"hipGetDevice\0")?,
                set_device: symbol(library, b"hipSetDevice\0")?,
            })
        }
    }

    fn enter(&self, device: Device) -> Result<DeviceScope, String> {
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

    fn exit(&self, scope: DeviceScope) -> Result<(), String> {
        // SAFETY: a plain call, back to the device that was current.
        let status = unsafe { (self.set_device)(scope.restore) };
        check(status, "hipSetDevice", "hipError_t")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_that_is_not_installed_is_an_error_naming_it() {
        // No ROCm on the machines that run the tests: the HIP runtime is refused by name. (On
        // one with ROCm it loads, and its event calls are what was loaded.)
        match HipRuntime::load() {
            Ok(runtime) => assert_eq!(runtime.events.names.status, "hipError_t"),
            Err(message) => assert!(
                message.starts_with("no HIP runtime could be loaded ("),
                "{message}"
            ),
        }
    }

    #[test]
    fn both_runtimes_name_their_own_calls_in_errors() {
        assert_eq!(
            check(
                1,
                CudaContexts::EVENT_NAMES.event_record,
                CudaContexts::EVENT_NAMES.status
            ),
            Err("cuEventRecord failed with CUresult 1".to_string())
        );
        assert_eq!(
            check(
                2,
                HipDevices::EVENT_NAMES.event_create,
                HipDevices::EVENT_NAMES.status
            ),
            Err("hipEventCreateWithFlags failed with hipError_t 2".to_string())
        );
    }
}
