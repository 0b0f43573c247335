//! A received message and what is known about how it came.

use std::ops::Deref;

use freight_msg::{BackendKind, Message};

/// How a message reached this subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// By pointer from a publisher in this process.
    Intra,
    /// Through shared memory (iceoryx2).
    Shm,
    /// As CDR over DDS, from another host or a non-freight node.
    Network,
}

/// Facts about a received message (`rmw_message_info_t` in ROS 2 terms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageInfo {
    /// The publisher, unique on this host (for [`Transport::Network`]: the DDS
    /// writer's instance handle, unique in this process).
    pub publisher_id: u64,
    /// The publisher's sequence number of this message (0 for
    /// [`Transport::Network`]: DDS does not report it).
    pub sequence: u64,
    /// When it was published, CLOCK_MONOTONIC nanoseconds (for
    /// [`Transport::Network`]: the writer's source timestamp, CLOCK_REALTIME
    /// nanoseconds, since monotonic clocks of two hosts do not compare).
    pub publish_time_ns: u64,
    /// How it came.
    pub transport: Transport,
    /// The backend that carried its buffers (the first buffer's; `cpu` for a
    /// message without buffers). Each [`Buffer`](freight_msg::Buffer) also
    /// reports its own.
    pub backend: BackendKind,
}

/// A received message. Dereferences to `M`; its buffers view the memory they
/// arrived in (shared memory stays mapped until the sample and every clone of
/// its buffers are dropped).
#[derive(Debug, Clone)]
pub struct Sample<M: Message> {
    pub(crate) msg: M,
    pub(crate) info: MessageInfo,
}

impl<M: Message> Sample<M> {
    /// How the message came.
    pub fn info(&self) -> &MessageInfo {
        &self.info
    }

    /// The backend that carried its buffers.
    pub fn backend(&self) -> BackendKind {
        self.info.backend
    }

    /// The message, taken out of the sample.
    pub fn into_message(self) -> M {
        self.msg
    }
}

impl<M: Message> Deref for Sample<M> {
    type Target = M;
    fn deref(&self) -> &M {
        &self.msg
    }
}
