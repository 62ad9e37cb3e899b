//! The integration tests: real binaries, real processes, real signals.
//! One module per clause of the contract, across the three tools; the
//! shared kit (processes, /proc, tmux, skips) in `kit`.

mod kit;
use kit::{procfs, reap as reap_kit, skip, tmux};

/// Budgets along a chain: caps announced, drain delays, survivors named, --stop-all.
mod budgets;
/// reap --cgroup: COMMAND's own cgroup v2, cgroup.kill, cgroup.events; the refusals.
mod cgroup;
/// The chain matrix: every chain of one to three tools × ways a job ends × job shapes.
mod chains;
/// reap's cleanup: order, environment, shielding, timeout, exit status.
mod cleanup;
/// Malformed invocations: 125, one line, nothing started; each tool's options.
mod command_line;
/// Real containers under a real Docker daemon: the CI report, ENTRYPOINT, init, examples.
mod containers;
/// graceful's deadline reaches everything below it; an inner reap's cleanup still runs.
mod deadline;
/// Help texts, man pages and parsers agree.
mod docs;
/// The event log: JSON lines in the contract's order; never blocking.
mod events;
/// Exit statuses: passed through, re-raised (no core handler), 125/126/127.
mod exit_status;
/// pgwrap's forwarding, mapping, dropping and targets; signal storms.
mod forwarding;
/// graceful's ladder: stop signal to the group, grace for every member, kill.
mod grace;
/// reap's guarantee: the cleanup runs when reap's group, or its subreaper, is SIGKILLed.
mod guarantee;
/// Hostile input and state: arguments, inherited state, races, PID reuse, faults, load, chaos.
mod hostile;
/// What COMMAND inherits: signal mask, ignored signals (nohup), file descriptors.
mod inheritance;
/// The .deb and .rpm: lintian, install and removal, files, completions, reap as PID 1.
mod packaging;
/// PID 1 of a PID namespace with and without reap; the static reap alone in an empty root.
mod pid1;
/// The static build (musl) images carry: arguments, environment, signals before main.
mod static_build;
/// Under real supervisors: systemd, and a CI agent cancelling a job.
mod supervisors;
/// reap's sweep: orphans reaped, leftovers (escapees included) stopped then killed.
mod sweep;
/// The terminal: hand-over, job control in every mode, the terminal matrix.
mod terminal;
