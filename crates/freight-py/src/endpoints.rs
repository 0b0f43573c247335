//! Context, node, publisher and subscription objects, and the wait an executor
//! sleeps in. The Python package (`freight/__init__.py`) wraps them in rclpy's
//! API; the per-message hot path (`publish`, `loan`, `take`) is called directly.

use std::any::Any;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration as StdDuration, Instant};

use freight::{
    BackendKind, BackendSet, Context as RustContext, CreateError, Durability, LoanError, LoanUninit, Node as RustNode,
    Publisher as RustPublisher, QoS, Reliability, Subscription as RustSubscription, SubscriptionOptions, WaitOutcome,
    WaitSet,
};
use numpy::npyffi::{self, npy_intp};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::arrays::{ascontiguous, contiguous_memory, parse_shape_dtype, view, LoanedBuffer, Memory};
use crate::errors::{error, from_context, from_create, from_loan, from_publish, from_take, from_wait, Kind};
use crate::fields::{Buffers, PyMessage};
use crate::messages;

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

    #[pyo3(signature = (name, namespace=None))]
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

fn endpoints_of(msg_type: &Bound<'_, PyType>) -> PyResult<&'static dyn Endpoints> {
    messages::typed(msg_type).ok_or_else(|| {
        PyTypeError::new_err(format!(
            "{} is not a freight message class; freight's Python messages are {}",
            msg_type.name().map_or_else(|_| "?".into(), |n| n.to_string()),
            messages::NAMES.join(", ")
        ))
    })
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

    fn create_publisher(&self, msg_type: &Bound<'_, PyType>, topic: &str, qos: QosTuple) -> PyResult<Publisher> {
        let inner = endpoints_of(msg_type)?.publisher(&self.inner, topic, qos_from(qos)?).map_err(from_create)?;
        Ok(Publisher { inner, msg_type: msg_type.clone().unbind() })
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

/// Creates the endpoints of one message type.
pub(crate) trait Endpoints: Sync {
    fn publisher(&self, node: &RustNode, topic: &str, qos: QoS) -> Result<Box<dyn AnyPublisher>, CreateError>;
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
    fn publisher(&self, node: &RustNode, topic: &str, qos: QoS) -> Result<Box<dyn AnyPublisher>, CreateError> {
        Ok(Box::new(node.create_publisher::<M>(topic, qos)?))
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

/// A publisher of any message type.
pub(crate) trait AnyPublisher: Send + Sync {
    fn publish(&self, py: Python<'_>, msg: &Bound<'_, PyAny>, me: &Bound<'_, Publisher>) -> PyResult<()>;
    fn loan<'py>(
        &self,
        py: Python<'py>,
        shape: &Bound<'py, PyAny>,
        dtype: &Bound<'py, PyAny>,
        me: &Bound<'py, Publisher>,
    ) -> PyResult<Bound<'py, PyAny>>;
    fn topic_name(&self) -> &str;
    fn subscription_count(&self) -> usize;
}

/// The loan behind `arrays` when they are exactly one whole loan of `me`.
fn adopt_loan<M: PyMessage>(
    py: Python<'_>,
    arrays: &[Bound<'_, PyUntypedArray>],
    me: &Bound<'_, Publisher>,
) -> PyResult<Option<LoanUninit<M>>> {
    let [array] = arrays else { return Ok(None) };
    // SAFETY: a live array; its base is a borrowed reference or null.
    let base = unsafe { (*array.as_array_ptr()).fields.base };
    if base.is_null() {
        return Ok(None);
    }
    // SAFETY: non-null and owned by the array, which outlives this borrow.
    let base = unsafe { Bound::from_borrowed_ptr(py, base) };
    let Ok(lent) = base.cast::<LoanedBuffer>() else { return Ok(None) };
    let lent = lent.get();
    let (addr, nbytes) = contiguous_memory(array);
    // Another publisher's loan, or a part of this one: published by copy.
    // (numpy holds a placeholder address for an empty loan.)
    let same_memory = nbytes == lent.len && (lent.len == 0 || addr == lent.ptr);
    if !lent.publisher.bind(py).is(me) || !array.is_c_contiguous() || !same_memory {
        return Ok(None);
    }
    let taken = lent.loan.lock().map_err(|_| error(Kind::Loan, "a loan's lock was poisoned"))?.take();
    let Some(loan) = taken else {
        return Err(error(Kind::Loan, "this loan was already published; call loan() again for the next message"));
    };
    let loan =
        loan.downcast::<LoanUninit<M>>().map_err(|_| error(Kind::Loan, "the loan is of another message type"))?;
    // The memory now belongs to the subscribers: the array that was published
    // may no longer write to it.
    // SAFETY: clearing WRITEABLE on a live array is what numpy's
    // PyArray_CLEARFLAGS does.
    unsafe { (*array.as_array_ptr()).fields.flags &= !npyffi::NPY_ARRAY_WRITEABLE };
    Ok(Some(*loan))
}

impl<M: PyMessage> AnyPublisher for RustPublisher<M> {
    fn publish(&self, py: Python<'_>, msg: &Bound<'_, PyAny>, me: &Bound<'_, Publisher>) -> PyResult<()> {
        let obj = msg.cast::<M::Class>().map_err(|_| {
            PyTypeError::new_err(format!(
                "this publisher sends {}, not {}",
                M::TYPE_NAME,
                crate::errors::type_name(msg)
            ))
        })?;
        let obj = obj.try_borrow()?;
        let mut arrays = Vec::new();
        M::arrays_of(&obj, py, &mut arrays);
        let loan = match adopt_loan::<M>(py, &arrays, me)? {
            Some(loan) => loan,
            None => {
                let arrays = arrays.iter().map(ascontiguous).collect::<PyResult<Vec<_>>>()?;
                let memory: Vec<(usize, usize)> = arrays.iter().map(contiguous_memory).collect();
                let fill = || -> Result<LoanUninit<M>, LoanError> {
                    let lens: Vec<usize> = memory.iter().map(|m| m.1).collect();
                    let mut loan = self.loan_buffers(&lens)?;
                    for (i, &(addr, len)) in memory.iter().enumerate().filter(|(_, m)| m.1 > 0) {
                        // SAFETY: C-contiguous arrays of `len` bytes, kept alive
                        // by `arrays` until this returns.
                        let src = unsafe { std::slice::from_raw_parts(addr as *const u8, len) };
                        loan.write_buffer_from_host(i, 0, src)?;
                    }
                    Ok(loan)
                };
                let total: usize = memory.iter().map(|m| m.1).sum();
                let loan = if total > COPY_KEEPS_GIL { py.detach(fill) } else { fill() };
                loan.map_err(from_loan)?
            }
        };
        // SAFETY: every buffer byte was written: by the copy above, or by the
        // user into the loaned array, whose contents until then are those of a
        // `numpy.empty` array but never uninitialised memory (shared memory is
        // zeroed when created, heap frames are zero-filled when they grow, and
        // both may hold an earlier message).
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
        let mut elements = Vec::new();
        M::elements(&mut elements);
        let [element] = elements[..] else {
            return Err(PyTypeError::new_err(format!(
                "{} has {} buffer fields; loan() lends memory for a message with one. Publish it with publish(msg)",
                M::TYPE_NAME,
                elements.len()
            )));
        };
        let (dims, descr, len): (Vec<npy_intp>, Bound<'py, PyArrayDescr>, usize) = parse_shape_dtype(py, shape, dtype)?;
        if element.size != 1 && !descr.is_equiv_to(&PyArrayDescr::new(py, element.ros_name)?) {
            return Err(PyTypeError::new_err(format!(
                "{}'s data is {}[]; loan it with dtype numpy.{}, not {}",
                M::TYPE_NAME,
                element.ros_name,
                element.ros_name,
                descr.repr()?
            )));
        }
        let mut loan = self.loan(len).map_err(from_loan)?;
        let ptr = loan
            .buffer_uninit_mut(0)
            .ok_or_else(|| error(Kind::Backend, "this publisher lends device memory, which numpy cannot view"))?
            .as_mut_ptr()
            .cast::<u8>();
        let lent = LoanedBuffer {
            publisher: me.clone().into_any().unbind(),
            loan: Mutex::new(Some(Box::new(loan) as Box<dyn Any + Send>)),
            ptr: ptr as usize,
            len,
            element,
        };
        let holder = Bound::new(py, lent)?;
        view(py, holder.into_any(), Memory { ptr, len, writable: true }, &dims, descr)
    }

    fn topic_name(&self) -> &str {
        RustPublisher::topic_name(self)
    }

    fn subscription_count(&self) -> usize {
        RustPublisher::subscription_count(self) + self.network_subscription_count()
    }
}

/// A publisher (rclpy's `Publisher`).
#[pyclass(frozen, module = "freight", name = "Publisher")]
pub(crate) struct Publisher {
    inner: Box<dyn AnyPublisher>,
    msg_type: Py<PyType>,
}

#[pymethods]
impl Publisher {
    /// Sends `msg` to every subscription of the topic. Its `data` is sent
    /// without a copy when it is an array from this publisher's `loan()`;
    /// any other array-like is copied once, into shared memory.
    fn publish(slf: &Bound<'_, Self>, msg: &Bound<'_, PyAny>) -> PyResult<()> {
        slf.get().inner.publish(slf.py(), msg, slf)
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
}

/// A subscription of any message type.
pub(crate) trait AnySubscription: Send + Sync {
    fn take(&self, py: Python<'_>, timeout: Option<StdDuration>) -> PyResult<Option<Py<PyAny>>>;
    fn add_to<'a>(&'a self, waitset: &mut WaitSet<'a>);
    fn topic_name(&self) -> &str;
    fn publisher_count(&self) -> usize;
}

impl<M: PyMessage> AnySubscription for RustSubscription<M> {
    fn take(&self, py: Python<'_>, timeout: Option<StdDuration>) -> PyResult<Option<Py<PyAny>>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let sample = loop {
            if let Some(s) = self.try_take().map_err(|e| from_take(py, e))? {
                break s;
            }
            let left = deadline.map_or(SIGNAL_CHECK, |d| d.saturating_duration_since(Instant::now()));
            if left.is_zero() {
                return Ok(None);
            }
            let got = py.detach(|| self.take(left.min(SIGNAL_CHECK))).map_err(|e| from_take(py, e))?;
            if let Some(s) = got {
                break s;
            }
            py.check_signals()?;
        };
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
}

/// A timeout; a negative one is no wait at all.
fn seconds(s: f64) -> PyResult<StdDuration> {
    if s.is_nan() {
        return Err(PyValueError::new_err("timeout_sec=nan is not a number of seconds"));
    }
    StdDuration::try_from_secs_f64(s.max(0.0))
        .map_err(|_| PyValueError::new_err(format!("timeout_sec={s} is not a number of seconds")))
}

/// Waits until one of `subscriptions` has a message, or `timeout_sec` passes
/// (`None`: no limit). Returns the indices of the ready ones, `[]` on timeout.
/// The GIL is released while waiting; Ctrl-C raises `KeyboardInterrupt`.
#[pyfunction]
#[pyo3(signature = (subscriptions, timeout_sec=None))]
pub(crate) fn wait(
    py: Python<'_>,
    subscriptions: Vec<Bound<'_, Subscription>>,
    timeout_sec: Option<f64>,
) -> PyResult<Vec<usize>> {
    let deadline = timeout_sec.map(seconds).transpose()?.map(|t| Instant::now() + t);
    let subs: Vec<&dyn AnySubscription> = subscriptions.iter().map(|s| &*s.get().inner).collect();
    loop {
        let left = deadline.map_or(SIGNAL_CHECK, |d| d.saturating_duration_since(Instant::now()));
        let outcome = py
            .detach(|| {
                let mut waitset = WaitSet::new();
                subs.iter().for_each(|s| s.add_to(&mut waitset));
                waitset.wait(left.min(SIGNAL_CHECK))
            })
            .map_err(|e| from_wait(py, e))?;
        if let WaitOutcome::Ready(ready) = outcome {
            return Ok(ready);
        }
        py.check_signals()?;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(Vec::new());
        }
    }
}
