//! What a DDS participant says of itself, as freight reads it: a
//! `ros_discovery_info` sample (`freight::inspect_ros_discovery_info`, both
//! GID layouts) and an endpoint's USER_DATA (`PeerTag::decode`). The first
//! byte of the input picks which; the rest is the sample.
//!
//! What is accepted must keep the bounds: names of at most 256 bytes, every
//! endpoint naming a node of the sample, no more endpoints than 16-byte GIDs
//! fit in the input; a USER_DATA tag reads back equal after encoding.
//!
//! With `FREIGHT_FUZZ_SEED_DIR` set, the target writes seeds there and exits.
#![no_main]

use freight::{inspect_ros_discovery_info, BackendKind, BackendSet, PeerTag};
use freight_msg::CdrWriter;
use libfuzzer_sys::fuzz_target;

/// rcl's bound on a node name or namespace, which freight applies.
const MAX_NAME_BYTES: usize = 256;

/// An announcement with `gid_len`-byte GIDs: two nodes, endpoints on each.
fn announcement(gid_len: usize) -> Vec<u8> {
    let mut w = CdrWriter::new();
    w.write_raw(&vec![1u8; gid_len]);
    w.write_len(2).expect("small");
    for (i, (namespace, name)) in [("/", "camera"), ("/robot", "planner")].into_iter().enumerate() {
        w.write_string(namespace).expect("small");
        w.write_string(name).expect("small");
        for endpoints in [1usize, 2] {
            w.write_len(endpoints).expect("small");
            for e in 0..endpoints {
                let mut gid = vec![0u8; gid_len];
                gid[0] = i as u8;
                gid[1] = endpoints as u8;
                gid[2] = e as u8;
                w.write_raw(&gid);
            }
        }
    }
    w.finish()
}

fn write_seeds(dir: &std::path::Path) {
    let tag = PeerTag {
        host: 0x0123_4567_89ab_cdef,
        pid: 4242,
        node: "/robot/camera".into(),
        backend: Some(BackendKind::Shm),
        accepts: Some(BackendSet::CPU_ONLY),
        spill: true,
    };
    let seeds = [
        [&[0u8][..], &announcement(16)].concat(),
        [&[0u8][..], &announcement(24)].concat(),
        [&[1u8][..], &tag.encode()].concat(),
        [&[1u8][..], b"typehash=RIHS01_00;"].concat(),
    ];
    for (i, seed) in seeds.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i}")), seed).expect("writing a seed");
    }
}

fuzz_target!(
    init: {
        if let Some(dir) = std::env::var_os("FREIGHT_FUZZ_SEED_DIR") {
            std::fs::create_dir_all(&dir).expect("creating the seed directory");
            write_seeds(std::path::Path::new(&dir));
            std::process::exit(0);
        }
    },
    |data: &[u8]| {
        let Some((&which, sample)) = data.split_first() else { return };
        if which % 2 == 0 {
            let Some((nodes, endpoints)) = inspect_ros_discovery_info(sample) else { return };
            for (namespace, name) in &nodes {
                assert!(namespace.len() <= MAX_NAME_BYTES && name.len() <= MAX_NAME_BYTES);
            }
            assert!(endpoints.iter().all(|&(_, node)| node < nodes.len()), "an endpoint of no node");
            assert!(endpoints.len() <= sample.len() / 16, "more endpoints than GIDs fit");
        } else if let Some(tag) = PeerTag::decode(sample) {
            assert_eq!(PeerTag::decode(&tag.encode()), Some(tag), "a tag does not read back");
        }
    }
);
