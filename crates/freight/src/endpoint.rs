//! What each endpoint tells its peers, written into its iceoryx2 port name so
//! that discovery needs no daemon and no registry of our own: publishers list
//! the subscribers of the topic's service and read this back.
//!
//! Port names hold at most 64 bytes:
//!
//! ```text
//! subscription  fs3;<pid, hex>;<r|b><v|t><b|s><a|l><accepted backends, 2 hex>;<pid ns, hex>[;c<cuda device>][;f<fake device>]
//! publisher     fp2;<pid>;<pid ns, hex>;<r|b>;<v|t>;<backend>[;<device>]
//! ```
//!
//! A device is a [`DeviceTag`] (16 hex digits), written for each device-pool
//! backend (`cuda`, `fake-device`) the endpoint offers or accepts: device
//! memory is only exchanged between endpoints on the same device. The longest
//! subscription name (pid 4294967295, both devices) is 59 bytes.

use std::fmt;

use freight_msg::{BackendKind, BackendSet};

use crate::qos::{Durability, History, QoS, Reliability};

/// How a subscription waits for data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WaitMode {
    /// Sleep in the OS until a publisher wakes it: no CPU while idle.
    #[default]
    Block,
    /// Busy-poll: lowest latency, one core kept busy while waiting.
    Spin,
}

/// A short name of a device: the first 8 bytes of its UUID, written as 16
/// lowercase hex digits. Two endpoints exchange memory of a device pool only
/// when their tags for that backend are equal.
///
/// ```
/// use freight::DeviceTag;
/// let uuid = [0x3f, 0x2a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14];
/// let tag = DeviceTag::of_uuid(&uuid);
/// assert_eq!(tag.to_string(), "3f2a010203040506");
/// assert_eq!(DeviceTag::parse("3f2a010203040506"), Some(tag));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceTag(pub [u8; 8]);

impl DeviceTag {
    /// The tag of the device with this UUID.
    pub fn of_uuid(uuid: &[u8; 16]) -> Self {
        let mut t = [0u8; 8];
        t.copy_from_slice(&uuid[..8]);
        DeviceTag(t)
    }

    /// Parses 16 hex digits, as [`DeviceTag`]'s `Display` writes them.
    pub fn parse(hex: &str) -> Option<Self> {
        if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut t = [0u8; 8];
        for (i, b) in t.iter_mut().enumerate() {
            *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(DeviceTag(t))
    }

    /// The first 4 bytes in hex, as `GPU-3f2a0102…`: enough to tell devices
    /// apart on one screen.
    pub fn short(&self) -> String {
        format!("GPU-{:02x}{:02x}{:02x}{:02x}\u{2026}", self.0[0], self.0[1], self.0[2], self.0[3])
    }
}

impl fmt::Display for DeviceTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for DeviceTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceTag({self})")
    }
}

/// The device of each device-pool backend (`cuda`, `fake-device`) an endpoint
/// offers or accepts; `None` for a backend it does not use (or one whose
/// device has no UUID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Devices {
    /// The CUDA device of `cuda` memory.
    pub cuda: Option<DeviceTag>,
    /// The simulated device of `fake-device` memory.
    pub fake_device: Option<DeviceTag>,
}

impl Devices {
    /// The device of `kind`'s memory (`None` for host-memory backends).
    pub fn get(&self, kind: BackendKind) -> Option<DeviceTag> {
        match kind {
            BackendKind::Cuda => self.cuda,
            BackendKind::FakeDevice => self.fake_device,
            _ => None,
        }
    }

    /// These devices with `kind`'s set to `tag` (host-memory backends have none).
    pub fn with(mut self, kind: BackendKind, tag: Option<DeviceTag>) -> Self {
        match kind {
            BackendKind::Cuda => self.cuda = tag,
            BackendKind::FakeDevice => self.fake_device = tag,
            _ => {}
        }
        self
    }

    /// The backends with a device, and their devices.
    pub fn iter(&self) -> impl Iterator<Item = (BackendKind, DeviceTag)> {
        [(BackendKind::Cuda, self.cuda), (BackendKind::FakeDevice, self.fake_device)]
            .into_iter()
            .filter_map(|(k, t)| Some((k, t?)))
    }

    fn encode(&self, out: &mut String) {
        if let Some(t) = self.cuda {
            out.push_str(&format!(";c{t}"));
        }
        if let Some(t) = self.fake_device {
            out.push_str(&format!(";f{t}"));
        }
    }

    /// Reads the optional trailing fields; unknown ones are skipped (a later
    /// version may add some), malformed device fields refuse the name.
    fn decode<'a>(fields: impl Iterator<Item = &'a str>) -> Option<Self> {
        let mut d = Devices::default();
        for f in fields {
            match f.split_at_checked(1) {
                Some(("c", hex)) => d.cuda = Some(DeviceTag::parse(hex)?),
                Some(("f", hex)) => d.fake_device = Some(DeviceTag::parse(hex)?),
                _ => {}
            }
        }
        Some(d)
    }
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
    /// Whether its history is keep-all: only then, when it is reliable, does a
    /// reliable keep-all publisher wait for room in its full queue
    /// ([`SubscriberAd::is_waited_for_by`]); a keep-last queue keeps what it
    /// has and misses what does not fit.
    pub keep_all: bool,
    /// Backends it accepts.
    pub accepts: BackendSet,
    /// How it waits.
    pub wait: WaitMode,
    /// The device of each device-pool backend it accepts.
    pub devices: Devices,
    /// The inode of its process's pid namespace (`None` when unknown, or
    /// advertised by a freight that did not say): `pid` means that process
    /// only in that namespace, so device-pool holds, which are kept per pid,
    /// are given only to subscribers of the publisher's own.
    pub pid_ns: Option<u32>,
}

/// Subscriber port names: `fs3`; `fs2` of freight before the history was
/// advertised and `fs1` before the pid namespace was are read, never written
/// (as keep-last).
const PREFIX: &str = "fs3";
const PREFIX_V2: &str = "fs2";
const PREFIX_V1: &str = "fs1";
const PUBLISHER_PREFIX: &str = "fp2";
const PUBLISHER_PREFIX_V1: &str = "fp1";

/// A publisher as subscribers and tools see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublisherAd {
    /// Process id.
    pub pid: u32,
    /// Reliability.
    pub reliability: Reliability,
    /// Durability.
    pub durability: Durability,
    /// The memory its buffers live in (`shm` for frames, `cuda-host` frames,
    /// or a device pool).
    pub backend: BackendKind,
    /// The device of its pool, for device-pool backends (`cuda`, `fake-device`).
    pub device: Option<DeviceTag>,
    /// Its process's pid namespace (the inode of `/proc/self/ns/pid`), if
    /// known: with the pid, it names the process's mailbox on the host.
    pub pid_ns: Option<u32>,
}

impl PublisherAd {
    /// The port name (at most 64 bytes): `fp2;<pid>;<pid ns in hex>;` then
    /// reliability, durability, backend and the device tag, `;`-separated.
    pub fn encode(&self) -> String {
        let mut s = format!(
            "{PUBLISHER_PREFIX};{};{};{};{};{}",
            self.pid,
            self.pid_ns.map_or_else(String::new, |ns| format!("{ns:x}")),
            reliability_code(self.reliability),
            durability_code(self.durability),
            self.backend.name()
        );
        if let Some(t) = self.device {
            s.push_str(&format!(";{t}"));
        }
        s
    }

    /// Parses a port name (also an earlier freight's, `fp1`, without the
    /// pid namespace); `None` for ports that are not freight publishers.
    pub fn decode(s: &str) -> Option<Self> {
        let mut it = s.split(';');
        let v1 = match it.next()? {
            PUBLISHER_PREFIX => false,
            PUBLISHER_PREFIX_V1 => true,
            _ => return None,
        };
        let pid = it.next()?.parse().ok()?;
        let pid_ns = match v1 {
            true => None,
            false => match it.next()? {
                "" => None,
                hex => Some(u32::from_str_radix(hex, 16).ok()?),
            },
        };
        Some(PublisherAd {
            pid,
            pid_ns,
            reliability: parse_reliability(it.next()?)?,
            durability: parse_durability(it.next()?)?,
            backend: BackendKind::from_name(it.next()?)?,
            device: match it.next() {
                Some(hex) => Some(DeviceTag::parse(hex)?),
                None => None,
            },
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
    /// Whether `publisher` waits (up to its `max_blocking_time`) for room when
    /// this subscription's queue is full: only when both are reliable and keep
    /// all, as a DDS writer blocks only on a keep-all history that reliable
    /// readers have not acknowledged. Otherwise a full queue never slows the
    /// publisher: an in-process one lets its oldest message go, a
    /// shared-memory one misses the new message (docs/architecture.md, "QoS on
    /// the local plane").
    pub fn is_waited_for_by(&self, publisher: &QoS) -> bool {
        publisher.reliability == Reliability::Reliable
            && publisher.history == History::KeepAll
            && self.reliability == Reliability::Reliable
            && self.keep_all
    }

    /// The port name (at most 64 bytes): `fs3;<pid>;<flags>;<pid ns>` and the
    /// device fields, the pid and the namespace in hex, the flags one
    /// character each (reliability, durability, wait, history) and the
    /// accepted backends' bits in two hex digits.
    pub fn encode(&self) -> String {
        let mut s = format!(
            "{PREFIX};{:x};{}{}{}{}{:02x};{}",
            self.pid,
            reliability_code(self.reliability),
            durability_code(self.durability),
            if self.wait == WaitMode::Block { 'b' } else { 's' },
            if self.keep_all { 'a' } else { 'l' },
            self.accepts.bits(),
            self.pid_ns.map_or_else(String::new, |ns| format!("{ns:x}")),
        );
        self.devices.encode(&mut s);
        s
    }

    /// Parses a port name; `None` for ports that are not freight subscribers.
    pub fn decode(s: &str) -> Option<Self> {
        let mut it = s.split(';');
        let with_history = match it.next()? {
            PREFIX => true,
            PREFIX_V2 => false,
            PREFIX_V1 => return Self::decode_v1(it),
            _ => return None,
        };
        let pid = u32::from_str_radix(it.next()?, 16).ok()?;
        let flags = it.next()?;
        let reliability = parse_reliability(flags.get(0..1)?)?;
        let durability = parse_durability(flags.get(1..2)?)?;
        let wait = parse_wait(flags.get(2..3)?)?;
        let (keep_all, bits) = if with_history {
            let keep_all = match flags.get(3..4)? {
                "a" => true,
                "l" => false,
                _ => return None,
            };
            (keep_all, flags.get(4..)?)
        } else {
            (false, flags.get(3..)?)
        };
        let accepts = BackendSet::from_bits(u8::from_str_radix(bits, 16).ok()?);
        let pid_ns = match it.next()? {
            "" => None,
            hex => Some(u32::from_str_radix(hex, 16).ok()?),
        };
        let devices = Devices::decode(it)?;
        Some(SubscriberAd { pid, reliability, durability, keep_all, accepts, wait, devices, pid_ns })
    }

    fn decode_v1<'a>(mut it: impl Iterator<Item = &'a str>) -> Option<Self> {
        let pid = it.next()?.parse().ok()?;
        let reliability = parse_reliability(it.next()?)?;
        let durability = parse_durability(it.next()?)?;
        let accepts = BackendSet::from_bits(u8::from_str_radix(it.next()?, 16).ok()?);
        let wait = parse_wait(it.next()?)?;
        let devices = Devices::decode(it)?;
        Some(SubscriberAd { pid, reliability, durability, keep_all: false, accepts, wait, devices, pid_ns: None })
    }
}

fn parse_wait(s: &str) -> Option<WaitMode> {
    match s {
        "b" => Some(WaitMode::Block),
        "s" => Some(WaitMode::Spin),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAG: DeviceTag = DeviceTag([0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88]);

    #[test]
    fn ad_round_trips_and_fits_a_port_name() {
        let ad = SubscriberAd {
            pid: u32::MAX,
            reliability: Reliability::BestEffort,
            durability: Durability::TransientLocal,
            keep_all: false,
            accepts: BackendSet::of(&[BackendKind::Shm, BackendKind::FakeDevice]),
            wait: WaitMode::Spin,
            devices: Devices::default(),
            pid_ns: Some(4026531836),
        };
        let s = ad.encode();
        assert_eq!(s, "fs3;ffffffff;btsl07;effffffc");
        assert_eq!(SubscriberAd::decode(&s), Some(ad));
        let unknown_ns = SubscriberAd { pid_ns: None, ..ad };
        assert_eq!(SubscriberAd::decode(&unknown_ns.encode()), Some(unknown_ns));
        assert_eq!(SubscriberAd::decode("other;1;r;v;01;b"), None);
        assert_eq!(SubscriberAd::decode("fs1;x;r;v;01;b"), None);
        let all = SubscriberAd { keep_all: true, ..ad };
        assert_eq!(SubscriberAd::decode(&all.encode()), Some(all));
        // fs2, before the history was advertised: keep-last.
        assert_eq!(SubscriberAd::decode("fs2;ffffffff;bts07;effffffc"), Some(ad));
        for bad in [
            "fs2;1;rv",
            "fs2;1;rvb01",
            "fs2;1;xvb01;",
            "fs2;1;rvb01;zz",
            "fs2;z;rvb01;",
            "fs2;1;rvbé1;",
            "fs3;1;rvb01;",
            "fs3;1;rvbx01;",
        ] {
            assert_eq!(SubscriberAd::decode(bad), None, "{bad}");
        }
        let p = PublisherAd {
            pid: 7,
            reliability: Reliability::Reliable,
            durability: Durability::Volatile,
            backend: BackendKind::FakeDevice,
            device: None,
            pid_ns: None,
        };
        assert!(p.encode().len() <= 64);
        assert_eq!(PublisherAd::decode(&p.encode()), Some(p));
        assert_eq!(PublisherAd::decode("fp1;7;r;v;fake-device"), Some(p), "an earlier freight's publisher");
        assert_eq!(PublisherAd::decode(&ad.encode()), None);
    }

    #[test]
    fn only_a_reliable_keep_all_publisher_waits_and_only_for_a_reliable_keep_all_subscription() {
        let sub = |reliability, keep_all| SubscriberAd {
            pid: 1,
            reliability,
            durability: Durability::Volatile,
            keep_all,
            accepts: BackendSet::of(&[BackendKind::Shm]),
            wait: WaitMode::Block,
            devices: Devices::default(),
            pid_ns: None,
        };
        let all = QoS::keep_all();
        assert!(sub(Reliability::Reliable, true).is_waited_for_by(&all));
        assert!(!sub(Reliability::Reliable, false).is_waited_for_by(&all), "a keep-last queue never waits");
        assert!(!sub(Reliability::BestEffort, true).is_waited_for_by(&all));
        assert!(!sub(Reliability::Reliable, true).is_waited_for_by(&all.best_effort()));
        assert!(!sub(Reliability::Reliable, true).is_waited_for_by(&QoS::default_profile()), "rclpy's default");
    }

    #[test]
    fn ads_with_device_tags_round_trip_within_64_bytes() {
        let every = BackendSet::of(&BackendKind::ALL);
        let devices = Devices { cuda: Some(TAG), fake_device: Some(DeviceTag([0; 8])) };
        let ad = SubscriberAd {
            pid: u32::MAX,
            reliability: Reliability::Reliable,
            durability: Durability::TransientLocal,
            keep_all: true,
            accepts: every,
            wait: WaitMode::Block,
            devices,
            pid_ns: Some(u32::MAX),
        };
        let s = ad.encode();
        assert_eq!(s, "fs3;ffffffff;rtba1f;ffffffff;cffeeddccbbaa9988;f0000000000000000");
        assert!(s.len() <= 64, "{} bytes: {s}", s.len());
        assert_eq!(SubscriberAd::decode(&s), Some(ad));
        for one in [Devices { fake_device: None, ..devices }, Devices { cuda: None, ..devices }] {
            let a = SubscriberAd { devices: one, ..ad };
            assert_eq!(SubscriberAd::decode(&a.encode()), Some(a));
        }
        // Names of the earlier formats (fs1, without device fields) still
        // read, with no pid namespace; unknown fields are skipped, malformed
        // device fields refuse the name.
        let old = SubscriberAd::decode("fs1;12;r;v;05;b").unwrap();
        assert_eq!((old.pid, old.devices, old.pid_ns), (12, Devices::default(), None));
        assert_eq!(
            SubscriberAd::decode("fs1;12;r;v;05;b;f0000000000000000").unwrap().devices.fake_device,
            Some(DeviceTag([0; 8]))
        );
        assert_eq!(
            SubscriberAd::decode("fs1;12;r;v;05;b;x1;fffeeddccbbaa9988").unwrap().devices.fake_device,
            Some(TAG)
        );
        assert_eq!(SubscriberAd::decode("fs1;12;r;v;05;b;fzz"), None);
        assert_eq!(SubscriberAd::decode("fs1;12;r;v;05;b;c0123"), None);

        for backend in BackendKind::ALL {
            let p = PublisherAd {
                pid: u32::MAX,
                reliability: Reliability::BestEffort,
                durability: Durability::TransientLocal,
                backend,
                device: Some(TAG),
                pid_ns: Some(u32::MAX),
            };
            let s = p.encode();
            assert!(s.len() <= 64, "{} bytes: {s}", s.len());
            assert_eq!(PublisherAd::decode(&s), Some(p));
        }
        assert_eq!(PublisherAd::decode("fp1;1;r;v;cuda;nothex"), None);
    }

    #[test]
    fn device_tags_are_the_uuid_prefix_in_hex() {
        let mut uuid = [0u8; 16];
        uuid[..8].copy_from_slice(&TAG.0);
        uuid[8] = 1;
        assert_eq!(DeviceTag::of_uuid(&uuid), TAG);
        assert_eq!(TAG.to_string(), "ffeeddccbbaa9988");
        assert_eq!(TAG.short(), "GPU-ffeeddcc\u{2026}");
        assert_eq!(DeviceTag::parse("FFEEDDCCBBAA9988"), Some(TAG));
        for bad in ["", "ffeeddccbbaa998", "ffeeddccbbaa99880", "ffeeddccbbaa99+8", "ffeeddccbbaa99é"] {
            assert_eq!(DeviceTag::parse(bad), None, "{bad:?}");
        }
        let d = Devices::default().with(BackendKind::Cuda, Some(TAG)).with(BackendKind::Shm, Some(TAG));
        assert_eq!((d.get(BackendKind::Cuda), d.get(BackendKind::FakeDevice)), (Some(TAG), None));
        assert_eq!(d.iter().collect::<Vec<_>>(), vec![(BackendKind::Cuda, TAG)]);
    }
}
