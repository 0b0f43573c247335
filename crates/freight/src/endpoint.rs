//! What each endpoint tells its peers, written into its iceoryx2 port name so
//! that discovery needs no daemon and no registry of our own: publishers list
//! the subscribers of the topic's service and read this back.

use freight_msg::BackendSet;

use crate::qos::{Durability, Reliability};

/// How a subscription waits for data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WaitMode {
    /// Sleep in the OS until a publisher wakes it: no CPU while idle.
    #[default]
    Block,
    /// Busy-poll: lowest latency, one core kept busy while waiting.
    Spin,
}

/// A subscription as its publishers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscriberAd {
    /// Process id.
    pub pid: u32,
    /// Reliability.
    pub reliability: Reliability,
    /// Durability.
    pub durability: Durability,
    /// Backends it accepts.
    pub accepts: BackendSet,
    /// How it waits.
    pub wait: WaitMode,
}

const PREFIX: &str = "fs1";

impl SubscriberAd {
    /// The port name (at most 64 bytes).
    pub fn encode(&self) -> String {
        format!(
            "{PREFIX};{};{};{};{:02x};{}",
            self.pid,
            if self.reliability == Reliability::Reliable { 'r' } else { 'b' },
            if self.durability == Durability::TransientLocal { 't' } else { 'v' },
            self.accepts.bits(),
            if self.wait == WaitMode::Block { 'b' } else { 's' },
        )
    }

    /// Parses a port name; `None` for ports that are not freight subscribers.
    pub fn decode(s: &str) -> Option<Self> {
        let mut it = s.split(';');
        if it.next()? != PREFIX {
            return None;
        }
        let pid = it.next()?.parse().ok()?;
        let reliability = match it.next()? {
            "r" => Reliability::Reliable,
            "b" => Reliability::BestEffort,
            _ => return None,
        };
        let durability = match it.next()? {
            "t" => Durability::TransientLocal,
            "v" => Durability::Volatile,
            _ => return None,
        };
        let accepts = BackendSet::from_bits(u8::from_str_radix(it.next()?, 16).ok()?);
        let wait = match it.next()? {
            "b" => WaitMode::Block,
            "s" => WaitMode::Spin,
            _ => return None,
        };
        Some(SubscriberAd { pid, reliability, durability, accepts, wait })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use freight_msg::BackendKind;

    #[test]
    fn ad_round_trips_and_fits_a_port_name() {
        let ad = SubscriberAd {
            pid: u32::MAX,
            reliability: Reliability::BestEffort,
            durability: Durability::TransientLocal,
            accepts: BackendSet::of(&[BackendKind::Shm, BackendKind::FakeDevice]),
            wait: WaitMode::Spin,
        };
        let s = ad.encode();
        assert!(s.len() <= 64, "{s}");
        assert_eq!(SubscriberAd::decode(&s), Some(ad));
        assert_eq!(SubscriberAd::decode("other;1;r;v;01;b"), None);
        assert_eq!(SubscriberAd::decode("fs1;x;r;v;01;b"), None);
    }
}
