//! DLPack export of freight's buffers (`__dlpack__`), so `numpy.from_dlpack`,
//! `torch.from_dlpack`, `cupy.from_dlpack` and `jax.dlpack.from_dlpack` view
//! them without a copy.
//!
//! The structures are those of `dlpack.h` 1.x. A consumer that announces
//! `max_version >= (1, 0)` gets a `dltensor_versioned` capsule, which can say
//! "read-only"; an older consumer gets a plain `dltensor` capsule, which
//! cannot, so read-only memory (a received sample) is refused to it, as numpy
//! refuses its own read-only arrays: a consumer that writes to a subscriber's
//! shared memory would corrupt what every other subscriber reads.
//!
//! Host memory is exported as `kDLCPU`; CUDA device memory (and host memory
//! mapped for a device, when asked for as such) as `kDLCUDA` with the device's
//! ordinal in this process. [`negotiate`] decides, from the consumer's
//! `dl_device` and `copy`, whether a buffer is exported in place or as a host copy.

use std::ffi::{c_void, CStr};
use std::ptr;

use freight_msg::ElementInfo;
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;

/// `kDLCPU`: host memory.
pub(crate) const KDL_CPU: i32 = 1;
/// `kDLCUDA`: CUDA device memory (or host memory mapped for a device).
pub(crate) const KDL_CUDA: i32 = 2;
/// `kDLExtDev`: DLPack's device type "for testing extension devices", which
/// the simulated `fake-device` reports; no consumer can address it.
pub(crate) const KDL_EXT_DEV: i32 = 12;
/// `(kDLCPU, 0)`: host memory.
pub(crate) const CPU_DEVICE: (i32, i32) = (KDL_CPU, 0);

const READ_ONLY: u64 = 1 << 0;
const IS_COPIED: u64 = 1 << 1;
const LEGACY_NAME: &CStr = c"dltensor";
const VERSIONED_NAME: &CStr = c"dltensor_versioned";

#[repr(C)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

/// A DLPack element type: `code` (0 int, 1 uint, 2 float, 4 bfloat, 5
/// complex, 6 bool), `bits`, `lanes`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DLDataType {
    pub(crate) code: u8,
    pub(crate) bits: u8,
    pub(crate) lanes: u16,
}

impl DLDataType {
    /// The DLPack type of a buffer field's element.
    pub(crate) fn of(element: ElementInfo) -> Self {
        let code = match element.ros_name.as_bytes()[0] {
            b'i' => 0, // kDLInt
            b'u' => 1, // kDLUInt
            _ => 2,    // kDLFloat: float32, float64
        };
        DLDataType { code, bits: (element.size * 8) as u8, lanes: 1 }
    }

    /// Bytes per element.
    pub(crate) fn itemsize(self) -> usize {
        (self.bits as usize).div_ceil(8) * self.lanes as usize
    }

    /// Parses a dtype as torch, numpy or a string names it (`torch.float16`,
    /// `numpy.uint8`, `"float32"`, `torch.bfloat16`, `torch.bool`).
    pub(crate) fn parse(dtype: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = dtype.py();
        let text = dtype.str()?.to_string();
        let name = match text.strip_prefix("torch.") {
            Some(torch_name) => torch_name.to_string(),
            None => {
                let numpy = py.import("numpy")?;
                match numpy.getattr("dtype")?.call1((dtype,)) {
                    Ok(d) => d.getattr("name")?.extract::<String>()?,
                    Err(_) => text.clone(),
                }
            }
        };
        let unsupported = || {
            PyTypeError::new_err(format!(
                "dtype {text} has no DLPack type freight knows; use an int, uint, float, bfloat16, complex or bool dtype"
            ))
        };
        if name == "bool" {
            return Ok(DLDataType { code: 6, bits: 8, lanes: 1 });
        }
        let split = name.find(|c: char| c.is_ascii_digit()).ok_or_else(unsupported)?;
        let (kind, bits) = name.split_at(split);
        let bits: u8 = bits.parse().map_err(|_| unsupported())?;
        let code = match kind {
            "int" => 0,
            "uint" => 1,
            "float" => 2,
            "bfloat" => 4,
            "complex" => 5,
            _ => return Err(unsupported()),
        };
        if bits == 0 || !bits.is_multiple_of(8) {
            return Err(unsupported());
        }
        Ok(DLDataType { code, bits, lanes: 1 })
    }
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

/// What a capsule points at: the DLPack struct first, then what it borrows.
#[repr(C)]
struct Exported<T> {
    managed: T,
    /// The extents; `dl_tensor.shape` points into this vector's heap buffer,
    /// which does not move with the box.
    shape: Vec<i64>,
    /// Keeps the memory alive; released by [`free_export`].
    owner: Py<PyAny>,
    /// The bytes, when the consumer asked for a copy.
    _copy: Option<Vec<u8>>,
}

/// Frees an export and releases its owner under the GIL, taken here.
///
/// A consumer may call the deleter without the GIL even while this thread
/// is inside a call into freight: torch releases it while it destroys a
/// tensor's storage, and a message freed by freight frees its tensor. PyO3
/// counts that thread as holding the GIL still and would drop the owner
/// without it (a crash in `PyObject_GC_Del`, seen with torch on a GPU).
/// `PyGILState_Ensure` asks CPython itself, and takes the GIL only when this
/// thread does not hold it.
///
/// # Safety
/// `exported` is a leaked `Box<Exported<T>>`, freed once.
unsafe fn free_export<T>(exported: *mut Exported<T>) {
    // SAFETY: as the caller guarantees.
    let Exported { owner, .. } = *unsafe { Box::from_raw(exported) };
    // SAFETY: a DLPack deleter runs before the interpreter is finalized, or
    // (checked) the reference is left to the process's end.
    unsafe {
        if ffi::Py_IsInitialized() == 0 {
            std::mem::forget(owner);
            return;
        }
        let gil = ffi::PyGILState_Ensure();
        ffi::Py_DECREF(owner.into_ptr());
        ffi::PyGILState_Release(gil);
    }
}

unsafe extern "C" fn delete_legacy(t: *mut DLManagedTensor) {
    // SAFETY: `t` is the first field of a leaked `Box<Exported<_>>` (repr(C)),
    // and DLPack calls the deleter once.
    unsafe { free_export(t.cast::<Exported<DLManagedTensor>>()) }
}

unsafe extern "C" fn delete_versioned(t: *mut DLManagedTensorVersioned) {
    // SAFETY: as in `delete_legacy`.
    unsafe { free_export(t.cast::<Exported<DLManagedTensorVersioned>>()) }
}

/// Frees a capsule that no consumer took (a consumer renames it `used_…`).
unsafe extern "C" fn drop_unused_legacy(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with a live capsule and the GIL held.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, LEGACY_NAME.as_ptr()) == 1 {
            let t = ffi::PyCapsule_GetPointer(capsule, LEGACY_NAME.as_ptr()).cast::<DLManagedTensor>();
            delete_legacy(t);
        }
    }
}

unsafe extern "C" fn drop_unused_versioned(capsule: *mut ffi::PyObject) {
    // SAFETY: as in `drop_unused_legacy`.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, VERSIONED_NAME.as_ptr()) == 1 {
            let t = ffi::PyCapsule_GetPointer(capsule, VERSIONED_NAME.as_ptr()).cast::<DLManagedTensorVersioned>();
            delete_versioned(t);
        }
    }
}

/// How a buffer answers one `__dlpack__` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Export {
    /// A view of the memory where it is.
    InPlace,
    /// A private host copy (the consumer asked for `copy=True`, or for the CPU
    /// while the memory is on a device).
    HostCopy,
}

/// Decides how memory on `native` (a DLPack device) is exported to a consumer
/// that asked for `dl_device` and `copy`, as the array API's `__dlpack__`
/// defines them; refuses what cannot be done with `BufferError`.
pub(crate) fn negotiate(native: (i32, i32), dl_device: Option<(i32, i32)>, copy: Option<bool>) -> PyResult<Export> {
    let target = dl_device.unwrap_or(native);
    if target == native {
        return match copy {
            Some(true) if native != CPU_DEVICE => Err(PyBufferError::new_err(format!(
                "copy=True on device {native:?}: freight copies device memory only to the host; ask for \
                 dl_device=(1, 0) (numpy.from_dlpack(x, device='cpu', copy=True)), or copy on the device \
                 after importing (tensor.clone())"
            ))),
            Some(true) => Ok(Export::HostCopy),
            _ => Ok(Export::InPlace),
        };
    }
    if target == CPU_DEVICE && native.0 != KDL_CPU {
        if copy == Some(false) {
            return Err(PyBufferError::new_err(format!(
                "this buffer is on device {native:?}; the CPU can have it only as a copy (copy=False was given)"
            )));
        }
        return Ok(Export::HostCopy);
    }
    let what = if native.0 == KDL_CPU { "host memory" } else { "device memory" };
    Err(PyBufferError::new_err(format!(
        "this buffer is {what} (device {native:?}); it cannot be exported to device {target:?}"
    )))
}

/// The DLPack stream a consumer named (`__dlpack__(stream=...)`): `None` when
/// it asked for no ordering (`-1`), else the `CUstream` handle, `None` from
/// Python meaning the legacy default stream (`1`), as the array API says.
pub(crate) fn consumer_stream(stream: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    let Some(stream) = stream.filter(|s| !s.is_none()) else { return Ok(Some(1)) };
    let handle: i64 = stream.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "stream must be an int (a CUstream handle; 1: legacy default stream, 2: per-thread default, \
             -1: no ordering), not {}",
            crate::errors::type_name(stream)
        ))
    })?;
    match handle {
        -1 => Ok(None),
        h if h < 0 => Err(PyValueError::new_err(format!("stream {h} is not a CUstream handle"))),
        h => Ok(Some(h as u64)),
    }
}

/// What a capsule describes: a C-contiguous tensor at `data` on `device`.
pub(crate) struct Described {
    /// Address of the first element (a host pointer, or a `CUdeviceptr`).
    pub(crate) data: u64,
    /// `(device type, ordinal)`.
    pub(crate) device: (i32, i32),
    pub(crate) shape: Vec<i64>,
    pub(crate) dtype: DLDataType,
    pub(crate) writable: bool,
}

impl Described {
    /// A 1-D tensor of `element` over `len` bytes of host memory.
    pub(crate) fn host(ptr: *const u8, len: usize, element: ElementInfo, writable: bool) -> Self {
        Described {
            data: ptr as u64,
            device: CPU_DEVICE,
            shape: vec![(len / element.size.max(1)) as i64],
            dtype: DLDataType::of(element),
            writable,
        }
    }
}

/// A DLPack capsule of `tensor`, owned by `owner`. With `copy` the capsule
/// holds those bytes (host memory, `IS_COPIED`) instead of viewing `tensor`.
pub(crate) fn export<'py>(
    owner: &Bound<'py, PyAny>,
    tensor: Described,
    max_version: Option<(u32, u32)>,
    copy: Option<Vec<u8>>,
) -> PyResult<Bound<'py, PyAny>> {
    let versioned = max_version.is_some_and(|(major, _)| major >= 1);
    let writable = tensor.writable || copy.is_some();
    if !versioned && !writable {
        return Err(PyBufferError::new_err(
            "this buffer is read-only (a received message), which DLPack before 1.0 cannot signal; \
             use a consumer that supports DLPack 1.0 (numpy >= 2.1, torch >= 2.9) or copy it first",
        ));
    }
    let (mut data, device) = match &copy {
        Some(v) => (v.as_ptr().cast_mut().cast::<c_void>(), CPU_DEVICE),
        None => (tensor.data as usize as *mut c_void, tensor.device),
    };
    if data.is_null() {
        data = ptr::NonNull::<u64>::dangling().as_ptr().cast();
    }
    let ndim = tensor.shape.len() as i32;
    let dl_tensor = || DLTensor {
        data,
        device: DLDevice { device_type: device.0, device_id: device.1 },
        ndim,
        dtype: tensor.dtype,
        shape: ptr::null_mut(),
        strides: ptr::null_mut(),
        byte_offset: 0,
    };
    let py = owner.py();
    let owner = owner.clone().unbind();
    let shape = tensor.shape;
    // SAFETY (both arms): the boxes are leaked into the capsule and freed
    // exactly once, by the consumer's call of the deleter or by the capsule's
    // destructor when no consumer took it; the extents live in the same box.
    let capsule = unsafe {
        if versioned {
            let flags = match (&copy, tensor.writable) {
                (Some(_), _) => IS_COPIED,
                (None, true) => 0,
                (None, false) => READ_ONLY,
            };
            let b = Box::into_raw(Box::new(Exported {
                managed: DLManagedTensorVersioned {
                    version: DLPackVersion { major: 1, minor: 0 },
                    manager_ctx: ptr::null_mut(),
                    deleter: Some(delete_versioned),
                    flags,
                    dl_tensor: dl_tensor(),
                },
                shape,
                owner,
                _copy: copy,
            }));
            (*b).managed.dl_tensor.shape = (*b).shape.as_mut_ptr();
            (*b).managed.manager_ctx = b.cast();
            let capsule = ffi::PyCapsule_New(b.cast(), VERSIONED_NAME.as_ptr(), Some(drop_unused_versioned));
            if capsule.is_null() {
                delete_versioned(b.cast());
            }
            capsule
        } else {
            let b = Box::into_raw(Box::new(Exported {
                managed: DLManagedTensor {
                    dl_tensor: dl_tensor(),
                    manager_ctx: ptr::null_mut(),
                    deleter: Some(delete_legacy),
                },
                shape,
                owner,
                _copy: copy,
            }));
            (*b).managed.dl_tensor.shape = (*b).shape.as_mut_ptr();
            (*b).managed.manager_ctx = b.cast();
            let capsule = ffi::PyCapsule_New(b.cast(), LEGACY_NAME.as_ptr(), Some(drop_unused_legacy));
            if capsule.is_null() {
                delete_legacy(b.cast());
            }
            capsule
        }
    };
    // SAFETY: PyCapsule_New returned a new reference or null with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, capsule) }
}
