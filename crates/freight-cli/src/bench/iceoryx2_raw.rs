//! The `iceoryx2` baseline: raw iceoryx2, written the way freight uses it.
//!
//! Two rows of it: `iceoryx2` on the single-threaded `ipc::Service`, the baseline, and
//! `iceoryx2-threadsafe` on `ipc_threadsafe::Service`, the service freight's endpoints use
//! (its ports are `Send + Sync` and lock a mutex per call). The difference between the two is
//! what the thread-safe service costs; the rest of freight's distance to the baseline is
//! freight's own.
//!
//! Per row: a `[u8]` publish-subscribe service for the data, a `u64` publish-subscribe service
//! for the acks, and one event service per direction so that `--wait block` can sleep in the
//! OS. The publisher loans an uninitialized slice, writes only the 16-byte header and sends:
//! the cost of a message does not depend on its size, which is the point of zero-copy and
//! what freight's zero-copy paths are compared against.

use std::marker::PhantomData;
use std::time::Instant;

use iceoryx2::port::listener::{Listener, ListenerWaitError};
use iceoryx2::port::notifier::Notifier;
use iceoryx2::port::publisher::Publisher;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::port::ReceiveError;
use iceoryx2::prelude::*;
use iceoryx2::service::port_factory::event::PortFactory as EventFactory;
use iceoryx2::service::port_factory::publish_subscribe::PortFactory as PubSubFactory;
use iceoryx2::service::Service;

use super::transport::{Placement, PublisherEnd, RowConfig, SubscriberEnd, Transport, WaitMode, HEADER_LEN};
use super::BenchError;

/// In spin mode, look at the clock only every this many empty polls: the deadline is a safety
/// net, and a clock read per poll would slow the poll loop down for nothing.
const POLLS_PER_CLOCK_CHECK: u32 = 1024;

/// The raw iceoryx2 transport on the service `S`.
pub struct RawIceoryx2<S> {
    name: &'static str,
    service: PhantomData<fn() -> S>,
}

impl RawIceoryx2<ipc::Service> {
    /// The baseline: the single-threaded service.
    pub fn baseline() -> Self {
        RawIceoryx2 { name: "iceoryx2", service: PhantomData }
    }
}

impl RawIceoryx2<ipc_threadsafe::Service> {
    /// The thread-safe service, which freight's endpoints use.
    pub fn threadsafe() -> Self {
        RawIceoryx2 { name: "iceoryx2-threadsafe", service: PhantomData }
    }
}

impl<S: Service + 'static> Transport for RawIceoryx2<S> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn placement(&self) -> Placement {
        Placement::Processes
    }

    fn open_publisher(&self, row: &RowConfig) -> Result<Box<dyn PublisherEnd>, BenchError> {
        Ok(Box::new(Iox2Publisher::<S>::open(row)?))
    }

    fn open_subscriber(&self, row: &RowConfig) -> Result<Box<dyn SubscriberEnd>, BenchError> {
        Ok(Box::new(Iox2Subscriber::<S>::open(row)?))
    }

    fn after_peer_failed(&self) {
        // A killed subscriber leaves its node and port resources in /dev/shm; iceoryx2 can
        // reclaim them from any live node once the owning process is gone. (Dropping the
        // publisher's node usually does this already; this is the safety net.)
        if let Ok(node) = new_node::<S>() {
            let _ = node.try_cleanup_dead_nodes();
        }
    }
}

fn iox_error(what: String) -> BenchError {
    BenchError::new(
        what,
        "check that /dev/shm is mounted and has free space (df -h /dev/shm); stale files from a \
         killed run can be removed with `iox2 node cleanup` or by deleting /dev/shm/iox2_*",
    )
}

/// iceoryx2's built-in defaults, sized as freight sizes them (`freight::node`): a subscriber
/// keeps 16 slots for publishers that left with samples queued, not 128, which every `receive`
/// walks. The baseline is iceoryx2 configured the way freight configures it.
fn baseline_config() -> Config {
    let mut config = Config::default();
    config.defaults.publish_subscribe.subscriber_expired_connection_buffer = 16;
    config
}

fn new_node<S: Service>() -> Result<Node<S>, BenchError> {
    NodeBuilder::new()
        // iceoryx2's built-in defaults, not a config file it would look up in the working
        // directory or the home directory: the baseline must not change with where the bench
        // is started from (and the lookup warns on every run when no file exists).
        .config(&baseline_config())
        // iceoryx2 would otherwise install SIGINT/SIGTERM handlers and Ctrl+C would no longer
        // stop the benchmark.
        .signal_handling_mode(SignalHandlingMode::Disabled)
        .create::<S>()
        .map_err(|e| iox_error(format!("cannot create an iceoryx2 node: {e}")))
}

fn service_name(row: &RowConfig, suffix: &str) -> Result<ServiceName, BenchError> {
    let name = format!("{}/{suffix}", row.channel);
    ServiceName::new(&name).map_err(|e| {
        BenchError::new(
            format!("`{name}` is not a valid iceoryx2 service name: {e}"),
            "this is a bug in the harness; please report it",
        )
    })
}

/// The services of one row, identical on both sides so that either may create them.
///
/// The configuration is deliberately minimal. Every publisher preallocates
/// `max_subscribers * (buffer + borrowed) + history + loaned` samples of the maximum slice
/// length in /dev/shm (and iceoryx2 zeroes that memory when it creates it), so at 128 MiB
/// each extra slot costs 128 MiB. Ping-pong has one message in flight; one publisher and N
/// subscribers (`row.subscribers`, 1 unless fan-out is measured) give N * (2 + 1) + 0 + 1
/// samples. The data service keeps iceoryx2's default safe overflow: a full queue drops its
/// oldest sample and the publisher never waits, the keep-last semantics the throughput rows
/// document (ping-pong never fills a queue, so latency rows never lose a message).
struct Services<S: Service> {
    data: PubSubFactory<S, [u8], ()>,
    ack: PubSubFactory<S, u64, ()>,
    data_event: EventFactory<S>,
    ack_event: EventFactory<S>,
}

impl<S: Service> Services<S> {
    fn open_or_create(node: &Node<S>, row: &RowConfig) -> Result<Self, BenchError> {
        // One reader per subscriber process on the data, one writer per subscriber on the acks.
        let readers = row.subscribers.max(1);
        let data = node
            .service_builder(&service_name(row, "data")?)
            .publish_subscribe::<[u8]>()
            .max_publishers(1)
            .max_subscribers(readers)
            .subscriber_max_buffer_size(2)
            .subscriber_max_borrowed_samples(1)
            .history_size(0)
            .open_or_create()
            .map_err(|e| iox_error(format!("cannot open the iceoryx2 data service: {e}")))?;
        let ack = node
            .service_builder(&service_name(row, "ack")?)
            .publish_subscribe::<u64>()
            .max_publishers(readers)
            .max_subscribers(1)
            .subscriber_max_buffer_size(2)
            .subscriber_max_borrowed_samples(1)
            .history_size(0)
            .open_or_create()
            .map_err(|e| iox_error(format!("cannot open the iceoryx2 ack service: {e}")))?;
        let event = |suffix: &str, notifiers: usize, listeners: usize| -> Result<EventFactory<S>, BenchError> {
            node.service_builder(&service_name(row, suffix)?)
                .event()
                .max_notifiers(notifiers)
                .max_listeners(listeners)
                .open_or_create()
                .map_err(|e| iox_error(format!("cannot open the iceoryx2 event service {suffix}: {e}")))
        };
        Ok(Self { data, ack, data_event: event("data-event", 1, readers)?, ack_event: event("ack-event", readers, 1)? })
    }
}

/// Calls `try_receive` until it reports a sample, spinning or sleeping on `listener` in
/// between, as `wait` says. Returns `false` if `deadline` passed first.
fn wait_for_sample<S: Service>(
    listener: &Listener<S>,
    wait: WaitMode,
    deadline: Instant,
    mut try_receive: impl FnMut() -> Result<bool, ReceiveError>,
) -> Result<bool, BenchError> {
    let mut polls = 0u32;
    loop {
        // Always try to receive before waiting: a sample may already be there, and an event
        // may have been consumed by an earlier wake-up.
        if try_receive().map_err(|e| iox_error(format!("iceoryx2 receive failed: {e}")))? {
            return Ok(true);
        }
        match wait {
            WaitMode::Spin => {
                core::hint::spin_loop();
                polls += 1;
                if polls.is_multiple_of(POLLS_PER_CLOCK_CHECK) && Instant::now() >= deadline {
                    return Ok(false);
                }
            }
            WaitMode::Block => {
                let remaining = deadline.saturating_duration_since(Instant::now());
                if remaining.is_zero() {
                    return Ok(false);
                }
                match listener.timed_wait(|_| {}, remaining) {
                    // Woken (or timed out): loop and look for the sample.
                    Ok(_) | Err(ListenerWaitError::InterruptSignal) => {}
                    Err(e) => return Err(iox_error(format!("iceoryx2 listener wait failed: {e}"))),
                }
            }
        }
    }
}

/// Publisher side: data publisher + data notifier, ack subscriber + ack listener.
///
/// Field order is drop order: ports before their services, services before the node.
struct Iox2Publisher<S: Service> {
    publisher: Publisher<S, [u8], ()>,
    notifier: Notifier<S>,
    ack_subscriber: Subscriber<S, u64, ()>,
    ack_listener: Listener<S>,
    _services: Services<S>,
    _node: Node<S>,
    wait: WaitMode,
    wire_len: usize,
}

impl<S: Service> Iox2Publisher<S> {
    fn open(row: &RowConfig) -> Result<Self, BenchError> {
        let node = new_node::<S>()?;
        let services = Services::open_or_create(&node, row)?;
        let wire_len = row.wire_len();
        let publisher = services
            .data
            .publisher_builder()
            .initial_max_slice_len(wire_len)
            // freight publishes messages whose size varies; PowerOfTwo lets the segment grow
            // instead of failing a larger loan. With a fixed size per row it never grows here.
            .allocation_strategy(AllocationStrategy::PowerOfTwo)
            .max_loaned_samples(1)
            .create()
            .map_err(|e| iox_error(format!("cannot create the iceoryx2 publisher: {e}")))?;
        let notifier = services
            .data_event
            .notifier_builder()
            .create()
            .map_err(|e| iox_error(format!("cannot create the iceoryx2 notifier: {e}")))?;
        let ack_subscriber = services
            .ack
            .subscriber_builder()
            .create()
            .map_err(|e| iox_error(format!("cannot create the iceoryx2 ack subscriber: {e}")))?;
        let ack_listener = services
            .ack_event
            .listener_builder()
            .create()
            .map_err(|e| iox_error(format!("cannot create the iceoryx2 ack listener: {e}")))?;
        Ok(Self {
            publisher,
            notifier,
            ack_subscriber,
            ack_listener,
            _services: services,
            _node: node,
            wait: row.wait,
            wire_len,
        })
    }
}

impl<S: Service> PublisherEnd for Iox2Publisher<S> {
    fn send(&mut self, stamp: &mut dyn FnMut() -> [u8; HEADER_LEN]) -> Result<(), BenchError> {
        let mut sample = self
            .publisher
            .loan_slice_uninit(self.wire_len)
            .map_err(|e| iox_error(format!("iceoryx2 loan of {} bytes failed: {e}", self.wire_len)))?;
        let header = stamp();
        for (dst, src) in sample.payload_mut()[..HEADER_LEN].iter_mut().zip(header) {
            dst.write(src);
        }
        // SAFETY: only the header written above is ever read, by the subscriber. The remaining
        // bytes are shared memory that has always been initialized at the byte level: the
        // kernel hands out zero-filled pages, iceoryx2 zeroes the data segment when it creates
        // it, and a reused chunk holds an earlier message. Initializing the whole slice would
        // cost a memset of the payload per message, which is exactly what zero-copy avoids.
        let sample = unsafe { sample.assume_init() };
        sample.send().map_err(|e| iox_error(format!("iceoryx2 send failed: {e}")))?;
        if self.wait == WaitMode::Block {
            self.notifier.notify().map_err(|e| iox_error(format!("iceoryx2 notify failed: {e}")))?;
        }
        Ok(())
    }

    fn wait_ack(&mut self, deadline: Instant) -> Result<Option<u64>, BenchError> {
        let mut ack = None;
        let subscriber = &self.ack_subscriber;
        let got = wait_for_sample(&self.ack_listener, self.wait, deadline, || {
            Ok(subscriber.receive()?.map(|sample| ack = Some(*sample.payload())).is_some())
        })?;
        Ok(if got { ack } else { None })
    }
}

/// Subscriber side: data subscriber + data listener, ack publisher + ack notifier.
///
/// Field order is drop order: ports before their services, services before the node.
struct Iox2Subscriber<S: Service> {
    subscriber: Subscriber<S, [u8], ()>,
    listener: Listener<S>,
    ack_publisher: Publisher<S, u64, ()>,
    ack_notifier: Notifier<S>,
    _services: Services<S>,
    _node: Node<S>,
    wait: WaitMode,
}

impl<S: Service> Iox2Subscriber<S> {
    fn open(row: &RowConfig) -> Result<Self, BenchError> {
        let node = new_node::<S>()?;
        let services = Services::open_or_create(&node, row)?;
        let subscriber = services
            .data
            .subscriber_builder()
            .create()
            .map_err(|e| iox_error(format!("cannot create the iceoryx2 subscriber: {e}")))?;
        let listener = services
            .data_event
            .listener_builder()
            .create()
            .map_err(|e| iox_error(format!("cannot create the iceoryx2 listener: {e}")))?;
        let ack_publisher = services
            .ack
            .publisher_builder()
            .max_loaned_samples(1)
            .create()
            .map_err(|e| iox_error(format!("cannot create the iceoryx2 ack publisher: {e}")))?;
        let ack_notifier = services
            .ack_event
            .notifier_builder()
            .create()
            .map_err(|e| iox_error(format!("cannot create the iceoryx2 ack notifier: {e}")))?;
        Ok(Self { subscriber, listener, ack_publisher, ack_notifier, _services: services, _node: node, wait: row.wait })
    }
}

impl<S: Service> SubscriberEnd for Iox2Subscriber<S> {
    fn receive(&mut self, deadline: Instant, on_message: &mut dyn FnMut(&[u8])) -> Result<bool, BenchError> {
        let subscriber = &self.subscriber;
        wait_for_sample(&self.listener, self.wait, deadline, || {
            Ok(match subscriber.receive()? {
                Some(sample) => {
                    on_message(sample.payload());
                    true
                }
                None => false,
            })
        })
    }

    fn ack(&mut self, seq: u64) -> Result<(), BenchError> {
        self.ack_publisher.send_copy(seq).map_err(|e| iox_error(format!("iceoryx2 ack send failed: {e}")))?;
        if self.wait == WaitMode::Block {
            self.ack_notifier.notify().map_err(|e| iox_error(format!("iceoryx2 ack notify failed: {e}")))?;
        }
        Ok(())
    }
}
