//! `freight bag info`: a bag as `ros2 bag info` prints it.

use std::path::Path;

use freight_bag::{Metadata, Reader};

/// Prints the bag at `path` (a directory or one `.mcap` file).
pub fn run(path: &Path) -> Result<(), String> {
    let bag = Reader::open(path).map_err(|e| e.to_string())?;
    // The files' own summaries are the truth; metadata.yaml may lag behind
    // them after a crash.
    let scanned = bag.scan().map_err(|e| e.to_string())?;
    let size: u64 = bag.files().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum();
    print!("{}", render(&scanned, size, bag.recorded_metadata().map(|m| m.ros_distro.as_str())));
    if let Some(recorded) = bag.recorded_metadata() {
        if recorded.message_count() != scanned.message_count() || recorded.files.len() != scanned.files.len() {
            eprintln!(
                "warning: metadata.yaml lists {} messages in {} files, the files hold {} in {}: the recording did not \
                 finish; `freight bag reindex {}` rewrites it",
                recorded.message_count(),
                recorded.files.len(),
                scanned.message_count(),
                scanned.files.len(),
                path.display()
            );
        }
    }
    Ok(())
}

/// The `ros2 bag info` layout.
fn render(m: &Metadata, size: u64, distro: Option<&str>) -> String {
    const INDENT: &str = "                   ";
    let mut out = String::new();
    for (i, f) in m.files.iter().enumerate() {
        let label = if i == 0 { "Files:             " } else { INDENT };
        out.push_str(&format!("{label}{}\n", crate::topic::shown(&f.path)));
    }
    out.push_str(&format!("Bag size:          {}\n", size_text(size)));
    out.push_str(&format!("Storage id:        {}\n", m.storage_identifier));
    out.push_str(&format!("ROS Distro:        {}\n", crate::topic::shown(distro.unwrap_or("unknown"))));
    let (start, duration) = (m.starting_time_ns(), m.duration_ns());
    out.push_str(&format!("Duration:          {}.{:09}s\n", duration / 1_000_000_000, duration % 1_000_000_000));
    out.push_str(&format!("Start:             {}\n", time_text(start)));
    out.push_str(&format!("End:               {}\n", time_text(start.saturating_add(duration))));
    out.push_str(&format!("Messages:          {}\n", m.message_count()));
    for (i, t) in m.topics.iter().enumerate() {
        let label = if i == 0 { "Topic information: " } else { INDENT };
        out.push_str(&format!(
            "{label}Topic: {} | Type: {} | Count: {} | Serialization Format: {}\n",
            crate::topic::shown(&t.name),
            crate::topic::shown(&t.type_name),
            t.message_count,
            crate::topic::shown(&t.serialization_format)
        ));
    }
    if m.topics.is_empty() {
        out.push_str("Topic information: \n");
    }
    out
}

/// `12.3 MiB`, as rosbag2 prints sizes.
fn size_text(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// `Nov 28 2026 00:12:01.123456789 (1764288721.123456789)`, local time.
fn time_text(ns: u64) -> String {
    let secs = (ns / 1_000_000_000) as libc::time_t;
    let frac = ns % 1_000_000_000;
    // SAFETY: localtime_r writes only into `tm`, plain data valid when zeroed.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&secs, &mut tm);
        tm
    };
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let month = MONTHS.get(tm.tm_mon as usize).copied().unwrap_or("???");
    format!(
        "{month} {:02} {} {:02}:{:02}:{:02}.{frac:09} ({secs}.{frac:09})",
        tm.tm_mday,
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use freight_bag::metadata::{FileInfo, TopicInfo};

    #[test]
    fn the_layout_is_ros2_bag_infos() {
        let m = Metadata {
            version: 8,
            storage_identifier: "mcap".into(),
            ros_distro: "freight".into(),
            files: vec![
                FileInfo { path: "b_0.mcap".into(), starting_time_ns: 1_500_000_000, duration_ns: 1, message_count: 2 },
                FileInfo { path: "b_1.mcap".into(), starting_time_ns: 2_500_000_000, duration_ns: 0, message_count: 1 },
            ],
            topics: vec![TopicInfo {
                name: "/cam".into(),
                type_name: "sensor_msgs/msg/Image".into(),
                serialization_format: "cdr".into(),
                message_count: 3,
                ..TopicInfo::default()
            }],
        };
        let text = render(&m, 3 << 20, Some("freight"));
        assert!(text.starts_with("Files:             b_0.mcap\n                   b_1.mcap\n"), "{text}");
        assert!(text.contains("Bag size:          3.0 MiB\n"), "{text}");
        assert!(text.contains("Duration:          1.000000000s\n"), "{text}");
        assert!(text.contains("Messages:          3\n"), "{text}");
        assert!(text.contains(
            "Topic information: Topic: /cam | Type: sensor_msgs/msg/Image | Count: 3 | Serialization Format: cdr\n"
        ));
        assert!(text.contains("(1.500000000)"), "{text}");
    }
}
