//! The interface between the harness and the things it measures.
//!
//! The harness owns the protocol (timestamps, warm-up, acks, stop message, statistics); a
//! transport only moves bytes. That keeps every transport measured in exactly the same way:
//! a transport never reads the clock itself, it calls the closures the harness gives it.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::harness::{RowOutcome, RunPlan};
use super::sys::CpuPlan;
use super::BenchError;

/// Bytes of [`Header`] at the start of every payload; also the minimum wire size.
pub const HEADER_LEN: usize = 16;

/// The header the publisher writes at offset 0 of every payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Sequence number, starting at 0 for the first warm-up message. [`Header::STOP_SEQ`] ends
    /// the row.
    pub seq: u64,
    /// `CLOCK_MONOTONIC` in nanoseconds, read just before the message was sent.
    pub t_send_ns: u64,
}

impl Header {
    /// Sequence number of the message that tells the subscriber to stop and report.
    pub const STOP_SEQ: u64 = u64::MAX;

    /// Encodes the header in native byte order (both sides run on the same machine).
    pub fn to_bytes(self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..8].copy_from_slice(&self.seq.to_ne_bytes());
        out[8..].copy_from_slice(&self.t_send_ns.to_ne_bytes());
        out
    }

    /// Decodes the header from the start of a payload; `None` if the payload is too short.
    pub fn from_payload(payload: &[u8]) -> Option<Self> {
        let seq = u64::from_ne_bytes(payload.get(..8)?.try_into().ok()?);
        let t_send_ns = u64::from_ne_bytes(payload.get(8..HEADER_LEN)?.try_into().ok()?);
        Some(Self { seq, t_send_ns })
    }
}

/// How the waiting side of a transport waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitMode {
    /// Busy-poll: non-blocking receive in a loop with `core::hint::spin_loop()`.
    Spin,
    /// Sleep in the OS until the sender wakes the receiver.
    Block,
}

impl WaitMode {
    /// The name used on the command line, in the table and in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitMode::Spin => "spin",
            WaitMode::Block => "block",
        }
    }
}

/// What both ends of one row agree on. Serialized to JSON to hand it to the peer process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowConfig {
    /// Transport name, e.g. `iceoryx2`.
    pub transport: String,
    /// How the receiving sides wait (for data on the subscriber, for the ack on the publisher).
    pub wait: WaitMode,
    /// Requested payload size in bytes (what the table reports).
    pub size: usize,
    /// A name unique to this row and this bench run; transports derive their service / topic
    /// names from it so that rows and concurrent runs never share state.
    pub channel: String,
    /// Subscriber processes the row runs (fan-out); every message goes to all of them. Each
    /// transport sizes its services for this many readers.
    #[serde(default = "one_subscriber")]
    pub subscribers: usize,
    /// What the row measures, which also decides the delivery semantics the ends use.
    #[serde(default)]
    pub measure: Measure,
}

fn one_subscriber() -> usize {
    1
}

/// What a row measures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Measure {
    /// Ping-pong: one message in flight, acked by every subscriber before the next. The ends
    /// deliver reliably (a lost message would stall the row, which then fails).
    #[default]
    Latency,
    /// The publisher sends in a tight loop and the subscribers take what they can. Nothing
    /// waits for a slow subscriber: each end keeps the newest messages in a full queue and
    /// drops the rest, as a camera stream with `SensorDataQoS` does (see the `throughput`
    /// module).
    Throughput,
}

impl RowConfig {
    /// A single-subscriber latency row, what `freight bench latency` measures by default.
    pub fn latency(transport: &str, wait: WaitMode, size: usize, channel: String) -> Self {
        Self { transport: transport.into(), wait, size, channel, subscribers: 1, measure: Measure::Latency }
    }

    /// Bytes actually sent per message: the requested size, but at least the header.
    pub fn wire_len(&self) -> usize {
        self.size.max(HEADER_LEN)
    }
}

/// Where the two sides of a transport run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Publisher in the bench process, subscriber in a child process.
    Processes,
    /// Publisher and subscriber on two threads of the bench process.
    Threads,
    /// No peer: one thread times a transfer by itself through [`Transport::open_loopback`].
    Inline,
    /// Both sides in another program, which follows the protocol itself and reports the
    /// row's outcome: [`Transport::run_external`] (freight's C++ API).
    External,
}

/// A transport the latency benchmark can measure.
///
/// Implementations must be cheap to construct and stateless between rows: all per-row state
/// lives in the ends they open. Ends are opened on the thread (and, for
/// [`Placement::Processes`], in the process) that uses them, so they need not be `Send`.
///
/// Which methods the harness calls depends on [`Transport::placement`]:
/// * [`Placement::Processes`] / [`Placement::Threads`]: [`Transport::open_publisher`] first,
///   then [`Transport::open_subscriber`] on the other side. The publisher end is opened before
///   the subscriber side even starts, so the publisher side may create what the subscriber
///   opens. The harness does not send anything before `open_subscriber` has returned.
/// * [`Placement::Inline`]: only [`Transport::open_loopback`].
/// * [`Placement::External`]: only [`Transport::run_external`].
pub trait Transport: Send + Sync {
    /// The transport name as used on the command line (`--transports`).
    fn name(&self) -> &'static str;

    /// Where the two sides run.
    fn placement(&self) -> Placement;

    /// Opens the sending side of one row: the data publisher and the ack subscriber.
    fn open_publisher(&self, row: &RowConfig) -> Result<Box<dyn PublisherEnd>, BenchError> {
        Err(unsupported(self.name(), row, "a publisher end"))
    }

    /// Opens the receiving side of one row: the data subscriber and the ack publisher. In the
    /// peer process stdout is the result channel: implementations must not print to stdout.
    fn open_subscriber(&self, row: &RowConfig) -> Result<Box<dyn SubscriberEnd>, BenchError> {
        Err(unsupported(self.name(), row, "a subscriber end"))
    }

    /// Opens a single-threaded loopback for [`Placement::Inline`] transports.
    fn open_loopback(&self, row: &RowConfig) -> Result<Box<dyn Loopback>, BenchError> {
        Err(unsupported(self.name(), row, "a loopback"))
    }

    /// Runs a whole row in another program, for [`Placement::External`] transports: the
    /// program pins its two sides to `cpus` (when given), follows `plan` and gives up after
    /// `plan.row_timeout`.
    fn run_external(&self, row: &RowConfig, plan: &RunPlan, cpus: &CpuPlan) -> Result<RowOutcome, BenchError> {
        let _ = (plan, cpus);
        Err(unsupported(self.name(), row, "a program of its own"))
    }

    /// Called in the bench process after a row with a peer process failed, once the peer is
    /// dead and reaped and the publisher end is dropped, so that the transport can reclaim
    /// resources a killed or crashed peer left behind (e.g. in /dev/shm).
    fn after_peer_failed(&self) {}
}

fn unsupported(name: &str, row: &RowConfig, what: &str) -> BenchError {
    BenchError::new(
        format!("transport `{name}` does not provide {what} (row {} bytes)", row.size),
        "this is a bug in the transport's registration: its placement does not match the methods it implements",
    )
}

/// The publisher side of one row.
pub trait PublisherEnd {
    /// Publishes one message of `row.wire_len()` bytes. Call `stamp` as late as possible
    /// before the message becomes visible to the subscriber and put the 16 bytes it returns at
    /// offset 0 of the payload; the rest of the payload may hold anything.
    fn send(&mut self, stamp: &mut dyn FnMut() -> [u8; HEADER_LEN]) -> Result<(), BenchError>;

    /// Waits for the next ack and returns its sequence number, or `None` if `deadline` passed
    /// first. Waits as the row's [`WaitMode`] says. Returning early with `None` is allowed;
    /// the harness calls again.
    fn wait_ack(&mut self, deadline: Instant) -> Result<Option<u64>, BenchError>;
}

/// The subscriber side of one row.
pub trait SubscriberEnd {
    /// Waits for the next message; when it arrives, calls `on_message` with the payload (at
    /// least 16 bytes, the header first) while the message is still held, and returns `true`.
    /// Returns `false` if `deadline` passed first (returning early is allowed). Waits as the
    /// row's [`WaitMode`] says.
    fn receive(&mut self, deadline: Instant, on_message: &mut dyn FnMut(&[u8])) -> Result<bool, BenchError>;

    /// Sends the ack for `seq` back to the publisher (and wakes it in block mode).
    fn ack(&mut self, seq: u64) -> Result<(), BenchError>;
}

/// A single-threaded transfer, for [`Placement::Inline`] transports.
pub trait Loopback {
    /// Moves one message: calls `stamp` and puts its bytes at the start of the source, moves
    /// the payload to the destination, then calls `on_arrival` with the destination.
    fn transfer(
        &mut self,
        stamp: &mut dyn FnMut() -> [u8; HEADER_LEN],
        on_arrival: &mut dyn FnMut(&[u8]),
    ) -> Result<(), BenchError>;
}
