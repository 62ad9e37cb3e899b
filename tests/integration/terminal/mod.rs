//! pgwrap on a real terminal (tmux): the automatic hand-over lets COMMAND
//! read, job control (Ctrl-Z, `fg`) is followed, and without the terminal a
//! stopped reader gets the hint instead of a silent hang.

/// Terminal cases across the tools: default hand-over or not, hints, Ctrl-C, Ctrl-Z/fg.
mod all;
/// A job-control stop of COMMAND before its execve (the tool in clone).
mod before_exec;
/// graceful on a terminal: Ctrl-C starts the ladder.
mod graceful;
/// Job control in every mode: the shell's job is the tool and COMMAND together.
pub mod job_control;
/// The terminal matrix: each tool × mode × action, against the man pages' TERMINAL tables.
mod matrix;
/// Inside a PID namespace whose terminal's foreground group is outside it.
mod namespace;
/// reap on a terminal: hand-over and job control across the split.
mod reap;

use crate::kit::{bin, temp_dir, TIMEOUT};
use crate::procfs;
use crate::tmux::Tmux;

fn file_has(path: &std::path::Path, needle: &str) -> bool {
    std::fs::read_to_string(path).is_ok_and(|s| s.contains(needle))
}

#[test]
fn interactive_read_works_and_ctrl_z_fg_resume_both() {
    let dir = temp_dir("tty");
    let out = dir.join("out");
    let tmux = Tmux::start("fg");
    tmux.type_line(&format!(
        "{} -- {} --read --exit-on INT > {} 2>&1",
        bin("pgwrap").display(),
        bin("sigprobe").display(),
        out.display()
    ));
    procfs::wait_until("probe ready", TIMEOUT, || file_has(&out, "ready pid="));
    let text = std::fs::read_to_string(&out).unwrap();
    let probe = crate::kit::Ready::parse(&text).unwrap();
    let pgwrap = probe.ppid;

    tmux.type_line("first");
    procfs::wait_until("probe read a line", TIMEOUT, || {
        file_has(&out, "read: first")
    });

    tmux.send(&["C-z"]);
    procfs::wait_until("both stopped", TIMEOUT, || {
        procfs::is_stopped(probe.pid) && procfs::is_stopped(pgwrap)
    });
    tmux.wait_for_screen("the shell reports the job stopped", |s| {
        s.contains("Stopped")
    });

    tmux.type_line("fg");
    procfs::wait_until("both running again", TIMEOUT, || {
        !procfs::is_stopped(probe.pid) && !procfs::is_stopped(pgwrap)
    });
    tmux.type_line("second");
    procfs::wait_until("probe reads after fg", TIMEOUT, || {
        file_has(&out, "read: second")
    });

    tmux.send(&["C-c"]);
    procfs::wait_until("pgwrap exits with the probe", TIMEOUT, || {
        !procfs::alive(pgwrap)
    });
    tmux.type_line("echo \"st=$?\"");
    tmux.wait_for_screen("the job's status", |s| s.contains("st=0"));
}

#[test]
fn no_foreground_reader_gets_the_hint() {
    let dir = temp_dir("tty-hint");
    let err = dir.join("err");
    let tmux = Tmux::start("nofg");
    tmux.type_line(&format!(
        "{} --no-foreground -- sh -c 'read x; echo got $x' 2> {}",
        bin("pgwrap").display(),
        err.display()
    ));
    procfs::wait_until("the hint", TIMEOUT, || file_has(&err, "--foreground"));
    let text = std::fs::read_to_string(&err).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        crate::kit::said(text.trim_end(), "pgwrap").is_some() && text.contains("TTIN"),
        "{text}"
    );
    // Ctrl-C reaches pgwrap (its group has the terminal), is passed on, and
    // the stopped reader is continued so it can act on it.
    tmux.send(&["C-c"]);
    tmux.type_line("echo done=$?");
    tmux.wait_for_screen("pgwrap ended", |s| s.contains("done=130"));
}
