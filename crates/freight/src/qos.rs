//! Quality of service, as ROS 2 defines it.
//!
//! What each setting does on freight's local plane:
//!
//! * **History** `KeepLast(n)` gives a subscription a queue of `n` messages;
//!   `KeepAll` gives it the largest queue the context allows
//!   ([`Limits::max_depth`](crate::Limits::max_depth)): "all, within resource limits".
//! * **A full queue** never slows a publisher unless both ends asked for it:
//!   only a *reliable keep-all* publisher waits, up to
//!   [`QoS::max_blocking_time`], for room in a *reliable keep-all*
//!   subscription's queue, and then returns
//!   [`PublishError::QueueFull`](crate::PublishError::QueueFull) (the message
//!   still reached every other subscription) — as a DDS writer blocks only on
//!   a keep-all history its reliable readers have not acknowledged. Every
//!   other full queue (keep last, rclpy's and rclcpp's default, or best
//!   effort) misses a message and the publisher goes on, so a slow, stopped
//!   or dead subscriber slows neither it nor the other subscribers: in the
//!   process the queue lets its oldest message go and keeps the newest `n`,
//!   as Fast DDS does; in shared memory it keeps the `n` it has and misses
//!   the new one (iceoryx2 0.10 can push out the oldest only for every
//!   subscriber of a topic at once, which keep-all ones and device holds
//!   rule out).
//! * **Durability** `TransientLocal`: a subscription that joins late receives
//!   the last `depth` messages of each publisher that is still alive; `depth`
//!   may be at most [`Limits::max_history`](crate::Limits::max_history).
//!
//! **Large data over a lossy link** ([`QoS::large_data_lossy`]): on the network plane,
//! freight derives the DDS settings for the stream from its rate, size and link with
//! `freight tune`'s formulas and applies them itself (see [`LargeData`]).

use std::time::Duration;

use freight_dds::EndpointQos;
use freight_tune::{Inputs, Profile, TuneError};

use crate::error::CreateError;
use crate::limits::Limits;

/// Whether delivery is retried when a subscription's queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reliability {
    /// Nothing is lost on the way; with keep-all history on both ends, the
    /// publisher waits (bounded) for room in the subscriber's queue.
    Reliable,
    /// Never wait; a subscriber with a full queue misses the message.
    BestEffort,
}

/// Whether late subscriptions receive earlier messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Durability {
    /// Only messages published after the subscription exists.
    Volatile,
    /// The last `depth` messages are kept for late joiners.
    TransientLocal,
}

/// How many messages are queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum History {
    /// The last `n` messages.
    KeepLast(usize),
    /// As many as the resource limits allow.
    KeepAll,
}

/// A large stream over a lossy, outage-prone link (WiFi): what `freight tune` asks, as a
/// QoS setting. Defaults are the tuner's: MTU 1500, 1 % loss, a 20 s outage to ride
/// through, a 100 ms latency budget, 5 ms round trip, two heartbeats per sample.
///
/// ```
/// use std::time::Duration;
/// use freight::LargeData;
/// let wifi = LargeData { loss: 0.05, outage: Duration::from_secs(5), ..LargeData::new(30.0, 512 << 10, 433e6) };
/// assert_eq!(wifi.mtu, 1500);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LargeData {
    /// Publish rate, Hz.
    pub rate_hz: f64,
    /// Serialized message size, bytes.
    pub payload_bytes: u64,
    /// Rate the link really moves IP packets, bits per second.
    pub link_bps: f64,
    /// The link's MTU, bytes.
    pub mtu: u32,
    /// Expected fraction of packets lost.
    pub loss: f64,
    /// Longest outage to ride through without losing the match.
    pub outage: Duration,
    /// How late a sample may arrive after the link returns.
    pub latency_budget: Duration,
    /// Round trip of the unloaded link.
    pub rtt: Duration,
    /// Heartbeats (repair rounds) per published sample.
    pub heartbeats_per_sample: f64,
}

impl LargeData {
    /// A stream of `payload_bytes` at `rate_hz` over a link of `link_bps`, with the
    /// tuner's defaults for the rest.
    pub fn new(rate_hz: f64, payload_bytes: u64, link_bps: f64) -> Self {
        Self::from_inputs(&Inputs::new(rate_hz, payload_bytes, link_bps))
    }

    fn from_inputs(i: &Inputs) -> Self {
        LargeData {
            rate_hz: i.rate_hz,
            payload_bytes: i.payload_bytes,
            link_bps: i.link_bps,
            mtu: i.mtu,
            loss: i.loss,
            outage: i.outage,
            latency_budget: i.latency_budget,
            rtt: i.rtt,
            heartbeats_per_sample: i.heartbeats_per_sample,
        }
    }

    /// The tuned settings for this stream on `topic`: [`freight_tune::tune`]'s profile.
    // The tuner's error carries every number its message names; it is returned once, at
    // setup, never on a hot path, so its size does not matter.
    #[allow(clippy::result_large_err)]
    pub fn profile(&self, topic: &str) -> Result<Profile, TuneError> {
        freight_tune::tune(&Inputs {
            rate_hz: self.rate_hz,
            payload_bytes: self.payload_bytes,
            link_bps: self.link_bps,
            mtu: self.mtu,
            loss: self.loss,
            outage: self.outage,
            latency_budget: self.latency_budget,
            rtt: self.rtt,
            heartbeats_per_sample: self.heartbeats_per_sample,
            topic: topic.into(),
        })
    }
}

/// A QoS profile.
///
/// ```
/// use freight::{QoS, Reliability};
/// let qos = QoS::sensor_data();
/// assert_eq!(qos.reliability, Reliability::BestEffort);
/// let qos: QoS = 1.into(); // like rclcpp: a depth is a keep-last profile
/// assert_eq!(qos, QoS::keep_last(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QoS {
    /// Reliability.
    pub reliability: Reliability,
    /// Durability.
    pub durability: Durability,
    /// History.
    pub history: History,
    /// How long a reliable keep-all publisher waits for room in a reliable
    /// keep-all subscription's full queue.
    pub max_blocking_time: Duration,
    /// A large stream over a lossy link: the network plane applies the tuned DDS settings
    /// ([`QoS::large_data_lossy`]). `None`: the DDS configuration as given.
    pub large_data: Option<LargeData>,
}

impl QoS {
    /// Reliable, volatile, keep last `depth` (rclcpp's `QoS(depth)`).
    pub const fn keep_last(depth: usize) -> Self {
        QoS {
            reliability: Reliability::Reliable,
            durability: Durability::Volatile,
            history: History::KeepLast(depth),
            max_blocking_time: Duration::from_millis(100),
            large_data: None,
        }
    }

    /// Reliable, volatile, keep last N_HC, for a large stream over a lossy link: the
    /// network plane configures DDS as `freight tune` would for `stream` (one RTPS message
    /// per IP packet, repair at twice the publish rate, a lease and buffers that ride
    /// through the outage), with no configuration file to write. The history depth is the
    /// tuner's N_HC. Errors are the tuner's, naming the field to change.
    ///
    /// Cyclone DDS configures a domain once per process: the first network endpoint joins
    /// it with the settings of every stream known then (this one, and those declared with
    /// [`ContextBuilder::large_data`](crate::ContextBuilder::large_data)); a later stream
    /// that needs stricter settings is refused with
    /// [`CreateError::NetworkTuning`](crate::CreateError::NetworkTuning).
    ///
    /// ```
    /// use freight::{History, LargeData, QoS};
    /// let qos = QoS::large_data_lossy(LargeData::new(30.0, 512 << 10, 433e6))?;
    /// assert_eq!(qos.history, History::KeepLast(4));
    /// # Ok::<_, freight::TuneError>(())
    /// ```
    #[allow(clippy::result_large_err)] // as LargeData::profile: setup only
    pub fn large_data_lossy(stream: LargeData) -> Result<Self, TuneError> {
        let profile = stream.profile("/large_data")?;
        let depth = usize::try_from(profile.history_depth).unwrap_or(usize::MAX);
        Ok(QoS { large_data: Some(stream), ..Self::keep_last(depth) })
    }

    /// Reliable, volatile, keep all.
    pub const fn keep_all() -> Self {
        QoS { history: History::KeepAll, ..Self::keep_last(0) }
    }

    /// ROS 2's default profile: reliable, volatile, keep last 10.
    pub const fn default_profile() -> Self {
        Self::keep_last(10)
    }

    /// ROS 2's services profile (`rmw_qos_profile_services_default`):
    /// reliable, volatile, keep last 10, for a service's requests and replies.
    pub const fn services_default() -> Self {
        Self::keep_last(10)
    }

    /// ROS 2's `SensorDataQoS`: best effort, volatile, keep last 5.
    pub const fn sensor_data() -> Self {
        QoS { reliability: Reliability::BestEffort, ..Self::keep_last(5) }
    }

    /// This profile, reliable.
    pub const fn reliable(self) -> Self {
        QoS { reliability: Reliability::Reliable, ..self }
    }

    /// This profile, best effort.
    pub const fn best_effort(self) -> Self {
        QoS { reliability: Reliability::BestEffort, ..self }
    }

    /// This profile, transient local.
    pub const fn transient_local(self) -> Self {
        QoS { durability: Durability::TransientLocal, ..self }
    }

    /// This profile, volatile.
    pub const fn volatile(self) -> Self {
        QoS { durability: Durability::Volatile, ..self }
    }

    /// This profile with another reliable-publisher wait bound.
    pub const fn with_max_blocking_time(self, t: Duration) -> Self {
        QoS { max_blocking_time: t, ..self }
    }

    /// The queue length this profile asks for, given the context's largest.
    pub fn depth(&self, max_depth: usize) -> usize {
        match self.history {
            History::KeepLast(n) => n,
            History::KeepAll => max_depth,
        }
    }

    /// This profile in DDS terms, as rmw_cyclonedds maps it: what a plain DDS
    /// reader or writer of the same topic (a recorder's raw reader, a
    /// player's writer) is given. A reliable writer blocks at most
    /// `max_blocking_time`; keep-all holds at most `max_depth` samples (the
    /// context's [`Limits::max_depth`](crate::Limits::max_depth), as a local
    /// keep-all queue), where rmw_cyclonedds leaves Cyclone's unbounded
    /// default. No USER_DATA: freight's own endpoints add their tag.
    ///
    /// ```
    /// use freight::QoS;
    /// let dds = QoS::sensor_data().to_dds(16);
    /// assert!(!dds.reliable && !dds.transient_local);
    /// assert_eq!(dds.depth, Some(5));
    /// ```
    pub fn to_dds(&self, max_depth: usize) -> EndpointQos {
        EndpointQos {
            max_samples: Some(u32::try_from(max_depth).unwrap_or(u32::MAX)),
            reliable: self.reliability == Reliability::Reliable,
            max_blocking_time: self.max_blocking_time,
            transient_local: self.durability == Durability::TransientLocal,
            depth: match self.history {
                History::KeepLast(n) => Some(u32::try_from(n).unwrap_or(u32::MAX)),
                History::KeepAll => None,
            },
            user_data: Vec::new(),
        }
    }

    /// Checks the profile against the context's limits; returns its depth.
    pub(crate) fn validate(&self, limits: &Limits) -> Result<usize, CreateError> {
        let mut depth = self.depth(limits.max_depth);
        if self.large_data.is_some() {
            // N_HC sizes the DDS history for repair over a lossy link; shared memory
            // loses nothing, so its queue need not be longer than the context allows.
            depth = depth.min(limits.max_depth);
        }
        if depth == 0 || depth > limits.max_depth {
            return Err(CreateError::OverLimit { what: "history depth (1..)", asked: depth, limit: limits.max_depth });
        }
        if self.durability == Durability::TransientLocal && depth > limits.max_history {
            return Err(CreateError::OverLimit {
                what: "transient-local depth (Limits::max_history)",
                asked: depth,
                limit: limits.max_history,
            });
        }
        Ok(depth)
    }
}

impl Default for QoS {
    fn default() -> Self {
        Self::default_profile()
    }
}

impl From<usize> for QoS {
    fn from(depth: usize) -> Self {
        QoS::keep_last(depth)
    }
}
