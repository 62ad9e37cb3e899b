//! Load: 200 chains `reap -- graceful -- pgwrap -- short-command` started
//! at once (on CI's 2 cores): every chain finishes with its command's
//! status (an exit code passed up three levels, or a death by TERM re-raised
//! three times), and nothing is left: no process of any chain, no zombie.
//!
//! Every process of the chains carries a marker in its environment (the
//! tools pass the environment on), so a leftover is found among all the
//! processes of the machine while other tests run beside this one. A zombie
//! has no environment left, but its parent is then a leftover too (a chain's
//! front is reaped by the test itself).

use crate::kit::bin;
use crate::procfs;
use crate::reap_kit::Guard;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHAINS: usize = 200;

/// What chain `i` runs, and the status the test expects from it.
fn command(i: usize) -> (String, Option<i32>, Option<i32>) {
    if i % 5 == 4 {
        ("kill -TERM $$".into(), None, Some(libc::SIGTERM))
    } else {
        let code = (i % 100) as i32;
        (format!("exit {code}"), Some(code), None)
    }
}

/// Processes whose environment holds `marker` (zombies have none: a zombie
/// is found through its parent, which then is a leftover itself).
fn marked(marker: &str) -> Vec<i32> {
    let needle = marker.as_bytes();
    procfs::all_pids()
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|kv| kv == needle))
        })
        .collect()
}

#[test]
fn two_hundred_concurrent_chains_finish_cleanly() {
    let marker = format!("PGWRAP_LOAD_TEST={}", std::process::id());
    let (key, value) = marker.split_once('=').unwrap();
    let started = Instant::now();
    let mut chains: Vec<(usize, Child)> = Vec::new();
    let mut guard = Guard::new();
    for i in 0..CHAINS {
        let (script, _, _) = command(i);
        let child = Command::new(bin("reap"))
            .arg("--")
            .arg(bin("graceful"))
            // Budgets that agree: within reap's 5 s less graceful's margin
            // (else graceful announces its cap on stderr).
            .args(["--grace", "4s", "--"])
            .arg(bin("pgwrap"))
            .args(["--", "sh", "-c", &script])
            .env(key, value)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("start a chain");
        guard.watch(child.id() as i32);
        chains.push((i, child));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut done = Vec::new();
    while !chains.is_empty() {
        let mut i = 0;
        while i < chains.len() {
            if let Some(status) = chains[i].1.try_wait().unwrap() {
                let (n, child) = chains.swap_remove(i);
                done.push((n, status, child));
            } else {
                i += 1;
            }
        }
        if Instant::now() > deadline {
            for (_, child) in &chains {
                guard.watch_tree(child.id() as i32);
            }
            panic!("{} chains still running after 120 s", chains.len());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = started.elapsed();
    for (n, status, mut child) in done {
        let (script, code, signal) = command(n);
        let mut stderr = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        assert_eq!(
            (status.code(), status.signal()),
            (code, signal),
            "chain {n} ({script}): {stderr}"
        );
        assert_eq!(stderr, "", "chain {n} ({script})");
    }
    // Every chain's front has exited, and exits last: nothing may be left.
    let left = marked(&marker);
    let described: Vec<_> = left
        .iter()
        .map(|&p| (p, procfs::state(p), procfs::cmdline(p)))
        .collect();
    for &p in &left {
        guard.watch(p);
    }
    assert!(described.is_empty(), "left behind: {described:?}");
    eprintln!("{CHAINS} chains in {elapsed:.1?}");
}
