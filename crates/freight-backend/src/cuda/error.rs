//! [`CudaError`]: why a CUDA call could not be made or failed.

use std::fmt;

/// Why CUDA could not be used, or which driver call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CudaError {
    /// The driver library could not be loaded: no NVIDIA driver is installed.
    DriverMissing,
    /// The driver lacks a function freight calls: it is older than CUDA 12.
    SymbolMissing {
        /// The function.
        function: &'static str,
    },
    /// The driver works but reports no CUDA device.
    NoDevice,
    /// A device ordinal this process does not have.
    NoSuchDevice {
        /// The ordinal asked for.
        ordinal: i32,
        /// Devices this process sees (`CUDA_VISIBLE_DEVICES` applies).
        count: i32,
    },
    /// A driver call failed.
    Call {
        /// The driver function, e.g. `cuMemAlloc_v2`.
        function: &'static str,
        /// The `CUresult` code.
        code: u32,
        /// Its name, e.g. `CUDA_ERROR_OUT_OF_MEMORY` (from `cuGetErrorName`).
        name: String,
        /// Its description (from `cuGetErrorString`).
        description: String,
    },
    /// Host memory of this many bytes could not be allocated.
    HostAllocation {
        /// The bytes asked for.
        len: usize,
    },
    /// The driver's JIT refused a kernel program (`cuModuleLoadDataEx`).
    Jit {
        /// The `CUresult`'s name, e.g. `CUDA_ERROR_INVALID_PTX`.
        name: String,
        /// Its description.
        description: String,
        /// What the JIT wrote into its error log.
        log: String,
    },
}

impl CudaError {
    /// Whether this is a failed call that returned `CUDA_ERROR_<suffix>`.
    pub(crate) fn is(&self, suffix: &str) -> bool {
        matches!(self, CudaError::Call { name, .. } if name.strip_prefix("CUDA_ERROR_") == Some(suffix))
    }
}

impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CudaError::DriverMissing => f.write_str(
                "the CUDA driver library (libcuda.so.1) could not be loaded: no NVIDIA driver is installed \
                 (or it is not on the library path)",
            ),
            CudaError::SymbolMissing { function } => {
                write!(f, "the CUDA driver has no {function}: it is too old (CUDA 12 drivers or later are needed)")
            }
            CudaError::NoDevice => f.write_str("the CUDA driver reports no device (check CUDA_VISIBLE_DEVICES)"),
            CudaError::NoSuchDevice { ordinal, count } => {
                write!(f, "no CUDA device {ordinal}: this process sees {count} (check CUDA_VISIBLE_DEVICES)")
            }
            CudaError::Call { function, code, name, description } => {
                write!(f, "{function} failed: {name} ({code}): {description}")
            }
            CudaError::HostAllocation { len } => write!(f, "{len} bytes of host memory could not be allocated"),
            CudaError::Jit { name, description, log } => {
                write!(f, "the CUDA driver did not load a kernel program: {name}: {description}")?;
                if !log.is_empty() {
                    write!(f, "; its JIT log: {log}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for CudaError {}
