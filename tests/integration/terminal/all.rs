//! The terminal cases not covered next to each tool (`mod.rs` for
//! pgwrap, `graceful.rs`, `reap.rs` beside this one), through tmux: graceful's
//! default leaves the terminal to graceful (a reader gets the one-line hint,
//! Ctrl-Z stops graceful and COMMAND, `fg` continues both); `graceful
//! --foreground` hands it over and
//! follows Ctrl-Z/`fg`, and Ctrl-C then reaches COMMAND straight from the
//! terminal; `reap --no-foreground` gives the same hint as the others.

use crate::kit::{bin, temp_dir, Ready, TIMEOUT};
use crate::procfs;
use crate::tmux::Tmux;
use std::path::Path;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn file_has(path: &Path, needle: &str) -> bool {
    read(path).contains(needle)
}

/// `TOOL OPTS -- sh -c 'read x; echo got $x'` in a terminal: the reader is
/// stopped by SIGTTIN and the tool says so on one line naming --foreground.
fn reader_gets_the_hint(tool: &str, opts: &str) {
    let dir = temp_dir("tty-hint");
    let err = dir.join("err");
    let tmux = Tmux::start(&format!("{tool}-hint"));
    tmux.type_line(&format!(
        "{} {opts} -- sh -c 'read x; echo got $x' 2> {}",
        bin(tool).display(),
        err.display()
    ));
    procfs::wait_until("the hint", TIMEOUT, || file_has(&err, "--foreground"));
    let text = read(&err);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        crate::kit::said(text.trim_end(), tool).is_some() && text.contains("TTIN"),
        "{text}"
    );
    // Ctrl-C reaches the tool (its group has the terminal), which stops
    // COMMAND; the shell gets its prompt back.
    tmux.send(&["C-c"]);
    tmux.type_line("echo done=$?");
    tmux.wait_for_screen("the job ended", |s| {
        s.lines().any(|l| l.starts_with("done=") && l != "done=0")
    });
}

#[test]
fn graceful_by_default_keeps_the_terminal_and_a_reader_gets_the_hint() {
    reader_gets_the_hint("graceful", "--grace 1s");
}

#[test]
fn reap_no_foreground_keeps_the_terminal_and_a_reader_gets_the_hint() {
    reader_gets_the_hint("reap", "--no-foreground --grace 1s");
}

#[test]
fn graceful_default_ctrl_z_stops_graceful_and_command_and_fg_resumes_both() {
    let dir = temp_dir("graceful-tstp");
    let out = dir.join("out");
    let tmux = Tmux::start("graceful-tstp");
    tmux.type_line(&format!(
        "{} --grace 500ms -- {} --exit-on INT > {}",
        bin("graceful").display(),
        bin("sigprobe").display(),
        out.display()
    ));
    procfs::wait_until("probe ready", TIMEOUT, || file_has(&out, "ready pid="));
    let probe = Ready::parse(&read(&out)).unwrap();
    let graceful = probe.ppid;

    tmux.send(&["C-z"]);
    tmux.wait_for_screen("the shell reports the job stopped", |s| {
        s.contains("Stopped")
    });
    // The shell's job is graceful and COMMAND together: graceful stops
    // COMMAND's group (a group of its own, not the terminal's) first.
    procfs::wait_until("graceful and COMMAND stopped", TIMEOUT, || {
        procfs::is_stopped(graceful) && procfs::is_stopped(probe.pid)
    });

    tmux.type_line("fg");
    procfs::wait_until("graceful and COMMAND run again", TIMEOUT, || {
        !procfs::is_stopped(graceful) && !procfs::is_stopped(probe.pid)
    });
    tmux.send(&["C-c"]);
    procfs::wait_until("the probe got INT from graceful", TIMEOUT, || {
        file_has(&out, &format!("got INT pid={} from={graceful}", probe.pid))
    });
    tmux.type_line("echo \"st=$?\"");
    tmux.wait_for_screen("graceful's status", |s| s.contains("st=0"));
}

#[test]
fn graceful_foreground_reads_follows_ctrl_z_fg_and_ctrl_c_reaches_command() {
    let dir = temp_dir("graceful-fg");
    let out = dir.join("out");
    let tmux = Tmux::start("graceful-fg");
    tmux.type_line(&format!(
        "{} --foreground --grace 500ms -- {} --read --exit-on INT > {}",
        bin("graceful").display(),
        bin("sigprobe").display(),
        out.display()
    ));
    procfs::wait_until("probe ready", TIMEOUT, || file_has(&out, "ready pid="));
    let probe = Ready::parse(&read(&out)).unwrap();
    let graceful = probe.ppid;

    tmux.type_line("first");
    procfs::wait_until("probe read a line", TIMEOUT, || {
        file_has(&out, "read: first")
    });

    tmux.send(&["C-z"]);
    procfs::wait_until("COMMAND and graceful stopped", TIMEOUT, || {
        procfs::is_stopped(probe.pid) && procfs::is_stopped(graceful)
    });
    tmux.wait_for_screen("the shell reports the job stopped", |s| {
        s.contains("Stopped")
    });

    tmux.type_line("fg");
    procfs::wait_until("both running again", TIMEOUT, || {
        !procfs::is_stopped(probe.pid) && !procfs::is_stopped(graceful)
    });
    tmux.type_line("second");
    procfs::wait_until("probe reads after fg", TIMEOUT, || {
        file_has(&out, "read: second")
    });

    // Ctrl-C goes to COMMAND's group, from the terminal itself (sender 0):
    // graceful does not start its ladder.
    tmux.send(&["C-c"]);
    procfs::wait_until("the probe got INT", TIMEOUT, || file_has(&out, "got INT"));
    let text = read(&out);
    assert!(
        text.contains(&format!("got INT pid={} from=0", probe.pid)),
        "INT came from the terminal, not from graceful ({graceful}):\n{text}"
    );
    tmux.type_line("echo \"st=$?\"");
    tmux.wait_for_screen("graceful's status", |s| s.contains("st=0"));
}
