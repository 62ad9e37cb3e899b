//! `/proc`, read as bytes: the one place of the engine that opens and parses
//! its files (`stat`, `status`, `task/TID/children`).
//!
//! A process name is whatever bytes the process chose (`PR_SET_NAME`), cut
//! by the kernel at 15 bytes — possibly in the middle of a multibyte
//! character, possibly holding `)`, spaces or newlines. Nothing here
//! requires text to be UTF-8: a process the walk cannot parse is a process
//! the sweep cannot kill, so every field is found by position in bytes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// A process name as `/proc/PID/stat` shows it: up to 15 bytes, any bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Name {
    bytes: [u8; 16],
    len: u8,
}

impl Name {
    fn new(raw: &[u8]) -> Name {
        let mut bytes = [0u8; 16];
        let len = raw.len().min(16);
        bytes[..len].copy_from_slice(&raw[..len]);
        Name {
            bytes,
            len: len as u8,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl std::fmt::Display for Name {
    /// The name with anything that is not printable UTF-8 escaped, so a
    /// log line stays one line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for chunk in self.as_bytes().utf8_chunks() {
            f.write_str(&crate::log::one_line(chunk.valid()))?;
            for b in chunk.invalid() {
                write!(f, "\\x{b:02x}")?;
            }
        }
        Ok(())
    }
}

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\"{self}\"")
    }
}

/// One process as `/proc/PID/stat` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proc {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    /// Start time in clock ticks after boot: with the pid, names a process.
    pub start: u64,
    /// `R`, `S`, `D`, `T`, `t`, `Z`, ...
    pub state: u8,
    pub name: Name,
}

impl Proc {
    /// Exited and not yet reaped: nothing left to signal.
    pub fn is_zombie(&self) -> bool {
        matches!(self.state, b'Z' | b'X')
    }

    /// Stopped by job control (it acts on nothing but KILL until continued).
    pub fn is_stopped(&self) -> bool {
        self.state == b'T'
    }
}

/// Parse `/proc/PID/stat`. The name (field 2) sits between the first `(`
/// and the last `)`, and may hold anything, so the other fields are
/// counted after that last `)`.
pub fn parse_stat(text: &[u8]) -> Option<Proc> {
    let open = text.iter().position(|&b| b == b'(')?;
    let close = text.iter().rposition(|&b| b == b')')?;
    if close < open {
        return None;
    }
    let pid = number(text[..open].strip_suffix(b" ")?)?;
    let mut fields = text[close + 1..]
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty());
    // proc(5) numbering: field 3 is the state, 4 ppid, 5 pgrp, 22 starttime.
    let state = *fields.next()?.first()?;
    let ppid = number(fields.next()?)?;
    let pgid = number(fields.next()?)?;
    let start = number(fields.nth(16)?)?;
    Some(Proc {
        pid: i32::try_from(pid).ok()?,
        ppid: i32::try_from(ppid).ok()?,
        pgid: i32::try_from(pgid).ok()?,
        start,
        state,
        name: Name::new(&text[open + 1..close]),
    })
}

/// An unsigned decimal number (a negative field, such as a tty's pgrp of
/// -1, is not one).
fn number(field: &[u8]) -> Option<u64> {
    if field.is_empty() || field.len() > 20 || !field.iter().all(u8::is_ascii_digit) {
        return None;
    }
    field.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// The pids of a `children` file (space-separated).
pub fn pids(text: &[u8]) -> Vec<i32> {
    text.split(|b| b.is_ascii_whitespace())
        .filter_map(|p| i32::try_from(number(p)?).ok())
        .collect()
}

/// The value of `Key:` in a `status` file, without the key and the tab.
pub fn status_field<'a>(status: &'a [u8], key: &str) -> Option<&'a [u8]> {
    status.split(|&b| b == b'\n').find_map(|line| {
        let rest = line.strip_prefix(key.as_bytes())?.strip_prefix(b":")?;
        Some(rest.trim_ascii())
    })
}

/// The time since boot in the unit of [`Proc::start`]: clock ticks of
/// `USER_HZ`, 100 on every architecture the tools are built for, as
/// `/proc/uptime` gives it (hundredths of a second, in the reader's time
/// namespace, as the start times are). `None` if it cannot be read.
pub fn uptime_ticks() -> Option<u64> {
    let text = read("/proc/uptime").ok()?;
    let first = text.split(|&b| b == b' ').next()?;
    let (secs, hundredths) = std::str::from_utf8(first).ok()?.split_once('.')?;
    let hundredths: u64 = hundredths.get(..2)?.parse().ok()?;
    let secs: u64 = secs.parse().ok()?;
    secs.checked_mul(100)?.checked_add(hundredths)
}

/// A `/proc` file, whole: `openat`, reads until the end (room for a
/// kilobyte more whenever the vector is full), `close`. std's `fs::read`
/// added musl's `fcntl` after the open, an `fstat` (a `/proc` file's size
/// is 0) and reads from 32 bytes, doubling: 10 system calls for
/// `/proc/self/stat`, 4 here.
pub fn read(path: impl AsRef<std::path::Path>) -> std::io::Result<Vec<u8>> {
    let fd = open(path.as_ref())?;
    // Read into the vector's spare room, not a buffer on the stack: a
    // kilobyte of stack in each caller this is inlined into.
    let mut out = Vec::new();
    loop {
        if out.len() == out.capacity() {
            out.reserve(1024);
        }
        match rustix::io::read(&fd, rustix::buffer::spare_capacity(&mut out)) {
            Ok(0) => return Ok(out),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// A file opened to read (`O_CLOEXEC`), by rustix: std's `File::open`
/// links in `io::Error::new` with a boxed string, whose `Debug` needs
/// core's Unicode tables (4 KB of each static binary).
///
/// Where no descriptor is left, the deadline timer gives its own back and
/// the open is tried once more: a tool short of descriptors would
/// otherwise lose `/proc` for good to its own timer, which takes the one
/// a reap frees and keeps it (reap(1), "Without /proc": a lack of
/// descriptors passes).
pub fn open(path: impl rustix::path::Arg) -> std::io::Result<std::fs::File> {
    Ok(path.into_with_c_str(open_c)?.into())
}

/// [`open`] of a C string: its code once, whatever the path's type.
fn open_c(path: &std::ffi::CStr) -> rustix::io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let open = || rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty());
    match open() {
        Err(rustix::io::Errno::MFILE) if crate::poll::close_timer() => open(),
        opened => opened,
    }
}

/// Where the symbolic link `path` points, as bytes.
pub fn link(path: impl rustix::path::Arg) -> Option<Vec<u8>> {
    rustix::fs::readlink(path, Vec::new())
        .ok()
        .map(std::ffi::CString::into_bytes)
}

/// `each` called with every name in directory `path` but `.` and `..`:
/// `getdents64` into one buffer (rustix's `Dir`), not musl's `opendir` and
/// std's `ReadDir` (an `Arc` of the path, a `DirEntry` for each name). An
/// error while listing ends the list, as std's iterator did when flattened.
pub fn each_name(path: &str, mut each: impl FnMut(&[u8])) -> std::io::Result<()> {
    let dir = rustix::fs::Dir::new(open(path)?)?;
    for entry in dir.map_while(Result::ok) {
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            each(name);
        }
    }
    Ok(())
}

/// Set once by the tools' start-up hook: the process has one thread, so
/// its children are all in its main thread's `children` file.
static SINGLE_THREADED: AtomicBool = AtomicBool::new(false);

/// Called by the start-up hook of a tool (which starts no thread).
pub(crate) fn single_threaded() {
    SINGLE_THREADED.store(true, Ordering::Relaxed);
}

/// `/proc/PID/stat`, or `None` if there is no such process.
pub fn stat(pid: i32) -> Option<Proc> {
    if pid <= 0 {
        return None;
    }
    parse_stat(&read(format!("/proc/{pid}/stat")).ok()?)
}

/// A zombie's status in `wait(2)`'s form: the `exit_code` field of
/// `/proc/PID/stat` (the 52nd, since Linux 3.5). The kernel shows it only
/// to a reader allowed to trace the process, and 0 to others, so it is
/// taken only where `/proc/PID/status` gives the process this reader's
/// user and group, real, effective and saved (the kernel's check for a
/// process without memory, as a zombie is); `None` otherwise.
pub fn exit_code(pid: i32) -> Option<i32> {
    if pid <= 0 {
        return None;
    }
    let status = read(format!("/proc/{pid}/status")).ok()?;
    let ours = |key: &str, id: u32| {
        status_field(&status, key).is_some_and(|ids| {
            // Real, effective and saved, all three there.
            let mut ids = ids
                .split(|b| b.is_ascii_whitespace())
                .filter(|f| !f.is_empty());
            (0..3).all(|_| ids.next().and_then(number) == Some(u64::from(id)))
        })
    };
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    if !ours("Uid", uid) || !ours("Gid", gid) {
        return None;
    }
    parse_exit_code(&read(format!("/proc/{pid}/stat")).ok()?)
}

/// The `exit_code` field of a `stat` line (the last, the 52nd).
fn parse_exit_code(text: &[u8]) -> Option<i32> {
    let close = text.iter().rposition(|&b| b == b')')?;
    let field = text[close + 1..]
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
        .nth(52 - 3)?;
    i32::try_from(number(field)?).ok()
}

/// This process's pid, as `/proc` and the tree walks name it.
pub(crate) fn own_pid() -> i32 {
    std::process::id() as i32
}

/// The children of every thread of `pid` (zombies included), from
/// `/proc/PID/task/TID/children`. Empty when the process is gone; `None`
/// when this process's own files cannot be read (a kernel without them).
pub fn children_of(pid: i32) -> Option<Vec<i32>> {
    let own = pid == own_pid();
    if own && SINGLE_THREADED.load(Ordering::Relaxed) {
        // One file instead of a directory listing and a file per thread:
        // one descriptor, not two at once, which a walk under a tight
        // RLIMIT_NOFILE cannot spare.
        return own_children();
    }
    let who = if own { "self".into() } else { pid.to_string() };
    let dir = format!("/proc/{who}/task");
    // Each task's file is read while the listing is open, as it was with
    // std's read_dir: with every name listed first, chaos seed 1796663935
    // (reap under RLIMIT_NOFILE=10, a member stopped) hung, and ends so.
    let (mut kids, mut failed) = (Vec::new(), false);
    let listed = each_name(&dir, |tid| {
        let tid = String::from_utf8_lossy(tid);
        match read(format!("{dir}/{tid}/children")) {
            Ok(text) => kids.extend(pids(&text)),
            Err(_) => failed |= own,
        }
    });
    (!own || listed.is_ok() && !failed).then_some(kids)
}

/// This process's own children (zombies included), from its main thread's
/// `children` file. `None` where that file cannot be read.
pub fn own_children() -> Option<Vec<i32>> {
    let text = read(format!("/proc/self/task/{}/children", own_pid())).ok()?;
    Some(pids(&text))
}

/// Every process of the system, from one pass over `/proc`.
pub fn all() -> Option<Vec<Proc>> {
    let mut all = Vec::new();
    let pid = |name: &[u8]| std::str::from_utf8(name).ok()?.parse::<i32>().ok();
    each_name("/proc", |name| all.extend(pid(name).and_then(stat))).ok()?;
    Some(all)
}

/// Why `/proc` cannot be used to find this process's descendants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unusable {
    /// Not mounted (or unreadable).
    Missing,
    /// Mounted, but another PID namespace's: its pids are not ours.
    Foreign,
    /// No file descriptor left to open it with (`RLIMIT_NOFILE`).
    NoDescriptor,
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unusable::Missing => "/proc is not mounted",
            Unusable::Foreign => "/proc belongs to another PID namespace",
            Unusable::NoDescriptor => {
                "no file descriptor is left to read /proc with (raise RLIMIT_NOFILE, ulimit -n)"
            }
        })
    }
}

/// 0: not checked yet; 1: usable; 2, 3: [`Unusable::Missing`], `Foreign`.
/// The answer of [`check`], once it is one to keep.
static CHECKED: OnceLock<Result<(), Unusable>> = OnceLock::new();

/// Whether `/proc` is mounted and shows this PID namespace. The answer is
/// kept for the process image (a fork stays in its parent's namespace),
/// except a lack of descriptors, which may pass.
///
/// The namespace is told by `NSpid` in `/proc/self/status`: it lists the
/// process's pid in every namespace from the one `/proc` belongs to down to
/// its own, so it holds exactly one pid, ours, only when `/proc` is this
/// namespace's. (Comparing `/proc/self` with our pid alone accepts a
/// foreign `/proc` in which our pid happens to have the same number.)
pub fn check() -> Result<(), Unusable> {
    if let Some(&answer) = CHECKED.get() {
        return answer;
    }
    let answer = look();
    if answer != Err(Unusable::NoDescriptor) {
        let _ = CHECKED.set(answer);
    }
    answer
}

fn look() -> Result<(), Unusable> {
    let status = read("/proc/self/status").map_err(|e| match e.raw_os_error() {
        Some(libc::EMFILE | libc::ENFILE) => Unusable::NoDescriptor,
        _ => Unusable::Missing,
    })?;
    let me = own_pid();
    if let Some(nspid) = status_field(&status, "NSpid") {
        return (pids(nspid) == [me]).then_some(()).ok_or(Unusable::Foreign);
    }
    // A kernel before 4.1 has no NSpid: the pid of /proc/self then has to do.
    let own = link("/proc/self").and_then(|p| std::str::from_utf8(&p).ok()?.parse::<i32>().ok());
    (own == Some(me)).then_some(()).ok_or(Unusable::Foreign)
}

/// Why a walk of `/proc` just failed although [`check`] found it usable:
/// most often no descriptor was left to open a file with.
pub fn diagnose() -> Unusable {
    (check().and_then(|()| look())).map_or_else(|e| e, |()| Unusable::Missing)
}

/// [`check`] as a yes or no.
pub fn usable() -> bool {
    check().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_zombies_exit_code() {
        let line = b"42 (a) b) Z 1 42 42 0 -1 4228108 0 0 0 0 0 0 0 0 20 0 1 0 3 0 0 \
            18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 768\n";
        assert_eq!(parse_exit_code(line), Some(768));
        assert_eq!(parse_exit_code(b"42 (a) Z 1 42 42"), None);
    }

    #[test]
    fn parses_stat_with_odd_names() {
        let text = b"42 (a) b (c)) S 7 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 1 2 3";
        let p = parse_stat(text).unwrap();
        assert_eq!(
            (p.pid, p.ppid, p.pgid, p.start, p.state),
            (42, 7, 42, 98765, b'S')
        );
        assert_eq!(p.name.as_bytes(), b"a) b (c)");
        assert!(parse_stat(b"42 (x) S 1").is_none());
        assert!(parse_stat(b"").is_none());
        assert!(parse_stat(b"42 x) S 1").is_none());
    }

    #[test]
    fn parses_stat_with_names_that_are_not_text() {
        // 15 bytes of "é" cut in the middle of the eighth, a newline, a
        // parenthesis and a space.
        let mut text = b"7 (".to_vec();
        text.extend_from_slice(&"é".repeat(7).as_bytes()[..14]);
        text.push(0xc3);
        text.extend_from_slice(b") S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 555 1 2 3");
        let p = parse_stat(&text).unwrap();
        assert_eq!((p.pid, p.ppid, p.start), (7, 1, 555));
        assert_eq!(p.name.to_string(), format!("{}\\xc3", "é".repeat(7)));
        let p = parse_stat(b"8 (a\n) b) Z 1 8 8 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9 1 2 3").unwrap();
        assert!(p.is_zombie());
        assert_eq!(p.name.to_string(), "a\\n) b");
    }

    #[test]
    fn status_fields_and_pid_lists() {
        let status = b"Name:\tx\nNSpid:\t40\t1\nSigIgn:\t0000000000000001\n";
        assert_eq!(status_field(status, "NSpid"), Some(&b"40\t1"[..]));
        assert_eq!(pids(status_field(status, "NSpid").unwrap()), [40, 1]);
        assert_eq!(status_field(status, "Sig"), None);
        assert_eq!(pids(b"12 13 \n"), [12, 13]);
    }

    #[test]
    fn own_stat_and_namespace() {
        let me = stat(own_pid()).unwrap();
        assert_eq!(me.pid, own_pid());
        assert_eq!(check(), Ok(()));
    }
}
