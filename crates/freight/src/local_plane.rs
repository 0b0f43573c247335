//! Where this process's shared-memory plane lives: iceoryx2's root directory
//! (its service and node records) and the prefix of its files in `/dev/shm`.
//!
//! iceoryx2 0.10 creates every file owner-only, and its root directory
//! (`/tmp/iceoryx2`) readable but not writable by others: a second user on the
//! host can neither create a node there nor open the first user's segments. So
//! a process whose user does not own the shared root uses a root and a file
//! prefix of its own (`/tmp/iceoryx2-uid<uid>`, `iox2u<uid>_`). Its host id
//! ([`crate::network::host_id`]) covers that root, so it is another host to
//! the first user's processes, and they reach each other over DDS, as stock
//! ROS 2 nodes of two users do. Shared memory between users would need
//! iceoryx2 to create group-accessible files, which 0.10 does not (its
//! `dev_permissions` feature makes them world-writable).

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Where this process's shared-memory plane lives.
///
/// ```
/// let plane = freight::local_plane();
/// assert!(plane.root.is_absolute());
/// if let Some(owner) = plane.shared_root_owner {
///     println!("/tmp/iceoryx2 belongs to uid {owner}: other users' nodes are reached over DDS");
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPlane {
    /// iceoryx2's root directory.
    pub root: PathBuf,
    /// The owner of the shared root when this process uses one of its own
    /// instead: nodes of other users are then reached over DDS.
    pub shared_root_owner: Option<u32>,
}

struct Chosen {
    plane: LocalPlane,
    config: iceoryx2::config::Config,
}

fn chosen() -> &'static Chosen {
    static CHOSEN: OnceLock<Chosen> = OnceLock::new();
    CHOSEN.get_or_init(|| {
        let mut config = iceoryx2::config::Config::global_config().clone();
        let shared = config.global.root_path().to_string();
        let own = (!cfg!(feature = "shared-with-all-users")).then(|| own_root(&shared)).flatten();
        let plane = match own {
            Some((root, prefix, owner)) => {
                config.global.set_root_path(&root);
                config.global.prefix = prefix;
                LocalPlane { root: PathBuf::from(root.to_string()), shared_root_owner: Some(owner) }
            }
            None => LocalPlane { root: PathBuf::from(shared), shared_root_owner: None },
        };
        Chosen { plane, config }
    })
}

/// This user's own root and file prefix, and the owner of the shared root,
/// when another user owns it. The shared root is this user's when it does not
/// exist yet (iceoryx2 makes it with the first node) or when this user owns it.
fn own_root(shared: &str) -> Option<(iceoryx2::prelude::Path, iceoryx2::prelude::FileName, u32)> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let owner = std::fs::metadata(shared).ok().map(|m| m.uid()).filter(|&uid| uid != me)?;
    let root = iceoryx2::prelude::Path::try_from(format!("{}-uid{me}/", shared.trim_end_matches('/')).as_str()).ok()?;
    let prefix = iceoryx2::prelude::FileName::try_from(format!("iox2u{me}_").as_str()).ok()?;
    Some((root, prefix, owner))
}

/// Where this process's shared-memory plane lives (decided once per process).
pub fn local_plane() -> &'static LocalPlane {
    &chosen().plane
}

/// iceoryx2's configuration for this process's root and file prefix.
pub(crate) fn iceoryx2_config() -> &'static iceoryx2::config::Config {
    &chosen().config
}

/// For error messages: where the plane lives and who may write there.
pub(crate) fn where_it_lives() -> String {
    let describe = |path: &str| match std::fs::metadata(path) {
        Ok(m) => format!("{path} (owner uid {}, mode {:o})", m.uid(), m.mode() & 0o7777),
        Err(e) => format!("{path} ({e})"),
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let root = local_plane().root.to_string_lossy().into_owned();
    format!("this process (uid {me}) needs to write in {} and {}", describe(&root), describe("/dev/shm"))
}
