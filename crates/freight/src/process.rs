//! Which shared-memory peers are this process, and which are dead.
//!
//! A pid says neither across pid namespaces: two containers that share
//! `/dev/shm` and iceoryx2's directory (`--ipc=host`, a shared volume) often
//! both run their node as pid 1, and a `kill(pid, 0)` from one container asks
//! about a process of its own namespace, not the peer's. So a peer is
//! identified by the iceoryx2 node its port belongs to: this process knows the
//! ids of the nodes it created, and iceoryx2 knows whether a node's process is
//! alive from the node's monitoring lock, which any process sharing the
//! directory can test whatever its pid namespace.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use iceoryx2::config::Config;
use iceoryx2::node::{NodeState, NodeView};
use iceoryx2::prelude::CallbackProgression;

use crate::sync::lock;
use crate::topic::Ipc;

/// A process of the host: the inode of its pid namespace (if known) and its pid.
pub(crate) type Process = (Option<u32>, u32);

/// The inode of this process's pid namespace (`/proc/self/ns/pid`), once
/// read; `None` without `/proc`.
pub(crate) fn pid_namespace() -> Option<u32> {
    static NS: OnceLock<Option<u32>> = OnceLock::new();
    *NS.get_or_init(|| {
        let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
        let inode = link.to_str()?.strip_prefix("pid:[")?.strip_suffix(']')?;
        inode.parse().ok()
    })
}

/// The iceoryx2 nodes of this process that exist.
static OWN_NODES: Mutex<Option<HashSet<u128>>> = Mutex::new(None);

/// Records a node this process created.
pub(crate) fn add_own_node(id: u128) {
    lock(&OWN_NODES).get_or_insert_with(HashSet::new).insert(id);
}

/// Forgets a node of this process that was dropped.
pub(crate) fn remove_own_node(id: u128) {
    if let Some(nodes) = lock(&OWN_NODES).as_mut() {
        nodes.remove(&id);
    }
}

/// Whether the node `id` belongs to this process.
pub(crate) fn is_own_node(id: u128) -> bool {
    lock(&OWN_NODES).as_ref().is_some_and(|nodes| nodes.contains(&id))
}

/// The ids of the nodes iceoryx2 sees as dead (their process is gone, their
/// files are not cleaned up yet). A node this process cannot inspect (another
/// user's) counts as alive; so do all when the listing fails.
pub(crate) fn dead_nodes(config: &Config) -> HashSet<u128> {
    let mut dead = HashSet::new();
    let _ = iceoryx2::node::Node::<Ipc>::list(config, |state| {
        if let NodeState::Dead(view) = state {
            dead.insert(view.id().value());
        }
        CallbackProgression::Continue
    });
    dead
}
