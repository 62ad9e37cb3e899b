//! A cgroup v2 directory of the tool's own for COMMAND (reap's `--cgroup`):
//! what is in it is COMMAND's tree, wherever its processes were re-parented,
//! and the kernel says when it is empty.
//!
//! The directory is made below the cgroup the tool runs in (the `0::` line
//! of `/proc/self/cgroup`, found under the cgroup2 mount that
//! `/proc/self/mountinfo` names), before COMMAND exists; the spawn puts
//! COMMAND into it before `execve` (a write of `0` to its `cgroup.procs`
//! by the child: see [`crate::spawn`]).
//! The tool itself stays where it was: it never moves a process into a
//! cgroup it was not given, and it enables no controller (its own cgroup
//! holds a process, itself, so the kernel's "no internal processes" rule
//! would refuse that anyway).
//!
//! - Members: `cgroup.procs`. A pid read there is signalled through a
//!   pidfd opened after the read, and only if a second read still lists it:
//!   then the pidfd names a member (the process that had the pid when it
//!   was opened still has it, or the signal finds it gone).
//! - KILL: one write to `cgroup.kill` (Linux 5.14); before that, freeze,
//!   KILL each member until no unsignalled one is listed (frozen, none can
//!   fork), thaw.
//! - Empty: `cgroup.events`' `populated 0`; the file wakes `poll` with
//!   `POLLPRI` when it changes, so the wait for the tree to end is one more
//!   descriptor of the one blocking call.

use crate::error::{describe, Error};
use crate::pidfd;
use crate::signal::Signal;
use crate::sorted::Set;
use rustix::fs::{Access, AtFlags, Mode, OFlags, CWD};
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Members opened as pidfds at once, at most (a descriptor each).
const BATCH: usize = 256;

/// COMMAND's cgroup.
#[derive(Debug)]
pub struct Cgroup {
    path: PathBuf,
    dir: OwnedFd,
    /// `cgroup.procs`, open for writing (the vfork child's way in).
    procs: OwnedFd,
    /// `cgroup.events`, open for reading (polled with POLLPRI).
    events: OwnedFd,
    /// The kernel has `cgroup.kill`.
    has_kill: bool,
    removed: bool,
}

/// What the job used, read from its cgroup before it is removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// `cpu.stat`: usage, user and system time, in microseconds.
    pub cpu_usec: Option<u64>,
    pub user_usec: Option<u64>,
    pub system_usec: Option<u64>,
    /// `memory.peak` in bytes, where the memory controller is enabled.
    pub memory_peak: Option<u64>,
}

impl Usage {
    /// `cpu 1.234s (user 1.000s, system 0.234s), memory.peak 1234 bytes`.
    pub fn line(&self) -> String {
        let secs = |us: u64| format!("{}.{:03}s", us / 1_000_000, us % 1_000_000 / 1000);
        let cpu = self.cpu_usec.map_or("unknown".into(), secs);
        let split = (self.user_usec.zip(self.system_usec)).map_or(String::new(), |(u, s)| {
            format!(" (user {}, system {})", secs(u), secs(s))
        });
        let memory = (self.memory_peak).map_or("unknown (no memory controller)".into(), |b| {
            format!("{b} bytes")
        });
        format!("cpu {cpu}{split}, memory.peak {memory}")
    }
}

/// One line, exit 125: why `--cgroup` cannot be used here.
fn refuse(why: String) -> Error {
    Error::usage(format!("--cgroup: {why}"))
}

/// The tool's own cgroup directory: the cgroup2 mount of `mountinfo`
/// joined with the `0::` path of `cgroup` (both the texts of those files).
pub fn own_dir(mountinfo: &[u8], cgroup: &[u8]) -> Result<PathBuf, String> {
    let own = cgroup
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"0::"))
        .ok_or("no cgroup2 mount (/proc/self/cgroup has no 0:: line): cgroup v2 is not in use")?;
    // The last cgroup2 mount wins (it is the one on top): found from the end.
    let (root, point) = (mountinfo.rsplit(|&b| b == b'\n'))
        .find_map(|line| {
            let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
            let dash = fields.iter().position(|&f| f == b"-")?;
            let cgroup2 = fields.get(dash + 1) == Some(&&b"cgroup2"[..]) && fields.len() >= 5;
            cgroup2.then(|| (unescape(fields[3]), unescape(fields[4])))
        })
        .ok_or("no cgroup2 mount (see /proc/self/mountinfo)")?;
    // The mount shows the hierarchy from `root` down: reap's cgroup must be
    // in that part of it.
    let rel = match own.strip_prefix(&root[..]) {
        _ if root == b"/" => own,
        Some(rest) if rest.is_empty() || rest[0] == b'/' => rest,
        _ => {
            return Err(format!(
                "no cgroup2 mount shows reap's cgroup {} (the mount shows {} only)",
                String::from_utf8_lossy(own),
                String::from_utf8_lossy(&root)
            ))
        }
    };
    if rel.split(|&b| b == b'/').any(|c| c == b"..") {
        return Err(format!(
            "reap's cgroup {} is outside its cgroup namespace",
            String::from_utf8_lossy(own)
        ));
    }
    let mut path = PathBuf::from(OsStr::from_bytes(&point));
    let rel = rel.strip_prefix(b"/").unwrap_or(rel);
    if !rel.is_empty() {
        path.push(OsStr::from_bytes(rel));
    }
    Ok(path)
}

/// The systemd unit (`NAME.service`, `NAME.scope`) whose cgroup holds
/// `dir`, if it is not delegated: systemd (251 on) marks a delegated
/// unit's cgroup with the `trusted.delegate` (or `user.delegate`) xattr.
fn undelegated_unit(dir: &Path) -> Option<String> {
    let (unit, name) = dir.ancestors().find_map(|d| {
        let name = d.file_name()?.as_bytes();
        (name.ends_with(b".service") || name.ends_with(b".scope")).then_some((d, name))
    })?;
    let mut buf = [0u8; 8];
    let delegated = ["trusted.delegate", "user.delegate"]
        .iter()
        .any(|x| rustix::fs::getxattr(unit, *x, &mut buf).is_ok_and(|n| buf[..n] == *b"1"));
    (!delegated).then(|| String::from_utf8_lossy(name).into_owned())
}

/// mountinfo's octal escapes (`\040` for a space) undone.
fn unescape(field: &[u8]) -> Vec<u8> {
    let (mut out, mut rest) = (Vec::with_capacity(field.len()), field);
    while let Some((&b, tail)) = rest.split_first() {
        let octal = |d: &&[u8]| b == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c));
        let (byte, skip) = match tail.get(..3).filter(octal) {
            Some(d) => (d.iter().fold(0u8, |n, c| n.wrapping_mul(8) + (c - b'0')), 3),
            None => (b, 0),
        };
        out.push(byte);
        rest = &tail[skip..];
    }
    out
}

impl Cgroup {
    /// Make COMMAND's cgroup below the tool's own, or say why it cannot be
    /// (exit 125: no cgroup2 mount, not writable, not able to hold
    /// processes). `name` is the directory's name (`reap.PID`; `reap.PID.N`
    /// where it is taken).
    pub fn create(name: &str) -> Result<Cgroup, Error> {
        let read = |p: &str| {
            crate::procfs::read(p).map_err(|e| refuse(format!("cannot read {p}: {}", describe(&e))))
        };
        let own =
            own_dir(&read("/proc/self/mountinfo")?, &read("/proc/self/cgroup")?).map_err(refuse)?;
        let not_writable = |what: &Path, e: io::Error| {
            refuse(format!(
                "reap's cgroup {} is not writable ({}): it was not delegated to this process \
                 (under systemd add Delegate=yes to the unit; in a container give it a private, \
                 writable cgroup namespace)",
                what.display(),
                describe(&e)
            ))
        };
        // A unit's cgroup belongs to systemd unless the unit says
        // Delegate=yes (which marks it with a delegate xattr), root or not.
        if let Some(unit) = undelegated_unit(&own) {
            return Err(refuse(format!(
                "reap's cgroup belongs to systemd's {unit}, which does not delegate it: \
                 add Delegate=yes to the unit (reap does not make cgroups where it was not given them)"
            )));
        }
        // Moving COMMAND in needs write access to the procs file of the
        // common ancestor, reap's own cgroup (the kernel's delegation rule).
        let procs = own.join("cgroup.procs");
        rustix::fs::accessat(CWD, &procs, Access::WRITE_OK, AtFlags::empty())
            .map_err(|e| not_writable(&own, e.into()))?;
        let mut path = own.join(name);
        let mut n = 0;
        loop {
            match rustix::fs::mkdirat(CWD, &path, Mode::from_raw_mode(0o755)) {
                Ok(()) => break,
                // Another reap's (PID 1 of another namespace is `reap.1`
                // too: empty while it starts its COMMAND), or a leftover:
                // left alone, another name.
                Err(rustix::io::Errno::EXIST) if n < 100 => {
                    n += 1;
                    path = own.join(format!("{name}.{n}"));
                }
                Err(e) => return Err(not_writable(&own, e.into())),
            }
        }
        Cgroup::open(path.clone()).inspect_err(|_| {
            let _ = rustix::fs::unlinkat(CWD, &path, AtFlags::REMOVEDIR);
        })
    }

    fn open(path: PathBuf) -> Result<Cgroup, Error> {
        let fail = |what: &str, e: rustix::io::Errno| {
            refuse(format!(
                "cannot open {}/{what}: {}",
                path.display(),
                describe(&e.into())
            ))
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let dir = rustix::fs::open(&path, flags, Mode::empty()).map_err(|e| fail("", e))?;
        // A child of a threaded cgroup is "domain invalid": it cannot
        // take a process.
        let kind = read_at(&dir, "cgroup.type").unwrap_or_default();
        let kind = String::from_utf8_lossy(&kind).trim().to_string();
        if !kind.is_empty() && kind != "domain" {
            return Err(refuse(format!(
                "a cgroup made below reap's is of type '{kind}' and cannot hold processes \
                 (cgroup v2's \"no internal processes\" rule; run reap in a domain cgroup of its own)"
            )));
        }
        let open = |name: &str, flags| at(&dir, name, flags).map_err(|e| fail(name, e));
        let procs = open("cgroup.procs", OFlags::WRONLY)?;
        let events = open("cgroup.events", OFlags::RDONLY)?;
        let has_kill =
            rustix::fs::accessat(&dir, "cgroup.kill", Access::WRITE_OK, AtFlags::empty()).is_ok();
        Ok(Cgroup {
            path,
            dir,
            procs,
            events,
            has_kill,
            removed: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `cgroup.procs` open for writing, for the vfork child's `0`.
    pub fn procs_fd(&self) -> BorrowedFd<'_> {
        self.procs.as_fd()
    }

    /// `cgroup.events`: poll it with POLLPRI (it is always readable).
    pub fn events_fd(&self) -> BorrowedFd<'_> {
        self.events.as_fd()
    }

    /// Whether a process is in it (`populated 1`). A read also re-arms the
    /// POLLPRI wake. A file that cannot be read is that of a removed
    /// cgroup (only an empty one can be): not populated.
    pub fn populated(&self) -> bool {
        let mut buf = [0u8; 256];
        let read = rustix::io::pread(&self.events, &mut buf, 0);
        read.is_ok_and(|n| buf[..n].split(|&b| b == b'\n').any(|l| l == b"populated 1"))
    }

    /// The pids in `cgroup.procs` now (none if it cannot be read).
    pub fn members(&self) -> Vec<i32> {
        let text = read_at(&self.dir, "cgroup.procs").unwrap_or_default();
        text.split(|&b| b == b'\n')
            .filter_map(|l| std::str::from_utf8(l).ok()?.parse().ok())
            .collect()
    }

    /// Send `sig` (and CONT after it, so a stopped member can act on it,
    /// unless `sig` is KILL or CONT) to every member not in `done`, which
    /// gets the pids signalled. A pid of `done` no longer listed is
    /// dropped from it: its process is gone, and a new member that gets
    /// the pid later is signalled. Returns how many got it.
    /// `only`: the members a walk found (an inner reap's cleanup started
    /// since is not among them, nor known to be guarded): the others wait
    /// for the next round.
    pub fn signal_members(
        &self,
        sig: Signal,
        done: &mut Set<i32>,
        only: Option<&Set<i32>>,
    ) -> usize {
        let members = self.members();
        done.retain(|p| members.contains(p));
        let listed: Vec<i32> = (members.into_iter())
            .filter(|p| !done.contains(p) && only.map_or(true, |o| o.contains(p)))
            .collect();
        let mut sent = 0;
        for batch in listed.chunks(BATCH) {
            let opened: Vec<(i32, _, Option<OwnedFd>)> = batch
                .iter()
                .filter_map(|&pid| {
                    let typed = crate::typed_pid(pid)?;
                    match pidfd::open(typed) {
                        Ok(fd) => Some((pid, typed, Some(fd))),
                        Err(e) if pidfd::unsupported(&e) => Some((pid, typed, None)),
                        Err(_) => None,
                    }
                })
                .collect();
            // Still listed after the pidfd was opened: the pidfd names a
            // member (or a process that is gone).
            let now: Set<i32> = self.members().into_iter().collect();
            for (pid, typed, fd) in opened.iter().filter(|(p, ..)| now.contains(p)) {
                let (typed, fd) = (*typed, fd.as_ref().map(|f| f.as_fd()));
                if pidfd::send_or_kill(fd, typed, sig).is_ok() {
                    sent += 1;
                    done.insert(*pid);
                    if sig != Signal::KILL && sig != Signal::CONT {
                        let _ = pidfd::send_or_kill(fd, typed, Signal::CONT);
                    }
                }
            }
        }
        sent
    }

    /// [`Cgroup::signal_members`] for the members outside process group
    /// `group` (`--stop-all`: COMMAND's group got the signal already) and
    /// not in `spared`.
    pub fn signal_outside(&self, sig: Signal, group: i32, spared: &Set<i32>) -> usize {
        let mut skip: Set<i32> = (self.members().into_iter())
            .filter(|&p| {
                // Raw: a group led from an ancestor PID namespace is 0.
                crate::sigraw::int_call(crate::sigraw::IntCall::Group(p))
                    .map_or(true, |g| g == group)
            })
            .chain(spared.iter().copied())
            .collect();
        self.signal_members(sig, &mut skip, None)
    }

    /// KILL to every member at once: one write to `cgroup.kill`, or,
    /// before Linux 5.14, freeze, KILL each, thaw. Returns how many
    /// members there were (a fork storm's count is a guess).
    pub fn kill(&self) -> io::Result<usize> {
        let count = self.members().len();
        if self.has_kill {
            self.write("cgroup.kill", b"1")?;
            return Ok(count);
        }
        let frozen = self.write("cgroup.freeze", b"1").is_ok();
        let mut done = Set::new();
        // Frozen, no member can fork: the list stops growing.
        for _ in 0..if frozen { 1000 } else { 3 } {
            if self.signal_members(Signal::KILL, &mut done, None) == 0 {
                break;
            }
        }
        if frozen {
            self.write("cgroup.freeze", b"0")?;
        }
        Ok(count.max(done.len()))
    }

    fn write(&self, file: &str, what: &[u8]) -> io::Result<()> {
        Ok(rustix::io::write(at(&self.dir, file, OFlags::WRONLY)?, what).map(drop)?)
    }

    /// What the job used (cpu.stat, memory.peak).
    pub fn usage(&self) -> Usage {
        let number = |v: &[u8]| std::str::from_utf8(v).ok()?.trim().parse::<u64>().ok();
        let stat = read_at(&self.dir, "cpu.stat").unwrap_or_default();
        // A `KEY VALUE` line of cpu.stat.
        let cpu = |key: &str| {
            (stat.split(|&b| b == b'\n'))
                .find_map(|l| l.strip_prefix(key.as_bytes())?.strip_prefix(b" "))
                .and_then(number)
        };
        Usage {
            cpu_usec: cpu("usage_usec"),
            user_usec: cpu("user_usec"),
            system_usec: cpu("system_usec"),
            memory_peak: read_at(&self.dir, "memory.peak").and_then(|t| number(&t)),
        }
    }

    /// Remove the directory (it must be empty of processes). Once only.
    pub fn remove(&mut self) -> io::Result<()> {
        // Only the directory made here: one of the same name made by
        // another process after ours was removed is not ours to remove.
        let id = |s: rustix::fs::Stat| (s.st_dev, s.st_ino);
        let ours = || rustix::fs::fstat(&self.dir).map(id) == rustix::fs::stat(&self.path).map(id);
        if !self.removed && ours() {
            match rustix::fs::unlinkat(CWD, &self.path, AtFlags::REMOVEDIR) {
                // Removed by the other process of the tool.
                Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.removed = true;
        Ok(())
    }

    /// Mark it removed if its directory is gone (removed by another
    /// process of the tool: reap's back, before its front takes over).
    pub fn notice_removal(&mut self) {
        if rustix::fs::stat(&self.path).is_err_and(|e| e == rustix::io::Errno::NOENT) {
            self.removed = true;
        }
    }

    pub fn is_removed(&self) -> bool {
        self.removed
    }
}

/// `name` in the cgroup's directory `dir`, opened close-on-exec.
fn at(dir: &OwnedFd, name: &str, flags: OFlags) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(dir, name, flags | OFlags::CLOEXEC, Mode::empty())
}

/// The interface file `name` in `dir`, read whole; `None` if it cannot be.
fn read_at(dir: &OwnedFd, name: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let file = std::fs::File::from(at(dir, name, OFlags::RDONLY).ok()?);
    std::io::Read::read_to_end(&mut &file, &mut out).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &[u8] = b"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
        35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
        41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

    #[test]
    fn the_cgroup2_mount_and_the_0_line_make_the_directory() {
        let cg = b"4:memory:/x\n0::/system.slice/a.service\n";
        assert_eq!(
            own_dir(HYBRID, cg).unwrap(),
            Path::new("/sys/fs/cgroup/unified/system.slice/a.service")
        );
        assert_eq!(
            own_dir(HYBRID, b"0::/\n").unwrap(),
            Path::new("/sys/fs/cgroup/unified")
        );
    }

    #[test]
    fn no_mount_no_line_or_outside_the_mount_is_refused() {
        let v1only = b"35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        assert!(own_dir(v1only, b"0::/\n")
            .unwrap_err()
            .contains("no cgroup2 mount"));
        assert!(own_dir(HYBRID, b"4:memory:/\n")
            .unwrap_err()
            .contains("no cgroup2 mount"));
        let bound = b"41 31 0:38 /a /mnt/c\\040g rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            own_dir(bound, b"0::/a/b\n").unwrap(),
            Path::new("/mnt/c g/b")
        );
        assert!(own_dir(bound, b"0::/ab\n").is_err());
        assert!(own_dir(HYBRID, b"0::/../x\n")
            .unwrap_err()
            .contains("namespace"));
    }

    #[test]
    fn usage_line() {
        let u = Usage {
            cpu_usec: Some(1_234_567),
            user_usec: Some(1_000_000),
            system_usec: Some(234_567),
            memory_peak: None,
        };
        assert_eq!(
            u.line(),
            "cpu 1.234s (user 1.000s, system 0.234s), memory.peak unknown (no memory controller)"
        );
        let memory_only = Usage {
            memory_peak: Some(4096),
            ..Usage::default()
        };
        assert_eq!(memory_only.line(), "cpu unknown, memory.peak 4096 bytes");
    }

    #[test]
    fn usage_is_read_from_cpu_stat_and_memory_peak() {
        let dir = std::env::temp_dir().join(format!("pgkit-usage.{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let stat = "usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\nnr_periods 0\n";
        for (file, text) in [
            ("cgroup.procs", ""),
            ("cgroup.events", "populated 0\n"),
            ("cpu.stat", stat),
            ("memory.peak", "4096\n"),
        ] {
            std::fs::write(dir.join(file), text).unwrap();
        }
        let usage = Cgroup::open(dir.clone()).unwrap().usage();
        std::fs::write(dir.join("cpu.stat"), "user_usec_x 9\nusage_usec 7\n").unwrap();
        std::fs::remove_file(dir.join("memory.peak")).unwrap();
        let partial = Cgroup::open(dir.clone()).unwrap().usage();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            usage,
            Usage {
                cpu_usec: Some(1_234_567),
                user_usec: Some(1_000_000),
                system_usec: Some(234_567),
                memory_peak: Some(4096),
            }
        );
        let only_cpu = Usage {
            cpu_usec: Some(7),
            ..Usage::default()
        };
        assert_eq!(partial, only_cpu);
    }
}
