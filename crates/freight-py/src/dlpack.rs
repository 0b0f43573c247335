//! DLPack export of freight's buffers (`__dlpack__`), so `numpy.from_dlpack`
//! and `torch.from_dlpack` view them without a copy.
//!
//! The structures are those of `dlpack.h` 1.x. A consumer that announces
//! `max_version >= (1, 0)` gets a `dltensor_versioned` capsule, which can say
//! "read-only"; an older consumer gets a plain `dltensor` capsule, which
//! cannot, so read-only memory (a received sample) is refused to it, as numpy
//! refuses its own read-only arrays: a consumer that writes to a subscriber's
//! shared memory would corrupt what every other subscriber reads.

use std::ffi::{c_void, CStr};
use std::ptr;

use freight_msg::ElementInfo;
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;

use crate::arrays::Memory;

/// `(kDLCPU, 0)`: host memory.
pub(crate) const CPU_DEVICE: (i32, i32) = (1, 0);

const READ_ONLY: u64 = 1 << 0;
const IS_COPIED: u64 = 1 << 1;
const LEGACY_NAME: &CStr = c"dltensor";
const VERSIONED_NAME: &CStr = c"dltensor_versioned";

#[repr(C)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
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
    shape: i64,
    /// Keeps the memory alive (dropped by the deleter, with or without the GIL:
    /// PyO3 defers the decref until a thread holds it).
    _owner: Py<PyAny>,
    /// The bytes, when the consumer asked for a copy.
    _copy: Option<Vec<u8>>,
}

unsafe extern "C" fn delete_legacy(t: *mut DLManagedTensor) {
    // SAFETY: `t` is the first field of a leaked `Box<Exported<_>>` (repr(C)),
    // and DLPack calls the deleter once.
    drop(unsafe { Box::from_raw(t.cast::<Exported<DLManagedTensor>>()) });
}

unsafe extern "C" fn delete_versioned(t: *mut DLManagedTensorVersioned) {
    // SAFETY: as in `delete_legacy`.
    drop(unsafe { Box::from_raw(t.cast::<Exported<DLManagedTensorVersioned>>()) });
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

fn dtype_of(element: ElementInfo) -> DLDataType {
    let code = match element.ros_name.as_bytes()[0] {
        b'i' => 0, // kDLInt
        b'u' => 1, // kDLUInt
        _ => 2,    // kDLFloat: float32, float64
    };
    DLDataType { code, bits: (element.size * 8) as u8, lanes: 1 }
}

/// A DLPack capsule viewing `memory` (a 1-D array of `element`), owned by `owner`.
pub(crate) fn export<'py>(
    owner: &Bound<'py, PyAny>,
    memory: Memory,
    element: ElementInfo,
    max_version: Option<(u32, u32)>,
    dl_device: Option<(i32, i32)>,
    copy: Option<bool>,
) -> PyResult<Bound<'py, PyAny>> {
    if let Some(device) = dl_device.filter(|d| *d != CPU_DEVICE) {
        return Err(PyBufferError::new_err(format!(
            "this buffer is host memory (device {CPU_DEVICE:?}); it cannot be exported to device {device:?}"
        )));
    }
    let versioned = max_version.is_some_and(|(major, _)| major >= 1);
    if !versioned && !memory.writable {
        return Err(PyBufferError::new_err(
            "this buffer is read-only (a received message), which DLPack before 1.0 cannot signal; \
             use a consumer that supports DLPack 1.0 (numpy >= 2.1) or copy it first",
        ));
    }
    let copy_bytes = (copy == Some(true)).then(|| {
        // SAFETY: `memory` is valid for reads while `owner` lives (held here).
        unsafe { std::slice::from_raw_parts(memory.ptr, memory.len) }.to_vec()
    });
    let mut data = copy_bytes.as_ref().map_or(memory.ptr, |v| v.as_ptr().cast_mut()).cast::<c_void>();
    if data.is_null() {
        data = ptr::NonNull::<u64>::dangling().as_ptr().cast();
    }
    let itemsize = element.size.max(1);
    let tensor = |shape: *mut i64| DLTensor {
        data,
        device: DLDevice { device_type: CPU_DEVICE.0, device_id: CPU_DEVICE.1 },
        ndim: 1,
        dtype: dtype_of(element),
        shape,
        strides: ptr::null_mut(),
        byte_offset: 0,
    };
    let py = owner.py();
    let owner = owner.clone().unbind();
    let shape = (memory.len / itemsize) as i64;
    // SAFETY (both arms): the boxes are leaked into the capsule and freed
    // exactly once, by the consumer's call of the deleter or by the capsule's
    // destructor when no consumer took it; `shape` lives in the same box.
    let capsule = unsafe {
        if versioned {
            let mut flags = if memory.writable { 0 } else { READ_ONLY };
            if copy_bytes.is_some() {
                flags = IS_COPIED;
            }
            let b = Box::into_raw(Box::new(Exported {
                managed: DLManagedTensorVersioned {
                    version: DLPackVersion { major: 1, minor: 0 },
                    manager_ctx: ptr::null_mut(),
                    deleter: Some(delete_versioned),
                    flags,
                    dl_tensor: tensor(ptr::null_mut()),
                },
                shape,
                _owner: owner,
                _copy: copy_bytes,
            }));
            (*b).managed.dl_tensor.shape = ptr::addr_of_mut!((*b).shape);
            (*b).managed.manager_ctx = b.cast();
            let capsule = ffi::PyCapsule_New(b.cast(), VERSIONED_NAME.as_ptr(), Some(drop_unused_versioned));
            if capsule.is_null() {
                delete_versioned(b.cast());
            }
            capsule
        } else {
            let b = Box::into_raw(Box::new(Exported {
                managed: DLManagedTensor {
                    dl_tensor: tensor(ptr::null_mut()),
                    manager_ctx: ptr::null_mut(),
                    deleter: Some(delete_legacy),
                },
                shape,
                _owner: owner,
                _copy: copy_bytes,
            }));
            (*b).managed.dl_tensor.shape = ptr::addr_of_mut!((*b).shape);
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
