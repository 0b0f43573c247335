//! What the controller and its workers say to each other.
//!
//! A worker reads commands on stdin, one word a line ([`Command`]), and reports on stdout,
//! one JSON object a line ([`Report`]); its stderr is passed through, prefixed with its
//! name. Lines are written whole (stdout is line-buffered), so a worker killed mid-run
//! leaves no half line. Reports about a single message (an excused sequence number, a wrong
//! byte) go out at once; counters and received runs every [`REPORT_PERIOD`].

use std::time::Duration;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// How often a worker reports its counters, also when nothing happens: a worker that stays
/// silent for longer than [`super::STALL_LIMIT`] while not stopped is stalled.
pub const REPORT_PERIOD: Duration = Duration::from_millis(250);

/// The ROS domain of every worker (the soak runs in network namespaces of its own, where
/// nobody else is).
pub const DOMAIN: u32 = 42;

/// What a worker process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Publishes on `/soak/shm`.
    ShmPub,
    /// Subscribes to `/soak/shm` from another process.
    ShmSub,
    /// A publisher thread and a subscription thread on `/soak/intra`, in one process.
    Intra,
    /// Publishes on `/soak/device` from the fake-device pool.
    DevicePub,
    /// Two subscriptions of `/soak/device`: one that takes fake-device memory, one that
    /// takes host copies.
    DeviceSub,
    /// Publishes on `/soak/dds` (this host).
    DdsPub,
    /// Subscribes to `/soak/dds` from another "host": a private /dev/shm and /tmp/iceoryx2.
    DdsSub,
}

impl Role {
    /// The name on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::ShmPub => "shm-pub",
            Role::ShmSub => "shm-sub",
            Role::Intra => "intra",
            Role::DevicePub => "device-pub",
            Role::DeviceSub => "device-sub",
            Role::DdsPub => "dds-pub",
            Role::DdsSub => "dds-sub",
        }
    }

    /// The topology the role belongs to.
    pub fn topology(self) -> Topology {
        match self {
            Role::ShmPub | Role::ShmSub => Topology::Shm,
            Role::Intra => Topology::Intra,
            Role::DevicePub | Role::DeviceSub => Topology::Device,
            Role::DdsPub | Role::DdsSub => Topology::Dds,
        }
    }

    /// Whether the role publishes (the intra worker also subscribes).
    pub fn publishes(self) -> bool {
        matches!(self, Role::ShmPub | Role::Intra | Role::DevicePub | Role::DdsPub)
    }

    /// The names of the role's subscriptions, as its reports name them.
    pub fn subscriptions(self) -> &'static [&'static str] {
        match self {
            Role::ShmSub => &["shm"],
            Role::Intra => &["intra"],
            Role::DeviceSub => &["device", "device-host"],
            Role::DdsSub => &["dds"],
            Role::ShmPub | Role::DevicePub | Role::DdsPub => &[],
        }
    }

    /// Whether the role runs on the other "host".
    pub fn remote(self) -> bool {
        self == Role::DdsSub
    }
}

/// One of the four ways messages travel in the soak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Topology {
    /// Between two processes over shared memory.
    Shm,
    /// Between two threads of one process.
    Intra,
    /// From a fake-device pool, to a subscription that takes device memory and one that
    /// takes host copies.
    Device,
    /// Over DDS between two "hosts" (network plane).
    Dds,
}

impl Topology {
    /// All of them, in table order.
    pub const ALL: [Topology; 4] = [Topology::Shm, Topology::Intra, Topology::Device, Topology::Dds];

    /// The name in the table and the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Topology::Shm => "shm",
            Topology::Intra => "intra",
            Topology::Device => "device",
            Topology::Dds => "dds",
        }
    }

    /// The topic.
    pub fn topic(self) -> &'static str {
        match self {
            Topology::Shm => "/soak/shm",
            Topology::Intra => "/soak/intra",
            Topology::Device => "/soak/device",
            Topology::Dds => "/soak/dds",
        }
    }

    /// The publisher's id, carried in every message.
    pub fn publisher_id(self) -> u32 {
        match self {
            Topology::Shm => 1,
            Topology::Intra => 2,
            Topology::Device => 3,
            Topology::Dds => 4,
        }
    }

    /// The largest message. Shared memory and threads carry up to 64 MiB. The fake-device
    /// pool holds 256 MiB (`Limits::fake_device_capacity`), which a stopped subscription's
    /// queue of 32 MiB blocks must not exhaust. DDS serializes every message and moves it
    /// over UDP in 64 KB fragments: on a two-core machine a few MiB keep it light.
    pub fn max_size(self) -> usize {
        match self {
            Topology::Shm | Topology::Intra => 64 << 20,
            Topology::Device => 32 << 20,
            Topology::Dds => 2 << 20,
        }
    }
}

/// What publishers send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// A fixed schedule that repeats every second, with the topology's largest message
    /// once in it (warm-up and settle: memory use reaches the same high-water mark in each
    /// period, so growth between two measurements is a leak).
    Steady,
    /// Random sizes and loan/copy choices from the worker's seed.
    Chaos,
}

/// A command on a worker's stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Publish in this mode from now on.
    Mode(Mode),
    /// Publishers: stop publishing and report the last number ([`Report::Stopped`]).
    Stop,
    /// Subscriptions: report what is left, drop what they hold and stop taking; then the
    /// worker says [`Report::Finished`].
    Finish,
    /// Drop every endpoint and exit 0.
    Exit,
}

impl Command {
    /// The line.
    pub fn line(self) -> &'static str {
        match self {
            Command::Mode(Mode::Steady) => "steady",
            Command::Mode(Mode::Chaos) => "chaos",
            Command::Stop => "stop",
            Command::Finish => "finish",
            Command::Exit => "exit",
        }
    }

    /// Parses a line.
    pub fn parse(line: &str) -> Option<Command> {
        match line.trim() {
            "steady" => Some(Command::Mode(Mode::Steady)),
            "chaos" => Some(Command::Mode(Mode::Chaos)),
            "stop" => Some(Command::Stop),
            "finish" => Some(Command::Finish),
            "exit" => Some(Command::Exit),
            _ => None,
        }
    }
}

/// Why a publisher could not deliver a message to every subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Excuse {
    /// `PublishError::QueueFull`: a reliable subscription's queue stayed full past
    /// `max_blocking_time` (a stopped subscriber).
    QueueFull,
    /// The DDS write timed out (`PublishError::Network`, `DDS_RETCODE_TIMEOUT`): a reader
    /// that does not acknowledge (stopped, or dead and not yet expired).
    DdsTimeout,
    /// No DDS reader was matched: the message went nowhere, as freight documents.
    Unmatched,
    /// An unexpected publish error (reported as an error too).
    Failed,
}

/// A publisher's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PubStats {
    /// The last sequence number used.
    pub last_seq: u64,
    /// Messages published without an excuse.
    pub published: u64,
    /// Of all sent, those written into a loan.
    pub loans: u64,
    /// Of all sent, those sent with `publish_copy`.
    pub copies: u64,
    /// Payload bytes sent.
    pub bytes: u64,
    /// The largest payload sent.
    pub max_size: u64,
    /// Excused messages, by reason.
    pub queue_full: u64,
    /// See [`Excuse::DdsTimeout`].
    pub dds_timeout: u64,
    /// See [`Excuse::Unmatched`].
    pub unmatched: u64,
    /// Loans refused because the device pool was exhausted (no number is used).
    pub pool_exhausted: u64,
}

/// A subscription's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubStats {
    /// Messages received and verified.
    pub received: u64,
    /// Payload bytes received.
    pub bytes: u64,
    /// `TakeError::Unusable` or `TakeError::Import` before the first message: the
    /// subscription joined between a device publisher's loan and its publish (at most one).
    pub unusable_at_join: u64,
    /// A device loan taken as the host copy as the subscription's first message, for the
    /// same reason.
    pub host_at_join: u64,
}

/// Received runs of one publisher incarnation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Runs {
    /// The publisher's id.
    pub publisher: u32,
    /// Its incarnation.
    pub incarnation: u32,
    /// New runs of consecutive numbers, in order.
    pub runs: Vec<(u64, u64)>,
}

/// A message that was not what it should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// Its bytes are not the publisher's (payload, header, small fields, checksum).
    WrongBytes,
    /// It was published well before the subscription existed, or its bytes changed while
    /// the subscription held it.
    Stale,
    /// It came again, or after a later one.
    Order,
    /// It came another way than the topology's (transport or memory).
    Path,
}

/// A line of a worker's stdout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "report", rename_all = "kebab-case")]
pub enum Report {
    /// The worker's endpoints exist.
    Ready,
    /// Publishing in `mode` from number `from` on.
    Mode {
        /// The mode.
        mode: Mode,
        /// The first number sent in it.
        from: u64,
    },
    /// Number `seq` was not delivered to every subscription.
    Excused {
        /// The number.
        seq: u64,
        /// Why.
        why: Excuse,
    },
    /// A publisher's counters.
    Published(PubStats),
    /// A subscription's counters and new runs.
    Received {
        /// The subscription's name in its worker (`shm`, `device`, `device-host`, ...).
        sub: String,
        /// Its counters.
        stats: SubStats,
        /// Runs received since the last report.
        streams: Vec<Runs>,
    },
    /// A wrong message.
    Fault {
        /// The subscription.
        sub: String,
        /// What kind of wrong.
        fault: Fault,
        /// The details.
        what: String,
    },
    /// A loan of the device publisher arrived as host bytes at a subscription that takes
    /// device memory: the fallback freight makes when the memory cannot be imported.
    Fallback {
        /// The subscription.
        sub: String,
        /// The publisher's incarnation.
        incarnation: u32,
        /// The message.
        seq: u64,
    },
    /// An error the soak does not expect (the worker carries on where it can).
    Error {
        /// What failed.
        what: String,
    },
    /// After [`Command::Stop`]: the publisher's last number; nothing more is sent.
    Stopped {
        /// The last number used.
        last_seq: u64,
    },
    /// After [`Command::Finish`]: nothing more will be sent or taken.
    Finished,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_and_commands_round_trip() {
        let reports = [
            Report::Ready,
            Report::Mode { mode: Mode::Steady, from: 7 },
            Report::Excused { seq: 9, why: Excuse::QueueFull },
            Report::Published(PubStats { last_seq: 3, ..Default::default() }),
            Report::Received {
                sub: "shm".into(),
                stats: SubStats::default(),
                streams: vec![Runs { publisher: 1, incarnation: 0, runs: vec![(1, 4)] }],
            },
            Report::Fault { sub: "dds".into(), fault: Fault::Path, what: "x".into() },
            Report::Fallback { sub: "device".into(), incarnation: 1, seq: 2 },
            Report::Error { what: "y".into() },
            Report::Stopped { last_seq: 12 },
            Report::Finished,
        ];
        for r in reports {
            let line = serde_json::to_string(&r).unwrap();
            assert!(!line.contains('\n'));
            assert_eq!(serde_json::from_str::<Report>(&line).unwrap(), r);
        }
        for c in
            [Command::Mode(Mode::Steady), Command::Mode(Mode::Chaos), Command::Stop, Command::Finish, Command::Exit]
        {
            assert_eq!(Command::parse(c.line()), Some(c));
        }
        assert_eq!(Command::parse("reboot"), None);
    }
}
