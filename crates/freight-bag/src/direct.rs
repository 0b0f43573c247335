//! The file under the MCAP writer: written with `O_DIRECT` where the file
//! system allows it, so that a recording goes from the writer's memory to the
//! disk without the kernel copying it into the page cache.
//!
//! Why: profiled while recording 4K frames (`perf`, this repository's CI kind
//! of machine), 80 % of the recorder's CPU time was the kernel's copy of each
//! `write` into the page cache, far more than freight's own copy of the frame
//! out of shared memory (5 %). On a VM much of it is the hypervisor backing
//! the fresh pages the page cache takes (`dd` of 2 GB spent 5 s in the kernel
//! on never-used memory, 0.5 s on reused memory); the copy itself stays on
//! any machine. A recording also fills the page cache with data
//! nobody will read soon, evicting what the robot's other processes use.
//! `O_DIRECT` needs whole blocks at aligned offsets from aligned memory, so
//! bytes are gathered in an aligned buffer and written a buffer at a time,
//! except a large write whose memory sits at the file offset's alignment
//! (the bag writer pads the file to arrange it for large messages): its whole
//! blocks go to the disk from the caller's memory, copied by nobody.
//!
//! Where the file system refuses `O_DIRECT` (tmpfs on older kernels, some
//! overlay mounts), the file is written through a `BufWriter` as before.

use std::alloc::{self, Layout};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The alignment `O_DIRECT` asks of offsets, lengths and memory: the largest
/// logical block size of the devices freight meets.
pub(crate) const BLOCK: usize = 4096;

/// Bytes gathered before one write: large enough that the device sees big
/// requests, small against a recorder's cache.
const CAPACITY: usize = 16 << 20;

/// The fewest whole blocks a write passes to the disk from the caller's
/// memory: below it, the system call and the partial blocks on either side
/// cost more than the copy into the buffer saves.
pub(crate) const PASS_THROUGH_MIN: usize = 256 << 10;

/// A new file, written with `O_DIRECT` where possible (see the module docs).
pub(crate) enum BagFile {
    Direct(DirectFile),
    Buffered(BufWriter<File>),
}

impl BagFile {
    /// Creates `path`, which must not exist; with `O_DIRECT` if `direct` and
    /// the file system allows it. `passed_through` counts the bytes that go to
    /// the disk straight from the caller's memory.
    pub(crate) fn create(path: &Path, direct: bool, passed_through: Arc<AtomicU64>) -> io::Result<BagFile> {
        let buffered = |file| BagFile::Buffered(BufWriter::with_capacity(1 << 20, file));
        if !direct {
            return Ok(buffered(OpenOptions::new().write(true).create_new(true).open(path)?));
        }
        match OpenOptions::new().read(true).write(true).create_new(true).custom_flags(libc::O_DIRECT).open(path) {
            Ok(file) => Ok(BagFile::Direct(DirectFile::new(file, passed_through)?)),
            // The file system does not do O_DIRECT; the failed open may have
            // created the file already.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                Ok(buffered(OpenOptions::new().write(true).create(true).truncate(true).open(path)?))
            }
            Err(e) => Err(e),
        }
    }

    /// Writes out what is buffered, leaves the file exactly as long as what
    /// was written, and syncs it.
    pub(crate) fn finish(self) -> io::Result<()> {
        match self {
            BagFile::Direct(mut d) => {
                d.flush()?;
                d.file.sync_all()
            }
            BagFile::Buffered(b) => b.into_inner().map_err(|e| e.into_error())?.sync_all(),
        }
    }

    /// Whether the file is written with `O_DIRECT`.
    pub(crate) fn is_direct(&self) -> bool {
        matches!(self, BagFile::Direct(_))
    }
}

impl Write for BagFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            BagFile::Direct(d) => d.write(buf),
            BagFile::Buffered(b) => b.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            BagFile::Direct(d) => d.flush(),
            BagFile::Buffered(b) => b.flush(),
        }
    }
}

impl Seek for BagFile {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        match self {
            BagFile::Direct(d) => d.seek(to),
            BagFile::Buffered(b) => b.seek(to),
        }
    }
}

/// A file opened with `O_DIRECT`. The buffer always holds the file's tail:
/// everything before `buf_start` is on disk in whole blocks, and
/// `buf_start + buf_len` is the file's length. Writes behind the buffer (the
/// MCAP writer going back to fill in a chunk's header) read, patch and rewrite
/// the blocks they touch.
pub(crate) struct DirectFile {
    file: File,
    buf: AlignedBuf,
    /// The file offset of `buf`'s first byte; a multiple of `BLOCK`.
    buf_start: u64,
    buf_len: usize,
    pos: u64,
    /// Whether the buffer holds bytes not written yet.
    dirty: bool,
    /// Bytes written by [`DirectFile::pass_through`], counted where the
    /// file's owner reads them.
    passed_through: Arc<AtomicU64>,
}

impl DirectFile {
    fn new(file: File, passed_through: Arc<AtomicU64>) -> io::Result<DirectFile> {
        Ok(DirectFile {
            file,
            buf: AlignedBuf::new(CAPACITY)?,
            buf_start: 0,
            buf_len: 0,
            pos: 0,
            dirty: false,
            passed_through,
        })
    }

    /// Appends `data` mostly from its own memory: completes the buffer's last
    /// block from its head, writes the buffer out, then writes `data`'s whole
    /// blocks from where they are. Only when appending, when `data`'s memory
    /// sits at the file offset's alignment (so that what follows the head is
    /// aligned in both) and when at least [`PASS_THROUGH_MIN`] bytes would
    /// pass. Returns how many bytes it wrote; 0 when it did not apply, and the
    /// rest of `data` (less than a block) is left to the buffer.
    fn pass_through(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.pos != self.end() || !(data.as_ptr() as u64).wrapping_sub(self.pos).is_multiple_of(BLOCK as u64) {
            return Ok(0);
        }
        let head = (BLOCK - self.pos as usize % BLOCK) % BLOCK;
        let whole = data.len().saturating_sub(head) / BLOCK * BLOCK;
        if whole < PASS_THROUGH_MIN {
            return Ok(0);
        }
        // `buf_start` and `BLOCK`-aligned `CAPACITY` keep the completed block inside the buffer.
        let offset = (self.pos - self.buf_start) as usize;
        self.buf.as_mut()[offset..offset + head].copy_from_slice(&data[..head]);
        self.buf_len = offset + head;
        self.write_buffer()?;
        let at = self.pos + head as u64;
        self.file.write_all_at(&data[head..head + whole], at)?;
        self.buf_start = at + whole as u64;
        self.buf_len = 0;
        self.pos = self.buf_start;
        self.dirty = false;
        self.passed_through.fetch_add(whole as u64, Ordering::Relaxed);
        Ok(head + whole)
    }

    fn end(&self) -> u64 {
        self.buf_start + self.buf_len as u64
    }

    /// Writes `data` at `at`, before the buffer: block by block, each read,
    /// patched and written back.
    fn patch_on_disk(&mut self, mut at: u64, mut data: &[u8]) -> io::Result<()> {
        let mut block = AlignedBuf::new(BLOCK)?;
        while !data.is_empty() {
            let block_start = at - at % BLOCK as u64;
            let offset = (at - block_start) as usize;
            let n = data.len().min(BLOCK - offset);
            self.file.read_exact_at(block.as_mut(), block_start)?;
            block.as_mut()[offset..offset + n].copy_from_slice(&data[..n]);
            self.file.write_all_at(block.as_ref(), block_start)?;
            at += n as u64;
            data = &data[n..];
        }
        Ok(())
    }

    /// Writes the buffer's bytes, its last block padded with what the buffer
    /// holds past `buf_len` (the file is cut back to its length by `flush`).
    fn write_buffer(&mut self) -> io::Result<()> {
        let len = self.buf_len.next_multiple_of(BLOCK);
        self.file.write_all_at(&self.buf.as_ref()[..len], self.buf_start)
    }
}

impl Write for DirectFile {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.pos < self.buf_start {
            let n = data.len().min((self.buf_start - self.pos) as usize);
            self.patch_on_disk(self.pos, &data[..n])?;
            self.pos += n as u64;
            return Ok(n);
        }
        let passed = self.pass_through(data)?;
        if passed > 0 {
            return Ok(passed);
        }
        // `seek` keeps `pos` within the file, so this is inside the buffer or at its end.
        let offset = (self.pos - self.buf_start) as usize;
        if offset == CAPACITY {
            self.write_buffer()?;
            self.buf_start += CAPACITY as u64;
            self.buf_len = 0;
            return self.write(data);
        }
        let n = data.len().min(CAPACITY - offset);
        self.buf.as_mut()[offset..offset + n].copy_from_slice(&data[..n]);
        self.buf_len = self.buf_len.max(offset + n);
        self.pos += n as u64;
        self.dirty = true;
        Ok(n)
    }

    /// Puts every byte written on disk (not synced), and keeps the last,
    /// partial block in the buffer for the writes that follow.
    fn flush(&mut self) -> io::Result<()> {
        if !self.dirty {
            return Ok(());
        }
        self.write_buffer()?;
        self.dirty = false;
        let whole = self.buf_len - self.buf_len % BLOCK;
        self.buf.as_mut().copy_within(whole..self.buf_len, 0);
        self.buf_start += whole as u64;
        self.buf_len -= whole;
        self.file.set_len(self.end())
    }
}

impl Seek for DirectFile {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let end = self.end();
        let target = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => end.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        match target {
            Some(n) if n <= end => {
                self.pos = n;
                Ok(n)
            }
            _ => Err(io::Error::new(io::ErrorKind::InvalidInput, "a bag file is written without holes")),
        }
    }
}

impl Drop for DirectFile {
    /// Like `BufWriter`, puts what is buffered on disk, as far as it can: a
    /// writer dropped on an error path keeps every complete chunk. After
    /// `flush` there is nothing left to write.
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// Heap memory aligned to `BLOCK`, zeroed when allocated.
struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    layout: Layout,
}

// SAFETY: AlignedBuf owns its allocation, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    fn new(len: usize) -> io::Result<AlignedBuf> {
        let layout = Layout::from_size_align(len, BLOCK).map_err(io::Error::other)?;
        // SAFETY: `layout` has a non-zero size (both callers pass a multiple of BLOCK).
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(ptr).ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        Ok(AlignedBuf { ptr, layout })
    }

    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr` holds `layout.size()` initialised (zeroed) bytes that this owns.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_ref`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic byte pattern, so that misplaced bytes show.
    fn pattern(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// What the MCAP writer does to its file: appends of every size (a
    /// frame larger than the buffer among them), going back to patch a header
    /// behind the buffer or inside it, returning to the end, flushing now and
    /// then. The file must read back as the same operations on a `Vec`.
    #[test]
    fn a_direct_file_reads_back_as_written_through_patches_and_flushes() {
        write_as_mcap_does(true);
    }

    #[test]
    fn a_buffered_file_reads_back_as_written_through_patches_and_flushes() {
        write_as_mcap_does(false);
    }

    fn write_as_mcap_does(direct: bool) {
        let dir = freight_testkit::PrivateDir::new("bag-direct");
        let path = dir.path().join("f.mcap");
        let mut f = BagFile::create(&path, direct, Arc::default()).expect("create");
        // The repository's file systems (ext4 and tmpfs here and on CI) do
        // O_DIRECT: this test is about that path, so say which one ran.
        eprintln!("asked for O_DIRECT: {direct}, got it: {}", f.is_direct());
        let mut model: Vec<u8> = Vec::new();
        let sizes = [1usize, 9, 4095, 4096, 4097, 100_000, CAPACITY + 12_345, 3, BLOCK * 3 + 7, 2 * CAPACITY];
        for (i, &size) in sizes.iter().enumerate() {
            let header_at = model.len() as u64;
            let placeholder = [0u8; 60];
            f.write_all(&placeholder).unwrap();
            model.extend_from_slice(&placeholder);
            let data = pattern(size, i as u64);
            f.write_all(&data).unwrap();
            model.extend_from_slice(&data);
            // Back to the header, which may straddle a block and lie before the buffer.
            let header = pattern(60, 1000 + i as u64);
            assert_eq!(f.seek(SeekFrom::Start(header_at)).unwrap(), header_at);
            f.write_all(&header).unwrap();
            model[header_at as usize..header_at as usize + 60].copy_from_slice(&header);
            assert_eq!(f.seek(SeekFrom::End(0)).unwrap(), model.len() as u64);
            if i % 3 == 2 {
                f.flush().unwrap();
                assert_eq!(std::fs::metadata(&path).unwrap().len(), model.len() as u64, "flushed length");
            }
        }
        if direct {
            assert!(f.seek(SeekFrom::End(1)).is_err(), "a hole is refused");
        }
        f.finish().expect("finish");
        let read = std::fs::read(&path).unwrap();
        assert_eq!(read.len(), model.len(), "the file's length is what was written, not whole blocks");
        assert!(read == model, "the file differs from what was written");
    }

    /// A write whose memory sits at the file offset's alignment passes its
    /// whole blocks from where they are, after any small write, then a patch
    /// behind it (the MCAP writer's chunk header) and the bytes after it land
    /// where they should; one not at the alignment goes through the buffer.
    #[test]
    fn a_write_at_its_memorys_alignment_passes_to_the_disk_from_where_it_is() {
        let dir = freight_testkit::PrivateDir::new("bag-direct-pass");
        let path = dir.path().join("f.mcap");
        let passed = Arc::new(AtomicU64::new(0));
        let mut f = BagFile::create(&path, true, passed.clone()).expect("create");
        assert!(f.is_direct(), "the temporary directory's file system refuses O_DIRECT");
        let passed_through = || passed.load(Ordering::Relaxed);
        let mut model: Vec<u8> = Vec::new();
        let len = PASS_THROUGH_MIN + BLOCK + 9;
        for (i, lead) in [5usize, BLOCK, 0, 77, CAPACITY - 3].into_iter().enumerate() {
            let small = pattern(lead, i as u64);
            f.write_all(&small).unwrap();
            model.extend_from_slice(&small);
            let at = model.len();
            let backing = pattern(len + BLOCK, 100 + i as u64);
            let skew = (at as u64).wrapping_sub(backing.as_ptr() as u64) % BLOCK as u64;
            let aligned = &backing[skew as usize..skew as usize + len];
            let before = passed_through();
            f.write_all(aligned).unwrap();
            model.extend_from_slice(aligned);
            assert!(passed_through() - before >= (len - 2 * BLOCK) as u64, "write {i} did not pass through");
            // The same bytes one off the alignment are copied.
            let before = passed_through();
            let off = &backing[skew as usize + 1..skew as usize + 1 + len];
            f.write_all(off).unwrap();
            model.extend_from_slice(off);
            assert_eq!(passed_through(), before, "write {i} off the alignment passed through");
            let header = pattern(60, 200 + i as u64);
            let header_at = at.saturating_sub(30) as u64;
            f.seek(SeekFrom::Start(header_at)).unwrap();
            f.write_all(&header).unwrap();
            model[header_at as usize..header_at as usize + 60].copy_from_slice(&header);
            f.seek(SeekFrom::End(0)).unwrap();
        }
        f.finish().expect("finish");
        assert!(std::fs::read(&path).unwrap() == model, "the file differs from what was written");
    }

    #[test]
    fn a_direct_file_dropped_without_finish_keeps_what_was_written() {
        let dir = freight_testkit::PrivateDir::new("bag-direct-drop");
        let path = dir.path().join("f.mcap");
        let data = pattern(3 * BLOCK + 5, 7);
        {
            let mut f = BagFile::create(&path, true, Arc::default()).expect("create");
            f.write_all(&data).unwrap();
        }
        assert!(std::fs::read(&path).unwrap() == data);
    }

    #[test]
    fn an_existing_file_is_not_overwritten() {
        let dir = freight_testkit::PrivateDir::new("bag-direct-exists");
        let path = dir.path().join("f.mcap");
        std::fs::write(&path, b"kept").unwrap();
        for direct in [true, false] {
            let e = BagFile::create(&path, direct, Arc::default()).err().expect("create_new refuses an existing file");
            assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        }
        assert_eq!(std::fs::read(&path).unwrap(), b"kept");
    }
}
