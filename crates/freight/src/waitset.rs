//! Waiting on several subscriptions (and services' requests, clients'
//! replies) at once.

use std::time::Duration;

use freight_msg::{Message, ServiceType};

use crate::delivery::Receiver;
use crate::endpoint::WaitMode;
use crate::error::WaitError;
use crate::generic::{GenericClient, GenericServiceServer, GenericSubscription};
use crate::service::{Client, ServiceServer};
use crate::subscription::Subscription;

/// What a wait ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitOutcome {
    /// These entries (indices from [`WaitSet::add`]) have messages.
    Ready(Vec<usize>),
    /// Nothing came before the timeout.
    Timeout,
}

/// Waits until any of several subscriptions has a message.
///
/// ```no_run
/// use std::time::Duration;
/// use freight::{Context, WaitSet, WaitOutcome};
/// use freight::msgs::sensor_msgs::{Image, PointCloud2};
/// let node = Context::new()?.create_node("fusion")?;
/// let images = node.create_subscription::<Image>("image", 5)?;
/// let clouds = node.create_subscription::<PointCloud2>("points", 5)?;
/// let mut ws = WaitSet::new();
/// let (i, c) = (ws.add(&images), ws.add(&clouds));
/// if let WaitOutcome::Ready(ready) = ws.wait(Duration::from_millis(100))? {
///     if ready.contains(&i) { let _ = images.try_take()?; }
///     if ready.contains(&c) { let _ = clouds.try_take()?; }
/// }
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
#[derive(Default)]
pub struct WaitSet<'a> {
    subs: Vec<&'a Receiver>,
}

impl<'a> WaitSet<'a> {
    /// An empty wait-set.
    pub fn new() -> Self {
        WaitSet { subs: Vec::new() }
    }

    /// Adds a subscription; returns its index in [`WaitOutcome::Ready`].
    pub fn add<M: Message>(&mut self, sub: &'a Subscription<M>) -> usize {
        self.subs.push(&sub.inner);
        self.subs.len() - 1
    }

    /// Adds a generic subscription; returns its index in
    /// [`WaitOutcome::Ready`] (ready: a message to take).
    pub fn add_generic(&mut self, sub: &'a GenericSubscription) -> usize {
        self.subs.push(&sub.inner);
        self.subs.len() - 1
    }

    /// Adds a service's requests; returns its index in [`WaitOutcome::Ready`]
    /// (ready: a request to take). A [`Service`](crate::Service) is added
    /// through its server: `ws.add_service(&service)`.
    pub fn add_service<S: ServiceType>(&mut self, server: &'a ServiceServer<S>) -> usize {
        self.subs.push(&server.requests.inner);
        self.subs.len() - 1
    }

    /// Adds a client's replies; returns its index in [`WaitOutcome::Ready`]
    /// (ready: a reply came, for one of its pending calls or another client's).
    pub fn add_client<S: ServiceType>(&mut self, client: &'a Client<S>) -> usize {
        self.subs.push(client.replies_receiver());
        self.subs.len() - 1
    }

    /// Adds a generic service's requests (see [`add_service`](Self::add_service)).
    pub fn add_generic_service(&mut self, server: &'a GenericServiceServer) -> usize {
        self.subs.push(&server.requests.inner);
        self.subs.len() - 1
    }

    /// Adds a generic client's replies (see [`add_client`](Self::add_client)).
    pub fn add_generic_client(&mut self, client: &'a GenericClient) -> usize {
        self.subs.push(client.replies_receiver());
        self.subs.len() - 1
    }

    /// Waits up to `timeout` for a message on any entry.
    pub fn wait(&self, timeout: Duration) -> Result<WaitOutcome, WaitError> {
        wait_any(&self.subs, timeout)
    }
}

fn ready(subs: &[&Receiver]) -> Vec<usize> {
    subs.iter().enumerate().filter(|(_, s)| s.has_data()).map(|(i, _)| i).collect()
}

/// The wait shared by [`WaitSet`] and the executor. Busy-polls when any entry
/// spins, else sleeps until the process's bell rings for one of them
/// (`delivery/bell.rs`).
pub(crate) fn wait_any(subs: &[&Receiver], timeout: Duration) -> Result<WaitOutcome, WaitError> {
    let now = ready(subs);
    if !now.is_empty() {
        return Ok(WaitOutcome::Ready(now));
    }
    let Some(first) = subs.first() else {
        std::thread::sleep(timeout);
        return Ok(WaitOutcome::Timeout);
    };
    if subs.iter().any(|s| s.wait_mode() == WaitMode::Spin) {
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            let r = ready(subs);
            if !r.is_empty() {
                return Ok(WaitOutcome::Ready(r));
            }
            std::hint::spin_loop();
        }
        return Ok(WaitOutcome::Timeout);
    }
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Ok(WaitOutcome::Timeout);
        }
        let sleep = subs.iter().fold(left, |t, s| s.longest_sleep(t));
        // Every receiver of the process has the same bell. Another thread
        // may take what came before this one looks: then it waits on.
        if first.bell.wait(sleep, || subs.iter().any(|s| s.has_data()))? {
            let r = ready(subs);
            if !r.is_empty() {
                return Ok(WaitOutcome::Ready(r));
            }
        }
    }
}
