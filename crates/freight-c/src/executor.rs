//! `freight_executor`, callback subscriptions and callback services:
//! rclcpp's `SingleThreadedExecutor` shape. A subscription or service made
//! with a callback belongs to its node; an executor that a node was added to
//! runs their callbacks on the thread that spins.

use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use freight::{WaitOutcome, WaitSet};

use crate::error::{destroy, guard, hand_out, handle, Failure, Status};
use crate::node::FreightNode;
use crate::qos::FreightQos;
use crate::subscription::{make_subscription, FreightSample, FreightSubscriptionOptions};
use crate::types::AnySubscription;

/// A callback of a subscription (`freight_sample_callback` in C). It owns
/// `sample` (destroy it when done) and returns whether all went well: false
/// stops the spin, which returns `FREIGHT_ERROR_CALLBACK`.
pub type FreightSampleCallback = unsafe extern "C" fn(sample: *mut FreightSample, user_data: *mut c_void) -> bool;

/// What an executor runs: something to wait for, and the callbacks of
/// what became ready.
pub(crate) trait Dispatch: Send + Sync {
    /// Adds what it waits on to `waitset`.
    fn add_to<'a>(&'a self, waitset: &mut WaitSet<'a>);
    /// Runs the callback of each message or request queued now, until `stop`
    /// is set; returns how many ran.
    fn run(&self, stop: &AtomicBool) -> Result<usize, Failure>;
}

/// A subscription with a callback, as its node and executors see it.
pub(crate) struct CallbackSubscription {
    subscription: Box<dyn AnySubscription>,
    callback: FreightSampleCallback,
    user_data: UserData,
}

/// The user's pointer, handed back to a callback on the spinning thread.
pub(crate) struct UserData(pub(crate) *mut c_void);

// SAFETY: freight never dereferences it; the caller's contract (the
// functions that make callback endpoints) makes it usable from the thread
// that spins.
unsafe impl Send for UserData {}
unsafe impl Sync for UserData {}

/// The callback endpoints of a node: the node holds them weakly, their
/// handles strongly, so destroying a handle ends its callbacks.
pub(crate) type Callbacks = Arc<Mutex<Vec<Weak<dyn Dispatch>>>>;

/// Files `entry` with the node's callback endpoints.
pub(crate) fn register(callbacks: &Callbacks, entry: &Arc<dyn Dispatch>) {
    let mut list = lock(callbacks);
    list.retain(|w| w.strong_count() > 0);
    list.push(Arc::downgrade(entry));
}

impl Dispatch for CallbackSubscription {
    fn add_to<'a>(&'a self, waitset: &mut WaitSet<'a>) {
        self.subscription.add_to(waitset);
    }

    fn run(&self, stop: &AtomicBool) -> Result<usize, Failure> {
        let mut ran = 0;
        while let Some(sample) = self.subscription.try_take()? {
            let sample = Box::into_raw(Box::new(FreightSample(sample)));
            ran += 1;
            // SAFETY: the callback and its data as their subscription's
            // creator promised; the callback owns the sample.
            if !unsafe { (self.callback)(sample, self.user_data.0) } {
                return Err(Failure::new(Status::Callback, "a callback failed"));
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
        }
        Ok(ran)
    }
}

/// A subscription with a callback (`freight_callback_subscription` in C).
pub struct FreightCallbackSubscription {
    // The one strong reference: nodes and executors hold it weakly.
    _entry: Arc<dyn Dispatch>,
}

/// An executor (`freight_executor` in C).
pub struct FreightExecutor {
    nodes: Vec<Callbacks>,
    stop: Arc<AtomicBool>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The lists hold no invariant a panic could break.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Creates a subscription of `type_name` on `topic` whose messages go to
/// `callback(sample, user_data)` when an executor that `node` was added to
/// spins. Destroying the handle ends it.
///
/// # Safety
/// As [`crate::freight_subscription_create`]; `callback` is a valid function
/// and `user_data` stays usable by it, from the spinning thread, until the
/// handle is destroyed.
#[no_mangle]
pub unsafe extern "C" fn freight_node_create_subscription_callback(
    node: *const FreightNode,
    type_name: *const c_char,
    topic: *const c_char,
    qos: *const FreightQos,
    callback: Option<FreightSampleCallback>,
    user_data: *mut c_void,
    out: *mut *mut FreightCallbackSubscription,
) -> Status {
    // SAFETY: as the caller promised; null options are the defaults.
    unsafe {
        freight_node_create_subscription_callback_with_options(
            node,
            type_name,
            topic,
            qos,
            std::ptr::null(),
            callback,
            user_data,
            out,
        )
    }
}

/// As [`freight_node_create_subscription_callback`], for a subscription made
/// with `options` (as [`crate::freight_subscription_create_with_options`]'s).
///
/// # Safety
/// As [`freight_node_create_subscription_callback`]; `options` as
/// [`crate::freight_subscription_create_with_options`]'s.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature: one argument per thing given
pub unsafe extern "C" fn freight_node_create_subscription_callback_with_options(
    node: *const FreightNode,
    type_name: *const c_char,
    topic: *const c_char,
    qos: *const FreightQos,
    options: *const FreightSubscriptionOptions,
    callback: Option<FreightSampleCallback>,
    user_data: *mut c_void,
    out: *mut *mut FreightCallbackSubscription,
) -> Status {
    guard(|| {
        let callback = callback.ok_or_else(|| Failure::new(Status::InvalidArgument, "the callback is null"))?;
        // SAFETY (both): as the caller promised.
        let (node, subscription) = unsafe { make_subscription(node, type_name, topic, qos, options) }?;
        let entry: Arc<dyn Dispatch> =
            Arc::new(CallbackSubscription { subscription, callback, user_data: UserData(user_data) });
        register(node.callbacks(), &entry);
        unsafe { hand_out(out, FreightCallbackSubscription { _entry: entry }) }
    })
}

/// Ends a callback subscription (null is ignored): its callback is not
/// called again once this returns, unless a spin on another thread is
/// running it right now.
///
/// # Safety
/// `subscription` is null or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn freight_callback_subscription_destroy(subscription: *mut FreightCallbackSubscription) {
    // SAFETY: as the caller promised.
    unsafe { destroy(subscription) }
}

/// Creates an executor.
///
/// # Safety
/// `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_executor_create(out: *mut *mut FreightExecutor) -> Status {
    // SAFETY: as the caller promised.
    guard(|| unsafe { hand_out(out, FreightExecutor { nodes: Vec::new(), stop: Arc::new(AtomicBool::new(false)) }) })
}

/// Adds `node`: its callback subscriptions, those made later too, run when
/// the executor spins. The executor does not keep the node alive.
///
/// # Safety
/// `executor` and `node` are null or live; the executor is not spinning.
#[no_mangle]
pub unsafe extern "C" fn freight_executor_add_node(executor: *mut FreightExecutor, node: *const FreightNode) -> Status {
    guard(|| {
        // SAFETY (both): as the caller promised.
        let node = unsafe { handle(node, "the node") }?;
        let executor = unsafe { executor.as_mut() }
            .ok_or_else(|| Failure::new(Status::InvalidArgument, "the executor is a null pointer"))?;
        let callbacks = node.callbacks();
        if !executor.nodes.iter().any(|n| Arc::ptr_eq(n, callbacks)) {
            executor.nodes.push(Arc::clone(callbacks));
        }
        Ok(())
    })
}

impl FreightExecutor {
    /// Waits up to `timeout` for messages, then runs the callback of each
    /// message queued; returns how many ran.
    fn spin_once(&self, timeout: Duration) -> Result<usize, Failure> {
        let entries: Vec<Arc<dyn Dispatch>> =
            self.nodes.iter().flat_map(|n| lock(n).iter().filter_map(Weak::upgrade).collect::<Vec<_>>()).collect();
        let mut waitset = WaitSet::new();
        for e in &entries {
            e.add_to(&mut waitset);
        }
        let ready = match waitset.wait(timeout).map_err(|e| Failure::new(Status::Take, e.to_string()))? {
            WaitOutcome::Ready(ready) => ready,
            WaitOutcome::Timeout => return Ok(0),
        };
        let mut ran = 0;
        for i in ready {
            ran += entries[i].run(&self.stop)?;
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
        }
        Ok(ran)
    }
}

/// Waits up to `timeout_ns` for messages and runs their callbacks;
/// `*ran` (if not null) receives how many ran.
///
/// # Safety
/// `executor` is null or live; `ran` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn freight_executor_spin_once(
    executor: *const FreightExecutor,
    timeout_ns: u64,
    ran: *mut usize,
) -> Status {
    guard(|| {
        // SAFETY (both): as the caller promised.
        let executor = unsafe { handle(executor, "the executor") }?;
        let n = executor.spin_once(Duration::from_nanos(timeout_ns))?;
        if let Some(ran) = unsafe { ran.as_mut() } {
            *ran = n;
        }
        Ok(())
    })
}

/// Runs callbacks until [`freight_executor_stop`] (from a callback or
/// another thread; it returns within 100 ms) or a callback fails.
///
/// # Safety
/// `executor` is null or live.
#[no_mangle]
pub unsafe extern "C" fn freight_executor_spin(executor: *const FreightExecutor) -> Status {
    guard(|| {
        // SAFETY: as the caller promised.
        let executor = unsafe { handle(executor, "the executor") }?;
        executor.stop.store(false, Ordering::Relaxed);
        while !executor.stop.load(Ordering::Relaxed) {
            executor.spin_once(Duration::from_millis(100))?;
        }
        Ok(())
    })
}

/// Makes a running [`freight_executor_spin`] return; safe from any thread.
///
/// # Safety
/// `executor` is null or live.
#[no_mangle]
pub unsafe extern "C" fn freight_executor_stop(executor: *const FreightExecutor) {
    // SAFETY: as the caller promised.
    if let Some(e) = unsafe { executor.as_ref() } {
        e.stop.store(true, Ordering::Relaxed);
    }
}

/// Frees an executor (null is ignored); its nodes and subscriptions stay.
///
/// # Safety
/// `executor` is null or live and not spinning, not used again.
#[no_mangle]
pub unsafe extern "C" fn freight_executor_destroy(executor: *mut FreightExecutor) {
    // SAFETY: as the caller promised.
    unsafe { destroy(executor) }
}
