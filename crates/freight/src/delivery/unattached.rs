//! Device holds of subscribers that may have missed a frame, where nobody can
//! say which.
//!
//! Two ways a frame can miss a subscriber leave the publisher unsure who:
//!
//! * iceoryx2 asks the backpressure handler about a full queue only for a
//!   subscriber attached to its side of the connection. One that has not
//!   attached (its process was stopped when this publisher appeared, or has
//!   not taken anything since) fills its queue and is then skipped silently:
//!   `send` counts one recipient fewer, and the publisher cannot tell which
//!   subscriber it was (`Sender::unannounced_misses`);
//! * a subscriber the handler gave up on at once (keep last: the publisher
//!   does not wait for it) may receive the frame all the same: after the
//!   handler's answer iceoryx2 tries its queue once more, and the subscriber
//!   may have taken one meanwhile. Giving its holds back then would leave it a
//!   descriptor of a block freed and reused (seen: the GPU demo's display,
//!   [`ImportError::Stale`](freight_backend::ImportError::Stale)). Only when
//!   the handler gave up on every subscriber (one slow reader, the common
//!   case) does `send`'s count of recipients say who got it, and the
//!   publisher settles that frame itself (`Sender::all_discarded`): kept as a
//!   suspect, each frame sent while the reader's queue is full would hold a
//!   block until the reader takes a later one, and a slow reader of large
//!   frames would soon hold more than its share of the pool.
//!
//! So such a frame is a *suspect* for every process its device buffers were
//! lent to, and holds nobody gives back stay until that process exits, unless
//! settled here. Each connection delivers in order: once a process `p` took
//! a frame lent to it later (the pool says no hold of `p` on it is left
//! unimported, [`Backend::awaits`]), `p` has taken or missed every frame
//! before it, and the holds it has not imported on those never will be. Such
//! a later frame is a *proof*: any frame lent to `p`, suspect or not, except
//! one for which the publisher gave back a hold of `p` (a hold it gave back is
//! not awaited either, whether `p` took the frame or not). A process none of
//! whose subscriptions takes this publisher's device memory any more has its
//! suspects released too. What is kept per process is the frames lent to it
//! since its oldest unsettled suspect, each holding a block of the pool until
//! settled, so it is bounded by the pool.
//!
//! The publisher settles them after each frame it notes, and the reaper
//! thread every [`REAP_PERIOD`](super::housekeeping::reaper::REAP_PERIOD),
//! also after the publisher is gone (by proofs only), while its pool exists.

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
    /// The frames lent to it since its oldest unsettled suspect, as sent.
    frames: Vec<Lent>,
}

/// A frame lent to a reader with suspects.
struct Lent {
    /// Its device buffers.
    buffers: Vec<Descriptor>,
    /// Whether the reader may have missed it.
    suspect: bool,
    /// Whether, once the reader awaits none of its buffers, the reader took
    /// it: false when the publisher gave a hold of the reader back.
    proof: bool,
}

/// The suspects, locked from before a send until its frame is noted: a frame
/// that another thread sends meanwhile cannot come between the two, so the
/// frames of a reader are kept in the order they were sent.
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
    /// The processes the publisher gave a hold back for (subscriptions that
    /// certainly missed the frame).
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

    /// Releases the holds that a reader's proof (or, given the processes that
    /// take the publisher's device memory now, `taking`, its leaving) shows
    /// will never be imported. Returns how many holds were released.
    pub(super) fn settle(&self, taking: Option<&[u32]>) -> usize {
        if !self.pending.load(Ordering::Acquire) {
            return 0;
        }
        self.settle_locked(&mut lock(&self.readers), taking)
    }

    /// [`Unattached::settle`] with `readers` locked; updates `pending`.
    fn settle_locked(&self, readers: &mut Vec<Reader>, taking: Option<&[u32]>) -> usize {
        let Some(pool) = self.pool.upgrade() else {
            // The pool is gone, and every hold with it.
            readers.clear();
            self.pending.store(false, Ordering::Release);
            return 0;
        };
        let mut released = 0;
        let mut release = |frames: &mut dyn Iterator<Item = Lent>, pid: u32| {
            for d in frames.filter(|f| f.suspect).flat_map(|f| f.buffers) {
                // One hold per subscription of the process; an error means
                // none is left unimported.
                while pool.release_unimported(d.as_bytes(), pid).is_ok() {
                    released += 1;
                }
            }
        };
        readers.retain_mut(|r| {
            if taking.is_some_and(|now| !now.contains(&r.pid)) {
                release(&mut r.frames.drain(..), r.pid);
                return false;
            }
            let taken = |f: &Lent| f.proof && !f.buffers.iter().any(|d| pool.awaits(d.as_bytes(), r.pid));
            if let Some(last) = r.frames.iter().rposition(taken) {
                release(&mut r.frames.drain(..=last), r.pid);
            }
            r.frames.iter().any(|f| f.suspect)
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
    /// Records the frame just sent for the processes its device buffers were
    /// lent to: as a suspect, or as a possible proof for those with suspects;
    /// then settles what a proof shows.
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
            let proof = !sent.given_back.contains(&pid);
            if !sent.suspect && !proof {
                continue;
            }
            let lent = Lent { buffers: buffers(), suspect: sent.suspect, proof };
            match readers.iter_mut().find(|r| r.pid == pid) {
                Some(r) => r.frames.push(lent),
                None if sent.suspect => readers.push(Reader { pid, frames: vec![lent] }),
                None => {}
            }
        }
        self.unattached.settle_locked(readers, None);
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
    fn a_suspect_is_released_once_its_reader_took_a_later_frame_and_not_before() {
        let pool = pool();
        let u = Unattached::new(&pool);
        let lent = [me()];
        let missed = frame(&pool, 1);
        u.for_send().note(sent(&missed, &lent, &[], true));
        assert!(u.is_pending());
        assert_eq!(u.settle(Some(&lent)), 0, "no later frame yet");
        let later = frame(&pool, 1);
        u.for_send().note(sent(&later, &lent, &[], false));
        assert_eq!(u.settle(Some(&lent)), 0, "the later frame is not taken yet");
        let none: freight_backend::Frame = Arc::new(freight_backend::HeapFrame(Vec::new()));
        drop(pool.import(&none, later[0].descriptor.as_bytes()).unwrap());
        assert_eq!(u.settle(Some(&lent)), 1, "the later frame was taken: the suspect was missed");
        assert!(!u.is_pending());
        assert_eq!(in_use(&pool), 0);
    }

    #[test]
    fn a_frame_whose_holds_the_publisher_gave_back_proves_nothing() {
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
        assert_eq!(u.settle(Some(&lent)), 0, "a frame given back for the process is no proof");
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
    fn a_later_suspect_needs_a_later_proof_and_taken_suspects_are_forgotten() {
        let pool = pool();
        let u = Unattached::new(&pool);
        let lent = [me()];
        let taken = frame(&pool, 1);
        u.for_send().note(sent(&taken, &lent, &[], true));
        let later = frame(&pool, 1);
        u.for_send().note(sent(&later, &lent, &[], false));
        let missed = frame(&pool, 1);
        u.for_send().note(sent(&missed, &lent, &[], true));
        pool.release_unimported(taken[0].descriptor.as_bytes(), me()).unwrap();
        pool.release_unimported(later[0].descriptor.as_bytes(), me()).unwrap();
        assert_eq!(u.settle(Some(&lent)), 0, "the proof came before the last suspect");
        assert!(u.is_pending(), "the last suspect is still awaited");
        assert_eq!(u.settle(Some(&[])), 1, "the reader left");
        assert!(!u.is_pending());
        assert_eq!(in_use(&pool), 0);
    }

    #[test]
    fn a_suspect_its_reader_took_proves_the_suspects_before_it() {
        // A keep-last reader behind a fast publisher: every frame is a suspect,
        // and the reader takes some of them.
        let pool = pool();
        let u = Unattached::new(&pool);
        let lent = [me()];
        let missed = frame(&pool, 1);
        u.for_send().note(sent(&missed, &lent, &[], true));
        let taken = frame(&pool, 1);
        u.for_send().note(sent(&taken, &lent, &[], true));
        assert!(pool.awaits(missed[0].descriptor.as_bytes(), me()));
        let none: freight_backend::Frame = Arc::new(freight_backend::HeapFrame(Vec::new()));
        drop(pool.import(&none, taken[0].descriptor.as_bytes()).unwrap());
        let queued = frame(&pool, 1);
        u.for_send().note(sent(&queued, &lent, &[], true));
        assert!(!pool.awaits(missed[0].descriptor.as_bytes(), me()), "the next frame settled the missed one");
        assert!(pool.awaits(queued[0].descriptor.as_bytes(), me()), "a frame after the proof stays");
        assert!(u.is_pending());
        assert_eq!(in_use(&pool), 1);
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
