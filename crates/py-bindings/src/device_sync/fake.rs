//! The recording fake device runtime that tests install in place of the real ones: it keeps a
//! stack of current devices, as a driver does, and records every call with the device that was
//! current when it ran, so that a test can tell which device context each wait ran in.
//!
//! Its event handles are small made-up numbers that only it ever sees: no handle of a test
//! reaches a real driver while the fake is installed.

use std::sync::{Arc, Mutex};

use arrow_dlpack_tensor::Device;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::runtime::{DeviceRuntime, DeviceScope};
use crate::errors;

/// The fake installed by the tests, if any.
pub(super) static TEST_RUNTIME: Mutex<Option<Arc<RecordingRuntime>>> = Mutex::new(None);

/// The recording fake.
pub(super) struct RecordingRuntime {
    recorded: Py<PyList>,
    state: Mutex<FakeState>,
}

struct FakeState {
    /// The device the caller had current before any `enter_device`.
    caller_device: i32,
    /// The devices `enter_device` made current, innermost last.
    entered: Vec<i32>,
    /// The last event handle made by `record_event`.
    last_event: usize,
}

impl RecordingRuntime {
    fn state(&self) -> Result<std::sync::MutexGuard<'_, FakeState>, String> {
        self.state
            .lock()
            .map_err(|_| "the fake device runtime's lock is poisoned".to_string())
    }

    /// The device id current now.
    fn current(&self) -> Result<i32, String> {
        let state = self.state()?;
        Ok(*state.entered.last().unwrap_or(&state.caller_device))
    }

    fn record(&self, call: impl for<'py> IntoPyObject<'py>) -> Result<(), String> {
        Python::attach(|py| self.recorded.bind(py).append(call)).map_err(|error| error.to_string())
    }
}

impl DeviceRuntime for RecordingRuntime {
    fn enter_device(&self, device: Device) -> Result<DeviceScope, String> {
        let restore = {
            let mut state = self.state()?;
            let restore = *state.entered.last().unwrap_or(&state.caller_device);
            state.entered.push(device.device_id);
            restore
        };
        self.record(("enter", device.device_type, device.device_id))?;
        Ok(DeviceScope { device, restore })
    }

    fn exit_device(&self, scope: DeviceScope) -> Result<(), String> {
        self.state()?.entered.pop();
        let now = self.current()?;
        self.record((
            "exit",
            scope.device.device_type,
            scope.device.device_id,
            now,
        ))
    }

    fn stream_wait_event(&self, stream: usize, event: usize) -> Result<(), String> {
        self.record(("wait", self.current()?, stream, event))
    }

    fn synchronize_event(&self, event: usize) -> Result<(), String> {
        self.record(("synchronize", self.current()?, event))
    }

    fn record_event(&self, stream: usize) -> Result<usize, String> {
        let event = {
            let mut state = self.state()?;
            state.last_event += 1;
            0xEE00 + state.last_event
        };
        self.record(("record", self.current()?, stream, event))?;
        Ok(event)
    }

    fn destroy_event(&self, event: usize) -> Result<(), String> {
        self.record(("destroy", self.current()?, event))
    }
}

/// Installs a recording fake device runtime (for tests) and returns the list to which it appends
/// one tuple per call: `("enter", device_type, device_id)`, `("exit", device_type, device_id,
/// device current afterwards)`, `("wait", current device, stream, event)`, `("synchronize",
/// current device, event)`, `("record", current device, stream, new event)` and `("destroy",
/// current device, event)`. `current_device` is the device the caller has current;
/// `enable=False` puts the real runtimes back.
#[pyfunction]
#[pyo3(signature = (enable = true, current_device = 0))]
pub(crate) fn _testing_record_device_runtime(
    py: Python<'_>,
    enable: bool,
    current_device: i32,
) -> PyResult<Py<PyList>> {
    let list = PyList::empty(py).unbind();
    let mut runtime = TEST_RUNTIME
        .lock()
        .map_err(|_| errors::buffer_error("the device runtime lock is poisoned"))?;
    *runtime = enable.then(|| {
        Arc::new(RecordingRuntime {
            recorded: list.clone_ref(py),
            state: Mutex::new(FakeState {
                caller_device: current_device,
                entered: Vec::new(),
                last_event: 0,
            }),
        })
    });
    Ok(list)
}
