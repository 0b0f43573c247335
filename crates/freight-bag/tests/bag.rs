//! Bags written and read back through the library: every byte, across
//! splits and compressions, after a crash (reindex), and bad input refused
//! with the file named.

use std::fs;
use std::path::Path;
use std::time::Duration;

use freight_bag::{
    reindex, BagError, Compression, Durability, OfferedQos, Reader, Record, Reliability, Schema, Writer, WriterOptions,
};
use freight_msg::msgs::sensor_msgs::Image;
use freight_msg::msgs::std_msgs::{Float32MultiArray, MultiArrayDimension};
use freight_msg::{Buffer, Message as _};
use freight_testkit::PrivateDir;

/// Message `k` of topic `t`: CDR-like bytes whose content names both.
fn payload(t: usize, k: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0, 1, 0, 0];
    v.extend((0..len).map(|i| ((k as usize * 7 + t * 13 + i) % 251) as u8));
    v
}

const TOPICS: [(&str, &str); 3] = [
    ("/camera", "sensor_msgs/msg/Image"),
    ("/cloud", "sensor_msgs/msg/PointCloud2"),
    ("/chatter", "std_msgs/msg/String"),
];

/// Writes `n` messages round-robin over [`TOPICS`], message `k` received at `k` ms.
fn record(dir: &Path, options: WriterOptions, n: u64, len: usize) -> freight_bag::Metadata {
    let mut w = Writer::create(dir, options).unwrap();
    let qos = [OfferedQos { reliability: Reliability::Reliable, durability: Durability::Volatile }];
    let ids: Vec<_> =
        TOPICS.iter().map(|(name, ty)| w.add_topic(name, Schema::built_in(ty).unwrap(), &qos).unwrap()).collect();
    for k in 0..n {
        let t = (k % 3) as usize;
        let data = payload(t, k, len);
        let at = 1_700_000_000_000_000_000 + k * 1_000_000;
        w.write(ids[t], &Record { data: &data, log_time_ns: at, publish_time_ns: at - 10, sequence: k as u32 })
            .unwrap();
    }
    w.finish().unwrap()
}

fn check_all(bag: &Path, n: u64, len: usize) {
    let r = Reader::open(bag).unwrap();
    let mut k = 0;
    for m in r.messages() {
        let m = m.unwrap();
        let t = (k % 3) as usize;
        assert_eq!((m.topic.as_str(), m.type_name.as_str()), TOPICS[t], "message {k}");
        assert_eq!(m.data, payload(t, k, len), "message {k}");
        assert_eq!(m.publish_time_ns + 10, m.log_time_ns);
        assert_eq!(m.sequence, k as u32);
        k += 1;
    }
    assert_eq!(k, n);
}

#[test]
fn every_message_reads_back_byte_for_byte_and_the_metadata_counts_match() {
    let dir = PrivateDir::new("freight-bag");
    let bag = dir.path().join("run");
    let m = record(&bag, WriterOptions::default(), 30, 1000);
    check_all(&bag, 30, 1000);
    assert_eq!(m.message_count(), 30);
    assert_eq!(m.topics.iter().map(|t| t.message_count).collect::<Vec<_>>(), [10, 10, 10]);
    assert_eq!(m.duration_ns(), 29_000_000);
    let r = Reader::open(&bag).unwrap();
    assert_eq!(r.recorded_metadata(), Some(&m));
    // What the files' summaries say is what metadata.yaml says.
    let scanned = r.scan().unwrap();
    assert_eq!(scanned.files, m.files);
    assert_eq!(scanned.topics, m.topics);
    assert!(m.topics[0].type_description_hash.starts_with("RIHS01_"));
    assert!(m.topics[0].offered_qos_profiles.contains("reliability: 1"));
    // One file opens on its own too.
    assert_eq!(Reader::open(bag.join("run_0.mcap")).unwrap().messages().count(), 30);
}

#[test]
fn five_splits_by_size_lose_nothing_and_each_file_is_complete() {
    let dir = PrivateDir::new("freight-bag");
    let bag = dir.path().join("split");
    let options = WriterOptions { max_file_size: Some(20_000), chunk_size: 4096, ..WriterOptions::default() };
    let m = record(&bag, options, 120, 1000);
    assert!(m.files.len() >= 5, "{} files", m.files.len());
    assert_eq!(m.files.iter().map(|f| f.message_count).sum::<u64>(), 120);
    for f in &m.files {
        let bytes = fs::read(bag.join(&f.path)).unwrap();
        assert!(mcap::read::footer(&bytes).is_ok(), "{} has no footer", f.path);
        assert!(f.message_count > 0, "{} is empty", f.path);
    }
    check_all(&bag, 120, 1000);
}

#[test]
fn splits_by_time_follow_the_receive_clock() {
    let dir = PrivateDir::new("freight-bag");
    let bag = dir.path().join("timed");
    let options = WriterOptions { max_file_duration: Some(Duration::from_millis(10)), ..WriterOptions::default() };
    let m = record(&bag, options, 40, 16);
    // 40 messages 1 ms apart, a new file after each 10 ms.
    assert_eq!(m.files.len(), 4, "{:?}", m.files);
    check_all(&bag, 40, 16);
}

#[test]
fn compressed_chunks_read_back_the_same_and_split_by_size() {
    for compression in [Compression::Zstd, Compression::Lz4] {
        let dir = PrivateDir::new("freight-bag");
        let bag = dir.path().join("packed");
        // A compressed chunk reaches the file only when it closes: the size
        // limit still splits by what the files will hold.
        let options = WriterOptions { compression, max_file_size: Some(1_000_000), ..WriterOptions::default() };
        let m = record(&bag, options, 30, 100_000);
        assert!(m.files.len() >= 3, "{compression:?}: {} files", m.files.len());
        check_all(&bag, 30, 100_000);
        let size: u64 = fs::read_dir(&bag).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
        // The payload is a repeating pattern: compression must show.
        assert!(size < 30 * 100_000 / 4, "{compression:?}: {size} bytes");
    }
}

#[test]
fn a_file_cut_short_is_refused_with_the_remedy_and_reindex_recovers_its_complete_chunks() {
    let dir = PrivateDir::new("freight-bag");
    let bag = dir.path().join("crashed");
    let options = WriterOptions { chunk_size: 8192, ..WriterOptions::default() };
    record(&bag, options, 60, 4000);
    let file = bag.join("crashed_0.mcap");
    let full = fs::read(&file).unwrap();
    // The power goes out in the middle of the data section.
    let cut = full.len() / 2;
    fs::write(&file, &full[..cut]).unwrap();

    let r = Reader::open(&bag).unwrap();
    let err = r.messages().find_map(Result::err).expect("a cut file reads to an error");
    let text = err.to_string();
    assert!(text.contains("crashed_0.mcap") && text.contains("reindex"), "{text}");

    let report = reindex(&bag).unwrap();
    assert_eq!(report.len(), 1);
    assert!(report[0].rewritten);
    let kept = report[0].messages;
    assert!(kept > 10 && kept < 60, "kept {kept}");
    assert!(report[0].dropped_bytes > 0);
    // What was kept is the first `kept` messages, whole; metadata.yaml agrees.
    let r = Reader::open(&bag).unwrap();
    let got: Vec<_> = r.messages().map(Result::unwrap).collect();
    assert_eq!(got.len() as u64, kept);
    for (k, m) in got.iter().enumerate() {
        assert_eq!(m.data, payload(k % 3, k as u64, 4000));
    }
    assert_eq!(r.recorded_metadata().unwrap().message_count(), kept);
    assert_eq!(r.recorded_metadata().unwrap().topics.len(), 3);
    // A second reindex finds everything in order and changes nothing.
    let again = reindex(&bag).unwrap();
    assert!(!again[0].rewritten);
    assert_eq!(again[0].messages, kept);
}

#[test]
fn a_file_cut_before_its_first_record_and_a_file_not_listed_yet_are_recovered_too() {
    let dir = PrivateDir::new("freight-bag");
    let bag = dir.path().join("early");
    record(&bag, WriterOptions::default(), 9, 10);
    // A split had opened the next file when the process died: metadata.yaml
    // does not list it yet, and it holds only part of its magic.
    fs::write(bag.join("early_1.mcap"), &mcap::MAGIC[..3]).unwrap();
    let report = reindex(&bag).unwrap();
    assert_eq!(report.iter().map(|f| f.messages).collect::<Vec<_>>(), [9, 0]);
    let r = Reader::open(&bag).unwrap();
    assert_eq!(r.recorded_metadata().unwrap().files.len(), 2);
    assert_eq!(r.messages().count(), 9);
}

#[test]
fn corrupted_bytes_are_an_error_naming_the_file_never_a_crash() {
    let dir = PrivateDir::new("freight-bag");
    let bag = dir.path().join("bad");
    record(&bag, WriterOptions::default(), 30, 1000);
    let file = bag.join("bad_0.mcap");
    let mut bytes = fs::read(&file).unwrap();
    // Overwrite a stretch in the data section with garbage, lengths included.
    let at = bytes.len() / 3;
    for b in &mut bytes[at..at + 64] {
        *b = 0xff;
    }
    fs::write(&file, &bytes).unwrap();
    let r = Reader::open(&bag).unwrap();
    let results: Vec<_> = r.messages().collect();
    let err = results.iter().find_map(|m| m.as_ref().err()).expect("garbage is an error");
    assert!(err.to_string().contains("bad_0.mcap"), "{err}");
    // Not a bag at all.
    fs::write(dir.path().join("x.mcap"), b"hello, world").unwrap();
    let r = Reader::open(dir.path().join("x.mcap")).unwrap();
    assert!(r.messages().next().unwrap().is_err());
    assert!(matches!(Reader::open(dir.path().join("nothing")), Err(BagError::Io { .. })));
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    assert!(matches!(Reader::open(&empty), Err(BagError::NotABag { .. })));
}

#[test]
fn an_existing_directory_is_never_written_into() {
    let dir = PrivateDir::new("freight-bag");
    let bag = dir.path().join("taken");
    fs::create_dir(&bag).unwrap();
    fs::write(bag.join("keep.txt"), b"mine").unwrap();
    match Writer::create(&bag, WriterOptions::default()) {
        Err(e @ BagError::Exists { .. }) => assert!(e.to_string().contains("taken"), "{e}"),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("wrote into an existing directory"),
    }
    assert_eq!(fs::read(bag.join("keep.txt")).unwrap(), b"mine");
    assert_eq!(fs::read_dir(&bag).unwrap().count(), 1);
    let e = Writer::create(dir.path().join("no/such/parent"), WriterOptions::default()).err().unwrap();
    assert!(matches!(e, BagError::Io { .. }), "{e}");
}

#[test]
fn a_topic_is_added_once() {
    let dir = PrivateDir::new("freight-bag");
    let mut w = Writer::create(dir.path().join("b"), WriterOptions::default()).unwrap();
    let schema = Schema::built_in("std_msgs/msg/String").unwrap();
    w.add_topic("/a", schema.clone(), &[]).unwrap();
    assert!(matches!(w.add_topic("/a", schema, &[]), Err(BagError::DuplicateTopic { .. })));
}

/// Writes `images` and `clouds` (one topic each), then returns the reader.
fn images_and_clouds(dir: &Path, compression: Compression, images: &[Image], clouds: &[Float32MultiArray]) -> Reader {
    let mut w = Writer::create(dir, WriterOptions { compression, ..WriterOptions::default() }).unwrap();
    let qos = [OfferedQos { reliability: Reliability::Reliable, durability: Durability::Volatile }];
    let image = w.add_topic("/image", Schema::built_in(Image::TYPE_NAME).unwrap(), &qos).unwrap();
    let cloud = w.add_topic("/cloud", Schema::built_in(Float32MultiArray::TYPE_NAME).unwrap(), &qos).unwrap();
    let mut at = 1_700_000_000_000_000_000;
    for (id, cdr) in
        images.iter().map(|m| (image, m.to_cdr().unwrap())).chain(clouds.iter().map(|m| (cloud, m.to_cdr().unwrap())))
    {
        at += 1_000;
        w.write(id, &Record { data: &cdr, log_time_ns: at, publish_time_ns: at, sequence: 0 }).unwrap();
    }
    w.finish().unwrap();
    Reader::open(dir).unwrap()
}

fn image(n: u8) -> Image {
    Image {
        height: 480,
        width: 640,
        encoding: "rgb8".into(),
        step: 640 * 3,
        data: Buffer::from((0..640 * 480 * 3).map(|i| (i % 251) as u8 ^ n).collect::<Vec<u8>>()),
        ..Image::default()
    }
}

/// A cloud whose floats start `pad` bytes after a 4-byte boundary of the
/// payload: `pad` label characters move them.
fn cloud(label: &str) -> Float32MultiArray {
    let mut m = Float32MultiArray {
        data: Buffer::from((0..10_000).map(|i| i as f32 * 0.5).collect::<Vec<f32>>()),
        ..Float32MultiArray::default()
    };
    m.layout.dim.push(MultiArrayDimension { label: label.into(), size: 10_000, stride: 10_000 });
    m
}

#[test]
fn uncompressed_messages_are_the_files_memory_and_decode_with_arrays_viewing_it() {
    let dir = PrivateDir::new("freight-bag");
    let images = [image(1), image(2)];
    let r = images_and_clouds(&dir.path().join("b"), Compression::None, &images, &[]);
    let read: Vec<_> = r.messages().map(Result::unwrap).collect();
    assert_eq!(read.len(), 2);
    for (m, sent) in read.iter().zip(&images) {
        assert!(m.data.is_mapped(), "{:?}", m.data);
        let a: Image = m.decode().unwrap();
        let b: Image = m.decode().unwrap();
        assert_eq!(&a, sent);
        // Two decodes view the same bytes: neither copied them.
        let (pa, pb) = (a.data.as_slice().unwrap().as_ptr(), b.data.as_slice().unwrap().as_ptr());
        assert_eq!(pa, pb);
        assert!(m.data.as_ptr_range().contains(&pa), "the pixels are not inside the message's bytes");
    }
    drop(read);
    drop(r);

    // A flipped bit in a pixel read in place is caught by the chunk's CRC.
    let file = dir.path().join("b/b_0.mcap");
    let mut bytes = fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    fs::write(&file, &bytes).unwrap();
    let err = Reader::open(dir.path().join("b")).unwrap().messages().find_map(Result::err).expect("a CRC error");
    assert!(err.to_string().contains("CRC") && err.to_string().contains("b_0.mcap"), "{err}");
}

#[test]
fn decompressed_and_unaligned_arrays_are_copies_with_the_same_values() {
    let dir = PrivateDir::new("freight-bag");
    // One to three label bytes shift the floats off 4-byte alignment in the
    // file for at least two of the three, whatever the chunk's offset.
    let clouds = [cloud("a"), cloud("ab"), cloud("abc"), cloud("abcd")];
    let r = images_and_clouds(&dir.path().join("plain"), Compression::None, &[], &clouds);
    let mut views = 0;
    for (m, sent) in r.messages().map(Result::unwrap).zip(&clouds) {
        let c: Float32MultiArray = m.decode().unwrap();
        assert_eq!(&c, sent);
        let p = c.data.as_slice().unwrap().as_ptr().cast::<u8>();
        views += usize::from(m.data.as_ptr_range().contains(&p));
    }
    assert!((1..=2).contains(&views), "{views} of 4 clouds viewed the file: alignment is not what decode assumed");

    let r = images_and_clouds(&dir.path().join("zstd"), Compression::Zstd, &[image(3)], &clouds);
    let read: Vec<_> = r.messages().map(Result::unwrap).collect();
    assert!(read.iter().all(|m| !m.data.is_mapped()));
    assert_eq!(read[0].decode::<Image>().unwrap(), image(3));
    for (m, sent) in read[1..].iter().zip(&clouds) {
        assert_eq!(&m.decode::<Float32MultiArray>().unwrap(), sent);
    }
    // The wrong type is an error, not a crash.
    assert!(read[1].decode::<Image>().is_err());
}

#[test]
fn reindex_leaves_out_a_damaged_chunk_and_keeps_every_message_after_it() {
    for compression in [Compression::None, Compression::Zstd] {
        let dir = PrivateDir::new("freight-bag");
        let bag = dir.path().join("damaged");
        record(&bag, WriterOptions { chunk_size: 8192, compression, ..WriterOptions::default() }, 60, 4000);
        let file = bag.join("damaged_0.mcap");
        let mut bytes = fs::read(&file).unwrap();
        // One byte in the middle of the data section: inside some chunk's
        // messages (or, compressed, its stream).
        let middle = bytes.len() / 3;
        bytes[middle] ^= 0x01;
        fs::write(&file, &bytes).unwrap();
        let err = Reader::open(&bag).unwrap().messages().find_map(Result::err).expect("the damage is found");
        assert!(err.to_string().contains("damaged_0.mcap"), "{err}");

        let report = reindex(&bag).unwrap();
        assert!(report[0].rewritten, "{compression:?}");
        assert_eq!(report[0].damaged_chunks, 1, "{compression:?}");
        let kept: Vec<_> = Reader::open(&bag).unwrap().messages().map(Result::unwrap).collect();
        // The damaged chunk held a few messages; all the others, those after
        // it included, are back, byte for byte and in order.
        assert!(kept.len() >= 55 && kept.len() < 60, "{compression:?}: kept {}", kept.len());
        assert_eq!(kept.last().unwrap().sequence, 59);
        let mut previous = None;
        for m in &kept {
            let k = u64::from(m.sequence);
            assert_eq!(m.data, payload((k % 3) as usize, k, 4000), "message {k}");
            assert!(previous < Some(k));
            previous = Some(k);
        }
        assert_eq!(Reader::open(&bag).unwrap().recorded_metadata().unwrap().message_count(), kept.len() as u64);
        assert!(!reindex(&bag).unwrap()[0].rewritten, "a second reindex changes nothing");
    }
}

/// Messages of a megabyte and more go to the disk from the caller's memory:
/// each starts a chunk, after a padding record that puts its bytes at their
/// memory's alignment in the file. Whatever that alignment, among small
/// messages and across a split, every reader reads them back: freight's, the
/// mcap crate's record by record (which meets the padding), and reindex's
/// rewrite of a file cut short.
#[test]
fn large_messages_go_to_the_disk_from_the_callers_memory_and_every_reader_reads_them() {
    const MIB: usize = 1 << 20;
    let dir = PrivateDir::new("freight-bag");
    let bag = dir.path().join("pass");
    let options = WriterOptions { max_file_size: Some(8 * MIB as u64), ..WriterOptions::default() };
    let mut w = Writer::create(&bag, options).unwrap();
    let qos = [OfferedQos { reliability: Reliability::Reliable, durability: Durability::Volatile }];
    let topic = w.add_topic("/camera", Schema::built_in("sensor_msgs/msg/Image").unwrap(), &qos).unwrap();
    let sizes = [100, MIB, 3 * MIB + 5, 7, 2 * MIB + 4095, 5000, MIB + 1, 3 * MIB, 64, MIB + 4097];
    let (mut sent, mut large) = (Vec::new(), 0);
    for (k, &len) in sizes.iter().enumerate() {
        // Slices 0 to 3 bytes into their allocation: their alignment varies.
        let backing = payload(0, k as u64, len + 3);
        let data = &backing[k % 4..];
        let at = 1_700_000_000_000_000_000 + k as u64 * 1_000_000;
        w.write(topic, &Record { data, log_time_ns: at, publish_time_ns: at, sequence: k as u32 }).unwrap();
        if data.len() >= MIB {
            // Only the blocks the message shares with its neighbours are copied.
            large += data.len() - 2 * 4096;
        }
        sent.push(data.to_vec());
    }
    let passed = w.passed_through() as usize;
    let m = w.finish().unwrap();
    assert!(m.files.len() >= 2, "{} files", m.files.len());
    assert!(
        passed >= large,
        "{passed} bytes went from the caller's memory to the disk, {large} should have (does the temporary \
         directory's file system refuse O_DIRECT?)"
    );

    let read: Vec<Vec<u8>> = Reader::open(&bag).unwrap().messages().map(|m| m.unwrap().data.to_vec()).collect();
    assert!(read == sent, "freight's reader read other bytes");
    let mut streamed = Vec::new();
    for f in &m.files {
        let bytes = fs::read(bag.join(&f.path)).unwrap();
        streamed.extend(mcap::MessageStream::new(&bytes).unwrap().map(|m| m.unwrap().data.into_owned()));
    }
    assert!(streamed == sent, "the mcap crate's record stream read other bytes");

    // The last file cut inside its summary: reindex reads it record by record.
    let last = bag.join(&m.files.last().unwrap().path);
    let len = fs::metadata(&last).unwrap().len();
    fs::OpenOptions::new().write(true).open(&last).unwrap().set_len(len - 40).unwrap();
    reindex(&bag).unwrap();
    let read: Vec<Vec<u8>> = Reader::open(&bag).unwrap().messages().map(|m| m.unwrap().data.to_vec()).collect();
    assert!(read == sent, "reindex lost or changed messages");
}
