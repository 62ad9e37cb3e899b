//! PID reuse: no tool ever signals a PID or a PGID once its process (the
//! group's leader, for a group) has been reaped, since by then the number
//! may name a stranger.
//!
//! Why it holds, by reading the code:
//! - `pgkit::child::Child::signal` is the only way the tools signal COMMAND
//!   or its group. It refuses (ESRCH) once `Child::reap` has run, and before
//!   that COMMAND is unreaped — alive or a zombie — so its PID, which is
//!   also its group's id, cannot have been handed out again. `Child` learns
//!   of the exit with `waitid(WNOWAIT)` (`Child::peek_exit`), which leaves
//!   the zombie in place. pgwrap reaps COMMAND only once its loop is over
//!   and then exits; it signals nothing in between.
//! - graceful keeps COMMAND, the group's leader, unreaped until the whole
//!   group is gone (`supervise::Supervisor::run` reaps everything else with
//!   `pgkit::reap::reap_except(Some(leader))` and the leader only in
//!   `Supervisor::finish`), so every `kill(-pgid)` of the ladder names
//!   COMMAND's group. A member it watches is held by a pidfd opened and then
//!   checked against `/proc` (`pgkit::group::live_member`); it is never
//!   signalled by pid.
//! - reap signals COMMAND's group through `Child::signal` as above. Every
//!   other descendant goes through `pgkit::descend::signal`: its own
//!   children with `kill(pid)` (they are unreaped: the pid is pinned, and
//!   reap reaps nothing between its `/proc` walk and the signal), deeper ones
//!   through a pidfd opened and then re-checked in `/proc` (same start time,
//!   parent still in the tree), so `pidfd_send_signal` reaches that very
//!   process or no one. The sweep forgets a reaped pid
//!   (`sweep::Sweeper::forget`) and marks others by pid and start time.
//!   Without `/proc`, reap signals only COMMAND's group, keeping COMMAND
//!   unreaped while it does (`Sweeper::needs_pin`).
//!
//! The tests below force the worst case in a PID namespace of their own:
//! as soon as a process is reaped, a decoy (a sigprobe in a session of its
//! own, so its pid is also a group id) is created with that very pid by
//! writing `/proc/sys/kernel/ns_last_pid`, while signals keep arriving at
//! the tool. The decoy must never receive anything.
//!
//! The test kit itself must follow the same rule; the first test is its
//! regression test.

use crate::kit::{bin, Ready, Run, RunBuilder, TIMEOUT};
use crate::procfs;
use crate::skip;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `/proc/sys/kernel/ns_last_pid` of the caller's namespace.
fn last_pid() -> i32 {
    std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .expect("read ns_last_pid")
        .trim()
        .parse()
        .expect("ns_last_pid is a number")
}

fn set_last_pid(pid: i32) {
    std::fs::write("/proc/sys/kernel/ns_last_pid", format!("{pid}")).expect("write ns_last_pid");
}

/// A new group leader (`sleep`) with pid `pid`, if the pid can be had. The
/// pid counter is put back right after, so no other process of the machine
/// gets a recently freed pid early.
fn group_leader_with_pid(pid: i32) -> Option<std::process::Child> {
    for _ in 0..50 {
        let high = last_pid();
        set_last_pid(pid - 1);
        let child = std::process::Command::new("sleep")
            .arg("1000")
            .process_group(0)
            .spawn();
        set_last_pid(last_pid().max(high));
        let mut child = child.unwrap();
        if child.id() as i32 == pid {
            return Some(child);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    None
}

/// Regression: the kit killed the process group of a finished run by its
/// id alone when the run was dropped, even after every member was gone and
/// the id could belong to a new group: under heavy process turnover (the
/// pid counter wraps within one test run) it SIGKILLed another test's tool.
#[test]
fn test_kit_never_kills_a_group_whose_id_was_reused() {
    if let Some(why) = skip::needs_root() {
        return skip::skip("test_kit_never_kills_a_group_whose_id_was_reused", &why);
    }
    let mut run = Run::new("true").spawn();
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let pgid = run.pgid();
    // Start times in /proc are in clock ticks (10 ms): a pid reused within
    // the same tick looks like the same process to any start-time check.
    // Real reuse needs the pid counter to wrap, far slower than a tick, so
    // wait for the next tick before taking the pid back.
    std::thread::sleep(std::time::Duration::from_millis(30));
    // A new group leader with that very pid.
    let Some(mut victim) = group_leader_with_pid(pgid) else {
        return skip::skip(
            "test_kit_never_kills_a_group_whose_id_was_reused",
            "could not get the pid back (the machine is too busy)",
        );
    };
    drop(run);
    let alive = victim.try_wait().unwrap().is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(alive, "dropping the run killed the new group {pgid}");
}

/// A PID namespace whose init is a sigprobe; dropping it ends the whole
/// namespace (unshare --kill-child).
struct Namespace {
    unshare: Run,
    /// The init, as seen from here.
    init: i32,
}

impl Namespace {
    fn new() -> Namespace {
        let unshare = Run::new("unshare")
            .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
            .arg(bin("sigprobe"))
            .args(["--exit-on", "none"])
            .spawn();
        let mut init = 0;
        procfs::wait_until("the namespace's init runs", TIMEOUT, || {
            init = procfs::children_of(unshare.pid())
                .first()
                .copied()
                .unwrap_or(0);
            init > 0
                && procfs::cmdline(init)
                    .is_some_and(|c| c.first().is_some_and(|a| a.ends_with("sigprobe")))
        });
        Namespace { unshare, init }
    }

    /// `argv` run inside the namespace (nsenter forks: the run's pid is
    /// nsenter's, outside).
    fn enter(&self, argv: &[String]) -> RunBuilder {
        Run::new("nsenter")
            .args(["--target", &self.init.to_string(), "--pid", "--mount", "--"])
            .args(argv)
            .stderr_piped()
    }

    /// The process seen from here whose pid in the namespace is `inner`,
    /// among the descendants of `root`.
    fn outer(&self, root: i32, inner: i32) -> i32 {
        let mut found = 0;
        procfs::wait_until("the process is found by its namespace pid", TIMEOUT, || {
            found = procfs::descendants(root)
                .into_iter()
                .find(|&p| {
                    procfs::status_field(p, "NSpid")
                        .is_some_and(|ns| ns.split_whitespace().last() == Some(&inner.to_string()))
                })
                .unwrap_or(0);
            found > 0
        });
        found
    }

    /// A decoy that takes pid `inner` of the namespace the moment it is free.
    fn recycle(&self, inner: i32) -> Run {
        let script = format!(
            "while [ -d /proc/{inner} ]; do :; done; echo {} > /proc/sys/kernel/ns_last_pid; \
             setsid {} --exit-on none & wait",
            inner - 1,
            bin("sigprobe").display()
        );
        self.enter(&["sh".into(), "-c".into(), script]).spawn()
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        self.unshare.kill_all();
    }
}

/// Signals sent at a tool through a pidfd (never by a pid that may have
/// been reused), every 200 us until stopped or the tool is gone.
struct Storm {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<usize>>,
}

impl Storm {
    fn start(pid: i32, sig: i32) -> Storm {
        // SAFETY: pidfd_open returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
        assert!(fd >= 0, "pidfd_open({pid})");
        // SAFETY: a new descriptor that nothing else owns.
        let fd: OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut sent = 0;
            while !flag.load(Ordering::Relaxed) {
                // SAFETY: a valid pidfd, a valid signal, no siginfo.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_pidfd_send_signal,
                        fd.as_raw_fd(),
                        sig,
                        std::ptr::null::<libc::siginfo_t>(),
                        0,
                    )
                };
                if r != 0 {
                    break;
                }
                sent += 1;
                std::thread::sleep(Duration::from_micros(200));
            }
            sent
        });
        Storm {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Storm {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: a process of the test's namespace, found alive just before.
    unsafe { libc::kill(pid, sig) };
}

/// The decoy's ready line (its pid must be the one recycled), then nothing:
/// it must never get a signal.
fn decoy_ready(decoy: &mut Run, inner: i32) -> Ready {
    let ready = decoy.expect_ready(TIMEOUT);
    assert_eq!(ready.pid, inner, "the decoy did not get the pid");
    assert_eq!(ready.pgid, inner);
    ready
}

fn assert_untouched(decoy: &Run) {
    let got: Vec<String> = decoy
        .lines_so_far()
        .into_iter()
        .filter(|l| l.starts_with("got "))
        .collect();
    assert!(
        got.is_empty(),
        "a reaped pid was signalled: the decoy got {got:?}"
    );
}

fn needs_namespaces(test: &str) -> bool {
    match skip::needs_root()
        .or_else(|| skip::needs_program("unshare", "util-linux"))
        .or_else(|| skip::needs_program("nsenter", "util-linux"))
    {
        Some(why) => {
            skip::skip(test, &why);
            false
        }
        None => true,
    }
}

fn argv(tool: &str, opts: &[&str], probe: &[&str]) -> Vec<String> {
    let mut v = vec![bin(tool).display().to_string()];
    v.extend(opts.iter().map(|s| s.to_string()));
    v.push("--".into());
    v.push(bin("sigprobe").display().to_string());
    v.extend(probe.iter().map(|s| s.to_string()));
    v
}

#[test]
fn pgwrap_never_signals_command_once_reaped() {
    if !needs_namespaces("pgwrap_never_signals_command_once_reaped") {
        return;
    }
    let ns = Namespace::new();
    let mut run = ns
        .enter(&argv("pgwrap", &[], &["--exit-on", "none"]))
        .spawn();
    let command = run.expect_ready(TIMEOUT);
    let tool = ns.outer(run.pid(), command.ppid);
    let leader = ns.outer(run.pid(), command.pid);
    let mut decoy = ns.recycle(command.pid);
    let storm = Storm::start(tool, libc::SIGUSR2);
    run.expect_line(&format!("got USR2 pid={}", command.pid), TIMEOUT);
    kill(leader, libc::SIGKILL);
    decoy_ready(&mut decoy, command.pid);
    storm.finish();
    std::thread::sleep(Duration::from_millis(100));
    assert_untouched(&decoy);
}

#[test]
fn graceful_never_signals_a_reaped_member_or_group() {
    if !needs_namespaces("graceful_never_signals_a_reaped_member_or_group") {
        return;
    }
    let ns = Namespace::new();
    let mut run = ns
        .enter(&argv(
            "graceful",
            &["-g", "inf"],
            &["--fork", "2", "--exit-on", "none"],
        ))
        .spawn();
    let readies = run.expect_readies(3, TIMEOUT);
    let main = readies.iter().find(|r| r.role == "main").unwrap().clone();
    let members: Vec<&Ready> = readies.iter().filter(|r| r.role == "child").collect();
    let (gone, stays) = (members[0].pid, members[1].pid);
    let tool = ns.outer(run.pid(), main.ppid);
    let outer = |inner| ns.outer(tool, inner);
    let (leader, gone_outer, stays_outer) = (outer(main.pid), outer(gone), outer(stays));
    let storm = Storm::start(tool, libc::SIGUSR2);
    // The leader dies (graceful keeps it unreaped: the group stays
    // COMMAND's), then a member, which graceful reaps as its subreaper.
    kill(leader, libc::SIGKILL);
    let mut decoy = ns.recycle(gone);
    kill(gone_outer, libc::SIGKILL);
    decoy_ready(&mut decoy, gone);
    // graceful goes on passing signals to the group while the decoy lives.
    let before = run.lines_so_far().len();
    procfs::wait_until("the group still gets the storm", TIMEOUT, || {
        run.lines_so_far()[before..]
            .iter()
            .filter(|l| l.starts_with(&format!("got USR2 pid={stays} ")))
            .count()
            >= 20
    });
    kill(stays_outer, libc::SIGKILL);
    run.wait_exit(TIMEOUT);
    storm.finish();
    std::thread::sleep(Duration::from_millis(100));
    assert_untouched(&decoy);
}

#[test]
fn reap_never_signals_a_reaped_leftover() {
    if !needs_namespaces("reap_never_signals_a_reaped_leftover") {
        return;
    }
    let ns = Namespace::new();
    let mut run = ns
        .enter(&argv(
            "reap",
            &["-g", "500ms"],
            &["--escape", "2", "--exit-on", "none"],
        ))
        .spawn();
    let readies = run.expect_readies(3, TIMEOUT);
    let main = readies.iter().find(|r| r.role == "main").unwrap().clone();
    let escapees: Vec<i32> = readies
        .iter()
        .filter(|r| r.role == "escapee")
        .map(|r| r.pid)
        .collect();
    let front = procfs::children_of(run.pid())[0];
    let outer = |inner| ns.outer(front, inner);
    let (leader, first, second) = (outer(main.pid), outer(escapees[0]), outer(escapees[1]));
    let storm = Storm::start(front, libc::SIGUSR2);
    // COMMAND dies: the sweep sends TERM to both escapees (which ignore it).
    kill(leader, libc::SIGKILL);
    run.expect_line(&format!("got TERM pid={}", escapees[0]), TIMEOUT);
    run.expect_line(&format!("got TERM pid={}", escapees[1]), TIMEOUT);
    // One of them dies and is reaped; its pid is taken at once. The KILL
    // at the end of the grace must go to the other one only.
    let mut decoy = ns.recycle(escapees[0]);
    kill(first, libc::SIGKILL);
    decoy_ready(&mut decoy, escapees[0]);
    let started = Instant::now();
    run.wait_exit(TIMEOUT);
    assert!(started.elapsed() < TIMEOUT);
    assert!(!procfs::alive(second), "the other leftover was killed");
    storm.finish();
    std::thread::sleep(Duration::from_millis(100));
    assert_untouched(&decoy);
    assert!(decoy.try_exit().is_none(), "the decoy was killed");
}
