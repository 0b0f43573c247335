//! Device holds of subscribers that missed a frame without anyone saying which.
//!
//! iceoryx2 asks the backpressure handler about a full queue only for a
//! subscriber attached to its side of the connection. One that has not
//! attached (its process was stopped when this publisher appeared, or has
//! not taken anything since) fills its queue and is then skipped silently:
//! `send` counts one recipient fewer, and the publisher cannot tell which
//! subscriber it was (`Sender::unannounced_misses`). The device holds named
//! for it would stay until its process exits.
//!
//! So a frame that someone missed unannounced is a *suspect* for every
//! process its device buffers were lent to. Each connection delivers in
//! order; once every subscription of process `p` has taken a later frame,
//! `p` has taken or missed every suspect before it, and the holds it has not
//! imported on them never will be. That later frame is `p`'s *witness*: the
//! first frame lent to `p` after its last suspect for which the backpressure
//! handler gave back none of `p`'s holds (a subscription with a full queue
//! may still have the suspect queued). The pool says when every subscription
//! of `p` took it: no hold of `p` on it is left unimported
//! ([`Backend::awaits`]). A process none of whose subscriptions takes this
//! publisher's device memory any more has its suspects released too.
//! Suspects `p` no longer awaits (imported, given back, freed) are forgotten,
//! so what is kept is bounded by the pool's blocks.
//!
//! The reaper thread settles them every
//! [`REAP_PERIOD`](super::housekeeping::reaper::REAP_PERIOD), also after the
//! publisher is gone (by witnesses only), while its pool exists.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use freight_backend::{Backend, Descriptor};

use crate::frame::Entry;
use crate::sync::lock;

/// The suspect frames of one publisher, per reader process.
pub(crate) struct Unattached {
    pool: Weak<dyn Backend>,
    /// Whether `readers` is not empty: the reaper reads only this when
    /// nothing is suspect, which is nearly always.
    pending: AtomicBool,
    readers: Mutex<Vec<Reader>>,
}

/// A reader process with frames it may have missed.
struct Reader {
    pid: u32,
    /// The device buffers of its suspect frames.
    suspects: Vec<Descriptor>,
    /// The device buffers of its witness, once sent.
    witness: Option<Vec<Descriptor>>,
}

/// The suspects, locked from before a send until its frame is noted: a frame
/// that another thread sends meanwhile cannot come between the two, so a
/// witness is never a frame sent before its suspect.
pub(super) struct Noting<'a> {
    unattached: &'a Unattached,
    readers: MutexGuard<'a, Vec<Reader>>,
}

/// A frame just sent, as [`Noting::note`] needs it.
pub(super) struct Sent<'a> {
    /// Its buffers in device memory.
    pub(super) device: &'a [Entry],
    /// The processes they were lent to, one entry per subscription.
    pub(super) lent_to: &'a [u32],
    /// The processes the backpressure handler gave a hold back for.
    pub(super) given_back: &'a [u32],
    /// Whether some subscriber may have missed it unannounced.
    pub(super) suspect: bool,
}

impl Unattached {
    pub(super) fn new(pool: &Arc<dyn Backend>) -> Self {
        Unattached { pool: Arc::downgrade(pool), pending: AtomicBool::new(false), readers: Mutex::default() }
    }

    /// Locks the suspects for a send of device buffers.
    pub(super) fn for_send(&self) -> Noting<'_> {
        Noting { unattached: self, readers: lock(&self.readers) }
    }

    /// Releases the holds that a reader's witness (or, given the processes
    /// that take the publisher's device memory now, `taking`, its leaving)
    /// shows will never be imported; forgets suspects no longer awaited.
    /// Returns how many holds were released.
    pub(super) fn settle(&self, taking: Option<&[u32]>) -> usize {
        if !self.pending.load(Ordering::Acquire) {
            return 0;
        }
        let mut readers = lock(&self.readers);
        let Some(pool) = self.pool.upgrade() else {
            // The pool is gone, and every hold with it.
            readers.clear();
            self.pending.store(false, Ordering::Release);
            return 0;
        };
        let awaits = |d: &Descriptor, pid: u32| pool.awaits(d.as_bytes(), pid);
        let mut released = 0;
        readers.retain_mut(|r| {
            let left = taking.is_some_and(|now| !now.contains(&r.pid));
            let passed = r.witness.as_ref().is_some_and(|w| !w.iter().any(|d| awaits(d, r.pid)));
            if left || passed {
                for d in &r.suspects {
                    // One hold per subscription of the process; an error means
                    // none is left unimported.
                    while pool.release_unimported(d.as_bytes(), r.pid).is_ok() {
                        released += 1;
                    }
                }
                return false;
            }
            r.suspects.retain(|d| awaits(d, r.pid));
            !r.suspects.is_empty()
        });
        self.pending.store(!readers.is_empty(), Ordering::Release);
        released
    }

    /// Whether suspects wait to be settled.
    pub(super) fn is_pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }
}

impl Noting<'_> {
    /// Records the frame just sent: as a suspect for the processes its device
    /// buffers were lent to, or as the witness of those that wait for one.
    pub(super) fn note(mut self, sent: Sent<'_>) {
        let readers = &mut *self.readers;
        if sent.device.is_empty() || (!sent.suspect && readers.is_empty()) {
            return;
        }
        let buffers = || sent.device.iter().map(|e| e.descriptor.clone()).collect::<Vec<_>>();
        for (i, &pid) in sent.lent_to.iter().enumerate() {
            if sent.lent_to[..i].contains(&pid) {
                continue;
            }
            let known = readers.iter_mut().find(|r| r.pid == pid);
            match (sent.suspect, known) {
                (true, Some(r)) => {
                    r.suspects.extend(buffers());
                    r.witness = None;
                }
                (true, None) => readers.push(Reader { pid, suspects: buffers(), witness: None }),
                (false, Some(r)) if r.witness.is_none() && !sent.given_back.contains(&pid) => {
                    r.witness = Some(buffers());
                }
                (false, _) => {}
            }
        }
        self.unattached.pending.store(!readers.is_empty(), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use freight_backend::FakeDeviceBackend;
    use freight_msg::BackendKind;

    fn me() -> u32 {
        std::process::id()
    }

    /// A frame of one device buffer of `pool`, lent to this process `holds` times.
    fn frame(pool: &Arc<dyn Backend>, holds: usize) -> Vec<Entry> {
        let block = pool.allocate(64, None).unwrap();
        let descriptor = pool.export(block, &vec![me(); holds]).unwrap();
        vec![Entry { kind: BackendKind::FakeDevice, descriptor, alt: None }]
    }

    fn sent<'a>(device: &'a [Entry], lent_to: &'a [u32], given_back: &'a [u32], suspect: bool) -> Sent<'a> {
        Sent { device, lent_to, given_back, suspect }
    }

    fn pool() -> Arc<dyn Backend> {
        Arc::new(FakeDeviceBackend::new(1 << 20).unwrap())
    }

    fn in_use(pool: &Arc<dyn Backend>) -> usize {
        pool.stats().blocks_in_use
    }

    #[test]
    fn a_suspect_is_released_once_its_reader_took_the_witness_and_not_before() {
        let pool = pool();
        let u = Unattached::new(&pool);
        let lent = [me()];
        let missed = frame(&pool, 1);
        u.for_send().note(sent(&missed, &lent, &[], true));
        assert!(u.is_pending());
        assert_eq!(u.settle(Some(&lent)), 0, "no witness yet");
        let witness = frame(&pool, 1);
        u.for_send().note(sent(&witness, &lent, &[], false));
        assert_eq!(u.settle(Some(&lent)), 0, "the witness is not taken yet");
        let none: freight_backend::Frame = Arc::new(freight_backend::HeapFrame(Vec::new()));
        drop(pool.import(&none, witness[0].descriptor.as_bytes()).unwrap());
        assert_eq!(u.settle(Some(&lent)), 1, "the witness was taken: the suspect was missed");
        assert!(!u.is_pending());
        assert_eq!(in_use(&pool), 0);
    }

    #[test]
    fn a_witness_whose_holds_were_given_back_by_the_publisher_proves_nothing() {
        let pool = pool();
        let u = Unattached::new(&pool);
        // Two subscriptions in this process; one had a full queue for the
        // second frame, so it may still hold the first.
        let lent = [me(), me()];
        let first = frame(&pool, 2);
        u.for_send().note(sent(&first, &lent, &[], true));
        let second = frame(&pool, 2);
        u.for_send().note(sent(&second, &lent, &[me()], false));
        for _ in 0..2 {
            let _ = pool.release_unimported(second[0].descriptor.as_bytes(), me());
        }
        assert_eq!(u.settle(Some(&lent)), 0, "a frame given back for the process is no witness");
        assert!(pool.awaits(first[0].descriptor.as_bytes(), me()));
        let third = frame(&pool, 2);
        u.for_send().note(sent(&third, &lent, &[], false));
        for _ in 0..2 {
            pool.release_unimported(third[0].descriptor.as_bytes(), me()).unwrap();
        }
        assert_eq!(u.settle(Some(&lent)), 2, "both subscriptions passed the suspect");
        assert_eq!(in_use(&pool), 0);
    }

    #[test]
    fn a_later_suspect_needs_a_later_witness_and_taken_suspects_are_forgotten() {
        let pool = pool();
        let u = Unattached::new(&pool);
        let lent = [me()];
        let taken = frame(&pool, 1);
        u.for_send().note(sent(&taken, &lent, &[], true));
        let witness = frame(&pool, 1);
        u.for_send().note(sent(&witness, &lent, &[], false));
        let missed = frame(&pool, 1);
        u.for_send().note(sent(&missed, &lent, &[], true));
        pool.release_unimported(taken[0].descriptor.as_bytes(), me()).unwrap();
        pool.release_unimported(witness[0].descriptor.as_bytes(), me()).unwrap();
        assert_eq!(u.settle(Some(&lent)), 0, "the witness came before the last suspect");
        assert!(u.is_pending(), "the last suspect is still awaited");
        assert_eq!(u.settle(Some(&[])), 1, "the reader left");
        assert!(!u.is_pending());
        assert_eq!(in_use(&pool), 0);
    }

    #[test]
    fn without_a_pool_nothing_is_kept() {
        let pool = pool();
        let u = Unattached::new(&pool);
        let missed = frame(&pool, 1);
        u.for_send().note(sent(&missed, &[me()], &[], true));
        drop((missed, pool));
        assert_eq!(u.settle(None), 0);
        assert!(!u.is_pending());
    }
}
