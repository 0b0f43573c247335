//! `freight doctor`: what a user checks first when a message does not arrive, or a
//! publisher fails, in a container or on a shared host — `/dev/shm`'s size and what is
//! in use there, where the local plane lives and whose it is, the namespaces of this
//! process, and the limits that large data and many topics meet.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use freight::backend::os;

/// Below this, `/dev/shm` holds only a few large frames (Docker's default is 64 MB).
const SMALL_SHM: u64 = 512 << 20;
/// Open files below which hundreds of topics run out (a topic costs a few fds).
const FEW_FILES: u64 = 4096;

/// One finding: `ok` or `warn`, what, and the value or the advice.
struct Finding {
    warn: bool,
    what: &'static str,
    text: String,
}

fn ok(what: &'static str, text: String) -> Finding {
    Finding { warn: false, what, text }
}

fn warn(what: &'static str, text: String) -> Finding {
    Finding { warn: true, what, text }
}

/// Runs the checks and prints them; the exit status is 0 either way (a warning is
/// advice, not a failure).
pub fn run() -> Result<(), String> {
    // iceoryx2 warns that it found no configuration file: not a finding.
    iceoryx2::prelude::set_log_level(iceoryx2::prelude::LogLevel::Error);
    let findings = [shm(), shm_in_use(), local_plane(), namespaces(), memlock(), open_files()];
    for f in &findings {
        println!("{:<4}  {:<17} {}", if f.warn { "warn" } else { "ok" }, f.what, f.text);
    }
    Ok(())
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

fn shm() -> Finding {
    let Ok(os::Space { free, total, .. }) = os::space(Path::new("/dev/shm")) else {
        return warn("/dev/shm", "missing or unreadable: freight's local plane needs it (mount a tmpfs there)".into());
    };
    let text = format!("{} of {} free", mib(free), mib(total));
    if total < SMALL_SHM {
        return warn(
            "/dev/shm",
            format!(
                "{text}: a few large frames fill it, and loans then fail (LoanError::SharedMemoryFull); \
                 in a container: docker run --shm-size=2g, or --ipc=host"
            ),
        );
    }
    ok("/dev/shm", text)
}

/// The pages iceoryx2's files in `/dev/shm` have allocated, and freight's device pools.
fn shm_in_use() -> Finding {
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return warn("in /dev/shm", "cannot list /dev/shm".into());
    };
    let (mut iox, mut iox_bytes, mut pools, mut pool_bytes) = (0u64, 0u64, 0u64, 0u64);
    for entry in dir.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let Ok(meta) = entry.metadata() else { continue };
        // Allocated pages, not the sparse length iceoryx2 gives a segment.
        let allocated = meta.blocks().saturating_mul(512);
        if name.starts_with("iox2") {
            (iox, iox_bytes) = (iox + 1, iox_bytes + allocated);
        } else if name.starts_with("freight-") {
            (pools, pool_bytes) = (pools + 1, pool_bytes + allocated);
        }
    }
    ok(
        "in /dev/shm",
        format!(
            "{} in {iox} iceoryx2 files (samples queued, held or kept for late joiners), {} in {pools} freight \
             device pools",
            mib(iox_bytes),
            mib(pool_bytes)
        ),
    )
}

fn local_plane() -> Finding {
    let plane = freight::local_plane();
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let root = plane.root.display().to_string();
    let state = match std::fs::metadata(&plane.root) {
        Ok(m) => format!("owner uid {}, mode {:o}", m.uid(), m.mode() & 0o7777),
        Err(_) => "not made yet: the first node makes it".into(),
    };
    match plane.shared_root_owner {
        Some(owner) => warn(
            "local plane",
            format!(
                "{root} ({state}; this process: uid {me}): the shared iceoryx2 directory belongs to uid {owner}, \
                 so this user's nodes reach theirs over DDS, not shared memory"
            ),
        ),
        None => ok("local plane", format!("{root} ({state}; this process: uid {me})")),
    }
}

/// This process's pid, ipc, mount and network namespaces, and whether they are
/// init's (the host's) where that can be read.
fn namespaces() -> Finding {
    let ns = |pid: &str, kind: &str| std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).ok();
    let (mut own, mut differ, mut unknown) = (Vec::new(), Vec::new(), Vec::new());
    for kind in ["pid", "ipc", "mnt", "net"] {
        let mine = ns("self", kind);
        if let Some(m) = &mine {
            own.push(m.display().to_string());
        }
        match ns("1", kind) {
            None => unknown.push(kind),
            Some(init) if mine.as_ref() != Some(&init) => differ.push(kind),
            Some(_) => {}
        }
    }
    let text = own.join(" ");
    if differ.is_empty() {
        if unknown.is_empty() {
            return ok("namespaces", format!("{text} (those of pid 1)"));
        }
        return ok("namespaces", format!("{text} (pid 1's {} cannot be read here)", unknown.join(", ")));
    }
    ok(
        "namespaces",
        format!(
            "{text}; not pid 1's: {} — a container: processes reach this one's shared memory only if they \
             share /dev/shm and {} (else over DDS)",
            differ.join(", "),
            freight::local_plane().root.display()
        ),
    )
}

fn limit(resource: libc::__rlimit_resource_t) -> Option<(u64, u64)> {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a valid, writable rlimit.
    (unsafe { libc::getrlimit(resource, &mut r) } == 0).then_some((r.rlim_cur, r.rlim_max))
}

fn shown_limit(v: u64) -> String {
    if v == libc::RLIM_INFINITY {
        "unlimited".into()
    } else {
        v.to_string()
    }
}

fn memlock() -> Finding {
    match limit(libc::RLIMIT_MEMLOCK) {
        Some((soft, hard)) => ok("locked memory", format!("{} (hard {}) bytes", shown_limit(soft), shown_limit(hard))),
        None => warn("locked memory", "getrlimit(RLIMIT_MEMLOCK) failed".into()),
    }
}

fn open_files() -> Finding {
    match limit(libc::RLIMIT_NOFILE) {
        Some((soft, hard)) if soft < FEW_FILES => warn(
            "open files",
            format!(
                "{} (hard {}): each topic costs a few descriptors; raise it for hundreds of topics (ulimit -n {})",
                shown_limit(soft),
                shown_limit(hard),
                shown_limit(hard.min(65536))
            ),
        ),
        Some((soft, hard)) => ok("open files", format!("{} (hard {})", shown_limit(soft), shown_limit(hard))),
        None => warn("open files", "getrlimit(RLIMIT_NOFILE) failed".into()),
    }
}
