//! What users of timeout(1), tini, dumb-init and systemd type: each habit
//! gets a hint naming what it is here, not a generic error.

use crate::command_line::assert_rejected;
use crate::kit::{bin, Run, TIMEOUT};

/// `tool ARGS...`: its exit code and its stderr, which is one line.
fn one_line(tool: &str, args: &[&str]) -> (Option<i32>, String) {
    let mut run = Run::new(bin(tool)).args(args).stderr_piped().spawn();
    let code = run.wait_exit(TIMEOUT).code();
    let err = run.stderr_all();
    assert_eq!(err.lines().count(), 1, "{tool} {args:?}: {err}");
    (code, err)
}

#[test]
fn any_duration_after_k_points_to_the_grace() {
    for value in ["5", "5s", "1.5", "250ms", "1min"] {
        let (code, err) = one_line("graceful", &["-k", value, "true"]);
        assert_eq!(code, Some(125), "{err}");
        assert!(
            err.contains(&format!("--grace {value}")),
            "-k {value}: {err}"
        );
    }
}

#[test]
fn a_kill_signal_that_ends_no_process_is_refused() {
    let sigs = [
        "STOP", "TSTP", "TTIN", "TTOU", "CONT", "CHLD", "URG", "WINCH",
    ];
    let cases: Vec<[&str; 2]> = (sigs.iter())
        .flat_map(|s| [["-k", *s], ["--kill-signal", *s], ["--pdeathsig", *s]])
        .collect();
    let cases: Vec<&[&str]> = cases.iter().map(|c| &c[..]).collect();
    assert_rejected("graceful", &cases);
    let cases: Vec<[&str; 2]> = sigs.iter().map(|s| ["--pdeathsig", *s]).collect();
    let cases: Vec<&[&str]> = cases.iter().map(|c| &c[..]).collect();
    assert_rejected("pgwrap", &cases);
    let (_, err) = one_line("graceful", &["-k", "STOP", "true"]);
    assert!(err.contains("STOP ends no process"), "{err}");
    // A stop signal may be any: Apache's graceful stop is WINCH.
    let mut run = Run::new(bin("graceful"))
        .args(["--signal", "WINCH", "true"])
        .spawn();
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
}
