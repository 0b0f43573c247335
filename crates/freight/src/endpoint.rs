//! What each endpoint tells its peers, written into its iceoryx2 port name so
//! that discovery needs no daemon and no registry of our own: publishers list
//! the subscribers of the topic's service and read this back.

use freight_msg::{BackendKind, BackendSet};

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
const PUBLISHER_PREFIX: &str = "fp1";

/// A publisher as subscribers and tools see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublisherAd {
    /// Process id.
    pub pid: u32,
    /// Reliability.
    pub reliability: Reliability,
    /// Durability.
    pub durability: Durability,
    /// The memory its buffers live in (`shm` for frames, or a device pool).
    pub backend: BackendKind,
}

impl PublisherAd {
    /// The port name (at most 64 bytes).
    pub fn encode(&self) -> String {
        format!(
            "{PUBLISHER_PREFIX};{};{};{};{}",
            self.pid,
            reliability_code(self.reliability),
            durability_code(self.durability),
            self.backend.name()
        )
    }

    /// Parses a port name; `None` for ports that are not freight publishers.
    pub fn decode(s: &str) -> Option<Self> {
        let mut it = s.split(';');
        if it.next()? != PUBLISHER_PREFIX {
            return None;
        }
        Some(PublisherAd {
            pid: it.next()?.parse().ok()?,
            reliability: parse_reliability(it.next()?)?,
            durability: parse_durability(it.next()?)?,
            backend: BackendKind::from_name(it.next()?)?,
        })
    }
}

fn reliability_code(r: Reliability) -> char {
    if r == Reliability::Reliable {
        'r'
    } else {
        'b'
    }
}

fn durability_code(d: Durability) -> char {
    if d == Durability::TransientLocal {
        't'
    } else {
        'v'
    }
}

fn parse_reliability(s: &str) -> Option<Reliability> {
    match s {
        "r" => Some(Reliability::Reliable),
        "b" => Some(Reliability::BestEffort),
        _ => None,
    }
}

fn parse_durability(s: &str) -> Option<Durability> {
    match s {
        "t" => Some(Durability::TransientLocal),
        "v" => Some(Durability::Volatile),
        _ => None,
    }
}

impl SubscriberAd {
    /// The port name (at most 64 bytes).
    pub fn encode(&self) -> String {
        format!(
            "{PREFIX};{};{};{};{:02x};{}",
            self.pid,
            reliability_code(self.reliability),
            durability_code(self.durability),
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
        let reliability = parse_reliability(it.next()?)?;
        let durability = parse_durability(it.next()?)?;
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
        let p = PublisherAd {
            pid: 7,
            reliability: Reliability::Reliable,
            durability: Durability::Volatile,
            backend: BackendKind::FakeDevice,
        };
        assert!(p.encode().len() <= 64);
        assert_eq!(PublisherAd::decode(&p.encode()), Some(p));
        assert_eq!(PublisherAd::decode(&ad.encode()), None);
    }
}
