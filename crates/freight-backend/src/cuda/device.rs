//! [`Device`]: one CUDA device of this process, through its primary context.

use std::sync::Arc;

use cudarc::driver::sys;
use freight_msg::DeviceView;

use super::driver::{self, Raw};
use super::CudaError;

/// A device of this process with its primary context retained. Every driver
/// call that needs a context first makes this one current on the calling
/// thread ([`Device::bind`]): the context is the one the CUDA runtime and
/// frameworks (PyTorch, ...) of this process use, so pointers and streams
/// are shared with them.
#[derive(Debug)]
pub(crate) struct Device {
    ordinal: i32,
    dev: sys::CUdevice,
    ctx: Raw,
    uuid: [u8; 16],
}

impl Device {
    /// Opens device `ordinal` (as this process numbers devices).
    pub(crate) fn open(ordinal: i32) -> Result<Arc<Device>, CudaError> {
        let dev = driver::device(ordinal)?;
        let uuid = driver::device_uuid(dev)?;
        let ctx = driver::primary_context_retain(dev)?;
        Ok(Arc::new(Device { ordinal, dev, ctx, uuid }))
    }

    /// Makes the device's primary context current on the calling thread.
    pub(crate) fn bind(&self) -> Result<(), CudaError> {
        driver::set_current(self.ctx)
    }

    pub(crate) fn ordinal(&self) -> i32 {
        self.ordinal
    }

    pub(crate) fn uuid(&self) -> [u8; 16] {
        self.uuid
    }

    /// How this device addresses `ptr`.
    pub(crate) fn view(&self, ptr: u64, host_mapped: bool) -> DeviceView {
        DeviceView { ptr, ordinal: self.ordinal, uuid: self.uuid, host_mapped }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // Nothing to do on failure: the context goes with the process.
        let _ = driver::primary_context_release(self.dev);
    }
}
