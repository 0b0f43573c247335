//! Holds and openers on a block record (see "Holds" and "Opened blocks" in
//! the module documentation): the compare-exchanges that take and empty a
//! reader slot, the count of holds whose last one frees the block (a new
//! generation), and the clearing of opener slots of dead processes. The
//! creator, the readers and the reclaim of dead readers all go through these.

use std::sync::atomic::Ordering;

use super::layout::{slot_pid, Mapping, IDLE};
use crate::os::{monotonic_ns, process_gone};

/// Frees a block: a new generation makes its descriptors stale, then it is idle.
pub(super) fn free_block(map: &Mapping, index: u32) {
    let rec = map.record(index);
    rec.freed_at.store(monotonic_ns(), Ordering::Relaxed);
    rec.generation.store(map.next_generation(), Ordering::Release);
    rec.state.store(IDLE, Ordering::Release);
}

/// Counts off the hold whose reader slot the caller has just emptied; the last
/// one frees the block.
pub(super) fn count_off_hold(map: &Mapping, index: u32) {
    let rec = map.record(index);
    // `holds` is never 0 here (each occupied slot was counted at export, and is
    // counted off once); `checked_sub` only keeps a corrupted pool from wrapping.
    if rec.holds.fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| h.checked_sub(1)) == Ok(1) {
        free_block(map, index);
    }
}

/// Releases the hold in reader slot `slot` of block `index` if the slot still
/// holds exactly `expected`. `true` when this call released it; `false` when
/// the slot holds something else (the hold was released by someone else).
pub(super) fn release_slot(map: &Mapping, index: u32, slot: usize, expected: u64) -> bool {
    let released =
        map.record(index).readers[slot].compare_exchange(expected, 0, Ordering::AcqRel, Ordering::Acquire).is_ok();
    if released {
        count_off_hold(map, index);
    }
    released
}

/// Finds a reader slot of block `index` holding exactly `from` and changes it
/// to `to` (0 to release the hold, the imported value to import it); returns it.
pub(super) fn claim_slot(map: &Mapping, index: u32, from: u64, to: u64) -> Option<usize> {
    // Each slot is tried once: a failed compare-exchange means the slot holds
    // another value (another reader's hold, or one that was just claimed).
    map.record(index)
        .readers
        .iter()
        .position(|s| s.compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire).is_ok())
}

/// Empties the opener slots of block `index` whose process is gone; returns
/// whether a living process still has the block open.
pub(super) fn clear_dead_openers(map: &Mapping, index: u32) -> bool {
    let mut open = false;
    for opener in map.record(index).openers {
        let seen = opener.load(Ordering::Acquire);
        if seen == 0 {
            continue;
        }
        if process_gone(slot_pid(seen)) {
            // A failed exchange means the slot changed meanwhile: its (living)
            // owner cleared it, or another process claimed it.
            let _ = opener.compare_exchange(seen, 0, Ordering::AcqRel, Ordering::Acquire);
        } else {
            open = true;
        }
    }
    open
}
