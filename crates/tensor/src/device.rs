//! Where a tensor's memory lives.

use dlpack_sys::{DLDevice, DLDeviceType};

/// A DLPack device: a device type and an index.
///
/// This crate only holds host memory, so every [`Tensor`](crate::Tensor) is on [`Device::CPU`];
/// the type exists so that errors and the Python `__dlpack_device__` speak DLPack's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Device {
    /// The `DLDeviceType` value (1 is the CPU).
    pub device_type: u32,
    /// The device index (0 for host memory).
    pub device_id: i32,
}

impl Device {
    /// Host memory.
    pub const CPU: Device = Device {
        device_type: 1,
        device_id: 0,
    };

    /// The DLPack descriptor.
    pub const fn to_dlpack(self) -> DLDevice {
        DLDevice {
            device_type: DLDeviceType(self.device_type),
            device_id: self.device_id,
        }
    }

    /// Reads a DLPack descriptor.
    pub const fn from_dlpack(device: DLDevice) -> Device {
        Device {
            device_type: device.device_type.0,
            device_id: device.device_id,
        }
    }

    /// Whether the data pointer of a tensor on this device type is an opaque handle rather than
    /// an address: OpenCL (4, a `cl_mem`), Vulkan (7, a `VkBuffer`), Metal (8, an `MTLBuffer`)
    /// and WebGPU (15, a `WGPUBuffer`). No arithmetic may be done on such a pointer: DLPack puts
    /// the distance to the first element into `byte_offset`.
    pub const fn has_opaque_handles(self) -> bool {
        matches!(self.device_type, 4 | 7 | 8 | 15)
    }

    /// Whether the memory is ordinary host memory.
    pub const fn is_cpu(self) -> bool {
        self.device_type == DLDeviceType::CPU.0
    }

    /// The name `dlpack.h` gives the device type.
    pub const fn type_name(self) -> &'static str {
        match self.device_type {
            1 => "CPU",
            2 => "CUDA",
            3 => "CUDAHost",
            4 => "OpenCL",
            7 => "Vulkan",
            8 => "Metal",
            9 => "VPI",
            10 => "ROCM",
            11 => "ROCMHost",
            12 => "ExtDev",
            13 => "CUDAManaged",
            14 => "OneAPI",
            15 => "WebGPU",
            16 => "Hexagon",
            17 => "MAIA",
            18 => "Trainium",
            _ => "unknown",
        }
    }
}

impl Default for Device {
    fn default() -> Self {
        Device::CPU
    }
}
