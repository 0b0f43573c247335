//! Reading `/proc/self/maps`: which mapping of this process contains an address
//! (the CUDA host backend registers a sample's whole segment; a publisher
//! reserves the tmpfs pages behind a loan).

/// One line of `/proc/<pid>/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapEntry {
    /// First address of the mapping.
    pub start: usize,
    /// One past its last address.
    pub end: usize,
    /// Whether it is a shared mapping (`s` in the permissions): memory that
    /// other processes may map too, as iceoryx2's segments are.
    pub shared: bool,
    /// Whether this process may write it (`w` in the permissions).
    pub writable: bool,
    /// Offset of the mapping in its file.
    pub offset: u64,
    /// The file's device (`major:minor`, hexadecimal in the file).
    pub dev: (u32, u32),
    /// The file's inode.
    pub inode: u64,
    /// The file's path (empty for anonymous mappings).
    pub path: String,
}

/// Parses one line: `start-end perms offset major:minor inode [path]`.
pub fn parse_line(line: &str) -> Option<MapEntry> {
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let offset = fields.next()?;
    let (major, minor) = fields.next()?.split_once(':')?;
    let inode = fields.next()?;
    let path = fields.next().unwrap_or("").trim_start().to_owned();
    let hex_usize = |s: &str| usize::from_str_radix(s, 16).ok();
    let entry = MapEntry {
        start: hex_usize(start)?,
        end: hex_usize(end)?,
        shared: perms.len() == 4 && perms.as_bytes()[3] == b's',
        writable: perms.len() == 4 && perms.as_bytes()[1] == b'w',
        offset: u64::from_str_radix(offset, 16).ok()?,
        dev: (u32::from_str_radix(major, 16).ok()?, u32::from_str_radix(minor, 16).ok()?),
        inode: inode.parse().ok()?,
        path,
    };
    (entry.start < entry.end).then_some(entry)
}

/// The mapping in `maps` (the text of a maps file) that contains `addr`.
pub fn find(maps: &str, addr: usize) -> Option<MapEntry> {
    maps.lines().filter_map(parse_line).find(|m| (m.start..m.end).contains(&addr))
}

/// The mapping of this process that contains `addr`, read from `/proc/self/maps`.
///
/// ```
/// let x = 7u64;
/// let here = freight_backend::maps::find_own(&x as *const u64 as usize).unwrap().expect("the stack is mapped");
/// assert!(here.writable && !here.shared);
/// ```
pub fn find_own(addr: usize) -> Result<Option<MapEntry>, String> {
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| format!("reading /proc/self/maps: {e}"))?;
    Ok(find(&maps, addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c0a00000-55d0c0a21000 r--p 00000000 fd:01 1835041                    /usr/bin/cat
55d0c2400000-55d0c2421000 rw-p 00000000 00:00 0                          [heap]
7f3a10000000-7f3a14000000 rw-s 00000000 00:1a 4242                       /dev/shm/iox2_5d1c_data_segment
7f3a20000000-7f3a20001000 rw-s 00001000 00:1a 4243                       /dev/shm/with spaces in name
7f3a30000000-7f3a30021000 rw-p 00000000 00:00 0 
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
";

    #[test]
    fn maps_lines_are_parsed_field_by_field() {
        let m = parse_line(MAPS.lines().nth(2).unwrap()).unwrap();
        assert_eq!(
            m,
            MapEntry {
                start: 0x7f3a_1000_0000,
                end: 0x7f3a_1400_0000,
                shared: true,
                writable: true,
                offset: 0,
                dev: (0, 0x1a),
                inode: 4242,
                path: "/dev/shm/iox2_5d1c_data_segment".into(),
            }
        );
        let spaced = parse_line(MAPS.lines().nth(3).unwrap()).unwrap();
        assert_eq!((spaced.offset, spaced.path.as_str()), (0x1000, "/dev/shm/with spaces in name"));
        let anonymous = parse_line(MAPS.lines().nth(4).unwrap()).unwrap();
        assert_eq!((anonymous.shared, anonymous.writable, anonymous.path.as_str()), (false, true, ""));
        let program = parse_line(MAPS.lines().next().unwrap()).unwrap();
        assert!(!program.writable && !program.shared);
        let top = parse_line(MAPS.lines().nth(5).unwrap()).unwrap();
        assert_eq!(top.end, 0xffff_ffff_ff60_1000);
    }

    #[test]
    fn the_mapping_containing_an_address_is_found() {
        assert_eq!(find(MAPS, 0x7f3a_1200_0000).map(|m| m.inode), Some(4242));
        assert_eq!(find(MAPS, 0x7f3a_1000_0000).map(|m| m.inode), Some(4242), "first byte");
        assert_eq!(find(MAPS, 0x7f3a_1400_0000), None, "one past the end");
        assert_eq!(find(MAPS, 0x55d0_c240_0010).map(|m| m.path), Some("[heap]".into()));
        assert_eq!(find(MAPS, 0x1000), None);
    }

    #[test]
    fn malformed_lines_are_skipped() {
        for bad in [
            "",
            "garbage",
            "7f3a-7f3b",
            "7f3b0000-7f3a0000 rw-s 00000000 00:1a 1 /backwards",
            "zz-7f3b0000 rw-s 00000000 00:1a 1 /x",
            "7f3a0000-7f3b0000 rw-s 00000000 001a 1 /x",
            "7f3a0000-7f3b0000 rw-s 00000000 00:1a notanumber /x",
        ] {
            assert_eq!(parse_line(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn this_process_finds_its_own_stack() {
        let local = 0u8;
        let m = find_own(&local as *const u8 as usize).unwrap().expect("the stack is mapped");
        assert!(m.start <= &local as *const u8 as usize);
    }
}
