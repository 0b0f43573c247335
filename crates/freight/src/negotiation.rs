//! The one rule that decides which memory a subscription receives a buffer in.
//! The data path follows it when it imports a buffer, and `freight topic info`
//! shows it per publisher/subscription pair.

use freight_msg::{BackendKind, BackendSet};

/// The backend a subscription that accepts `accepts` receives a buffer in,
/// when the publisher's memory is `offered` and the frame's host bytes live in
/// `host` (`shm` between processes, `cpu` inside one).
///
/// The publisher's own memory if the subscription takes it (zero copy); else
/// the host bytes if it takes those (zero copy of the host copy); else a private
/// CPU copy, which every subscription takes.
///
/// ```
/// use freight::{negotiate, BackendKind, BackendSet};
/// let gpu_aware = BackendSet::of(&[BackendKind::Shm, BackendKind::FakeDevice]);
/// assert_eq!(negotiate(BackendKind::FakeDevice, BackendKind::Shm, gpu_aware), BackendKind::FakeDevice);
/// assert_eq!(negotiate(BackendKind::FakeDevice, BackendKind::Shm, BackendSet::CPU_ONLY), BackendKind::Cpu);
/// assert_eq!(negotiate(BackendKind::Shm, BackendKind::Shm, BackendSet::of(&[BackendKind::Shm])), BackendKind::Shm);
/// ```
pub fn negotiate(offered: BackendKind, host: BackendKind, accepts: BackendSet) -> BackendKind {
    if accepts.contains(offered) {
        offered
    } else if accepts.contains(host) {
        host
    } else {
        BackendKind::Cpu
    }
}
