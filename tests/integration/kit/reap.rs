//! Helpers shared by the reap tests: the subreaper process behind the front,
//! and a guard that kills by PID whatever a test saw of a tree that may have
//! left the front (the back and the cleanup outlive a killed front).

#![allow(dead_code)]

use crate::kit::{bin, slowed, Run, RunBuilder, TIMEOUT};
use crate::procfs;
use std::time::Duration;

/// The sigprobe binary, as a string for shell scripts.
pub fn sigprobe() -> String {
    bin("sigprobe").display().to_string()
}

/// `reap ARGS...` as a [`RunBuilder`].
pub fn reap<I, S>(args: I) -> RunBuilder
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Run::new(bin("reap")).args(args)
}

/// The back (the subreaper process) of a running reap front. The wait is a
/// native machine's times the slowdown (reap may have been started under
/// strace, on an emulated CPU).
pub fn back_of(front: i32) -> i32 {
    let mut back = 0;
    procfs::wait_until("reap's subreaper process exists", slowed(TIMEOUT), || {
        back = procfs::children_of(front).first().copied().unwrap_or(0);
        back > 0
    });
    back
}

/// Zombie children of `pid`.
pub fn zombies_of(pid: i32) -> Vec<i32> {
    procfs::children_of(pid)
        .into_iter()
        .filter(|&p| procfs::is_zombie(p))
        .collect()
}

/// The process still exists as the one recorded (same start time), zombie
/// or not.
pub fn same_process(pid: i32, start: u64) -> bool {
    procfs::start_time(pid) == Some(start)
}

/// Processes a test saw, SIGKILLed by PID on drop if they are still the
/// same processes (start time checked), pass or fail.
#[derive(Default)]
pub struct Guard {
    procs: Vec<(i32, u64)>,
}

impl Guard {
    pub fn new() -> Guard {
        Guard::default()
    }

    /// Remember `pid` (as it is now).
    pub fn watch(&mut self, pid: i32) {
        if let Some(start) = procfs::start_time(pid) {
            if !self.procs.iter().any(|&(p, _)| p == pid) {
                self.procs.push((pid, start));
            }
        }
    }

    /// Remember `pid` and all its descendants.
    pub fn watch_tree(&mut self, pid: i32) {
        self.watch(pid);
        for p in procfs::descendants(pid) {
            self.watch(p);
        }
    }

    /// The remembered processes that still exist and are not zombies.
    pub fn alive(&self) -> Vec<i32> {
        self.procs
            .iter()
            .filter(|&&(p, s)| same_process(p, s) && procfs::alive(p))
            .map(|&(p, _)| p)
            .collect()
    }

    /// The remembered processes that still exist at all (zombies included).
    pub fn existing(&self) -> Vec<i32> {
        self.procs
            .iter()
            .filter(|&&(p, s)| same_process(p, s))
            .map(|&(p, _)| p)
            .collect()
    }

    /// Wait until none of the remembered processes exists any more.
    pub fn wait_all_gone(&self, what: &str, timeout: Duration) {
        procfs::wait_until(what, timeout, || self.existing().is_empty());
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        for &(pid, start) in &self.procs {
            if same_process(pid, start) {
                // SAFETY: plain syscall; the start time was checked just now.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

/// The value after `key=` in a line such as `trap=123` or `ready pid=4`.
pub fn field(line: &str, key: &str) -> i32 {
    let pat = format!("{key}=");
    let at = line
        .find(&pat)
        .unwrap_or_else(|| panic!("no {pat} in {line:?}"));
    line[at + pat.len()..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no number after {pat} in {line:?}"))
}

/// ORPHANS orphans that exit one after another, as fast as `sh` makes them
/// (`(true &)`), under the subreaper `watched` (reap's back, or graceful):
/// how often it went to sleep from the first to the last being reaped, and
/// how long that took. `run` is a tool whose COMMAND is [`BURST`], waiting
/// for a line on stdin to start; it is left waiting for a second line.
fn orphan_burst(run: &mut Run, watched: i32) -> (u64, Duration) {
    run.expect_line("up", TIMEOUT);
    procfs::wait_until("the subreaper sleeps", TIMEOUT, || {
        procfs::state(watched) == Some('S')
    });
    let before = procfs::voluntary_switches(watched).unwrap();
    let start = std::time::Instant::now();
    run.write_stdin("go\n");
    run.expect_line("made", Duration::from_secs(120));
    procfs::wait_until("no zombie is left", Duration::from_secs(30), || {
        zombies_of(watched).is_empty()
    });
    let elapsed = start.elapsed();
    let after = procfs::voluntary_switches(watched).unwrap();
    (after - before, elapsed)
}

/// How many orphans [`BURST`] makes.
pub const ORPHANS: u64 = 500;

/// COMMAND of [`orphan_burst`], for `sh -c`.
pub const BURST: &str = "echo up; read x; i=0; while [ $i -lt 500 ]; do (true &); i=$((i+1)); \
                         done; echo made; read y";

/// The most wake-ups a subreaper that reaps orphans in bursts may take for
/// [`BURST`] over `elapsed`: one per hold (5 ms) and some slack. One wake-up
/// per exit, as before the hold, is ORPHANS whenever sh forks faster than
/// one orphan per 3 ms (about ten times faster here); on a machine slower
/// than that the bound is above ORPHANS and the check says nothing.
fn burst_bound(elapsed: Duration) -> u64 {
    elapsed.as_millis() as u64 * 3 / (2 * 5) + 20
}

/// `tool -- sh -c BURST`, the orphan burst under the subreaper that
/// `watched` names (`who` in the message), checked: no more wake-ups than
/// [`burst_bound`], no zombie left, and COMMAND's status at the end.
pub fn burst_is_batched(tool: &str, who: &str, watched: impl FnOnce(&Run) -> i32) {
    let mut run = Run::new(bin(tool))
        .args(["--", "sh", "-c", BURST])
        .stdin_piped()
        .watchdog(Duration::from_secs(240))
        .spawn();
    let pid = watched(&run);
    let (wakes, elapsed) = orphan_burst(&mut run, pid);
    let bound = burst_bound(elapsed);
    assert!(
        wakes <= bound,
        "{who} went to sleep {wakes} times for {ORPHANS} orphans in {elapsed:?} (at most {bound})"
    );
    run.write_stdin("done\n");
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}
