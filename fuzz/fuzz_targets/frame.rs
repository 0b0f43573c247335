//! The local-plane frame, as a subscriber receives it from another process:
//! `freight::inspect_frame` on arbitrary bytes.
//!
//! What it accepts must be consistent: every descriptor range lies in the
//! frame, the table has the header's buffer count, and the header fields are
//! the frame's bytes. The in-frame descriptors (`cpu`, `shm`) of an accepted
//! frame are then imported over it, as a subscriber would, in a frame of this
//! process and in a shared one; what imports must be the bytes it names.
//!
//! With `FREIGHT_FUZZ_SEED_DIR` set, the target writes a few valid frames there
//! and exits (see `scripts/fuzz-smoke.sh`).
#![no_main]

use std::ops::Range;
use std::sync::Arc;

use freight::backend::{Backend, CpuBackend, Frame, FrameMemory, HeapFrame, ShmBackend};
use freight::{inspect_frame, BackendKind};
use freight_msg::msgs::sensor_msgs::{Image, PointCloud2, PointField};
use freight_msg::msgs::std_msgs::Header;
use freight_msg::{BufferEncoder, CdrField, CdrWriter, ElementInfo, EncodeError, RawBuffer};
use libfuzzer_sys::fuzz_target;

const HEADER_LEN: usize = 64;
const DATA_ALIGN: usize = 64;
const NO_ALT: u8 = 0xff;

/// A frame in memory shared with other processes: `cpu` copies out of it.
#[derive(Debug)]
struct SharedFrame(Vec<u8>);

impl FrameMemory for SharedFrame {
    fn bytes(&self) -> &[u8] {
        &self.0
    }
    fn is_process_local(&self) -> bool {
        false
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The region an in-frame descriptor names, when it is well formed and inside the frame.
fn region(frame: &[u8], d: &[u8]) -> Option<Range<usize>> {
    if d.len() != freight::backend::IN_FRAME_DESCRIPTOR_LEN {
        return None;
    }
    let (offset, len) = (u64_at(d, 0), u64_at(d, 8));
    let end = offset.checked_add(len).filter(|e| *e <= frame.len() as u64)?;
    Some(offset as usize..end as usize)
}

/// Imports an in-frame descriptor as a subscriber would, and checks what it gets.
fn import_in_frame(kind: BackendKind, data: &[u8], descriptor: Range<usize>, local: &Frame, shared: &Frame) {
    let d = &data[descriptor];
    let expected = region(data, d);
    let backends: [(&dyn Backend, &Frame); 3] =
        [(&CpuBackend, local), (&CpuBackend, shared), (&ShmBackend::default(), shared)];
    for (backend, frame) in backends {
        // A subscriber imports `shm` descriptors with either backend.
        if kind != backend.kind() && kind != BackendKind::Shm {
            continue;
        }
        match backend.import(frame, d) {
            Ok(storage) => {
                let want = expected.clone().expect("an import of a region outside the frame succeeded");
                assert_eq!(storage.len(), want.len());
                assert_eq!(storage.host_bytes(), Some(&data[want]), "imported bytes are not the region named");
            }
            Err(e) => assert!(expected.is_none(), "a region inside the frame was refused: {e}"),
        }
    }
}

fn check(data: &[u8]) {
    let Ok(summary) = inspect_frame(data) else { return };
    // What was accepted has a whole header and a table the header announced.
    assert_eq!(summary.type_hash, u64_at(data, 8));
    assert_eq!(summary.publisher_id, u64_at(data, 16));
    assert_eq!(summary.sequence, u64_at(data, 24));
    assert_eq!(summary.publish_time_ns, u64_at(data, 32));
    assert_eq!(summary.buffers.len(), u32_at(data, 44) as usize);
    let meta_end = HEADER_LEN + u32_at(data, 40) as usize;
    assert!(meta_end <= data.len());
    let inside = |r: &Range<usize>| r.start >= HEADER_LEN && r.start <= r.end && r.end <= meta_end;
    for b in &summary.buffers {
        assert!(inside(&b.descriptor), "descriptor {:?} outside the meta (..{meta_end})", b.descriptor);
        assert!(b.descriptor.len() <= u16::MAX as usize);
        if let Some((_, alt)) = &b.alt {
            assert!(inside(alt), "alternative {alt:?} outside the meta (..{meta_end})");
            assert!(alt.start >= b.descriptor.end);
        }
    }
    if summary.buffers.is_empty() {
        return;
    }
    let local: Frame = Arc::new(HeapFrame(data.to_vec()));
    let shared: Frame = Arc::new(SharedFrame(data.to_vec()));
    for b in summary.buffers {
        let reps = std::iter::once((b.kind, b.descriptor)).chain(b.alt);
        for (kind, descriptor) in reps {
            if matches!(kind, BackendKind::Cpu | BackendKind::Shm) {
                import_in_frame(kind, data, descriptor, &local, &shared);
            }
        }
    }
}

/// Writes buffer fields as their ordinal in the table, as a publisher does.
struct Ordinals(u32);

impl BufferEncoder for Ordinals {
    fn write_buffer(&mut self, w: &mut CdrWriter, _: &RawBuffer, _: ElementInfo) -> Result<(), EncodeError> {
        w.write_u32(self.0);
        self.0 += 1;
        Ok(())
    }
}

fn small_fields<M: CdrField>(msg: &M) -> Vec<u8> {
    let mut w = CdrWriter::new();
    msg.write(&mut w, &mut Ordinals(0)).unwrap();
    w.finish()
}

/// One table entry of a seed: backend code, descriptor, alternative. A
/// descriptor `None` is an in-frame one for the next buffer of `data`.
struct SeedBuffer {
    kind: u8,
    descriptor: Option<Vec<u8>>,
    alt: Option<(u8, Option<Vec<u8>>)>,
}

/// Builds a frame as the layout in `crates/freight/src/frame.rs` describes it;
/// in-frame buffers get one region each of `data`'s chunks.
fn build_frame(small: &[u8], table: &[SeedBuffer], data: &[&[u8]]) -> Vec<u8> {
    let meta_with = |descs: &mut dyn FnMut() -> Vec<u8>| {
        let mut meta = (small.len() as u32).to_le_bytes().to_vec();
        meta.extend_from_slice(small);
        meta.resize(meta.len().next_multiple_of(4), 0);
        for e in table {
            let d = e.descriptor.clone().unwrap_or_else(&mut *descs);
            let (alt_kind, alt) = match &e.alt {
                Some((k, d)) => (*k, d.clone().unwrap_or_else(&mut *descs)),
                None => (NO_ALT, Vec::new()),
            };
            meta.extend_from_slice(&[e.kind, alt_kind]);
            meta.extend_from_slice(&(d.len() as u16).to_le_bytes());
            meta.extend_from_slice(&(alt.len() as u16).to_le_bytes());
            meta.extend_from_slice(&[0, 0]);
            meta.extend_from_slice(&d);
            meta.extend_from_slice(&alt);
            meta.resize(meta.len().next_multiple_of(4), 0);
        }
        meta
    };
    // In-frame descriptors have a fixed length: lay out once to place the data.
    let meta_len = meta_with(&mut || vec![0; 16]).len();
    let mut at = (HEADER_LEN + meta_len).next_multiple_of(DATA_ALIGN);
    let mut regions = Vec::new();
    for chunk in data {
        regions.push((at, chunk.len()));
        at = (at + chunk.len()).next_multiple_of(DATA_ALIGN);
    }
    let mut next = regions.iter();
    let meta = meta_with(&mut || {
        let (offset, len) = next.next().copied().unwrap_or((0, 0));
        [(offset as u64).to_le_bytes(), (len as u64).to_le_bytes()].concat()
    });
    let mut f = vec![0u8; HEADER_LEN];
    f[0..4].copy_from_slice(b"FRT1");
    f[4..6].copy_from_slice(&1u16.to_le_bytes());
    f[8..16].copy_from_slice(&0x5eed_f00d_u64.to_le_bytes());
    f[16..24].copy_from_slice(&3u64.to_le_bytes());
    f[24..32].copy_from_slice(&17u64.to_le_bytes());
    f[32..40].copy_from_slice(&1_700_000_000_000_000_000u64.to_le_bytes());
    f[40..44].copy_from_slice(&(meta.len() as u32).to_le_bytes());
    f[44..48].copy_from_slice(&(table.len() as u32).to_le_bytes());
    f.extend_from_slice(&meta);
    for ((offset, _), chunk) in regions.iter().zip(data) {
        f.resize(*offset, 0);
        f.extend_from_slice(chunk);
    }
    f
}

fn write_seeds(dir: &std::path::Path) {
    let header = Header { frame_id: "cam".into(), ..Default::default() };
    let image = small_fields(&Image { header: header.clone(), height: 2, width: 4, step: 4, ..Default::default() });
    let cloud = small_fields(&PointCloud2 {
        header,
        fields: vec![PointField { name: "x".into(), offset: 0, datatype: PointField::FLOAT32, count: 1 }],
        ..Default::default()
    });
    let in_frame = |kind| SeedBuffer { kind, descriptor: None, alt: None };
    let fake_device = {
        let mut d = vec![0u8; 96];
        d[..4].copy_from_slice(b"FRFD");
        d[4] = 1;
        let name = b"freight-fakedev-1000-4242-0123456789abcdef";
        d[5] = name.len() as u8;
        d[32..32 + name.len()].copy_from_slice(name);
        d
    };
    let pixels: Vec<u8> = (0..8).collect();
    let seeds: Vec<Vec<u8>> = vec![
        build_frame(&small_fields(&Header::default()), &[], &[]),
        build_frame(&image, &[in_frame(1)], &[&pixels]),
        build_frame(&image, &[in_frame(2)], &[&pixels]),
        build_frame(
            &image,
            &[SeedBuffer { kind: 3, descriptor: Some(fake_device.clone()), alt: Some((2, None)) }],
            &[&pixels],
        ),
        build_frame(&cloud, &[SeedBuffer { kind: 3, descriptor: Some(fake_device), alt: None }], &[]),
        build_frame(
            &image,
            &[in_frame(2), in_frame(1), SeedBuffer { kind: 4, descriptor: Some(vec![7; 24]), alt: Some((1, None)) }],
            &[&pixels, &pixels[..3], &[]],
        ),
    ];
    for (i, seed) in seeds.into_iter().enumerate() {
        assert!(inspect_frame(&seed).is_ok(), "seed {i} is not a valid frame");
        std::fs::write(dir.join(format!("seed-{i:02}")), seed).expect("writing a seed");
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
    |data: &[u8]| check(data)
);
