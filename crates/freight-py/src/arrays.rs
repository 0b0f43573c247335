//! numpy arrays over freight's memory, device arrays, and the objects that
//! keep the memory alive.
//!
//! A received buffer in host memory becomes a read-only numpy array whose base
//! object is a [`ReceivedBuffer`]: it owns the Rust buffer (and through it the
//! shared-memory sample), so the sample lives exactly as long as some array
//! views it. A received buffer in device memory (`cuda`, `fake-device`) becomes
//! a [`DeviceArray`], which numpy cannot view: it exports DLPack for the
//! device and copies to the host on request. A loan becomes a writable numpy
//! array, or a tensor of any DLPack consumer, whose owner is a
//! [`LoanedBuffer`]. All of them export DLPack (see [`crate::dlpack`]).

use std::any::Any;
use std::os::raw::c_int;
use std::ptr;
use std::sync::{Arc, Mutex};

use freight_msg::{DeviceView, ElementInfo, RawBuffer};
use numpy::npyffi::{self, npy_intp, PY_ARRAY_API};
use numpy::{PyArray1, PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyBufferError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::dlpack::{self, negotiate, Described, Export, CPU_DEVICE, KDL_CUDA, KDL_EXT_DEV};
use crate::errors::{error, type_name, Kind};

/// Memory a numpy array views, as DLPack describes it.
#[derive(Clone, Copy)]
pub(crate) struct Memory {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
    pub(crate) writable: bool,
}

/// A buffer of a received message in host memory. Arrays over it keep it,
/// and the sample it arrived in, alive.
#[pyclass(frozen, module = "freight", name = "ReceivedBuffer")]
pub(crate) struct ReceivedBuffer {
    raw: RawBuffer,
    element: ElementInfo,
}

impl ReceivedBuffer {
    fn bytes(&self) -> &[u8] {
        self.raw.host_bytes().unwrap_or_default()
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
    /// this process, or a private copy), or `"cuda-host"` (page-locked host
    /// memory that a CUDA device maps too).
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

    /// The same memory as a CUDA device addresses it, for a buffer in
    /// `cuda-host` memory: a [`DeviceArray`] whose `__dlpack__` is `kDLCUDA`
    /// over the mapped device pointer (`torch.from_dlpack(buf.as_cuda())`).
    /// Raises `freight.BackendError` for memory no device maps.
    fn as_cuda(&self) -> PyResult<DeviceArray> {
        match self.raw.storage().and_then(|s| s.device_view()) {
            Some(view) => Ok(DeviceArray { raw: self.raw.clone(), element: self.element, view: Some(view) }),
            None => Err(error(
                Kind::Backend,
                format!(
                    "this buffer is in {} memory, which no CUDA device maps; publish with backend=\"cuda-host\" \
                     (and subscribe with accepted_backends including \"cuda-host\") for host memory a GPU reads \
                     in place, or copy it (torch.from_numpy(arr).cuda())",
                    self.raw.backend()
                ),
            )),
        }
    }

    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = stream; // host memory the CPU reads in full: no stream to order against
        let me = slf.get();
        let m = me.memory();
        let copied = match negotiate(CPU_DEVICE, dl_device, copy)? {
            Export::InPlace => None,
            Export::HostCopy => Some(me.bytes().to_vec()),
        };
        dlpack::export(slf.as_any(), Described::host(m.ptr, m.len, me.element, false), max_version, copied)
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        CPU_DEVICE
    }
}

/// A buffer of a received message in device memory: CUDA memory (`cuda`,
/// or `cuda-host` memory as its device maps it, from
/// [`ReceivedBuffer::as_cuda`]) or the simulated `fake-device`.
///
/// numpy cannot view it: `numpy.asarray` raises `TypeError`, `to_numpy()`
/// copies it to the host. GPU libraries import it in place through DLPack
/// (`torch.from_dlpack`, `cupy.from_dlpack`, `jax.dlpack.from_dlpack`); the
/// stream they pass is ordered after the publisher's writes first, without
/// blocking the host.
#[pyclass(frozen, module = "freight", name = "DeviceArray")]
pub(crate) struct DeviceArray {
    raw: RawBuffer,
    element: ElementInfo,
    /// Where a CUDA device addresses the memory; `None` for `fake-device`.
    view: Option<DeviceView>,
}

impl DeviceArray {
    /// The DLPack device of the memory.
    fn dl_device(&self) -> (i32, i32) {
        self.view.map_or((KDL_EXT_DEV, 0), |v| (KDL_CUDA, v.ordinal))
    }

    /// The bytes, copied to a new host vector (a device-to-host copy), with
    /// the GIL released.
    pub(crate) fn host_copy(&self, py: Python<'_>) -> PyResult<Vec<u8>> {
        let raw = &self.raw;
        py.detach(|| raw.to_host_vec()).map_err(|e| error(Kind::Backend, e.to_string()))
    }

    fn items(&self) -> usize {
        self.raw.len_bytes() / self.element.size.max(1)
    }
}

#[pymethods]
impl DeviceArray {
    /// The backend whose memory this is: `"cuda"`, `"cuda-host"` or `"fake-device"`.
    #[getter]
    fn backend(&self) -> &'static str {
        self.raw.backend().name()
    }

    /// Where the memory is, as torch names devices: `"cuda:0"`, or
    /// `"fake-device"` for the simulated device (which nothing can address).
    #[getter]
    fn device(&self) -> String {
        match self.view {
            Some(v) => format!("cuda:{}", v.ordinal),
            None => self.raw.backend().name().into(),
        }
    }

    /// The device address of the first byte (a `CUdeviceptr`); `None` for `fake-device`.
    #[getter]
    fn device_ptr(&self) -> Option<u64> {
        self.view.map(|v| v.ptr)
    }

    /// Whether the memory is host memory mapped for the device (`cuda-host`).
    #[getter]
    fn host_mapped(&self) -> bool {
        self.view.is_some_and(|v| v.host_mapped)
    }

    /// Length in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.raw.len_bytes()
    }

    /// `(n,)`: a buffer field is one-dimensional; reshape it after importing
    /// (`torch.from_dlpack(data).view(h, w, 4)`).
    #[getter]
    fn shape(&self) -> (usize,) {
        (self.items(),)
    }

    #[getter]
    fn ndim(&self) -> usize {
        1
    }

    #[getter]
    fn size(&self) -> usize {
        self.items()
    }

    /// The numpy dtype of the elements (`uint8` for images and tensors' data).
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDescr>> {
        PyArrayDescr::new(py, self.element.ros_name)
    }

    fn __len__(&self) -> usize {
        self.items()
    }

    /// A new, writable numpy array holding a copy of the bytes (a
    /// device-to-host copy, with the GIL released).
    fn to_numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let bytes = self.host_copy(py)?;
        PyArray1::from_vec(py, bytes).into_any().call_method1("view", (self.dtype(py)?,))
    }

    /// numpy cannot view device memory: raises `TypeError` saying what to do.
    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__(&self, dtype: Option<&Bound<'_, PyAny>>, copy: Option<bool>) -> PyResult<()> {
        let _ = (dtype, copy);
        Err(PyTypeError::new_err(format!(
            "this buffer is in {} device memory ({}), which numpy cannot view: copy it to the host with \
             .to_numpy(), or import it on the device with torch.from_dlpack(x) / cupy.from_dlpack(x)",
            self.raw.backend(),
            self.device()
        )))
    }

    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let me = slf.get();
        let native = me.dl_device();
        let copied = match negotiate(native, dl_device, copy)? {
            Export::HostCopy => Some(me.host_copy(py)?),
            Export::InPlace => None,
        };
        let Some(view) = me.view.filter(|_| copied.is_none()) else {
            if copied.is_none() {
                return Err(PyBufferError::new_err(
                    "fake-device memory is a simulated device that no consumer can address; copy it to the host \
                     with .to_numpy() or numpy.from_dlpack(x, device='cpu', copy=True)",
                ));
            }
            let len = me.raw.len_bytes();
            let host = Described::host(ptr::null(), len, me.element, true);
            return dlpack::export(slf.as_any(), host, max_version, copied);
        };
        // Order the consumer's stream after the publisher's writes: an event
        // wait queued on the stream, not a host wait; the GIL is released in
        // case the backend has to import or synchronise.
        if let (Some(stream), Some(storage)) = (dlpack::consumer_stream(stream)?, me.raw.storage()) {
            py.detach(|| storage.order_on_stream(stream)).map_err(|e| error(Kind::Backend, e.to_string()))?;
        }
        let tensor = Described {
            data: view.ptr,
            device: native,
            shape: vec![me.items() as i64],
            dtype: dlpack::DLDataType::of(me.element),
            writable: false,
        };
        dlpack::export(slf.as_any(), tensor, max_version, None)
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        self.dl_device()
    }

    fn __repr__(&self) -> String {
        format!(
            "<freight.DeviceArray of {} {} on {} ({} backend)>",
            self.items(),
            self.element.ros_name,
            self.device(),
            self.raw.backend()
        )
    }
}

/// The Rust loan (`LoanUninit<M>`) behind a [`LoanedBuffer`], taken out when
/// it is published. The publisher keeps a weak reference to find it again
/// from the address of a tensor over its memory.
pub(crate) type LoanCell = Arc<Mutex<Option<Box<dyn Any + Send>>>>;

/// What a [`LoanedBuffer`] exports: a C-contiguous tensor on a device.
#[derive(Clone, Debug)]
pub(crate) struct LoanLayout {
    pub(crate) shape: Vec<i64>,
    pub(crate) dtype: dlpack::DLDataType,
    pub(crate) device: (i32, i32),
}

/// Read-only pages of zeros: an anonymous private mapping, which costs no
/// memory (reads see the kernel's one zero page). A published loan's array is
/// pointed here, because the loan's memory now belongs to the subscribers and
/// returns to the publisher's pool when they release it, to be lent again, or
/// unmapped: the array must neither write it nor read it.
///
/// One mapping serves every published loan of the process that fits in it
/// ([`ZeroPages::at_least`]): a mapping per publish cost an `mmap` and a
/// `munmap` (with its TLB shootdown) on every publish from Python.
pub(crate) struct ZeroPages {
    ptr: ptr::NonNull<libc::c_void>,
    len: usize,
}

// SAFETY: a read-only mapping owned by this value alone; nothing writes it.
unsafe impl Send for ZeroPages {}
// SAFETY: as above; sharing it only shares reads of zeros.
unsafe impl Sync for ZeroPages {}

impl ZeroPages {
    /// Zero pages of at least `len` bytes, shared: the process's current
    /// mapping if it is large enough, else a new one twice as large as asked
    /// (the old one lives on while arrays point into it).
    fn at_least(len: usize) -> PyResult<Arc<ZeroPages>> {
        static CURRENT: Mutex<Option<Arc<ZeroPages>>> = Mutex::new(None);
        let mut current = CURRENT.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pages) = current.as_ref().filter(|p| p.len >= len) {
            return Ok(pages.clone());
        }
        // Growing by doubling maps O(log n) times for any sequence of sizes.
        let pages = Arc::new(ZeroPages::new(len.checked_next_power_of_two().unwrap_or(len))?);
        *current = Some(pages.clone());
        Ok(pages)
    }

    fn new(len: usize) -> PyResult<ZeroPages> {
        // SAFETY: a new anonymous mapping; no existing memory is touched.
        let ptr = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            return Err(error(Kind::Loan, format!("cannot map {len} bytes for a published loan's array: {e}")));
        }
        let ptr = ptr::NonNull::new(ptr).ok_or_else(|| error(Kind::Loan, "mmap returned a null mapping"))?;
        Ok(ZeroPages { ptr, len })
    }
}

impl Drop for ZeroPages {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once. Arrays over it are
        // gone: each loan object they reference (their base) holds it.
        unsafe { libc::munmap(self.ptr.as_ptr(), self.len) };
    }
}

/// Writable memory lent by a publisher, not yet published.
#[pyclass(frozen, module = "freight", name = "LoanedBuffer")]
pub(crate) struct LoanedBuffer {
    /// The publisher that lent it (kept alive: its memory backs the loan).
    pub(crate) publisher: Py<PyAny>,
    pub(crate) loan: LoanCell,
    /// Address of the first byte, where the exported tensor lives (a host
    /// pointer, or a device pointer for a loan on a device).
    pub(crate) ptr: usize,
    pub(crate) len: usize,
    pub(crate) layout: LoanLayout,
    /// What the published array reads instead of the loan's memory.
    pub(crate) retired: Mutex<Option<Arc<ZeroPages>>>,
}

impl LoanedBuffer {
    /// Once the loan is published: points `array` (the array `loan()` returned,
    /// or a reshape of it, over all of this loan's memory) at read-only zeros
    /// and clears its WRITEABLE flag, which numpy will not set again (its base,
    /// this object, exports no writable buffer).
    pub(crate) fn retire(&self, array: &Bound<'_, PyUntypedArray>) -> PyResult<()> {
        let pages = if self.len > 0 { Some(ZeroPages::at_least(self.len)?) } else { None };
        let raw = array.as_array_ptr();
        // SAFETY: a live array whose memory is this loan's `len` bytes
        // (checked by the caller); the new data pointer has as many readable
        // bytes, which live as long as this object, the array's base. numpy
        // reads `data` afresh on each access. An empty array keeps numpy's
        // placeholder address.
        unsafe {
            if let Some(p) = &pages {
                (*raw).fields.data = p.ptr.as_ptr().cast();
            }
            (*raw).fields.flags &= !npyffi::NPY_ARRAY_WRITEABLE;
        }
        let mut retired = self.retired.lock().map_err(|_| error(Kind::Loan, "a loan's lock was poisoned"))?;
        *retired = pages;
        Ok(())
    }
}

#[pymethods]
impl LoanedBuffer {
    /// Length in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.len
    }

    /// Address of the first byte (in this process, or on the device for a
    /// loan on a device).
    #[getter]
    fn address(&self) -> usize {
        self.ptr
    }

    /// Whether it was published (or dropped) and may no longer be touched.
    #[getter]
    pub(crate) fn published(&self) -> bool {
        self.loan.lock().map_or(true, |l| l.is_none())
    }

    /// The shape the loan was asked for.
    #[getter]
    fn shape(&self) -> Vec<i64> {
        self.layout.shape.clone()
    }

    /// Where the memory is, as torch names devices: `"cpu"` or `"cuda:N"`.
    #[getter]
    fn device(&self) -> String {
        match self.layout.device {
            (KDL_CUDA, ordinal) => format!("cuda:{ordinal}"),
            _ => "cpu".into(),
        }
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
        // Nothing was written yet that a stream would have to wait for.
        let _ = stream;
        let me = slf.get();
        if me.published() {
            return Err(PyBufferError::new_err("this loan was published; its memory belongs to the subscribers"));
        }
        let copied = match negotiate(me.layout.device, dl_device, copy)? {
            Export::InPlace => None,
            Export::HostCopy if me.layout.device == CPU_DEVICE => {
                // SAFETY: the loan's `len` host bytes stay valid while `me`
                // lives; their contents are as `numpy.empty`'s, never
                // uninitialised memory (see `publish`).
                Some(unsafe { std::slice::from_raw_parts(me.ptr as *const u8, me.len) }.to_vec())
            }
            Export::HostCopy => {
                return Err(PyBufferError::new_err(
                    "a loan on a device is exported only in place, for writing: it holds no message yet",
                ))
            }
        };
        let tensor = Described {
            data: me.ptr as u64,
            device: me.layout.device,
            shape: me.layout.shape.clone(),
            dtype: me.layout.dtype,
            writable: true,
        };
        dlpack::export(slf.as_any(), tensor, max_version, copied)
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        self.layout.device
    }

    fn __repr__(&self) -> String {
        let state = if self.published() { "published" } else { "not published" };
        format!("<freight.LoanedBuffer of {} bytes on {}, {state}>", self.len, self.device())
    }
}

/// The value of a received buffer field: a read-only 1-D numpy array of
/// `dtype` over host memory, or a [`DeviceArray`] for device memory.
pub(crate) fn received_value<'py>(
    py: Python<'py>,
    raw: RawBuffer,
    element: ElementInfo,
    dtype: Bound<'py, PyArrayDescr>,
) -> PyResult<Bound<'py, PyAny>> {
    if raw.host_bytes().is_none() {
        let view = raw.storage().and_then(|s| s.device_view());
        return Ok(Bound::new(py, DeviceArray { raw, element, view })?.into_any());
    }
    let holder = Bound::new(py, ReceivedBuffer { raw, element })?;
    let memory = holder.get().memory();
    let itemsize = element.size.max(1);
    view(py, holder.into_any(), memory, &[(memory.len / itemsize) as npy_intp], dtype)
}

/// Where the memory of a buffer field's value is, to recognise a loan.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ObjectMemory {
    pub(crate) addr: usize,
    pub(crate) len: usize,
    pub(crate) contiguous: bool,
}

/// The memory of a numpy array, a [`LoanedBuffer`], a torch tensor (CPU or
/// CUDA) or any object with `__cuda_array_interface__` (CuPy, Numba);
/// `None` for anything else.
pub(crate) fn object_memory(obj: &Bound<'_, PyAny>) -> PyResult<Option<ObjectMemory>> {
    if let Ok(array) = obj.cast::<PyUntypedArray>() {
        let (addr, len) = contiguous_memory(array);
        return Ok(Some(ObjectMemory { addr, len, contiguous: array.is_c_contiguous() }));
    }
    if let Ok(lent) = obj.cast::<LoanedBuffer>() {
        let lent = lent.get();
        return Ok(Some(ObjectMemory { addr: lent.ptr, len: lent.len, contiguous: true }));
    }
    // Sizes below come from the object's own metadata: checked, as input.
    let too_large = |what: &str| PyValueError::new_err(format!("the {what} of this {} is too large", type_name(obj)));
    if obj.hasattr("data_ptr")? && obj.hasattr("element_size")? && obj.hasattr("is_contiguous")? {
        // A torch tensor (any device).
        let addr: usize = obj.call_method0("data_ptr")?.extract()?;
        let numel: usize = obj.call_method0("numel")?.extract()?;
        let len = numel.checked_mul(obj.call_method0("element_size")?.extract()?).ok_or_else(|| too_large("size"))?;
        let contiguous: bool = obj.call_method0("is_contiguous")?.extract()?;
        return Ok(Some(ObjectMemory { addr, len, contiguous }));
    }
    if let Ok(cai) = obj.getattr("__cuda_array_interface__") {
        let cai = cai.cast_into::<PyDict>()?;
        let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
            cai.get_item(k)?.ok_or_else(|| PyValueError::new_err(format!("__cuda_array_interface__ lacks {k:?}")))
        };
        let (addr, _read_only): (usize, bool) = get("data")?.extract()?;
        let shape: Vec<usize> = get("shape")?.extract()?;
        let typestr: String = get("typestr")?.extract()?;
        let itemsize: usize = typestr.get(2..).and_then(|s| s.parse().ok()).unwrap_or(1);
        let len = shape
            .iter()
            .try_fold(itemsize, |n, &extent| n.checked_mul(extent))
            .ok_or_else(|| too_large("__cuda_array_interface__ shape"))?;
        let strides: Option<Vec<usize>> = match cai.get_item("strides")? {
            Some(s) if !s.is_none() => Some(s.extract()?),
            _ => None,
        };
        // Saturating: with an extent of 0 the product of the others need not fit.
        let contiguous = strides.is_none_or(|strides| {
            let mut expected = itemsize;
            strides.len() == shape.len()
                && shape.iter().zip(&strides).rev().all(|(&extent, &stride)| {
                    let ok = extent <= 1 || stride == expected;
                    expected = expected.saturating_mul(extent);
                    ok
                })
        });
        return Ok(Some(ObjectMemory { addr, len, contiguous }));
    }
    Ok(None)
}

/// Host bytes of a buffer field's value, for a copy: a C-contiguous numpy
/// array, or bytes copied off a device.
pub(crate) enum HostSource<'py> {
    Array(Bound<'py, PyUntypedArray>),
    Owned(Vec<u8>),
}

impl HostSource<'_> {
    /// `(address, bytes)`, valid while `self` lives.
    pub(crate) fn memory(&self) -> (usize, usize) {
        match self {
            HostSource::Array(a) => contiguous_memory(a),
            HostSource::Owned(v) => (v.as_ptr() as usize, v.len()),
        }
    }
}

/// The host bytes of a buffer field's value (a numpy array, a received
/// device array, a loan of another publisher), to copy into a message.
pub(crate) fn host_source<'py>(value: &Bound<'py, PyAny>) -> PyResult<HostSource<'py>> {
    if let Ok(array) = value.cast::<PyUntypedArray>() {
        return Ok(HostSource::Array(ascontiguous(array)?));
    }
    if let Ok(device) = value.cast::<DeviceArray>() {
        return Ok(HostSource::Owned(device.get().host_copy(value.py())?));
    }
    if let Ok(lent) = value.cast::<LoanedBuffer>() {
        let lent = lent.get();
        if lent.published() {
            return Err(error(Kind::Loan, "this loan was already published; call loan() again for the next message"));
        }
        if lent.layout.device == CPU_DEVICE {
            // SAFETY: as in `LoanedBuffer::__dlpack__`.
            return Ok(HostSource::Owned(
                unsafe { std::slice::from_raw_parts(lent.ptr as *const u8, lent.len) }.to_vec(),
            ));
        }
    } else if value.hasattr("__dlpack_device__")? {
        let (device_type, _): (i32, i32) = value.call_method0("__dlpack_device__")?.extract()?;
        if device_type == dlpack::KDL_CPU {
            let array = value.py().import("numpy")?.call_method1("from_dlpack", (value,))?;
            return Ok(HostSource::Array(ascontiguous(array.cast::<PyUntypedArray>()?)?));
        }
    }
    Err(PyTypeError::new_err(format!(
        "this {} is device memory that is not a loan of this publisher, which freight cannot copy; \
         publish a tensor from publisher.loan_tensor(), or host memory (tensor.cpu())",
        type_name(value)
    )))
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

/// Parses a loan's shape: an int or a sequence of ints, none negative.
pub(crate) fn parse_shape(py: Python<'_>, shape: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    let too_large = |e: PyErr| {
        if e.is_instance_of::<PyOverflowError>(py) {
            PyValueError::new_err(format!("shape {shape} is too large"))
        } else {
            PyTypeError::new_err(format!("shape must be an int or a tuple of ints, not {}", type_name(shape)))
        }
    };
    let dims: Vec<i64> = match shape.extract::<i64>() {
        Ok(n) => vec![n],
        Err(e) if e.is_instance_of::<PyOverflowError>(py) => return Err(too_large(e)),
        Err(_) => shape.extract().map_err(too_large)?,
    };
    if dims.iter().any(|&d| d < 0) {
        return Err(PyValueError::new_err(format!("shape {dims:?} has a negative extent")));
    }
    Ok(dims)
}

/// Parses `loan(shape, dtype)`: the shape as a list of extents, the dtype, and
/// the byte length, checked against overflow.
pub(crate) fn parse_shape_dtype<'py>(
    py: Python<'py>,
    shape: &Bound<'py, PyAny>,
    dtype: &Bound<'py, PyAny>,
) -> PyResult<(Vec<npy_intp>, Bound<'py, PyArrayDescr>, usize)> {
    let dims = parse_shape(py, shape)?;
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
        len =
            len.checked_mul(d as usize).ok_or_else(|| PyValueError::new_err(format!("shape {dims:?} is too large")))?;
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
