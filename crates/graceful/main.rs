//! graceful: run COMMAND in a new process group; on a stop trigger send the
//! stop signal to the whole group, give every member the grace period, then
//! send the kill signal to whatever is left.
#![forbid(unsafe_code)]
// The unit tests run under the test harness's own main.
#![cfg_attr(not(test), no_main)]

mod below;
mod budget;
mod config;
mod machine;
mod supervise;

use machine::Machine;
use pgkit::spawn::Spawn;
use pgkit::startup::{self, Startup};
use pgkit::tty::JobControl;
use pgkit::{cli, events, exit, log, notify, reap, verbose, Error, SigSet};
use std::time::Instant;
use supervise::Supervisor;

pgkit::main!(run);

fn run() -> ! {
    let startup = Startup::get();
    log::set_tool("graceful");
    let mut config = cli::run_or_exit(config::parse(pgkit::args::args_os().skip(1)));
    // nohup's rule: what the caller left ignored stays ignored.
    let dropped = startup.left_ignored(config.on.union(config.forward), config.named);
    config.on = config.on.minus(dropped);
    config.forward = config.forward.minus(dropped);
    let grace = budget::effective(
        config.grace,
        config.grace_given,
        pgkit::spawn::var(budget::VAR),
    );

    events::install(config.events.as_deref());

    let caught = SigSet::blockable().union(config.caught());
    startup::block(caught);
    // Read once before COMMAND starts (cli::open_signals); what came
    // already is acted on once COMMAND exists, first thing.
    let (signals, received) = cli::open_signals(caught).unwrap_or_else(|e| e.exit());
    // Members whose parent dies are re-parented to graceful: their exits
    // reach it as SIGCHLD, and it can reap them.
    reap::become_subreaper().unwrap_or_else(|e| Error::sys("become a child subreaper", e).exit());
    // Before COMMAND exists, once no signal can end graceful unseen and
    // nothing more can fail before the spawn (the socket would be left):
    // COMMAND's notification socket, and what systemd's variables become
    // for it.
    let mut relay = notify::open();
    let handed_over = config.foreground.hand_over();
    let mut spawn = Spawn::new(&config.command);
    spawn.pdeathsig(config.pdeathsig).foreground(handed_over);
    pgkit::duration::export_grace(&mut spawn, grace.duration());
    // What an inner reap guards is spared by the deadline (pgkit::guard).
    let spare = pgkit::guard::Spare::new();
    if let Some(spare) = &spare {
        spawn.env(pgkit::guard::VAR, spare.export());
    }
    let child = notify::start(&mut spawn, &startup, &mut relay);
    // The grace's timer, open before any stop signal goes out.
    pgkit::poll::open_timer();
    let machine = Machine::new(config.ladder(grace), config.timeout, Instant::now());
    let pid = child.pid();
    events::started(pid, pid, pgkit::tty::own_session());
    verbose!("started pid {pid} in a new process group; grace {grace}");

    let mut supervisor = Supervisor {
        received,
        config: &config,
        child,
        machine,
        signals,
        jobs: JobControl::new(handed_over, config.foreground),
        member: None,
        recheck: None,
        blind_warned: false,
        waiting_below: false,
        relay,
        extension: Default::default(),
        below: below::Below::new(spare),
    };
    let status = supervisor.run();
    let timed_out = supervisor.finish();
    if timed_out && !config.preserve_status {
        verbose!("COMMAND {status}; exiting 124 (--timeout fired)");
        events::exit_with(124, "timeout", false, &[]);
        exit::exit_code(124)
    }
    events::exit_as(status);
    if timed_out {
        // --preserve-status after the timeout, as timeout(1): a signal S
        // is 128+S, not re-raised.
        exit::exit_code(status.shell_code())
    }
    exit::finish(status)
}
