//! Who did not stop: when a grace runs out, each survivor is named with the
//! reason `/proc/PID/status` gives for it — it ignores the stop signal, blocks
//! it, catches it (and its handler has not ended it), or cannot act on it
//! yet (uninterruptible sleep, or stopped).
//!
//! The line goes to stderr even without `-v`, before the kill signal, so a
//! slow shutdown can be blamed on the process that caused it.

use crate::procfs::{self, Proc};
use crate::signal::{SigSet, Signal};
use crate::sorted::{Map, Set};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::time::Instant;

/// Why a process is still there after the stop signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Ignores,
    Blocks,
    Catches,
    /// In uninterruptible sleep (`D`): no signal acts until it wakes.
    Uninterruptible,
    /// Stopped (`T`): it acts on nothing but KILL until continued.
    Stopped,
    /// None of the above could be read (the default action should have
    /// ended it: it may be exiting right now).
    Unknown,
}

/// One survivor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Survivor {
    pub pid: i32,
    pub name: String,
    pub reason: Reason,
    /// Whether the stop signal was sent to it (it is in a process group
    /// the stop went to); a process never sent it is not said to have
    /// resisted it.
    pub sent: bool,
    /// Not sent it because it started after the stop signal went out.
    pub late: bool,
}

/// The reason from the masks of `status` (the text of /proc/PID/status) and
/// the state letter, for the stop signal `sig`.
pub fn reason(status: &[u8], sig: Signal) -> Reason {
    // Whether `sig` is in the mask `key` (SigIgn, SigBlk, SigCgt).
    let has = |key| {
        procfs::status_field(status, key)
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| u64::from_str_radix(v, 16).ok())
            .is_some_and(|bits| SigSet::from_bits(bits).contains(sig))
    };
    match procfs::status_field(status, "State").and_then(|v| v.first().copied()) {
        Some(b'D') => Reason::Uninterruptible,
        Some(b'T' | b't') => Reason::Stopped,
        _ if has("SigIgn") => Reason::Ignores,
        _ if has("SigBlk") => Reason::Blocks,
        _ if has("SigCgt") => Reason::Catches,
        _ => Reason::Unknown,
    }
}

/// Read `pid`'s name and reason; `None` once it is gone (or a zombie).
pub fn survivor(pid: i32, sig: Signal) -> Option<Survivor> {
    let stat = procfs::stat(pid).filter(|p| !p.is_zombie())?;
    let status = procfs::read(format!("/proc/{pid}/status")).ok()?;
    Some(Survivor {
        pid,
        name: stat.name.to_string(),
        reason: reason(&status, sig),
        sent: true,
        late: false,
    })
}

/// What every tool's binary holds (pgkit::main! keeps it in the file):
/// with the file's name, how a tool installed elsewhere is known.
pub static MARK: &[u8] =
    b"\0pgwrap suite: pgwrap, graceful, reap; seen through by their survivor lines\0";

/// The names the tools are installed under.
const NAMES: [&str; 3] = ["pgwrap", "graceful", "reap"];

/// The most of a binary read for [`MARK`] (the tools are well under 4 MiB).
const MAX_SCAN: usize = 32 << 20;

/// The suite's own binaries (pgwrap, graceful, reap), known by the file
/// they run (device and inode of `/proc/PID/exe`), not by a name alone:
/// this tool's own and those installed next to it; and a file elsewhere
/// (another installation in a chain: a container's entrypoint, a distro's
/// package beside a build) named as a tool whose bytes hold [`MARK`].
pub struct Tools {
    ids: Vec<(u64, u64)>,
    /// Files elsewhere already looked at, and whether they are tools.
    seen: std::cell::RefCell<Map<(u64, u64), bool>>,
}

fn file_id(path: &std::path::Path) -> Option<(u64, u64)> {
    let st = rustix::fs::stat(path).ok()?;
    Some((st.st_dev as u64, st.st_ino as u64))
}

/// Some when the file `pid` runs is named as a tool and holds [`MARK`].
fn marked_tool(pid: i32) -> Option<()> {
    use std::io::Read;
    let exe = format!("/proc/{pid}/exe");
    let link = procfs::link(&*exe)?;
    // "PATH (deleted)" once the package was upgraded under it.
    let link = String::from_utf8_lossy(&link);
    let path = link.strip_suffix(" (deleted)").unwrap_or(&link);
    let name = path.rsplit('/').next().unwrap_or_default();
    NAMES.contains(&name).then_some(())?;
    let mut file = procfs::open(&*exe).ok()?;
    let keep = MARK.len() - 1;
    let mut buf = vec![0u8; 64 * 1024 + keep];
    let (mut have, mut read) = (0, 0);
    while read < MAX_SCAN {
        let n = file.read(&mut buf[have..]).ok().filter(|&n| n > 0)?;
        read += n;
        have += n;
        if buf[..have].windows(MARK.len()).any(|w| w == MARK) {
            return Some(());
        }
        // The last bytes may start the mark: keep them.
        let tail = have.saturating_sub(keep);
        buf.copy_within(tail..have, 0);
        have -= tail;
    }
    None
}

impl Tools {
    pub fn find() -> Tools {
        let own = procfs::link("/proc/self/exe").map(|p| PathBuf::from(OsString::from_vec(p)));
        let mut ids: Vec<(u64, u64)> = file_id("/proc/self/exe".as_ref()).into_iter().collect();
        if let Some(dir) = own.as_deref().and_then(|p| p.parent()) {
            for name in NAMES {
                ids.extend(file_id(&dir.join(name)));
            }
        }
        Tools {
            ids,
            seen: Default::default(),
        }
    }

    /// Whether `pid` runs one of the suite's tools.
    pub fn is_tool(&self, pid: i32) -> bool {
        let Some(id) = file_id(format!("/proc/{pid}/exe").as_ref()) else {
            return false;
        };
        let mut seen = self.seen.borrow_mut();
        self.ids.contains(&id) || *seen.get_or_insert_with(id, || marked_tool(pid).is_some())
    }
}

/// The survivors among `tree` (a walk of this process's descendants) of
/// the stop signal `sig` sent to COMMAND's group `group` (to every
/// descendant if `all_sent`), `skip` left out. The suite's own tools are
/// seen through: a pgwrap, graceful or reap is never named, and the stop
/// signal counts as sent to the group of each COMMAND a tool it reached
/// leads (it passes the signal on); a process outside those groups is said
/// not to have been sent it. `sent_to` decides first where the caller
/// knows better (a process started after the stop signal went out was not
/// sent it, whatever its group); `None` leaves it to the groups. Unless
/// `all_sent`, a member of `group` that started after the stop signal went
/// out to it (`stopped`) is said to be late: in a later tick, or up to 10
/// ticks before when the default action would have ended it.
pub fn below(
    tree: &[Proc],
    group: i32,
    all_sent: bool,
    stopped: Option<Instant>,
    sig: Signal,
    skip: &Set<i32>,
    sent_to: impl Fn(&Proc) -> Option<bool>,
) -> Vec<Survivor> {
    let tools = Tools::find();
    let mut is_tool = Map::new();
    let mut tool = |pid: i32| *is_tool.get_or_insert_with(pid, || tools.is_tool(pid));
    let live: Vec<&Proc> = tree.iter().filter(|p| !p.is_zombie()).collect();
    let (mut reached, mut tools_reached) = ([group].into_iter().collect::<Set<_>>(), Set::new());
    let mut grew = true;
    while std::mem::take(&mut grew) {
        for p in &live {
            if reached.contains(&p.pgid) && tool(p.pid) {
                grew |= tools_reached.insert(p.pid);
            }
            // A COMMAND a reached tool leads (reap's back too: the front's
            // child, in a group of its own).
            if tools_reached.contains(&p.ppid) && p.pid == p.pgid {
                grew |= reached.insert(p.pgid);
            }
        }
    }
    // A group whose leader is gone cannot be placed: its members may have
    // been sent the signal by a tool that has left since; only a group led
    // by a live process outside the reached ones was surely not sent it.
    let leaders: Set<i32> = live.iter().map(|p| p.pid).collect();
    // When the stop went out, in boot ticks as the start times are: now's,
    // less the time since (read here, not as the signal goes out).
    let ticks = |d: std::time::Duration| (d.as_millis() / 10) as u64;
    let stop =
        stopped.and_then(|at| Some(procfs::uptime_ticks()?.saturating_sub(ticks(at.elapsed()))));
    let mut out = Vec::new();
    for p in live.iter().filter(|p| !skip.contains(&p.pid)) {
        if tool(p.pid) {
            continue;
        }
        if let Some(mut s) = survivor(p.pid, sig) {
            let said = sent_to(p);
            s.late = said == Some(false)
                || !all_sent
                    && p.pgid == group
                    // Within a tenth of a second before the time taken, a
                    // member whose TERM is at its default (the time is read
                    // once the signal is out, in ticks of 10 ms, on a
                    // machine that may be loaded): it would have died of it.
                    && stop.is_some_and(|at| {
                        p.start > at || p.start + 10 >= at && s.reason == Reason::Unknown
                    });
            s.sent = !s.late
                && said.unwrap_or_else(|| {
                    all_sent || reached.contains(&p.pgid) || !leaders.contains(&p.pgid)
                });
            out.push(s);
        }
    }
    out
}

impl Survivor {
    /// One word, for the event log: the reason's, `unsent` where the stop
    /// signal never went to it.
    pub fn word(&self) -> &'static str {
        match self.reason {
            _ if !self.sent => "unsent",
            Reason::Ignores => "ignores",
            Reason::Blocks => "blocks",
            Reason::Catches => "catches",
            Reason::Uninterruptible => "uninterruptible",
            Reason::Stopped => "stopped",
            Reason::Unknown => "unknown",
        }
    }

    /// `pid 42 (sleep) is still running after the grace: it ignores TERM`.
    pub fn line(&self, sig: Signal) -> String {
        let why = match self.reason {
            _ if self.late => format!("it was not sent {sig}: it started after {sig} went out"),
            _ if !self.sent => format!(
                "it was not sent {sig} (it is outside the process groups the stop signal went to)"
            ),
            Reason::Ignores => format!("it ignores {sig}"),
            Reason::Blocks => format!("it blocks {sig}"),
            Reason::Catches => format!("it catches {sig} and its handler has not ended it"),
            Reason::Uninterruptible => {
                format!("it is in uninterruptible sleep (state D): {sig} waits until it wakes")
            }
            Reason::Stopped => format!("it is stopped: {sig} waits until it is continued"),
            Reason::Unknown => format!("{sig} has not ended it yet"),
        };
        format!(
            "pid {} ({}) is still running after the grace: {why}",
            self.pid, self.name
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(state: &str, ign: u64, blk: u64, cgt: u64) -> Vec<u8> {
        format!(
            "Name:\tx\nState:\t{state}\nSigBlk:\t{blk:016x}\nSigIgn:\t{ign:016x}\nSigCgt:\t{cgt:016x}\n"
        )
        .into_bytes()
    }

    #[test]
    fn reasons_from_the_masks_and_the_state() {
        let term = 1u64 << (libc::SIGTERM - 1);
        let t = Signal::TERM;
        assert_eq!(
            reason(&status("S (sleeping)", term, 0, 0), t),
            Reason::Ignores
        );
        assert_eq!(
            reason(&status("S (sleeping)", 0, term, term), t),
            Reason::Blocks
        );
        assert_eq!(
            reason(&status("S (sleeping)", 0, 0, term), t),
            Reason::Catches
        );
        assert_eq!(
            reason(&status("D (disk sleep)", term, 0, 0), t),
            Reason::Uninterruptible
        );
        assert_eq!(reason(&status("T (stopped)", 0, 0, 0), t), Reason::Stopped);
        assert_eq!(reason(&status("R (running)", 0, 0, 0), t), Reason::Unknown);
    }

    #[test]
    fn reads_a_live_process() {
        let me = survivor(std::process::id() as i32, Signal::TERM).unwrap();
        assert_eq!(me.pid, std::process::id() as i32);
        assert!(me
            .line(Signal::TERM)
            .starts_with(&format!("pid {} (", me.pid)));
        let never = Survivor { sent: false, ..me };
        assert!(never.line(Signal::TERM).ends_with(
            "still running after the grace: it was not sent TERM \
             (it is outside the process groups the stop signal went to)"
        ));
        assert_eq!(never.word(), "unsent");
        let late = Survivor {
            late: true,
            ..never
        };
        assert!(late.line(Signal::TERM).ends_with(
            "still running after the grace: it was not sent TERM: it started after TERM went out"
        ));
        let tools = Tools::find();
        assert!(tools.is_tool(std::process::id() as i32), "its own binary");
        assert!(!tools.is_tool(1) || procfs::own_pid() == 1);
    }
}
