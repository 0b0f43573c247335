//! Bags written and read back through the library: every byte, across
//! splits and compressions, after a crash (reindex), and bad input refused
//! with the file named.

use std::fs;
use std::path::Path;
use std::time::Duration;

use freight_bag::{
    reindex, BagError, Compression, Durability, OfferedQos, Reader, Record, Reliability, Schema, Writer, WriterOptions,
};
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
