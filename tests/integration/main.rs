//! The integration tests: real binaries, real processes, real signals.
//! One module per clause of the contract.

mod kit;
mod procfs;
mod tmux;

/// The test kit and the sigprobe handshake child themselves.
mod kit_selftest;

/// Malformed invocations: 125, one line, nothing started.
mod bad_input;
/// The chaos harness: random scenarios from a seed, the contract's invariants after each.
mod chaos;
/// A CI agent cancels a job (TERM, grace, SIGKILL to its group): with and without reap + graceful.
mod ci_agent;
/// reap's cleanup: order, environment, shielding, timeout, exit status.
mod cleanup;
/// A re-raised core-dumping signal runs no core handler for the tool.
mod core_dump;
/// Help texts, man pages and parsers agree.
mod docs;
/// Exit statuses: passed through, re-raised, 125/126/127.
mod exit_status;
/// Resource faults: no fork, no descriptor, closed stdio, no /proc.
mod faults;
/// pgwrap's forwarding, mapping, dropping and targets.
mod forwarding;
/// graceful's ladder: stop signal to the group, grace for every member, kill.
mod grace;
/// graceful's triggers, forwarding, GRACEFUL_GRACE_MS, bad input, man page.
mod graceful_options;
/// graceful on a terminal: Ctrl-C starts the ladder.
mod graceful_tty;
/// Hostile input: random argument vectors end in 125 or a started COMMAND, never a panic.
mod hostile;
/// Hostile state: the invariants hold whatever the caller hands over and whatever the tree does.
mod hostile_state;
/// What COMMAND inherits: signal mask, ignored signals, file descriptors.
mod inheritance;
/// Job control in every terminal mode: the shell's job is the tool and COMMAND together.
mod job_control;
/// Load: 200 concurrent reap -- graceful -- pgwrap chains finish cleanly.
mod load;
/// The nohup rule: a signal the caller left ignored stays ignored unless an option names it.
mod nohup;
/// The .deb and .rpm: lintian, install and removal, files, completions, reap as PID 1.
mod packaging;
/// PID 1 of a PID namespace with and without reap; the static reap alone in an empty root.
mod pid1;
/// PID reuse: no signal to a PID or PGID once its process was reaped (code review + ns_last_pid).
mod pid_reuse;
/// Start-up races: a signal at every point of start-up is never lost, misdelivered or hung on.
mod races;
/// reap's guarantee: the cleanup runs when reap's group is SIGKILLed.
mod reap_guarantee;
/// What reap's COMMAND and cleanup inherit.
mod reap_inheritance;
/// Helpers for the reap tests.
mod reap_kit;
/// reap's bad input, help, version and man page.
mod reap_options;
/// reap as PID 1 of a PID namespace.
mod reap_pid1;
/// reap on a terminal: hand-over and job control across the split.
mod reap_terminal;
/// reap: orphans reaped, leftovers (escapees included) stopped then killed.
mod reaping;
/// Skipped tests say why and are counted (PGWRAP_SKIP_LOG).
mod skip;
/// Signal storms at each tool: nothing forwarded is lost, nothing dropped gets through.
mod storms;
/// Under a real systemd: each tool as a service's ExecStart= prefix, with and without.
mod supervisors;
/// Terminal hand-over and job control, through tmux.
mod terminal;
/// The terminal matrix: tool x mode x action in bash, dash and zsh, against the man pages' tables.
mod terminal_matrix;
/// Terminal cases across the tools: default hand-over or not, hints, Ctrl-C, Ctrl-Z/fg.
mod tty_all;
/// Not root: each tool as nobody.
mod unprivileged;
