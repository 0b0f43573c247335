//! freight's own transports: `intra`, `shm-loan`, `shm-copy`, written with the
//! public freight API exactly as a user would.
//!
//! Data goes as `std_msgs/UInt8MultiArray` (one buffer field); acks come back
//! as a tiny message of their own. Both directions wait as the row says: in
//! spin mode the subscriptions busy-poll and publishers skip the wake-up, in
//! block mode subscriptions sleep in the OS until a publisher wakes them.

use std::time::{Duration, Instant};

use freight::msgs::std_msgs::UInt8MultiArray;
use freight::{Buffer, Context, Node, Publisher, QoS, Subscription, SubscriptionOptions};

use super::transport::{Measure, Placement, PublisherEnd, RowConfig, SubscriberEnd, Transport, WaitMode, HEADER_LEN};
use super::BenchError;

freight::message! {
    /// The subscriber's answer: the sequence number it received.
    pub struct Ack = "freight_bench/msg/Ack" {
        /// Sequence number of the acknowledged message.
        pub seq: u64,
    }
}

/// Which freight path a transport measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// Threads of one process; loans hand the buffer over by pointer.
    Intra,
    /// Two processes; loans of shared memory, nothing copied.
    ShmLoan,
    /// Two processes; `publish_copy` of a heap buffer, one copy into shared memory.
    ShmCopy,
}

/// One of freight's transports.
pub struct FreightTransport(Path);

/// freight's transports, for [`super::freight_transports`].
pub fn all() -> Vec<Box<dyn Transport>> {
    vec![
        Box::new(FreightTransport(Path::Intra)),
        Box::new(FreightTransport(Path::ShmLoan)),
        Box::new(FreightTransport(Path::ShmCopy)),
    ]
}

impl Transport for FreightTransport {
    fn name(&self) -> &'static str {
        match self.0 {
            Path::Intra => "intra",
            Path::ShmLoan => "shm-loan",
            Path::ShmCopy => "shm-copy",
        }
    }

    fn placement(&self) -> Placement {
        match self.0 {
            Path::Intra => Placement::Threads,
            Path::ShmLoan | Path::ShmCopy => Placement::Processes,
        }
    }

    fn open_publisher(&self, row: &RowConfig) -> Result<Box<dyn PublisherEnd>, BenchError> {
        let node = node("bench_publisher")?;
        let topic = topic_of(row);
        let data = node.create_publisher::<UInt8MultiArray>(&topic, data_qos(row)).map_err(freight_error)?;
        let acks = subscribe::<Ack>(&node, &format!("{topic}_ack"), QoS::keep_last(2), row.wait)?;
        let source = (self.0 == Path::ShmCopy).then(|| {
            // Pre-faulted, as a user's frame buffer would be after its first use.
            let mut data = Buffer::from(vec![0u8; row.wire_len()]);
            data.get_mut().expect("a fresh buffer is ours").fill(1);
            UInt8MultiArray { data, ..Default::default() }
        });
        Ok(Box::new(FreightPublisher { data, acks, source, wire_len: row.wire_len(), _node: node }))
    }

    fn open_subscriber(&self, row: &RowConfig) -> Result<Box<dyn SubscriberEnd>, BenchError> {
        let node = node("bench_subscriber")?;
        let topic = topic_of(row);
        let data = subscribe::<UInt8MultiArray>(&node, &topic, data_qos(row), row.wait)?;
        let acks = node.create_publisher::<Ack>(&format!("{topic}_ack"), QoS::keep_last(2)).map_err(freight_error)?;
        Ok(Box::new(FreightSubscriber { data, acks, _node: node }))
    }
}

fn freight_error(e: impl std::fmt::Display) -> BenchError {
    BenchError::new(format!("freight: {e}"), "check that /dev/shm is writable and has free space (df -h /dev/shm)")
}

fn node(name: &str) -> Result<Node, BenchError> {
    Context::new().and_then(|c| c.create_node(name)).map_err(freight_error)
}

/// The QoS of the data topic. Latency rows are reliable (ping-pong never fills a queue, and a
/// lost message would stall the row); throughput rows are best effort, so that the publisher
/// never waits for a slow subscriber, as iceoryx2's default safe overflow never does either
/// (freight skips a message for a full queue, iceoryx2 drops the queue's oldest).
fn data_qos(row: &RowConfig) -> QoS {
    match row.measure {
        Measure::Latency => QoS::keep_last(2),
        Measure::Throughput => QoS::keep_last(2).best_effort(),
    }
}

fn subscribe<M: freight::Message>(
    node: &Node,
    topic: &str,
    qos: QoS,
    wait: WaitMode,
) -> Result<Subscription<M>, BenchError> {
    let wait = match wait {
        WaitMode::Spin => freight::WaitMode::Spin,
        WaitMode::Block => freight::WaitMode::Block,
    };
    let options = SubscriptionOptions { wait, ..Default::default() };
    node.create_subscription_with_options::<M>(topic, qos, options).map_err(freight_error)
}

/// A ROS topic name from the row's channel (`freight-bench/<run>/<row>`):
/// tokens may not start with a digit nor contain '-'.
pub(super) fn topic_of(row: &RowConfig) -> String {
    let tokens: Vec<String> = row
        .channel
        .split('/')
        .filter(|t| !t.is_empty())
        .map(|t| {
            let t = t.replace(|c: char| !c.is_ascii_alphanumeric(), "_");
            if t.starts_with(|c: char| c.is_ascii_digit()) {
                format!("n{t}")
            } else {
                t
            }
        })
        .collect();
    format!("/{}", tokens.join("/"))
}

struct FreightPublisher {
    data: Publisher<UInt8MultiArray>,
    acks: Subscription<Ack>,
    /// For `shm-copy`: the user's message in ordinary memory.
    source: Option<UInt8MultiArray>,
    wire_len: usize,
    _node: Node,
}

impl PublisherEnd for FreightPublisher {
    fn send(&mut self, stamp: &mut dyn FnMut() -> [u8; HEADER_LEN]) -> Result<(), BenchError> {
        if let Some(msg) = &mut self.source {
            let header = stamp();
            let bytes = msg.data.get_mut().ok_or_else(|| freight_error("the source buffer is shared"))?;
            bytes[..HEADER_LEN].copy_from_slice(&header);
            return self.data.publish_copy(msg).map_err(freight_error);
        }
        let mut loan = self.data.loan(self.wire_len).map_err(freight_error)?;
        let header = stamp();
        let mem = loan.buffer_uninit_mut(0).ok_or_else(|| freight_error("the loan is not host memory"))?;
        for (dst, src) in mem[..HEADER_LEN].iter_mut().zip(header) {
            dst.write(src);
        }
        // SAFETY: only the header written above is read, by the subscriber;
        // the rest is shared or recycled heap memory that holds zeros or an
        // earlier message (see the `iceoryx2` baseline, which does the same).
        let loan = unsafe { loan.assume_init() };
        self.data.publish(loan).map_err(freight_error)
    }

    fn wait_ack(&mut self, deadline: Instant) -> Result<Option<u64>, BenchError> {
        let left = deadline.saturating_duration_since(Instant::now());
        Ok(self.acks.take(left).map_err(freight_error)?.map(|a| a.seq))
    }
}

struct FreightSubscriber {
    data: Subscription<UInt8MultiArray>,
    acks: Publisher<Ack>,
    _node: Node,
}

impl SubscriberEnd for FreightSubscriber {
    fn receive(&mut self, deadline: Instant, on_message: &mut dyn FnMut(&[u8])) -> Result<bool, BenchError> {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_micros(1));
        match self.data.take(left).map_err(freight_error)? {
            Some(sample) => {
                let bytes = sample.data.as_bytes().ok_or_else(|| freight_error("received device memory"))?;
                on_message(bytes);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn ack(&mut self, seq: u64) -> Result<(), BenchError> {
        self.acks.publish_copy(&Ack { seq }).map_err(freight_error)
    }
}
