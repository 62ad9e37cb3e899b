//! graceful on a real terminal (tmux): without `--foreground` (the default)
//! Ctrl-C reaches graceful, not COMMAND, and starts the ladder.

use crate::grace::{Death, SLACK};
use crate::kit::{bin, temp_dir, Ready, TIMEOUT};
use crate::procfs;
use crate::tmux::Tmux;
use std::time::{Duration, Instant};

#[test]
fn ctrl_c_in_a_terminal_starts_the_ladder() {
    let dir = temp_dir("graceful-tty");
    let out = dir.join("out");
    let tmux = Tmux::start("graceful");
    tmux.type_line(&format!(
        "{} --grace 1500ms -- {} --exit-on none > {}",
        bin("graceful").display(),
        bin("sigprobe").display(),
        out.display()
    ));
    let read = || std::fs::read_to_string(&out).unwrap_or_default();
    procfs::wait_until("probe ready", TIMEOUT, || read().contains("ready pid="));
    let probe = Ready::parse(&read()).unwrap();
    let graceful = probe.ppid;
    assert_ne!(
        procfs::pgid(graceful),
        Some(probe.pgid),
        "COMMAND runs in a group of its own"
    );
    let death = Death::watch(probe.pid);

    let pressed = Instant::now();
    tmux.send(&["C-c"]);
    // The terminal sent INT to graceful's (foreground) group only; graceful
    // passed it on as the stop signal.
    procfs::wait_until("the probe got INT from graceful", TIMEOUT, || {
        read().contains(&format!("got INT pid={} from={graceful}", probe.pid))
    });
    let dead = death.wait(Duration::from_millis(1500) + SLACK);
    assert!(
        dead >= pressed + Duration::from_millis(1500),
        "killed before the grace"
    );
    tmux.type_line("echo \"st=$?\"");
    tmux.wait_for_screen("graceful's status", |s| s.contains("st=137"));
}
