//! Context, node, publisher and subscription objects, and the wait an executor
//! sleeps in. The Python package (`freight/__init__.py`) wraps them in rclpy's
//! API; the per-message hot path (`publish`, `loan`, `take`) is called directly.

use std::any::Any;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration as StdDuration, Instant};

use freight::generic::GenericLoanUninit;
use freight::{
    BackendKind, BackendSet, Context as RustContext, CreateError, Durability, LoanError, LoanUninit, Message,
    Node as RustNode, Publisher as RustPublisher, PublisherOptions, QoS, Reliability, Subscription as RustSubscription,
    SubscriptionOptions, WaitOutcome, WaitSet,
};
use freight_msg::{DeviceView, ElementInfo};
use numpy::npyffi::npy_intp;
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyRuntimeWarning, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::arrays::{
    contiguous_memory, host_source, object_memory, parse_shape, parse_shape_dtype, view, HostSource, LoanCell,
    LoanLayout, LoanedBuffer, Memory,
};
use crate::dlpack::{DLDataType, CPU_DEVICE, KDL_CUDA};
use crate::errors::{error, from_context, from_create, from_loan, from_publish, from_take, from_wait, Kind};
use crate::fields::{Buffers, PyMessage};
use crate::messages;
use crate::user_types::MessageType;

/// How long a blocking wait sleeps before it looks for Ctrl-C: Python runs
/// signal handlers only between bytecodes, so a wait with the GIL released
/// must come back now and then for `KeyboardInterrupt` to be raised.
const SIGNAL_CHECK: StdDuration = StdDuration::from_millis(100);

/// Copies up to this size keep the GIL: releasing it costs more.
const COPY_KEEPS_GIL: usize = 64 << 10;

/// A freight context: one per process and ROS domain.
#[pyclass(frozen, module = "freight._native", name = "Context")]
pub(crate) struct Context {
    inner: RustContext,
    shut_down: AtomicBool,
}

#[pymethods]
impl Context {
    /// `domain_id`: the ROS domain (default: `ROS_DOMAIN_ID`, else 0).
    /// `local_only`: no network plane (DDS), shared memory only.
    #[new]
    #[pyo3(signature = (*, domain_id=None, local_only=false))]
    fn new(domain_id: Option<u32>, local_only: bool) -> PyResult<Self> {
        let mut builder = RustContext::builder();
        if let Some(id) = domain_id {
            builder = builder.domain_id(id);
        }
        if local_only {
            builder = builder.local_only();
        }
        Ok(Context { inner: builder.create().map_err(from_context)?, shut_down: AtomicBool::new(false) })
    }

    #[getter]
    fn domain_id(&self) -> u32 {
        self.inner.domain_id()
    }

    /// Whether `shutdown()` has not been called.
    fn ok(&self) -> bool {
        !self.shut_down.load(Ordering::Acquire)
    }

    /// Makes `ok()` false, which stops executors spinning nodes of this context.
    fn shutdown(&self) {
        self.shut_down.store(true, Ordering::Release);
    }

    /// The native node under a `freight.Node`, which is what Python code makes
    /// (`freight.Node(name, context=ctx)`): private, so that nobody reaches a
    /// node without the rclpy-shaped API.
    #[pyo3(name = "_create_node", signature = (name, namespace=None))]
    fn create_node(&self, name: &str, namespace: Option<&str>) -> PyResult<Node> {
        if !self.ok() {
            return Err(error(Kind::Context, "this context was shut down; create nodes in a new one"));
        }
        let node = match namespace {
            Some(ns) => self.inner.create_node_with_namespace(name, ns),
            None => self.inner.create_node(name),
        };
        Ok(Node { inner: node.map_err(from_context)? })
    }
}

/// A node: the owner of publishers and subscriptions.
#[pyclass(frozen, module = "freight._native", name = "Node")]
pub(crate) struct Node {
    inner: RustNode,
}

impl Node {
    /// The Rust node (for the graph functions of [`crate::graph`]).
    pub(crate) fn inner(&self) -> &RustNode {
        &self.inner
    }
}

/// `(history, depth, reliability, durability, max_blocking_time_sec)`, as
/// `freight.QoSProfile` hands it over.
type QosTuple = (String, usize, String, String, f64);

fn qos_from(t: QosTuple) -> PyResult<QoS> {
    let (history, depth, reliability, durability, blocking) = t;
    let mut qos = match history.as_str() {
        "keep_last" => QoS::keep_last(depth),
        "keep_all" => QoS::keep_all(),
        other => return Err(PyValueError::new_err(format!("history {other:?} is not keep_last or keep_all"))),
    };
    qos.reliability = match reliability.as_str() {
        "reliable" => Reliability::Reliable,
        "best_effort" => Reliability::BestEffort,
        other => return Err(PyValueError::new_err(format!("reliability {other:?} is not reliable or best_effort"))),
    };
    qos.durability = match durability.as_str() {
        "volatile" => Durability::Volatile,
        "transient_local" => Durability::TransientLocal,
        other => return Err(PyValueError::new_err(format!("durability {other:?} is not volatile or transient_local"))),
    };
    if !(blocking.is_finite() && blocking >= 0.0) {
        return Err(PyValueError::new_err(format!("max_blocking_time {blocking} s is not a duration")));
    }
    Ok(qos.with_max_blocking_time(StdDuration::from_secs_f64(blocking)))
}

/// The endpoints of a message class: a built-in one's Rust type, or a
/// user's type ([`MessageType`]).
pub(crate) enum TypeEndpoints {
    BuiltIn(&'static dyn Endpoints),
    User(Py<MessageType>),
}

impl std::ops::Deref for TypeEndpoints {
    type Target = dyn Endpoints;
    fn deref(&self) -> &(dyn Endpoints + 'static) {
        match self {
            TypeEndpoints::BuiltIn(e) => *e,
            TypeEndpoints::User(t) => t,
        }
    }
}

pub(crate) fn endpoints_of(msg_type: &Bound<'_, PyType>) -> PyResult<TypeEndpoints> {
    if let Some(typed) = messages::typed(msg_type) {
        return Ok(TypeEndpoints::BuiltIn(typed));
    }
    if let Ok(user) = msg_type.getattr(pyo3::intern!(msg_type.py(), "_freight_type")) {
        if let Ok(user) = user.cast_into::<MessageType>() {
            return Ok(TypeEndpoints::User(user.unbind()));
        }
    }
    Err(PyTypeError::new_err(format!(
        "{} is not a freight message class; freight's Python messages are {}, and the types of your own \
         packages that `freight msg python` generates",
        msg_type.name().map_or_else(|_| "?".into(), |n| n.to_string()),
        messages::NAMES.join(", ")
    )))
}

#[pymethods]
impl Node {
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    #[getter]
    fn namespace(&self) -> &str {
        self.inner.namespace()
    }

    #[getter]
    fn fully_qualified_name(&self) -> String {
        self.inner.fully_qualified_name()
    }

    /// `backend`: where loans live (`"shm"`, the default; `"cuda"`,
    /// `"cuda-host"`, `"fake-device"`, `"cpu"`). A backend this process
    /// cannot use raises `freight.BackendUnavailableError` with the reason.
    #[pyo3(signature = (msg_type, topic, qos, backend=None))]
    fn create_publisher(
        &self,
        msg_type: &Bound<'_, PyType>,
        topic: &str,
        qos: QosTuple,
        backend: Option<&str>,
    ) -> PyResult<Publisher> {
        let kind = match backend {
            None => BackendKind::Shm,
            Some(name) => BackendKind::from_name(name).ok_or_else(|| {
                let names: Vec<String> = BackendKind::ALL.iter().map(|k| format!("{:?}", k.name())).collect();
                PyValueError::new_err(format!("backend {name:?} is not one of {}", names.join(", ")))
            })?,
        };
        let options = PublisherOptions { backend: kind, ..PublisherOptions::default() };
        let endpoints = endpoints_of(msg_type)?;
        let inner = endpoints.publisher(&self.inner, topic, qos_from(qos)?, options).map_err(from_create)?;
        Ok(Publisher { inner, msg_type: msg_type.clone().unbind(), backend: kind, lent: LentLoans::default() })
    }

    /// `accepted_backends`: backend names (`"cpu"`, `"shm"`, ...) whose memory
    /// this subscription views in place; `None`: every one this process can use.
    #[pyo3(signature = (msg_type, topic, qos, callback=None, accepted_backends=None))]
    fn create_subscription(
        &self,
        msg_type: &Bound<'_, PyType>,
        topic: &str,
        qos: QosTuple,
        callback: Option<Py<PyAny>>,
        accepted_backends: Option<Vec<String>>,
    ) -> PyResult<Subscription> {
        let accepted = accepted_backends
            .map(|names| {
                names
                    .iter()
                    .map(|n| {
                        BackendKind::from_name(n)
                            .ok_or_else(|| PyValueError::new_err(format!("{n:?} is not a backend name")))
                    })
                    .collect::<PyResult<Vec<_>>>()
                    .map(|kinds| BackendSet::of(&kinds))
            })
            .transpose()?;
        let options = SubscriptionOptions { accepted_backends: accepted, ..SubscriptionOptions::default() };
        let inner =
            endpoints_of(msg_type)?.subscription(&self.inner, topic, qos_from(qos)?, options).map_err(from_create)?;
        Ok(Subscription { inner, msg_type: msg_type.clone().unbind(), callback })
    }
}

/// What the Rust type behind a Python message class does: create endpoints,
/// and decode a bag's message.
pub(crate) trait Endpoints: Sync {
    /// The Python message of a bag's message, its buffer fields viewing the
    /// file's memory where they can (see `freight_bag::Message::decode`).
    fn decode_bag_message(&self, py: Python<'_>, m: &freight_bag::Message) -> PyResult<Py<PyAny>>;
    fn publisher(
        &self,
        node: &RustNode,
        topic: &str,
        qos: QoS,
        options: PublisherOptions,
    ) -> Result<Box<dyn AnyPublisher>, CreateError>;
    fn subscription(
        &self,
        node: &RustNode,
        topic: &str,
        qos: QoS,
        options: SubscriptionOptions,
    ) -> Result<Box<dyn AnySubscription>, CreateError>;
}

/// The [`Endpoints`] of `M`.
pub(crate) struct Typed<M>(PhantomData<fn() -> M>);

impl<M> Typed<M> {
    pub(crate) const NEW: Self = Typed(PhantomData);
}

impl<M: PyMessage> Endpoints for Typed<M> {
    fn decode_bag_message(&self, py: Python<'_>, m: &freight_bag::Message) -> PyResult<Py<PyAny>> {
        let message: M = py.detach(|| m.decode()).map_err(|e| {
            error(Kind::Malformed, format!("{} on {} is not a {}: {e}", m.type_name, m.topic, M::TYPE_NAME))
        })?;
        Ok(Py::new(py, message.read_fields(py)?)?.into_any())
    }

    fn publisher(
        &self,
        node: &RustNode,
        topic: &str,
        qos: QoS,
        options: PublisherOptions,
    ) -> Result<Box<dyn AnyPublisher>, CreateError> {
        Ok(Box::new(node.create_publisher_with_options::<M>(topic, qos, options)?))
    }

    fn subscription(
        &self,
        node: &RustNode,
        topic: &str,
        qos: QoS,
        options: SubscriptionOptions,
    ) -> Result<Box<dyn AnySubscription>, CreateError> {
        Ok(Box::new(node.create_subscription_with_options::<M>(topic, qos, options)?))
    }
}

/// Where `loan_buffer` / `loan_tensor` should put the memory.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Placement {
    /// Host memory the CPU writes.
    Cpu,
    /// A CUDA device's address of the memory; `Some(n)`: it must be device `n`.
    Cuda(Option<i32>),
}

impl Placement {
    /// Parses `"cpu"`, `"cuda"`, `"cuda:N"` or a `torch.device`.
    fn parse(device: &Bound<'_, PyAny>) -> PyResult<Self> {
        let text = device.str()?.to_string();
        let bad = || PyValueError::new_err(format!("device {text:?} is not \"cpu\", \"cuda\" or \"cuda:N\""));
        match text.as_str() {
            "cpu" => Ok(Placement::Cpu),
            "cuda" => Ok(Placement::Cuda(None)),
            other => {
                let n = other.strip_prefix("cuda:").ok_or_else(bad)?;
                Ok(Placement::Cuda(Some(n.parse().map_err(|_| bad())?)))
            }
        }
    }
}

/// A loan this publisher lent and has not seen published: the addresses of
/// its memory (host, device; 0 where there is none) and a weak reference to
/// it, so that dropping the last Python reference still returns it.
struct Lent {
    addrs: [usize; 2],
    len: usize,
    loan: Weak<Mutex<Option<Box<dyn Any + Send>>>>,
}

/// The loans of one publisher, found again from the address of a tensor
/// over their memory: `publish` adopts a torch or CuPy tensor made from a
/// loan this way (such tensors do not lead back to the loan's object).
#[derive(Default)]
pub(crate) struct LentLoans(Mutex<Vec<Lent>>);

impl LentLoans {
    fn register(&self, addrs: [usize; 2], len: usize, cell: &LoanCell) {
        let Ok(mut lent) = self.0.lock() else { return };
        lent.retain(|l| l.loan.upgrade().is_some_and(|c| c.lock().is_ok_and(|c| c.is_some())));
        lent.push(Lent { addrs, len, loan: Arc::downgrade(cell) });
    }

    /// The loan whose memory is exactly `len` bytes at `addr`.
    fn find(&self, addr: usize, len: usize) -> Option<LoanCell> {
        if addr == 0 || len == 0 {
            return None;
        }
        let lent = self.0.lock().ok()?;
        lent.iter().filter(|l| l.len == len && l.addrs.contains(&addr)).find_map(|l| l.loan.upgrade())
    }
}

/// A publisher of any message type.
pub(crate) trait AnyPublisher: Send + Sync {
    fn publish(
        &self,
        py: Python<'_>,
        msg: &Bound<'_, PyAny>,
        me: &Bound<'_, Publisher>,
        stream: Option<u64>,
    ) -> PyResult<()>;
    fn loan<'py>(
        &self,
        py: Python<'py>,
        shape: &Bound<'py, PyAny>,
        dtype: &Bound<'py, PyAny>,
        me: &Bound<'py, Publisher>,
    ) -> PyResult<Bound<'py, PyAny>>;
    fn loan_buffer<'py>(
        &self,
        py: Python<'py>,
        shape: &Bound<'py, PyAny>,
        dtype: &Bound<'py, PyAny>,
        placement: Placement,
        me: &Bound<'py, Publisher>,
    ) -> PyResult<Bound<'py, LoanedBuffer>>;
    fn topic_name(&self) -> &str;
    fn subscription_count(&self) -> usize;
    fn spilled_count(&self) -> u64;
}

/// The loan behind `values` when they are exactly one whole loan of `me`: the
/// numpy array `loan()` returned, a `LoanedBuffer`, or a tensor (torch, CuPy)
/// over the whole memory of one of `me`'s loans.
///
/// A loan array is sent without a copy only when nothing but the message and
/// one variable refers to it, and nothing but the array to the loan object:
/// a view of the array (which holds it as its base) or an export of the loan
/// would still write into memory that belongs to the subscribers once it is
/// published, and read it after they gave it back. Otherwise the message is
/// published by copy, with a warning that says why, and the loan stays the
/// caller's. The published array itself is pointed at read-only zeros.
pub(crate) fn adopt_loan<L: PyLoan>(
    py: Python<'_>,
    values: &[Bound<'_, PyAny>],
    me: &Bound<'_, Publisher>,
) -> PyResult<Option<L>> {
    let [value] = values else { return Ok(None) };
    let publisher = me.get();
    let array = value.cast::<PyUntypedArray>().ok();
    let mut retire = None;
    let cell = if let Some(array) = array {
        // SAFETY: a live array; its base is a borrowed reference or null.
        let base = unsafe { (*array.as_array_ptr()).fields.base };
        // SAFETY: non-null and owned by the array, which outlives this borrow.
        let base = (!base.is_null()).then(|| unsafe { Bound::from_borrowed_ptr(py, base) });
        if loan_under(py, array).is_some_and(|owner| owner.get().published()) {
            // The published array, or a view made of it since: it reads zeros now.
            return Err(error(Kind::Loan, "this loan was already published; call loan() again for the next message"));
        }
        let (addr, nbytes) = contiguous_memory(array);
        match base.as_ref().and_then(|b| b.cast::<LoanedBuffer>().ok()) {
            // The array `loan()` returned; a view of it (numpy 2 makes the
            // array its base), another
            // publisher's loan, or a part of this one, is published by copy.
            // (numpy holds a placeholder address for an empty loan.)
            Some(holder) => {
                let lent = holder.get();
                let same_memory = nbytes == lent.len && (lent.len == 0 || addr == lent.ptr);
                let whole = lent.publisher.bind(py).is(me) && array.is_c_contiguous() && same_memory;
                // What may still write into the loan after publish: other
                // views of the array (each holds it as its base) and exports
                // of the loan object. They cannot be told apart from other
                // references, so any reference beyond those expected counts:
                // the array's from the message, `values` and one variable of
                // the caller; the loan object's from the array and `base`.
                // SAFETY: live objects; their reference counts are only read.
                let (array_refs, holder_refs) =
                    unsafe { (pyo3::ffi::Py_REFCNT(array.as_ptr()), pyo3::ffi::Py_REFCNT(holder.as_ptr())) };
                let others = (array_refs as usize).saturating_sub(3) + (holder_refs as usize).saturating_sub(2);
                if whole && others > 0 {
                    let text = format!(
                        "publish() copied this loan: its array is referenced from {others} more place(s) than \
                         the message and one variable (a view of it, an export, another name, a container), \
                         and a view would write into the subscribers' memory after publish; keep only the \
                         message and one variable referring to it to send it without a copy"
                    );
                    PyErr::warn(py, &py.get_type::<PyRuntimeWarning>(), &std::ffi::CString::new(text)?, 2)?;
                }
                (whole && others == 0).then(|| {
                    retire = Some((holder.clone(), array.clone()));
                    lent.loan.clone()
                })
            }
            None => None,
        }
    } else if let Ok(lent) = value.cast::<LoanedBuffer>() {
        let lent = lent.get();
        lent.publisher.bind(py).is(me).then(|| lent.loan.clone())
    } else {
        object_memory(value)?.filter(|m| m.contiguous).and_then(|m| publisher.lent.find(m.addr, m.len))
    };
    let Some(cell) = cell else { return Ok(None) };
    let taken = cell.lock().map_err(|_| error(Kind::Loan, "a loan's lock was poisoned"))?.take();
    let Some(loan) = taken else {
        return Err(error(Kind::Loan, "this loan was already published; call loan() again for the next message"));
    };
    let loan = loan.downcast::<L>().map_err(|_| error(Kind::Loan, "the loan is of another message type"))?;
    if let Some((holder, array)) = retire {
        // The memory now belongs to the subscribers. (A tensor has no flag to clear.)
        holder.get().retire(&array)?;
    }
    Ok(Some(*loan))
}

/// What Python does with a publisher's loan, typed or of a user's type
/// ([`GenericLoanUninit`]): fill it from host memory ([`copy_arrays`]), or
/// lend its one buffer as an array or tensor ([`lend_array`], [`lend_buffer`]).
pub(crate) trait PyLoan: Any + Send {
    /// Copies `src` to the start of buffer `i`.
    fn fill(&mut self, i: usize, src: &[u8]) -> Result<(), LoanError>;
    fn backend(&self) -> BackendKind;
    /// Buffer 0 as host memory; `None` for device memory.
    fn host(&mut self) -> Option<*mut u8>;
    /// Where a device addresses buffer 0.
    fn device(&self) -> Option<DeviceView>;
    fn set_write_stream(&mut self, stream: u64);
}

impl<T: Message> PyLoan for LoanUninit<T> {
    fn fill(&mut self, i: usize, src: &[u8]) -> Result<(), LoanError> {
        self.write_buffer_from_host(i, 0, src)
    }
    fn backend(&self) -> BackendKind {
        LoanUninit::backend(self)
    }
    fn host(&mut self) -> Option<*mut u8> {
        self.buffer_uninit_mut(0).map(|b| b.as_mut_ptr().cast::<u8>())
    }
    fn device(&self) -> Option<DeviceView> {
        self.device_view(0)
    }
    fn set_write_stream(&mut self, stream: u64) {
        LoanUninit::set_write_stream(self, stream)
    }
}

impl PyLoan for GenericLoanUninit {
    fn fill(&mut self, i: usize, src: &[u8]) -> Result<(), LoanError> {
        self.write_buffer_from_host(i, 0, src)
    }
    fn backend(&self) -> BackendKind {
        GenericLoanUninit::backend(self)
    }
    fn host(&mut self) -> Option<*mut u8> {
        self.buffer_uninit_mut(0).map(|b| b.as_mut_ptr().cast::<u8>())
    }
    fn device(&self) -> Option<DeviceView> {
        self.device_view(0)
    }
    fn set_write_stream(&mut self, stream: u64) {
        GenericLoanUninit::set_write_stream(self, stream)
    }
}

/// Names the stream that wrote `loan` when its memory is a device's: the
/// one `publish` was told, else the default ([`default_write_stream`]).
pub(crate) fn order_device_writes(py: Python<'_>, loan: &mut impl PyLoan, stream: Option<u64>) {
    // Readers wait for the kernels that wrote the loan, on the GPU: the
    // stream they were submitted to is recorded here.
    if let Some(view) = loan.device() {
        loan.set_write_stream(stream.unwrap_or_else(|| default_write_stream(py, view.ordinal)));
    }
}

/// A loan that `lend` makes for the lengths of `values` (a message's buffer
/// fields, in declaration order), each value copied into it once, without the
/// GIL when the copy is large. What `publish(msg)` does with arrays that are
/// no loan of the caller's, and what a service's request and response do.
pub(crate) fn copy_arrays<L: PyLoan>(
    py: Python<'_>,
    values: &[Bound<'_, PyAny>],
    lend: impl FnOnce(&[usize]) -> Result<L, LoanError> + Send,
) -> PyResult<L> {
    let sources = values.iter().map(host_source).collect::<PyResult<Vec<_>>>()?;
    let memory: Vec<(usize, usize)> = sources.iter().map(HostSource::memory).collect();
    let fill = || -> Result<L, LoanError> {
        let lens: Vec<usize> = memory.iter().map(|m| m.1).collect();
        let mut loan = lend(&lens)?;
        for (i, &(addr, len)) in memory.iter().enumerate().filter(|(_, m)| m.1 > 0) {
            // SAFETY: contiguous host memory of `len` bytes, kept alive by
            // `sources` until this returns.
            let src = unsafe { std::slice::from_raw_parts(addr as *const u8, len) };
            loan.fill(i, src)?;
        }
        Ok(loan)
    };
    let total: usize = memory.iter().map(|m| m.1).sum();
    let loan = if total > COPY_KEEPS_GIL { py.detach(fill) } else { fill() };
    loan.map_err(from_loan)
}

/// The loan object at the end of `array`'s chain of bases (views of views of
/// a loan array), if there is one.
fn loan_under<'py>(py: Python<'py>, array: &Bound<'py, PyUntypedArray>) -> Option<Bound<'py, LoanedBuffer>> {
    let mut next = array.as_array_ptr();
    // numpy 2 chains a view to the array it was made from; a chain this long
    // is no loan's.
    for _ in 0..64 {
        // SAFETY: a live array (the first is borrowed, each next is owned by the one before).
        let base = unsafe { (*next).fields.base };
        if base.is_null() {
            return None;
        }
        // SAFETY: non-null, owned by the array that refers to it.
        let base = unsafe { Bound::from_borrowed_ptr(py, base) };
        match base.cast_into::<PyUntypedArray>() {
            Ok(array) => next = array.as_array_ptr(),
            Err(e) => return e.into_inner().cast_into::<LoanedBuffer>().ok(),
        }
    }
    None
}

/// The stream a publisher's GPU writes were submitted to when `publish` was
/// not told: torch's current stream on the loan's device when torch is in
/// use, else the legacy default stream (0).
fn default_write_stream(py: Python<'_>, ordinal: i32) -> u64 {
    let torch_stream = || -> PyResult<u64> {
        let modules = py.import("sys")?.getattr("modules")?;
        let Some(torch) = modules.call_method1("get", ("torch",)).ok().filter(|t| !t.is_none()) else {
            return Ok(0);
        };
        torch.getattr("cuda")?.call_method1("current_stream", (ordinal,))?.getattr("cuda_stream")?.extract()
    };
    torch_stream().unwrap_or(0)
}

/// A `CUstream` from `publish(stream=...)`: an int, a `torch.cuda.Stream`
/// (`cuda_stream`) or a `cupy.cuda.Stream` (`ptr`).
fn parse_stream(stream: &Bound<'_, PyAny>) -> PyResult<u64> {
    let handle = if let Ok(h) = stream.extract::<i64>() {
        h
    } else if let Ok(h) = stream.getattr("cuda_stream") {
        h.extract()?
    } else if let Ok(h) = stream.getattr("ptr") {
        h.extract()?
    } else {
        return Err(PyTypeError::new_err(format!(
            "stream must be a CUstream handle (int), a torch.cuda.Stream or a cupy.cuda.Stream, not {}",
            crate::errors::type_name(stream)
        )));
    };
    u64::try_from(handle).map_err(|_| PyValueError::new_err(format!("stream {handle} is not a CUstream handle")))
}

/// The one buffer field of `type_name` (whose buffer fields' elements are
/// `elements`), which `loan` lends memory for.
pub(crate) fn single_element(type_name: &str, elements: &[ElementInfo]) -> PyResult<ElementInfo> {
    match elements {
        [element] => Ok(*element),
        _ => Err(PyTypeError::new_err(format!(
            "{type_name} has {} buffer fields; loan() lends memory for a message with one. Publish it with publish(msg)",
            elements.len()
        ))),
    }
}

/// The element types of `M`'s buffer fields, in declaration order.
fn elements_of<M: PyMessage>() -> Vec<ElementInfo> {
    let mut elements = Vec::new();
    M::elements(&mut elements);
    elements
}

/// A writable numpy array of `shape` and `dtype` over the one buffer of a
/// loan that `lend` makes for its length (`Publisher.loan`): the buffer
/// field of `type_name`, whose elements are `element`.
pub(crate) fn lend_array<'py, L: PyLoan>(
    py: Python<'py>,
    type_name: &str,
    element: ElementInfo,
    shape: &Bound<'py, PyAny>,
    dtype: &Bound<'py, PyAny>,
    me: &Bound<'py, Publisher>,
    lend: impl FnOnce(usize) -> Result<L, LoanError>,
) -> PyResult<Bound<'py, PyAny>> {
    let (dims, descr, len): (Vec<npy_intp>, Bound<'py, PyArrayDescr>, usize) = parse_shape_dtype(py, shape, dtype)?;
    if element.size != 1 && !descr.is_equiv_to(&PyArrayDescr::new(py, element.ros_name)?) {
        return Err(PyTypeError::new_err(format!(
            "{}'s data is {}[]; loan it with dtype numpy.{}, not {}",
            type_name,
            element.ros_name,
            element.ros_name,
            descr.repr()?
        )));
    }
    let mut loan = lend(len).map_err(from_loan)?;
    let backend = loan.backend();
    let ptr = loan.host().ok_or_else(|| {
        error(
            Kind::Backend,
            format!(
                "this publisher lends {backend} device memory, which numpy cannot view; use \
                         loan_tensor(shape, dtype) for a torch tensor on the device"
            ),
        )
    })?;
    let cell: LoanCell = Arc::new(Mutex::new(Some(Box::new(loan) as Box<dyn Any + Send>)));
    me.get().lent.register([ptr as usize, 0], len, &cell);
    let lent = LoanedBuffer {
        publisher: me.clone().into_any().unbind(),
        loan: cell,
        ptr: ptr as usize,
        len,
        layout: LoanLayout {
            shape: vec![(len / element.size.max(1)) as i64],
            dtype: DLDataType::of(element),
            device: CPU_DEVICE,
        },
        retired: Mutex::new(None),
    };
    let holder = Bound::new(py, lent)?;
    view(py, holder.into_any(), Memory { ptr, len, writable: true }, &dims, descr)
}

/// The one buffer of a loan that `lend` makes, as a [`LoanedBuffer`] of
/// `shape` and `dtype` where `placement` says (`Publisher.loan_buffer`).
#[allow(clippy::too_many_arguments)] // what `loan_buffer` takes, and the type's
pub(crate) fn lend_buffer<'py, L: PyLoan>(
    py: Python<'py>,
    type_name: &str,
    element: ElementInfo,
    shape: &Bound<'py, PyAny>,
    dtype: &Bound<'py, PyAny>,
    placement: Placement,
    me: &Bound<'py, Publisher>,
    lend: impl FnOnce(usize) -> Result<L, LoanError> + Send,
) -> PyResult<Bound<'py, LoanedBuffer>> {
    let dims = parse_shape(py, shape)?;
    let dl = DLDataType::parse(dtype)?;
    if element.size != 1 && !(dl.code <= 1 && dl.lanes == 1 && dl.itemsize() == element.size) {
        return Err(PyTypeError::new_err(format!(
            "{}'s data is {}[]; loan it with a {}-bit integer dtype, not {}",
            type_name,
            element.ros_name,
            element.size * 8,
            dtype.str()?
        )));
    }
    let len = dims
        .iter()
        .try_fold(dl.itemsize(), |n, &d| n.checked_mul(d as usize))
        .ok_or_else(|| PyValueError::new_err(format!("shape {dims:?} is too large")))?;
    // A device pool may have to grow (and map memory) first.
    let mut loan = py.detach(|| lend(len)).map_err(from_loan)?;
    let backend = loan.backend();
    let device_view = loan.device();
    let host = loan.host().map(|p| p as usize);
    let (ptr, device) = match placement {
        Placement::Cuda(wanted) => {
            let view = device_view.ok_or_else(|| {
                error(
                    Kind::Backend,
                    format!(
                        "this publisher lends {backend} memory, which no CUDA device addresses; create it with \
                             backend=\"cuda\" (or \"cuda-host\") to loan CUDA memory, or ask for device=\"cpu\""
                    ),
                )
            })?;
            if let Some(n) = wanted.filter(|n| *n != view.ordinal) {
                return Err(PyValueError::new_err(format!(
                    "this publisher's memory is on cuda:{}, not cuda:{n}",
                    view.ordinal
                )));
            }
            (view.ptr as usize, (KDL_CUDA, view.ordinal))
        }
        Placement::Cpu => {
            let host = host.ok_or_else(|| {
                    error(
                        Kind::Backend,
                        format!(
                            "this publisher lends {backend} device memory, which the CPU cannot write; use \
                             device=\"cuda\", or create the publisher with backend=\"cuda-host\" or \"shm\" for host memory"
                        ),
                    )
                })?;
            (host, CPU_DEVICE)
        }
    };
    let cell: LoanCell = Arc::new(Mutex::new(Some(Box::new(loan) as Box<dyn Any + Send>)));
    me.get().lent.register([host.unwrap_or(0), device_view.map_or(0, |v| v.ptr as usize)], len, &cell);
    let lent = LoanedBuffer {
        publisher: me.clone().into_any().unbind(),
        loan: cell,
        ptr,
        len,
        layout: LoanLayout { shape: dims, dtype: dl, device },
        retired: Mutex::new(None),
    };
    Bound::new(py, lent)
}

impl<M: PyMessage> AnyPublisher for RustPublisher<M> {
    fn publish(
        &self,
        py: Python<'_>,
        msg: &Bound<'_, PyAny>,
        me: &Bound<'_, Publisher>,
        stream: Option<u64>,
    ) -> PyResult<()> {
        let obj = msg.cast::<M::Class>().map_err(|_| {
            PyTypeError::new_err(format!(
                "this publisher sends {}, not {}",
                M::TYPE_NAME,
                crate::errors::type_name(msg)
            ))
        })?;
        let obj = obj.try_borrow()?;
        let mut values = Vec::new();
        M::arrays_of(&obj, py, &mut values);
        let loan = match adopt_loan::<LoanUninit<M>>(py, &values, me)? {
            Some(mut loan) => {
                order_device_writes(py, &mut loan, stream);
                loan
            }
            None => copy_arrays(py, &values, |lens| self.loan_buffers(lens))?,
        };
        // SAFETY: every buffer byte was written: by the copy above, or by the
        // user into the loan (on the host, or by kernels the readers are
        // ordered after), whose contents until then are those of a
        // `numpy.empty` array but never uninitialised memory (shared memory is
        // zeroed when created, heap frames are zero-filled when they grow,
        // device pools are cleared when they are made, and all may hold an
        // earlier message).
        let mut loan = unsafe { loan.assume_init() };
        M::write_fields(&obj, py, &mut loan, Buffers::Keep)?;
        drop(obj);
        // A reliable publish can wait for a full queue (max_blocking_time).
        py.detach(|| self.publish(loan)).map_err(from_publish)
    }

    fn loan<'py>(
        &self,
        py: Python<'py>,
        shape: &Bound<'py, PyAny>,
        dtype: &Bound<'py, PyAny>,
        me: &Bound<'py, Publisher>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let element = single_element(M::TYPE_NAME, &elements_of::<M>())?;
        lend_array(py, M::TYPE_NAME, element, shape, dtype, me, |len| self.loan(len))
    }

    fn loan_buffer<'py>(
        &self,
        py: Python<'py>,
        shape: &Bound<'py, PyAny>,
        dtype: &Bound<'py, PyAny>,
        placement: Placement,
        me: &Bound<'py, Publisher>,
    ) -> PyResult<Bound<'py, LoanedBuffer>> {
        let element = single_element(M::TYPE_NAME, &elements_of::<M>())?;
        lend_buffer(py, M::TYPE_NAME, element, shape, dtype, placement, me, |len| self.loan(len))
    }

    fn topic_name(&self) -> &str {
        RustPublisher::topic_name(self)
    }

    fn subscription_count(&self) -> usize {
        RustPublisher::subscription_count(self) + self.network_subscription_count()
    }

    fn spilled_count(&self) -> u64 {
        RustPublisher::spilled_count(self)
    }
}

/// A publisher (rclpy's `Publisher`).
///
/// What it published stays with its subscriptions after it goes: freeing it
/// waits until their processes hold it, at most half a second.
#[pyclass(frozen, module = "freight", name = "Publisher")]
pub(crate) struct Publisher {
    inner: Box<dyn AnyPublisher>,
    msg_type: Py<PyType>,
    backend: BackendKind,
    lent: LentLoans,
}

#[pymethods]
impl Publisher {
    /// Sends `msg` to every subscription of the topic. Its `data` is sent
    /// without a copy when it is this publisher's loan: the array `loan()`
    /// returned, the tensor `loan_tensor()` returned (or any tensor over that
    /// whole memory), or the `LoanedBuffer` of `loan_buffer()`. A loan array
    /// that something else still refers to (a view, an export, a second name)
    /// is copied, with a `RuntimeWarning`; a published loan array reads zeros.
    /// Any other host array-like is copied once; other device memory is refused.
    ///
    /// `stream`: for a loan on a CUDA device, the stream (an int `CUstream`, a
    /// `torch.cuda.Stream`, a `cupy.cuda.Stream`) the kernels that wrote it
    /// were submitted to; subscribers' streams wait for that stream's work up
    /// to now, on the GPU, without blocking this thread. Default: torch's
    /// current stream on the loan's device, or the legacy default stream.
    #[pyo3(signature = (msg, *, stream=None))]
    fn publish(slf: &Bound<'_, Self>, msg: &Bound<'_, PyAny>, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let stream = stream.filter(|s| !s.is_none()).map(parse_stream).transpose()?;
        slf.get().inner.publish(slf.py(), msg, slf, stream)
    }

    /// A writable numpy array of `shape` and `dtype` in shared memory, to
    /// become the `data` of the next message: fill it, set it as the
    /// message's `data`, and `publish` the message; nothing is copied. Its
    /// contents start unspecified (as `numpy.empty`'s). After `publish` the
    /// memory belongs to the subscribers: that array turns read-only, and no
    /// other view of it may be used.
    fn loan<'py>(
        slf: &Bound<'py, Self>,
        shape: &Bound<'py, PyAny>,
        dtype: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        slf.get().inner.loan(slf.py(), shape, dtype, slf)
    }

    /// The publisher's memory for the next message as a `LoanedBuffer`, a
    /// DLPack producer of a writable C-contiguous tensor of `shape` and
    /// `dtype` (torch, numpy or string dtypes) on `device` (`"cuda"`,
    /// `"cuda:N"` or `"cpu"`), for any DLPack consumer
    /// (`cupy.from_dlpack(buf)`). `loan_tensor` is this, made a torch tensor.
    #[pyo3(signature = (shape, dtype, device=None))]
    fn loan_buffer<'py>(
        slf: &Bound<'py, Self>,
        shape: &Bound<'py, PyAny>,
        dtype: &Bound<'py, PyAny>,
        device: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, LoanedBuffer>> {
        let placement = device.map(Placement::parse).transpose()?.unwrap_or(Placement::Cuda(None));
        slf.get().inner.loan_buffer(slf.py(), shape, dtype, placement, slf)
    }

    /// A torch tensor of `shape` and `dtype` over the publisher's memory for
    /// the next message: on the GPU (`device="cuda"`, a publisher with
    /// `backend="cuda"` or `"cuda-host"`) or on the host (`device="cpu"`).
    /// Write it with any kernel, make it the message's `data`, and
    /// `publish` the message: nothing is copied, and subscribers' streams
    /// wait for the stream that wrote it. Contents start unspecified (as
    /// `torch.empty`'s); after `publish` the tensor must not be used.
    #[pyo3(signature = (shape, dtype, device=None))]
    fn loan_tensor<'py>(
        slf: &Bound<'py, Self>,
        shape: &Bound<'py, PyAny>,
        dtype: &Bound<'py, PyAny>,
        device: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let torch = py.import("torch").map_err(|e| {
            pyo3::exceptions::PyImportError::new_err(format!(
                "loan_tensor returns a torch tensor, and torch is not importable ({e}); install torch, or use \
                 loan_buffer() with another DLPack consumer, or loan() for numpy"
            ))
        })?;
        let buffer = Publisher::loan_buffer(slf, shape, dtype, device)?;
        torch.call_method1("from_dlpack", (buffer,))
    }

    /// The backend the publisher lends memory from (`"shm"`, `"cuda"`, ...).
    #[getter]
    fn backend(&self) -> &'static str {
        self.backend.name()
    }

    #[getter]
    fn topic_name(&self) -> &str {
        self.inner.topic_name()
    }

    #[getter]
    fn msg_type(&self, py: Python<'_>) -> Py<PyType> {
        self.msg_type.clone_ref(py)
    }

    /// Subscriptions matched, on this host and over the network.
    fn get_subscription_count(&self) -> usize {
        self.inner.subscription_count()
    }

    /// Messages sent over DDS because `/dev/shm` had no room for them (a
    /// container's small `/dev/shm`; the first is said on stderr).
    #[getter]
    fn spilled_count(&self) -> u64 {
        self.inner.spilled_count()
    }
}

/// A subscription of any message type.
/// The next sample, waiting up to `timeout` (`None`: for ever): what
/// `try_take` finds, else what `take` waits for in slices of
/// [`SIGNAL_CHECK`], between which Ctrl-C raises. No GIL while taking:
/// importing device memory may map it.
pub(crate) fn take_waiting<S: Send>(
    py: Python<'_>,
    timeout: Option<StdDuration>,
    try_take: impl Fn() -> Result<Option<S>, freight::TakeError> + Sync,
    take: impl Fn(StdDuration) -> Result<Option<S>, freight::TakeError> + Sync,
) -> PyResult<Option<S>> {
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        if let Some(s) = py.detach(&try_take).map_err(from_take)? {
            return Ok(Some(s));
        }
        let left = deadline.map_or(SIGNAL_CHECK, |d| d.saturating_duration_since(Instant::now()));
        if left.is_zero() {
            return Ok(None);
        }
        if let Some(s) = py.detach(|| take(left.min(SIGNAL_CHECK))).map_err(from_take)? {
            return Ok(Some(s));
        }
        py.check_signals()?;
    }
}

pub(crate) trait AnySubscription: Send + Sync {
    fn take(&self, py: Python<'_>, timeout: Option<StdDuration>) -> PyResult<Option<Py<PyAny>>>;
    fn add_to<'a>(&'a self, waitset: &mut WaitSet<'a>);
    fn topic_name(&self) -> &str;
    fn publisher_count(&self) -> usize;
    fn network_losses(&self) -> u64;
}

impl<M: PyMessage> AnySubscription for RustSubscription<M> {
    fn take(&self, py: Python<'_>, timeout: Option<StdDuration>) -> PyResult<Option<Py<PyAny>>> {
        let Some(sample) = take_waiting(py, timeout, || self.try_take(), |t| self.take(t))? else { return Ok(None) };
        let msg = sample.into_message().read_fields(py)?;
        Ok(Some(Py::new(py, msg)?.into_any()))
    }

    fn add_to<'a>(&'a self, waitset: &mut WaitSet<'a>) {
        waitset.add(self);
    }

    fn topic_name(&self) -> &str {
        RustSubscription::topic_name(self)
    }

    fn publisher_count(&self) -> usize {
        RustSubscription::publisher_count(self) + self.network_publisher_count()
    }

    fn network_losses(&self) -> u64 {
        RustSubscription::network_losses(self).count()
    }
}

/// A subscription (rclpy's `Subscription`), with `take()`.
#[pyclass(frozen, module = "freight", name = "Subscription")]
pub(crate) struct Subscription {
    inner: Box<dyn AnySubscription>,
    msg_type: Py<PyType>,
    callback: Option<Py<PyAny>>,
}

#[pymethods]
impl Subscription {
    /// The next message, or `None` if none comes within `timeout_sec`
    /// (`None`: wait as long as it takes; 0: do not wait). Waiting releases
    /// the GIL; Ctrl-C raises `KeyboardInterrupt`.
    #[pyo3(signature = (timeout_sec=None))]
    fn take(&self, py: Python<'_>, timeout_sec: Option<f64>) -> PyResult<Option<Py<PyAny>>> {
        self.inner.take(py, timeout_sec.map(seconds).transpose()?)
    }

    #[getter]
    fn topic_name(&self) -> &str {
        self.inner.topic_name()
    }

    #[getter]
    fn msg_type(&self, py: Python<'_>) -> Py<PyType> {
        self.msg_type.clone_ref(py)
    }

    /// What an executor calls with each message (`None`: use `take()`).
    #[getter]
    fn callback(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.callback.as_ref().map(|c| c.clone_ref(py))
    }

    /// Publishers matched, on this host and over the network.
    fn get_publisher_count(&self) -> usize {
        self.inner.publisher_count()
    }

    /// Messages that came over DDS and that DDS knows this subscription
    /// missed: those of a best-effort topic that found its queue full (what
    /// rclcpp's message-lost event reports). Messages from this host's
    /// shared memory are not counted here: their publishers' sequence
    /// numbers say what was missed.
    #[getter]
    fn network_losses(&self) -> u64 {
        self.inner.network_losses()
    }
}

/// A timeout; a negative one is no wait at all.
fn seconds(s: f64) -> PyResult<StdDuration> {
    if s.is_nan() {
        return Err(PyValueError::new_err("timeout_sec=nan is not a number of seconds"));
    }
    StdDuration::try_from_secs_f64(s.max(0.0))
        .map_err(|_| PyValueError::new_err(format!("timeout_sec={s} is not a number of seconds")))
}

/// Waits until one of `entities` has work, or `timeout_sec` passes (`None`:
/// no limit): a subscription a message, a service server a request, a
/// service client a reply. Returns the indices of the ready ones, `[]` on
/// timeout. The GIL is released while waiting; Ctrl-C raises
/// `KeyboardInterrupt`.
#[pyfunction]
#[pyo3(signature = (entities, timeout_sec=None))]
pub(crate) fn wait(py: Python<'_>, entities: Vec<Bound<'_, PyAny>>, timeout_sec: Option<f64>) -> PyResult<Vec<usize>> {
    let deadline = timeout_sec.map(seconds).transpose()?.map(|t| Instant::now() + t);
    let mut subs: Vec<&dyn AnySubscription> = Vec::new();
    let mut servers: Vec<&dyn crate::services::AnyServer> = Vec::new();
    let mut clients: Vec<&dyn crate::services::AnyClient> = Vec::new();
    // Where each entity went, to give back indices in the caller's order.
    let mut order = Vec::with_capacity(entities.len());
    for e in &entities {
        if let Ok(s) = e.cast::<Subscription>() {
            order.push((0, subs.len()));
            subs.push(&*s.get().inner);
        } else if let Ok(s) = e.cast::<crate::services::Server>() {
            order.push((1, servers.len()));
            servers.push(&*s.get().inner);
        } else if let Ok(c) = e.cast::<crate::services::Client>() {
            order.push((2, clients.len()));
            clients.push(&*c.get().inner);
        } else {
            return Err(PyTypeError::new_err(format!(
                "wait() takes subscriptions, service servers and clients, not {}",
                crate::errors::type_name(e)
            )));
        }
    }
    loop {
        let left = deadline.map_or(SIGNAL_CHECK, |d| d.saturating_duration_since(Instant::now()));
        let outcome = py
            .detach(|| {
                // Added in the order of `order`: subscriptions, servers, clients.
                let mut waitset = WaitSet::new();
                subs.iter().for_each(|s| s.add_to(&mut waitset));
                servers.iter().for_each(|s| s.add_to(&mut waitset));
                clients.iter().for_each(|c| c.add_to(&mut waitset));
                waitset.wait(left.min(SIGNAL_CHECK))
            })
            .map_err(from_wait)?;
        if let WaitOutcome::Ready(ready) = outcome {
            let offset = [0, subs.len(), subs.len() + servers.len()];
            let position = |&(kind, i): &(usize, usize)| offset[kind] + i;
            return Ok((0..order.len()).filter(|&k| ready.contains(&position(&order[k]))).collect());
        }
        py.check_signals()?;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(Vec::new());
        }
    }
}
