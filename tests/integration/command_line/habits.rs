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

/// tini's and dumb-init's flags name what they are here.
#[test]
fn the_peers_flags_name_their_equivalent() {
    for (tool, args, wanted) in [
        ("reap", &["-e", "143"][..], "--success-status"),
        ("reap", &["-e143"], "--success-status"),
        ("graceful", &["-e", "143"], "--success-status"),
        ("pgwrap", &["-p", "KILL"], "--pdeathsig"),
        ("graceful", &["-p", "KILL"], "--pdeathsig"),
        ("pgwrap", &["-s"], "subreaper"),
        ("pgwrap", &["-g"], "the default here"),
        ("reap", &["-w"], "-v"),
        ("reap", &["-l"], "LICENSE"),
        ("reap", &["-r", "15:3"], "--map"),
        ("reap", &["--rewrite", "15:3"], "--map"),
        ("pgwrap", &["--rewrite=15:3"], "--map"),
        ("reap", &["--single-child"], "--to child"),
        ("pgwrap", &["-c"], "--to child"),
        ("graceful", &["--single-child"], "--to child"),
    ] {
        let (code, err) = one_line(tool, &[args, &["true"]].concat());
        assert_eq!(code, Some(125), "{tool} {args:?}: {err}");
        assert!(
            err.contains(wanted) && !err.contains("did you mean"),
            "{tool} {args:?}: {err}"
        );
    }
}

/// `reap -s -g -- cmd` is tini's subreaper and group flags: reap's -s
/// takes `-g` for a signal name. An option's value that is an option is
/// said to be one, with tini's meaning.
#[test]
fn a_value_that_is_an_option_is_said_to_be_one() {
    for (tool, args, wanted) in [
        (
            "reap",
            &["-s", "-g", "--"][..],
            &["'-g'", "tini's -s", "tini's -g"][..],
        ),
        ("reap", &["-g", "--"], &["'--'", "tini's -g"]),
        ("graceful", &["-s", "-g"], &["'-g'", "tini's -s"]),
        ("graceful", &["--grace", "--timeout", "5"], &["'--timeout'"]),
        ("reap", &["-c", "-g"], &["'-g'", "--to child"]),
    ] {
        let (code, err) = one_line(tool, &[args, &["true"]].concat());
        assert_eq!(code, Some(125), "{tool} {args:?}: {err}");
        for w in wanted {
            assert!(err.contains(w), "{tool} {args:?}: {w}: {err}");
        }
        assert!(err.contains("is an option"), "{tool} {args:?}: {err}");
    }
}

/// "did you mean" names only options the tool has: the help's prose names
/// dumb-init's --rewrite and --single-child, which reap does not have.
#[test]
fn a_suggestion_is_an_option_of_the_tool() {
    for (tool, typed) in [
        ("reap", "--rewrit"),
        ("reap", "--single-chil"),
        ("reap", "--rewrites"),
        ("graceful", "--kill-afterr"),
    ] {
        let (code, err) = one_line(tool, &[typed, "true"]);
        assert_eq!(code, Some(125), "{tool} {typed}: {err}");
        let named = err.split("did you mean ").nth(1).unwrap_or("");
        assert!(
            !named.starts_with("--rewrite") && !named.starts_with("--single-child"),
            "{tool} {typed}: {err}"
        );
    }
    let (_, err) = one_line("graceful", &["--kill-afte", "5", "true"]);
    assert!(err.contains("did you mean --kill-after?"), "{err}");
}

/// `graceful 5 make` (timeout(1)'s order): COMMAND's first word is a
/// duration and no such command exists. The 127 line points to
/// --timeout, or (pgwrap, reap: no time limit) to graceful; an unquoted
/// span (`--grace 1min 30s`, as a unit file splits it) to quoting it.
#[test]
fn a_duration_for_command_points_to_the_timeout_or_to_quoting() {
    for (tool, args, wanted) in [
        ("graceful", &["5", "true"][..], "graceful --timeout 5"),
        (
            "graceful",
            &["--preserve-status", "1.5s", "true"],
            "graceful --timeout 1.5s",
        ),
        ("pgwrap", &["5", "true"], "graceful --timeout 5"),
        ("reap", &["10s", "true"], "graceful --timeout 10s"),
        (
            "graceful",
            &["--grace", "1min", "30s", "true"],
            "--grace '1min 30s'",
        ),
        (
            "graceful",
            &["--timeout=1h", "30min", "true"],
            "--timeout '1h 30min'",
        ),
        ("reap", &["-g", "2", "min", "true"], "-g '2 min'"),
        ("graceful", &["-t", "1", "h", "true"], "-t '1 h'"),
    ] {
        let (code, err) = one_line(tool, args);
        assert_eq!(code, Some(127), "{tool} {args:?}: {err}");
        assert!(
            err.contains("command not found") && err.contains(wanted),
            "{tool} {args:?}: {err}"
        );
    }
    // Not a duration, or a command of that name: as before.
    let (_, err) = one_line("graceful", &["no-such-command-anywhere"]);
    assert!(!err.contains("--timeout"), "{err}");
    let dir = crate::kit::temp_dir("duration-command");
    std::fs::write(dir.join("5"), "#!/bin/sh\nexit 3\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.join("5"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut run = Run::new(bin("graceful"))
        .env("PATH", dir.path())
        .args(["5"])
        .spawn();
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(3));
}
