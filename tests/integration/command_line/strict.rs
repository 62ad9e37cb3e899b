//! What a user types by mistake: a single-valued option given twice, two
//! options that contradict each other, a misspelt long option, a negative
//! descriptor. Each is refused with one line and 125, nothing started.

use crate::command_line::assert_rejected;
use crate::kit::{bin, temp_dir, Run, TIMEOUT};

#[test]
fn repeated_and_contradictory_options_are_refused() {
    assert_rejected(
        "pgwrap",
        &[
            &["--foreground", "--no-foreground"],
            &["--no-foreground", "--foreground"],
            &["-f", "TERM", "--forward", "INT"],
            &["--to", "child", "--to", "group"],
            &["--pdeathsig", "TERM", "--pdeathsig", "none"],
            &["--events", "2", "--events", "2"],
            &["-m", "QUIT:TERM", "-m", "QUIT:INT"],
        ],
    );
    assert_rejected(
        "graceful",
        &[
            &["-g", "5", "--grace", "6"],
            &["-t", "5", "-t", "6"],
            &["-s", "INT", "--signal", "TERM"],
            &["-k", "TERM", "-k", "KILL"],
            &["--on", "TERM", "--on", "INT"],
            &["-f", "USR1", "-f", "USR2"],
            &["--stop-delay", "1", "--stop-delay", "2"],
            &["--foreground", "--no-foreground"],
            &["--pdeathsig", "TERM", "--pdeathsig", "KILL"],
        ],
    );
    assert_rejected(
        "reap",
        &[
            &["--cleanup", "true", "--cleanup", "false"],
            &["-c", "true", "-c", "false"],
            &["-g", "1", "-g", "2"],
            &["-s", "INT", "-s", "TERM"],
            &["-f", "TERM", "-f", "INT"],
            &[
                "-c",
                "true",
                "--cleanup-timeout",
                "1",
                "--cleanup-timeout",
                "2",
            ],
            &["--stop-delay", "1", "--stop-delay", "2"],
            &["--foreground", "--no-foreground"],
            &["--events", "2", "--events", "2"],
        ],
    );
}

#[test]
fn the_line_names_both_spellings() {
    let mut run = Run::new(bin("graceful"))
        .args(["-g", "5", "--grace", "6", "true"])
        .stderr_piped()
        .spawn();
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(125));
    let err = run.stderr_all();
    assert!(err.contains("--grace") && err.contains("-g"), "{err}");
    let mut run = Run::new(bin("pgwrap"))
        .args(["--foreground", "--no-foreground", "true"])
        .stderr_piped()
        .spawn();
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(125));
    let err = run.stderr_all();
    assert!(
        err.contains("--foreground") && err.contains("--no-foreground"),
        "{err}"
    );
}

/// One misspelt long option close to one of the tool's: named.
#[test]
fn a_close_unknown_option_gets_a_suggestion() {
    for (tool, typed, meant) in [
        ("graceful", "--grase", "--grace"),
        ("graceful", "--gracee", "--grace"),
        ("graceful", "--preserve-stat", "--preserve-status"),
        ("reap", "--cleanup-timout", "--cleanup-timeout"),
        ("reap", "--keep-orphan", "--keep-orphans"),
        ("pgwrap", "--foward", "--forward"),
        ("pgwrap", "--verbos", "--verbose"),
    ] {
        let mut run = Run::new(bin(tool))
            .args([typed, "5", "true"])
            .stderr_piped()
            .spawn();
        assert_eq!(run.wait_exit(TIMEOUT).code(), Some(125), "{tool} {typed}");
        let err = run.stderr_all();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("did you mean {meant}?")),
            "{tool} {typed}: {err}"
        );
    }
    // Nothing close: no guess.
    let mut run = Run::new(bin("graceful"))
        .args(["--frobnicate", "true"])
        .stderr_piped()
        .spawn();
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(125));
    let err = run.stderr_all();
    assert!(!err.contains("did you mean"), "{err}");
}

/// `--events -1` is not a file named `-1`.
#[test]
fn a_negative_events_descriptor_is_refused() {
    let dir = temp_dir("events-negative");
    for tool in ["pgwrap", "graceful", "reap"] {
        for value in ["-1", "-3"] {
            let mut run = Run::new(bin(tool))
                .args(["--events", value, "true"])
                .current_dir(dir.path())
                .stderr_piped()
                .spawn();
            assert_eq!(run.wait_exit(TIMEOUT).code(), Some(125), "{tool} {value}");
            let err = run.stderr_all();
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains("descriptor"), "{tool}: {err}");
            assert!(!dir.join(value).exists(), "{tool} created a file {value}");
        }
    }
}

/// A backgrounded script's tools start with INT and QUIT ignored (every
/// shell does that to a background job): `-v` does not open with a line
/// about it; `-vv` says it.
#[test]
fn the_callers_ignored_signals_are_said_with_a_second_v_only() {
    for tool in ["pgwrap", "graceful", "reap"] {
        for (v, said) in [("-v", false), ("-vv", true)] {
            let line = format!("trap '' INT QUIT; exec {} {v} -- true", bin(tool).display());
            let mut run = Run::new("sh").args(["-c", &line]).stderr_piped().spawn();
            assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0), "{tool} {v}");
            let err = run.stderr_all();
            assert_eq!(
                err.contains("ignored by the caller"),
                said,
                "{tool} {v}: {err}"
            );
        }
    }
}
