//! reap on a real terminal (tmux): COMMAND gets the terminal although the
//! subreaper is a second process, job control is followed through the front
//! (the process the shell knows), and Ctrl-C during the cleanup does not
//! reach the cleanup.

use crate::kit::{bin, temp_dir, Ready, TIMEOUT};
use crate::procfs;
use crate::tmux::Tmux;

fn file_has(path: &std::path::Path, needle: &str) -> bool {
    std::fs::read_to_string(path).is_ok_and(|s| s.contains(needle))
}

#[test]
fn reap_hands_the_terminal_over_and_follows_ctrl_z_and_fg() {
    let dir = temp_dir("reap-tty");
    let out = dir.join("out");
    let tmux = Tmux::start("reap-fg");
    tmux.type_line(&format!(
        "{} -- {} --read --exit-on INT > {} 2>&1",
        bin("reap").display(),
        bin("sigprobe").display(),
        out.display()
    ));
    procfs::wait_until("probe ready", TIMEOUT, || file_has(&out, "ready pid="));
    let text = std::fs::read_to_string(&out).unwrap();
    let probe = Ready::parse(&text).unwrap();
    let back = probe.ppid;
    let front = procfs::ppid(back).unwrap();
    assert_ne!(
        procfs::pgid(back),
        procfs::pgid(front),
        "the back has a group of its own"
    );

    tmux.type_line("first");
    procfs::wait_until("probe read a line", TIMEOUT, || {
        file_has(&out, "read: first")
    });

    tmux.send(&["C-z"]);
    procfs::wait_until("COMMAND and the front stopped", TIMEOUT, || {
        procfs::is_stopped(probe.pid) && procfs::is_stopped(front)
    });
    tmux.wait_for_screen("the shell reports the job stopped", |s| {
        s.contains("Stopped")
    });

    tmux.type_line("fg");
    procfs::wait_until("both running again", TIMEOUT, || {
        !procfs::is_stopped(probe.pid) && !procfs::is_stopped(front)
    });
    tmux.type_line("second");
    procfs::wait_until("probe reads after fg", TIMEOUT, || {
        file_has(&out, "read: second")
    });

    tmux.send(&["C-c"]);
    procfs::wait_until("reap exits with the probe", TIMEOUT, || {
        !procfs::alive(front) && !procfs::alive(back)
    });
    tmux.type_line("echo \"st=$?\"");
    tmux.wait_for_screen("the job's status", |s| s.contains("st=0"));
}

#[test]
fn ctrl_c_during_the_cleanup_does_not_reach_it() {
    let dir = temp_dir("reap-tty-cleanup");
    let out = dir.join("out");
    let tmux = Tmux::start("reap-cleanup");
    let cleanup = format!("exec {} --sleep-ms 1500", bin("sigprobe").display());
    tmux.type_line(&format!(
        "{} -c '{}' -- true > {} 2>&1 < /dev/null; echo \"st=$?\"",
        bin("reap").display(),
        cleanup,
        out.display()
    ));
    procfs::wait_until("the cleanup is ready", TIMEOUT, || {
        file_has(&out, "ready pid=")
    });
    tmux.send(&["C-c"]);
    let ended = |l: &str| l.contains("st=") && !l.contains("$?");
    let screen = tmux.wait_for_screen("reap ended", |s| s.lines().any(ended));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.contains("exit pid="),
        "the cleanup was cut short: {text}"
    );
    assert!(!text.contains("got INT"), "{text}");
    assert!(
        screen.lines().any(|l| ended(l) && l.ends_with("st=0")),
        "{screen}"
    );
}
