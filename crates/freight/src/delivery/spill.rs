//! Spilling: the frames `/dev/shm` has no room for go over DDS instead.
//!
//! A container's `/dev/shm` is 64 MB unless told otherwise; a few 4K frames
//! that subscribers hold, or that queue for a slow one, fill it. Stock ROS 2
//! goes on over UDP then. A freight publisher with the network plane does the
//! same: a loan that finds no room in shared memory (`reserve.rs`) lends a
//! heap frame instead ([`super::Route::Spill`]), and publishing sends the
//! message as CDR through a second DDS writer of the publisher, its *spill
//! writer*. That writer says `spill=1` in its USER_DATA
//! ([`PeerTag`](crate::network::PeerTag)), so this host's freight readers
//! take its samples where they drop the main writer's (the local plane
//! brought those). It reaches the readers on other hosts and stock ROS 2
//! nodes too, so the main writer leaves spilled messages out: none arrives
//! twice. Once shared memory has room again, loans are shared memory again.
//!
//! What it costs: a spilled message is serialized once and copied by DDS
//! to each subscriber, and messages that took different paths can arrive out
//! of order. Subscriptions in a local-only context have no DDS reader and
//! miss spilled messages. Device-memory publishers (`cuda`, `cuda-host`,
//! `fake-device`) do not spill: their loans are refused with
//! [`LoanError::SharedMemoryFull`](crate::LoanError::SharedMemoryFull) as
//! every loan is without a network plane.
//!
//! The spill writer is made when the publisher first foresees that its QoS
//! asks more than `/dev/shm` holds (`Sender::foresee`), so discovery has
//! matched it before the first frame spills; the first spill to a new set
//! of subscriptions still waits, up to [`MATCH_WAIT`], for the writer to
//! match them all. That is the writer's side of the match: a reader learns
//! of the writer when its process handles the writer's discovery message,
//! and a volatile DDS reader never gets what was written before. So the
//! first spill from a writer younger than [`READER_GRACE`] waits until it is
//! that old, and a subscriber whose process was stopped when the writer was
//! made misses what spills until it has run.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::ways_out::write_cdr;
use super::Sender;
use crate::error::{LoanError, PublishError};
use crate::network::{NetworkWriter, PeerTag};

/// How long a spill waits for the spill writer to match the subscriptions
/// it is for, once per new count of them.
const MATCH_WAIT: Duration = Duration::from_secs(2);

/// How old the spill writer is before its first write: time for this host's
/// readers to handle its discovery message (a millisecond or so on a running
/// host).
const READER_GRACE: Duration = Duration::from_millis(100);

/// A publisher's spill writer and what it did.
#[derive(Default)]
pub(super) struct Spill {
    /// Made on first need, and when; `None` when it could not be (said on stderr).
    writer: OnceLock<Option<(NetworkWriter, Instant)>>,
    /// The subscriptions last waited for to match.
    waited_for: AtomicUsize,
    /// Messages spilled.
    spilled: AtomicU64,
    /// Whether the first spill was said on stderr.
    said: AtomicBool,
}

impl Sender {
    /// Whether this publisher sends what shared memory has no room for over
    /// DDS: it has a network plane, and its buffers are host memory.
    pub(crate) fn can_spill(&self) -> bool {
        self.network.is_some() && self.pool.is_none() && self.in_frame.is_none()
    }

    /// Messages this publisher spilled over DDS so far.
    pub(crate) fn spilled(&self) -> u64 {
        self.spill.spilled.load(Ordering::Relaxed)
    }

    /// The spill writer, made on the first call; `None` when this publisher
    /// cannot spill or the writer could not be made.
    pub(super) fn spill_writer(&self) -> Option<&(NetworkWriter, Instant)> {
        if !self.can_spill() {
            return None;
        }
        let made = self.spill.writer.get_or_init(|| {
            let ctx = &self.node.inner.ctx.inner;
            let made = ctx.participant_for(&self.topic, &self.qos).map_err(|e| e.to_string()).and_then(|p| {
                let participant = p.ok_or("the context is local only")?;
                let tag = PeerTag { spill: true, ..PeerTag::of_this_process(&self.node, Some(self.backend), None) };
                NetworkWriter::new(&participant, &self.node, &self.topic, &self.dds_type, &self.qos, &tag)
                    .map(|w| (w, Instant::now()))
                    .map_err(|e| e.to_string())
            });
            made.map_err(|e| eprintln!("freight: the publisher of {}: cannot make its spill writer: {e}", self.topic))
                .ok()
        });
        made.as_ref()
    }

    /// Sends a message shared memory had no room for, as CDR, through the
    /// spill writer, to every subscription.
    pub(crate) fn spill(&self, cdr: Vec<u8>) -> Result<(), PublishError> {
        let Some((writer, made)) = self.spill_writer() else {
            // Loans spill only once the writer exists; should it not, the
            // message is refused as a loan without room is.
            let needed = cdr.len() as u64;
            return Err(LoanError::SharedMemoryFull { needed, free: None, size: None }.into());
        };
        self.await_readers(writer, *made);
        if !self.spill.said.swap(true, Ordering::Relaxed) {
            eprintln!(
                "freight: the publisher of {}: /dev/shm has no room for a frame; it and every frame after it \
                 that does not fit go to the subscribers over DDS (a copy each) until it has room again",
                self.topic
            );
        }
        write_cdr(writer, cdr).map_err(PublishError::Spill)?;
        self.spill.spilled.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Waits, up to [`MATCH_WAIT`], for the spill writer (made at `made`) to
    /// match every subscription of this host and every remote reader, when
    /// their number grew since the last wait, and until the writer is
    /// [`READER_GRACE`] old: a sample written before a reader matched is not
    /// sent to it.
    fn await_readers(&self, writer: &NetworkWriter, made: Instant) {
        let expected = self.listed_subscriptions() + self.network_readers();
        if expected <= self.spill.waited_for.swap(expected, Ordering::Relaxed) {
            return;
        }
        let deadline = Instant::now() + MATCH_WAIT;
        while writer.matched_readers() < expected && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        if let Some(young) = READER_GRACE.checked_sub(made.elapsed()) {
            std::thread::sleep(young);
        }
    }
}
