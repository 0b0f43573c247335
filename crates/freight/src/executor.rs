//! Callbacks run by an executor, as rclcpp's `SingleThreadedExecutor`:
//! subscriptions' and services'.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use freight_msg::{Message, ServiceType};

use crate::delivery::Receiver;
use crate::error::{ServeError, TakeError, WaitError};
use crate::sample::Sample;
use crate::service::Service;
use crate::subscription::Subscription;
use crate::waitset::{wait_any, WaitOutcome};

trait Entry: Send {
    fn inner(&self) -> &Receiver;
    /// Runs the callback on every queued message; returns how many.
    fn dispatch(&mut self) -> Result<usize, TakeError>;
}

struct CallbackEntry<M: Message, F> {
    sub: Subscription<M>,
    callback: F,
}

impl<M: Message, F: FnMut(Sample<M>) + Send> Entry for CallbackEntry<M, F> {
    fn inner(&self) -> &Receiver {
        &self.sub.inner
    }

    fn dispatch(&mut self) -> Result<usize, TakeError> {
        let mut n = 0;
        while let Some(s) = self.sub.try_take()? {
            (self.callback)(s);
            n += 1;
        }
        Ok(n)
    }
}

impl<S: ServiceType> Entry for Service<S> {
    fn inner(&self) -> &Receiver {
        &self.requests.inner
    }

    fn dispatch(&mut self) -> Result<usize, TakeError> {
        match self.try_serve() {
            Ok(n) => Ok(n),
            Err(ServeError::Request(e)) => Err(e),
            // As rclcpp does when a response cannot be sent: say so and go on;
            // the client's call times out.
            Err(e @ ServeError::Reply(_)) => {
                eprintln!("freight: service {}: {e}", self.service_name());
                Ok(1)
            }
        }
    }
}

/// Stops a spinning executor from another thread.
#[derive(Debug, Clone)]
pub struct StopHandle(Arc<AtomicBool>);

impl StopHandle {
    /// Makes `spin` return after the callbacks in progress (within 100 ms
    /// when it is waiting). Only an atomic store: a signal handler may call
    /// it, which is how Ctrl-C ends a spin where the application handles
    /// SIGINT — a signal alone never does.
    pub fn stop(&self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Runs subscription and service callbacks on the thread that spins it.
///
/// ```no_run
/// use std::time::Duration;
/// use freight::{Context, Executor};
/// use freight::msgs::sensor_msgs::Image;
/// let node = Context::new()?.create_node("viewer")?;
/// let mut exec = Executor::new();
/// exec.add_subscription(node.create_subscription::<Image>("image", 5)?, |img| {
///     println!("frame {} via {}", img.info().sequence, img.backend());
/// });
/// exec.spin()?; // until a StopHandle stops it
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
pub struct Executor {
    entries: Vec<Box<dyn Entry>>,
    stop: Arc<AtomicBool>,
    /// Errors from a callback's take are reported here and do not stop the executor.
    on_error: Box<dyn FnMut(&TakeError) + Send>,
}

impl Default for Executor {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Executor({} subscriptions and services)", self.entries.len())
    }
}

impl Executor {
    /// An executor with no subscriptions; take errors are logged to stderr.
    pub fn new() -> Self {
        Executor {
            entries: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            on_error: Box::new(|e| eprintln!("freight: {e}")),
        }
    }

    /// Replaces what happens with a message that could not be taken (malformed,
    /// wrong type): by default it is logged to stderr and skipped.
    pub fn on_take_error(&mut self, f: impl FnMut(&TakeError) + Send + 'static) {
        self.on_error = Box::new(f);
    }

    /// Runs `callback` for each message of `sub`.
    pub fn add_subscription<M: Message>(
        &mut self,
        sub: Subscription<M>,
        callback: impl FnMut(Sample<M>) + Send + 'static,
    ) {
        self.entries.push(Box::new(CallbackEntry { sub, callback }));
    }

    /// Answers the requests of `service` with its callback.
    pub fn add_service<S: ServiceType>(&mut self, service: Service<S>) {
        self.entries.push(Box::new(service));
    }

    /// A handle that stops [`spin`](Self::spin) from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle(self.stop.clone())
    }

    /// Waits up to `timeout` for messages and runs their callbacks. Returns how
    /// many callbacks ran (0 on timeout).
    pub fn spin_once(&mut self, timeout: Duration) -> Result<usize, WaitError> {
        let outcome = {
            let inners: Vec<&Receiver> = self.entries.iter().map(|e| e.inner()).collect();
            wait_any(&inners, timeout)?
        };
        match outcome {
            WaitOutcome::Ready(ready) => {
                let mut ran = 0;
                for i in ready {
                    match self.entries[i].dispatch() {
                        Ok(n) => ran += n,
                        Err(e) => (self.on_error)(&e),
                    }
                }
                Ok(ran)
            }
            WaitOutcome::Timeout => Ok(0),
        }
    }

    /// Runs callbacks until [`StopHandle::stop`]. Signals do not end it: a
    /// process stopped and continued (Ctrl-Z and `fg`, a debugger, a frozen
    /// container) goes on spinning. freight installs no signal handlers, so
    /// by default Ctrl-C ends the process as usual; an application that
    /// handles SIGINT calls [`StopHandle::stop`] from its handler.
    /// A stop requested before `spin` starts makes it return at once; the
    /// request is consumed, so the executor can spin again afterwards.
    pub fn spin(&mut self) -> Result<(), WaitError> {
        let result = loop {
            if self.stop.load(Ordering::Acquire) {
                break Ok(());
            }
            if let Err(e) = self.spin_once(Duration::from_millis(100)) {
                break Err(e);
            }
        };
        self.stop.store(false, Ordering::Release);
        result
    }
}
