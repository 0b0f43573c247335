//! Registration point for freight's own transports: `intra`, `shm-loan` and `shm-copy`.
//!
//! They are written against the freight API and live next to it; this file only lists them.
//! Until an entry exists here, asking for its name on the command line is an error ("has no
//! implementation in this build yet"), never a silently skipped row.

use super::transport::Transport;

/// freight's transports, in any order. Each entry is a [`Transport`] whose
/// [`Transport::name`] is the command-line name and which:
///
/// * **`intra`**: [`Placement::Threads`](super::Placement::Threads). `open_publisher` and
///   `open_subscriber` are called on two threads of the same process (publisher first), so the
///   two ends must find each other in-process, by `row.channel` as the topic name.
/// * **`shm-loan`**: [`Placement::Processes`](super::Placement::Processes). The publisher end
///   loans a `row.wire_len()`-byte message from freight, writes only the header from `stamp()`
///   at offset 0, and publishes it without copying; the subscriber end hands the received
///   payload to `on_message` without copying it either.
/// * **`shm-copy`**: [`Placement::Processes`](super::Placement::Processes). The publisher end
///   owns an ordinary, pre-faulted heap buffer of `row.wire_len()` bytes, writes the header
///   from `stamp()` into it and publishes it through freight's copying API (one copy into
///   shared memory per message); the subscriber end is the same as for `shm-loan`.
///
/// Rules for every entry, so that the comparison with the baselines is fair:
///
/// * Derive every service / topic name from `row.channel`; it is unique per row and run.
/// * Respect `row.wait`: in [`WaitMode::Spin`](super::WaitMode::Spin) poll without sleeping
///   (`core::hint::spin_loop()` between polls); in [`WaitMode::Block`](super::WaitMode::Block)
///   sleep in the OS until the other side's send wakes you. Both directions (data and ack).
/// * Return from `receive` / `wait_ack` by the deadline they are given (the harness calls
///   again), and call `on_message` while the message is still held, before releasing it.
/// * Do not print to stdout: in the subscriber process it carries the results.
/// * Keep shared-memory reservations small: ping-pong has one message in flight.
pub fn freight_transports() -> Vec<Box<dyn Transport>> {
    super::freight_impl::all()
}
