//! numpy arrays over freight's memory, and the objects that keep it alive.
//!
//! A received buffer becomes a read-only array whose base object is a
//! [`ReceivedBuffer`]: it owns the Rust buffer (and through it the shared-memory
//! sample), so the sample lives exactly as long as some array views it. A loan
//! becomes a writable array whose base is a [`LoanedBuffer`]. Both export
//! DLPack (see [`crate::dlpack`]).

use std::any::Any;
use std::os::raw::c_int;
use std::ptr;
use std::sync::Mutex;

use freight_msg::{ElementInfo, RawBuffer};
use numpy::npyffi::{self, npy_intp, PY_ARRAY_API};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyBufferError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::dlpack;

/// Memory a numpy array views, as DLPack describes it.
#[derive(Clone, Copy)]
pub(crate) struct Memory {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
    pub(crate) writable: bool,
}

/// A buffer of a received message. Arrays over it keep it, and the sample it
/// arrived in, alive.
#[pyclass(frozen, module = "freight", name = "ReceivedBuffer")]
pub(crate) struct ReceivedBuffer {
    raw: RawBuffer,
    /// The host copy of a buffer that arrived in device memory.
    host_copy: Option<Vec<u8>>,
    element: ElementInfo,
}

impl ReceivedBuffer {
    fn bytes(&self) -> &[u8] {
        match &self.host_copy {
            Some(v) => v,
            None => self.raw.host_bytes().unwrap_or_default(),
        }
    }

    fn memory(&self) -> Memory {
        let b = self.bytes();
        Memory { ptr: b.as_ptr().cast_mut(), len: b.len(), writable: false }
    }
}

#[pymethods]
impl ReceivedBuffer {
    /// The memory the buffer is in: `"shm"` (a publisher's shared memory in
    /// another process), `"cpu"` (process memory: the buffer of a publisher in
    /// this process, or a private copy), or a device backend.
    #[getter]
    fn backend(&self) -> &'static str {
        self.raw.backend().name()
    }

    /// Length in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.bytes().len()
    }

    /// Address of the first byte in this process.
    #[getter]
    fn address(&self) -> usize {
        self.bytes().as_ptr() as usize
    }

    fn __len__(&self) -> usize {
        self.bytes().len()
    }

    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = stream; // host memory: there is no stream to order against
        let me = slf.get();
        dlpack::export(slf.as_any(), me.memory(), me.element, max_version, dl_device, copy)
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        dlpack::CPU_DEVICE
    }
}

/// Writable memory lent by a publisher, not yet published.
#[pyclass(frozen, module = "freight", name = "LoanedBuffer")]
pub(crate) struct LoanedBuffer {
    /// The publisher that lent it (kept alive: its shared memory backs the loan).
    pub(crate) publisher: Py<PyAny>,
    /// The Rust loan (`LoanUninit<M>`), taken out when it is published.
    pub(crate) loan: Mutex<Option<Box<dyn Any + Send>>>,
    pub(crate) ptr: usize,
    pub(crate) len: usize,
    pub(crate) element: ElementInfo,
}

#[pymethods]
impl LoanedBuffer {
    /// Length in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.len
    }

    /// Address of the first byte in this process.
    #[getter]
    fn address(&self) -> usize {
        self.ptr
    }

    /// Whether it was published (or dropped) and may no longer be touched.
    #[getter]
    fn published(&self) -> bool {
        self.loan.lock().map_or(true, |l| l.is_none())
    }

    fn __len__(&self) -> usize {
        self.len
    }

    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = stream;
        let me = slf.get();
        if me.published() {
            return Err(PyBufferError::new_err("this loan was published; its memory belongs to the subscribers"));
        }
        let memory = Memory { ptr: me.ptr as *mut u8, len: me.len, writable: true };
        dlpack::export(slf.as_any(), memory, me.element, max_version, dl_device, copy)
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        dlpack::CPU_DEVICE
    }
}

/// A read-only 1-D array of `dtype` over a received buffer.
pub(crate) fn received_array<'py>(
    py: Python<'py>,
    raw: RawBuffer,
    element: ElementInfo,
    dtype: Bound<'py, PyArrayDescr>,
) -> PyResult<Bound<'py, PyAny>> {
    // Buffers in device memory (a subscription that accepted such a backend)
    // are copied to the host once; every host backend is viewed in place.
    let host_copy = match raw.host_bytes() {
        Some(_) => None,
        None => Some(raw.to_host_vec().map_err(|e| crate::errors::error(crate::errors::Kind::Backend, e.to_string()))?),
    };
    let holder = Bound::new(py, ReceivedBuffer { raw, host_copy, element })?;
    let memory = holder.get().memory();
    let itemsize = element.size.max(1);
    view(py, holder.into_any(), memory, &[(memory.len / itemsize) as npy_intp], dtype)
}

/// An array of `dtype` and `shape` over `memory`, owned by `base`.
pub(crate) fn view<'py>(
    py: Python<'py>,
    base: Bound<'py, PyAny>,
    memory: Memory,
    shape: &[npy_intp],
    dtype: Bound<'py, PyArrayDescr>,
) -> PyResult<Bound<'py, PyAny>> {
    let flags: c_int = if memory.writable { npyffi::NPY_ARRAY_WRITEABLE } else { 0 };
    // numpy wants a non-null pointer even for an empty array.
    let data = if memory.len == 0 { ptr::NonNull::<u64>::dangling().as_ptr().cast() } else { memory.ptr };
    // SAFETY: `data` points at `memory.len` bytes that stay valid while `base`
    // lives (the callers' invariant); the shape's product times the itemsize is
    // at most `memory.len` (the callers compute it from that length);
    // NewFromDescr steals the dtype reference and SetBaseObject the base's.
    unsafe {
        let array = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            npyffi::get_type_object(py, npyffi::NpyTypes::PyArray_Type),
            dtype.into_dtype_ptr(),
            shape.len() as c_int,
            shape.as_ptr() as *mut npy_intp,
            ptr::null_mut(),
            data.cast(),
            flags,
            ptr::null_mut(),
        );
        if array.is_null() {
            return Err(PyErr::fetch(py));
        }
        let array = Bound::from_owned_ptr(py, array);
        if PY_ARRAY_API.PyArray_SetBaseObject(py, array.as_ptr().cast(), base.into_ptr()) != 0 {
            return Err(PyErr::fetch(py));
        }
        Ok(array)
    }
}

/// Parses `loan(shape, dtype)`: the shape as a list of extents, the dtype, and
/// the byte length, checked against overflow.
pub(crate) fn parse_shape_dtype<'py>(
    py: Python<'py>,
    shape: &Bound<'py, PyAny>,
    dtype: &Bound<'py, PyAny>,
) -> PyResult<(Vec<npy_intp>, Bound<'py, PyArrayDescr>, usize)> {
    let too_large = |e: PyErr| {
        if e.is_instance_of::<PyOverflowError>(py) {
            PyValueError::new_err(format!("shape {shape} is too large"))
        } else {
            PyTypeError::new_err(format!(
                "shape must be an int or a tuple of ints, not {}",
                crate::errors::type_name(shape)
            ))
        }
    };
    let dims: Vec<i64> = match shape.extract::<i64>() {
        Ok(n) => vec![n],
        Err(e) if e.is_instance_of::<PyOverflowError>(py) => return Err(too_large(e)),
        Err(_) => shape.extract().map_err(too_large)?,
    };
    let descr = PyArrayDescr::new(py, dtype)?;
    if descr.has_object() {
        return Err(PyTypeError::new_err(format!(
            "dtype {} holds Python objects, which cannot live in shared memory; use a numeric or structured dtype",
            descr.repr()?
        )));
    }
    if descr.itemsize() == 0 {
        return Err(PyTypeError::new_err(format!("dtype {} has no size; give a sized dtype", descr.repr()?)));
    }
    let mut len = descr.itemsize();
    for &d in &dims {
        let d =
            usize::try_from(d).map_err(|_| PyValueError::new_err(format!("shape {dims:?} has a negative extent")))?;
        len = len.checked_mul(d).ok_or_else(|| PyValueError::new_err(format!("shape {dims:?} is too large")))?;
    }
    Ok((dims.into_iter().map(|d| d as npy_intp).collect(), descr, len))
}

/// The memory of a C-contiguous array: `(address, bytes)`.
pub(crate) fn contiguous_memory(array: &Bound<'_, PyUntypedArray>) -> (usize, usize) {
    let nbytes = array.len() * array.dtype().itemsize();
    // SAFETY: a live array object; only its data pointer is read.
    let data = unsafe { (*array.as_array_ptr()).fields.data };
    (data as usize, nbytes)
}

/// `array` as a C-contiguous array (itself when it is one: no copy).
pub(crate) fn ascontiguous<'py>(array: &Bound<'py, PyUntypedArray>) -> PyResult<Bound<'py, PyUntypedArray>> {
    if array.is_c_contiguous() {
        return Ok(array.clone());
    }
    let numpy = array.py().import("numpy")?;
    Ok(numpy.call_method1("ascontiguousarray", PyTuple::new(array.py(), [array])?)?.cast_into()?)
}
