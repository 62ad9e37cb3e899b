//! Job control in an interactive shell, whatever the terminal mode: the
//! shell's job is the tool and COMMAND together. Ctrl-Z stops both (COMMAND's
//! group first), `fg` continues both; `--foreground` from a background job
//! never takes the terminal from the shell.
//!
//! Also the pieces the terminal matrix (`matrix.rs`) is built of: a
//! COMMAND that says what it received ([`PROBE`]), the processes of a job
//! found from the shell down ([`Job`]), and the checks on them.

#![allow(dead_code)]

use crate::kit::{bin, temp_dir, TempDir, TIMEOUT};
use crate::procfs;
use crate::tmux::{Shell, Tmux};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// COMMAND for the terminal tests, a Perl script (a shell could not catch a
/// signal that was ignored when it started). `perl probe.pl DIR MODE`:
///
/// - appends to `DIR/ev` one line per event: `start pid= pgid= ppid= ign=`
///   (ign: its SigIgn mask at entry, before it touches any signal), then
///   `got SIG from=PID` for HUP, INT, TERM, QUIT and CONT (from=0: the
///   terminal), `read: LINE`, `wrote`, `exit`;
/// - MODE `read` reads a line from stdin first, `write` prints the line
///   `out-from-command` on stdout first, `tick` neither;
/// - then appends a line to `DIR/ticks` every 100 ms, for ever;
/// - exits 0 on HUP, INT, TERM or QUIT. TSTP, TTIN and TTOU keep their
///   default action: they stop it.
pub const PROBE: &str = r#"use strict; use POSIX ();
my ($dir, $mode) = @ARGV;
my $ign = '?';
if (open my $st, '<', '/proc/self/status') { while (<$st>) { $ign = $1 if /^SigIgn:\s*(\S+)/ } close $st }
sub ev { open my $f, '>>', "$dir/ev" or die "ev: $!"; syswrite $f, "$_[0]\n"; close $f }
my $h = sub {
    my ($sig, $info) = @_;
    my $from = ref $info ? $info->{pid} : -1;
    ev("got $sig from=$from");
    if ($sig ne 'CONT') { ev("exit"); POSIX::_exit(0) }
};
for my $s (qw(HUP INT TERM QUIT CONT)) {
    my $num = POSIX->can("SIG$s")->();
    POSIX::sigaction($num, POSIX::SigAction->new($h, POSIX::SigSet->new, POSIX::SA_SIGINFO())) or die "sigaction $s: $!";
}
ev(sprintf "start pid=%d pgid=%d ppid=%d ign=%s", $$, getpgrp(), getppid(), $ign);
if ($mode eq 'read') { my $line = <STDIN>; if (defined $line) { chomp $line; ev("read: $line") } else { ev("eof") } }
if ($mode eq 'write') { $| = 1; print "out-from-command\n"; ev("wrote") }
open my $t, '>>', "$dir/ticks" or die "ticks: $!";
while (1) { syswrite $t, "t\n"; select(undef, undef, undef, 0.1) }
"#;

/// A cell's working directory, with the probe written into it.
pub struct Place {
    dir: TempDir,
}

impl Place {
    pub fn new(tag: &str) -> Place {
        let dir = temp_dir(tag);
        std::fs::write(dir.join("probe.pl"), PROBE).unwrap();
        Place { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `perl DIR/probe.pl DIR MODE`, for a command line.
    pub fn probe(&self, mode: &str) -> String {
        format!(
            "perl {} {} {mode}",
            self.dir.join("probe.pl").display(),
            self.dir.path().display()
        )
    }

    /// Everything COMMAND wrote to its event file so far.
    pub fn events(&self) -> String {
        std::fs::read_to_string(self.dir.join("ev")).unwrap_or_default()
    }

    /// How often COMMAND ticked so far.
    pub fn ticks(&self) -> usize {
        std::fs::read(self.dir.join("ticks")).map_or(0, |b| b.len() / 2)
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Wait until COMMAND ticks again (two ticks more than now).
    pub fn wait_ticking(&self, what: &str) {
        let before = self.ticks();
        procfs::wait_until(&format!("{what}: COMMAND ticks"), TIMEOUT, || {
            self.ticks() >= before + 2
        });
    }

    /// Wait until `pid` is stopped (state T) and then check that COMMAND
    /// does not tick for half a second.
    pub fn wait_stopped_not_ticking(&self, what: &str, pid: i32) {
        wait_stopped(what, pid);
        let before = self.ticks();
        std::thread::sleep(Duration::from_millis(500));
        let after = self.ticks();
        assert!(
            after == before && procfs::is_stopped(pid),
            "{what}: COMMAND ticked while it should be stopped ({before} -> {after} ticks, state {:?})",
            procfs::state(pid)
        );
    }

    /// Wait for a line of the event file that satisfies `pred`.
    pub fn wait_event(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let ev = self.events();
            if let Some(line) = ev.lines().find(|l| pred(l)) {
                return line.to_string();
            }
            if Instant::now() > deadline {
                panic!("timed out waiting until {what}; COMMAND's events:\n{ev}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

pub fn wait_stopped(what: &str, pid: i32) {
    let deadline = Instant::now() + TIMEOUT;
    while !procfs::is_stopped(pid) {
        if Instant::now() > deadline {
            panic!(
                "timed out waiting until {what}: pid {pid} stopped (state {:?})",
                procfs::state(pid)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn wait_running(what: &str, pid: i32) {
    let deadline = Instant::now() + TIMEOUT;
    while procfs::is_stopped(pid) || !procfs::alive(pid) {
        if Instant::now() > deadline {
            panic!(
                "timed out waiting until {what}: pid {pid} running (state {:?})",
                procfs::state(pid)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The processes of one job: COMMAND, the tool the shell started (for reap,
/// its front) and any process between them (reap's back). They are killed
/// by PID when the value is dropped, if they still are the same processes.
pub struct Job {
    pub command: i32,
    /// COMMAND's parent: the process that passes signals on to it.
    pub parent: i32,
    /// The shell's child: the process the shell knows as the job.
    pub tool: i32,
    /// (pid, start time) of COMMAND up to the tool.
    chain: Vec<(i32, u64)>,
}

impl Job {
    /// Wait until COMMAND says it started, then walk up from it to the
    /// shell's child.
    pub fn wait(place: &Place, shell: i32) -> Job {
        let line = place.wait_event("COMMAND started", |l| l.starts_with("start "));
        let field = |key: &str| -> i32 {
            line.split_whitespace()
                .find_map(|t| t.strip_prefix(key)?.strip_prefix('='))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {key} in {line:?}"))
        };
        let command = field("pid");
        let mut chain = Vec::new();
        let mut pid = command;
        loop {
            let start = procfs::start_time(pid)
                .unwrap_or_else(|| panic!("pid {pid} (of COMMAND's ancestry) is gone"));
            chain.push((pid, start));
            let parent = procfs::ppid(pid).unwrap_or(0);
            if parent == shell {
                break;
            }
            assert!(
                parent > 1 && chain.len() < 5,
                "COMMAND (pid {command}) does not descend from the shell (pid {shell})"
            );
            pid = parent;
        }
        assert!(chain.len() >= 2, "COMMAND is the shell's own child");
        Job {
            command,
            parent: chain[1].0,
            tool: pid,
            chain,
        }
    }

    /// Whether any process of the job is still there (zombies aside).
    pub fn any_alive(&self) -> bool {
        self.chain
            .iter()
            .any(|&(pid, start)| procfs::start_time(pid) == Some(start) && procfs::alive(pid))
    }

    /// Wait until every process of the job is gone.
    pub fn wait_gone(&self, what: &str) {
        let deadline = Instant::now() + TIMEOUT;
        while self.any_alive() {
            if Instant::now() > deadline {
                let left: Vec<_> = self
                    .chain
                    .iter()
                    .filter(|&&(p, s)| procfs::start_time(p) == Some(s) && procfs::alive(p))
                    .map(|&(p, _)| format!("{p} (state {:?})", procfs::state(p)))
                    .collect();
                panic!("timed out waiting until {what}: still there: {left:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        for &(pid, start) in &self.chain {
            if procfs::start_time(pid) == Some(start) {
                // SAFETY: plain kill(2) of a process this test started,
                // checked by its start time.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

/// Check that the shell is alive and answers a command: type `echo m-N`
/// and wait for the line `m-N`.
pub fn shell_answers(tmux: &Tmux, shell_pid: i32, what: &str) {
    static N: AtomicU32 = AtomicU32::new(0);
    assert!(
        procfs::alive(shell_pid),
        "{what}: the shell (pid {shell_pid}) is gone"
    );
    let mark = format!("m-{}", N.fetch_add(1, Ordering::Relaxed));
    if !tmux.try_type_line(&format!("echo {mark}")) {
        panic!("{what}: the shell (pid {shell_pid}) exited: its window is gone");
    }
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if !procfs::alive(shell_pid) {
            panic!("{what}: the shell (pid {shell_pid}) exited");
        }
        let screen = tmux.screen();
        // The line `m-N`, or `$ m-N` when the command was typed ahead (while
        // the previous one ran) and the shell, without line editing (dash),
        // does not echo it again after its prompt.
        let answer = |l: &str| {
            l.trim_end()
                .strip_suffix(mark.as_str())
                .is_some_and(|before| before.is_empty() || before.ends_with("$ "))
        };
        if screen.lines().any(answer) {
            return;
        }
        if Instant::now() > deadline {
            panic!("{what}: the shell does not answer `echo {mark}`; screen:\n{screen}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait until the shell has no child left: nothing of the job is running,
/// stopped or unreaped.
pub fn wait_shell_has_no_child(shell_pid: i32, what: &str) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let left = procfs::descendants(shell_pid);
        if left.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            let left: Vec<_> = left
                .iter()
                .map(|&p| {
                    format!(
                        "{p} {:?} (state {:?})",
                        procfs::cmdline(p),
                        procfs::state(p)
                    )
                })
                .collect();
            panic!("{what}: the shell still has descendants: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `TOOL OPTS -- TICKER` in the foreground of an interactive bash, then
/// Ctrl-Z: the shell shows the job stopped and COMMAND stops too (state T,
/// no tick); `fg` continues both; Ctrl-C ends the job.
fn ctrl_z_stops_command_and_fg_continues_it(tool: &str, opts: &str) {
    let place = Place::new(&format!("jc-{tool}"));
    let tmux = Tmux::start_shell(&format!("jc-{tool}"), Shell::Bash);
    let shell = tmux.shell_pid();
    tmux.type_line(&format!(
        "{} {opts} -- {}",
        bin(tool).display(),
        place.probe("tick")
    ));
    let job = Job::wait(&place, shell);
    place.wait_ticking("started");

    tmux.send(&["C-z"]);
    tmux.wait_for_screen("the shell reports the job stopped", |s| {
        Shell::Bash.shows_stopped(s)
    });
    wait_stopped("Ctrl-Z: the tool", job.tool);
    place.wait_stopped_not_ticking("Ctrl-Z: COMMAND", job.command);
    shell_answers(&tmux, shell, "the job stopped");

    tmux.type_line("fg");
    wait_running("fg: the tool", job.tool);
    wait_running("fg: COMMAND", job.command);
    place.wait_ticking("after fg");

    tmux.send(&["C-c"]);
    place.wait_event("COMMAND got INT", |l| l.starts_with("got INT"));
    job.wait_gone("Ctrl-C ended the job");
    shell_answers(&tmux, shell, "after Ctrl-C");
    wait_shell_has_no_child(shell, "after Ctrl-C");
}

#[test]
fn graceful_default_ctrl_z_stops_command_too_and_fg_continues_both() {
    ctrl_z_stops_command_and_fg_continues_it("graceful", "");
}

#[test]
fn pgwrap_no_foreground_ctrl_z_stops_command_too_and_fg_continues_both() {
    ctrl_z_stops_command_and_fg_continues_it("pgwrap", "--no-foreground");
}

#[test]
fn reap_no_foreground_ctrl_z_stops_command_too_and_fg_continues_both() {
    ctrl_z_stops_command_and_fg_continues_it("reap", "--no-foreground");
}

/// `pgwrap --foreground -- sleep 0.5 &` from an interactive bash: the
/// background job does not take the terminal, so when it ends the shell is
/// still there and answers.
#[test]
fn pgwrap_foreground_in_the_background_leaves_the_shell_its_terminal() {
    let tmux = Tmux::start_shell("jc-bgfg", Shell::Bash);
    let shell = tmux.shell_pid();
    tmux.type_line(&format!(
        "{} --foreground -- sleep 0.5 &",
        bin("pgwrap").display()
    ));
    // The job starts, and ends (or the shell dies).
    procfs::wait_until("the job started", TIMEOUT, || {
        !procfs::descendants(shell).is_empty() || !procfs::alive(shell)
    });
    procfs::wait_until("the job ended", TIMEOUT, || {
        procfs::descendants(shell).is_empty() || !procfs::alive(shell)
    });
    shell_answers(&tmux, shell, "after `pgwrap --foreground -- sleep 0.5 &`");
    // And once more, after bash had the chance to read from a terminal it
    // may have lost.
    std::thread::sleep(Duration::from_millis(300));
    shell_answers(&tmux, shell, "a second command");
}
