//! Quality of service, as ROS 2 defines it.
//!
//! What each setting does on freight's local plane:
//!
//! * **History** `KeepLast(n)` gives a subscription a queue of `n` messages;
//!   `KeepAll` gives it the largest queue the context allows
//!   ([`Limits::max_depth`](crate::Limits::max_depth)): "all, within resource limits".
//! * **Reliability**: when a subscription's queue is full, a message for a
//!   *best-effort* subscription is not delivered to it (the publisher never
//!   waits for it); for a *reliable* subscription the publisher waits up to
//!   [`QoS::max_blocking_time`] for space and then returns
//!   [`PublishError::QueueFull`](crate::PublishError::QueueFull). The message was
//!   still delivered to every other subscription.
//! * **Durability** `TransientLocal`: a subscription that joins late receives
//!   the last `depth` messages of each publisher that is still alive; `depth`
//!   may be at most [`Limits::max_history`](crate::Limits::max_history).

use std::time::Duration;

use crate::context::Limits;
use crate::error::CreateError;

/// Whether delivery is retried when a subscription's queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reliability {
    /// Wait (bounded) for room in the subscriber's queue.
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

/// A QoS profile.
///
/// ```
/// use freight::{QoS, Reliability};
/// let qos = QoS::sensor_data();
/// assert_eq!(qos.reliability, Reliability::BestEffort);
/// let qos: QoS = 1.into(); // like rclcpp: a depth is a keep-last profile
/// assert_eq!(qos, QoS::keep_last(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QoS {
    /// Reliability.
    pub reliability: Reliability,
    /// Durability.
    pub durability: Durability,
    /// History.
    pub history: History,
    /// How long a reliable publisher waits for room in a full queue.
    pub max_blocking_time: Duration,
}

impl QoS {
    /// Reliable, volatile, keep last `depth` (rclcpp's `QoS(depth)`).
    pub const fn keep_last(depth: usize) -> Self {
        QoS {
            reliability: Reliability::Reliable,
            durability: Durability::Volatile,
            history: History::KeepLast(depth),
            max_blocking_time: Duration::from_millis(100),
        }
    }

    /// Reliable, volatile, keep all.
    pub const fn keep_all() -> Self {
        QoS { history: History::KeepAll, ..Self::keep_last(0) }
    }

    /// ROS 2's default profile: reliable, volatile, keep last 10.
    pub const fn default_profile() -> Self {
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

    /// Checks the profile against the context's limits; returns its depth.
    pub(crate) fn validate(&self, limits: &Limits) -> Result<usize, CreateError> {
        let depth = self.depth(limits.max_depth);
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
