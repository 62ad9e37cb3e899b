//! reap: run COMMAND as a child subreaper (or as init when PID 1), reap
//! every zombie, kill what COMMAND leaves behind, then run the cleanup —
//! even when reap's own process is SIGKILLed with its whole group.
//!
//! Outside PID 1, reap splits in two (guardian.rs): the front stays the
//! process the caller started, the back owns COMMAND's tree and the cleanup
//! (phases.rs, driving the state machine of machine.rs). As PID 1 there is nothing to guard against (if PID 1 dies,
//! the kernel kills its whole namespace), so reap runs as one process.
#![forbid(unsafe_code)]
// The unit tests run under the test harness's own main.
#![cfg_attr(not(test), no_main)]

mod config;
mod guardian;
mod machine;
mod outcome;
mod phases;
mod sweep;
mod terminal;

use guardian::Split;
use pgkit::startup::{self, Startup};
use pgkit::{cli, events, exit, log, notify, reap, verbose, SigSet};
use phases::{Back, Inbox};

#[cfg(not(test))]
pgkit::main!(run);
#[cfg(test)]
const _: fn() -> ! = run;

fn run() -> ! {
    let startup = Startup::get();
    log::set_tool("reap");
    let mut parsed = config::parse(pgkit::args::args_os().skip(1));
    // Invoked as `docker-init` (`dockerd --init-path`): `--version` answers
    // in tini's form, which `docker info` parses, printed as the help is.
    let argv0 = pgkit::args::args_os().next().unwrap_or_default();
    if let (Ok(cli::Parsed::Version), Some(line)) = (&parsed, config::docker_init_version(&argv0)) {
        parsed = Ok(cli::Parsed::Help(line.leak()));
    }
    let mut config = cli::run_or_exit(parsed);
    // nohup's rule: what the caller left ignored stays ignored.
    let dropped = startup.left_ignored(config.route.caught(), config.named);
    config.route.drop(dropped);

    // Checked before anything starts: 125 and one line if it cannot be used.
    events::install(config.events.as_deref());

    let caught = SigSet::blockable().union(config.route.caught());
    startup::block(caught);

    // --cgroup: COMMAND's cgroup exists before anything starts, or reap
    // says why it cannot (125).
    let cgroup = config.cgroup.then(|| {
        let cg = pgkit::cgroup::Cgroup::create(&format!("reap.{}", std::process::id()))
            .unwrap_or_else(|e| e.exit());
        verbose!("made cgroup {} for COMMAND", cg.path().display());
        cg
    });
    let handed_over = config.foreground.hand_over();

    // Before the split, in the process systemd started (the front): COMMAND's
    // notification socket, and what systemd's variables become for it.
    let mut relay = notify::open();
    let service = notify::Service::new(relay.as_ref());
    // The cleanup's stdout and stderr, where they are pipes or sockets a
    // caller may stop reading: made now, so the front holds them too.
    let outlet = (config.cleanup.is_some() && !config.exec_cleanup)
        .then(pgkit::outlet::Outlet::open)
        .flatten();

    let (mut link, mut lost) = (None, None);
    // Read once before COMMAND starts: a refused read ends reap here, with
    // nothing started (split, the front does so before its fork). What came
    // already goes to the back's machine first.
    let (signals, early) = if reap::is_pid1() {
        verbose!("running as PID 1: reaping every orphan of the namespace");
        cli::open_signals(caught).unwrap_or_else(|e| e.exit())
    } else {
        let split = guardian::split(caught).unwrap_or_else(|e| {
            drop(relay.take()); // the socket goes with it
            e.exit()
        });
        match split {
            Split::Front(front) => {
                // Returns only if the back was lost before it finished.
                // The front starts nothing that should get the activated
                // descriptors (the back has its own copies).
                service.command_started();
                let (back, signals, front_relay) = front.run(relay.take());
                (relay, lost) = (front_relay, Some(back));
                (signals, Vec::new())
            }
            Split::Back(mut back_link, signals) => {
                // The front relays; this copy only passes the path on, and
                // removes the socket if the front is killed.
                back_link.leftover = relay.take().map(notify::Relay::disown);
                link = Some(back_link);
                (signals, Vec::new())
            }
        }
    };
    let inbox = Inbox::new(signals, link, relay, outlet, early);
    let back = Back::new(&config, &startup, inbox, handed_over, cgroup, service);
    match lost {
        Some(lost) => {
            pgkit::warn!("{}", back.recover(&lost));
            exit::exit_code(pgkit::error::TOOL_FAILED)
        }
        None => exit::finish(back.run()),
    }
}
