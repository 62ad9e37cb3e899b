//! pgwrap: run COMMAND in a new process group and pass on only the chosen
//! signals; every other signal that would end pgwrap is dropped.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), no_main)]

mod config;

use config::Config;
use pgkit::sigfd::Received;
use pgkit::spawn::{Isolation, Spawn};
use pgkit::startup::{self, Startup};
use pgkit::tty::{self, JobControl};
use pgkit::{cli, events, exit, log, notify, poll, reap, verbose, Child, SigSet, Signal};
use std::os::fd::AsFd;

pgkit::main!(run);

fn run() -> ! {
    let startup = Startup::get();
    log::set_tool("pgwrap");
    let mut config = cli::run_or_exit(config::parse(pgkit::args::args_os().skip(1)));
    // nohup's rule: what the caller left ignored stays ignored.
    let dropped = startup.left_ignored(config.route.caught(), config.named);
    config.route.drop(dropped);

    events::install(config.events.as_deref());

    let caught = SigSet::blockable().union(config.route.caught());
    startup::block(caught);
    // Read once before COMMAND starts (cli::open_signals); what came
    // already is passed on once COMMAND exists, first thing.
    let (signals, mut received) = cli::open_signals(caught).unwrap_or_else(|e| e.exit());
    // Before COMMAND exists, once no signal can end pgwrap unseen and
    // nothing more can fail before the spawn (the socket would be left):
    // COMMAND's notification socket, and what systemd's variables become
    // for it.
    let mut relay = notify::open();
    let handed_over = !config.setsid && config.foreground.hand_over();
    let mut spawn = Spawn::new(&config.command);
    spawn.pdeathsig(config.pdeathsig).foreground(handed_over);
    if config.setsid {
        spawn.isolation(Isolation::Session);
    }
    let mut child = notify::start(&mut spawn, &startup, &mut relay);
    let (sid, kind) = if config.setsid {
        (child.pid(), "session")
    } else {
        (tty::own_session(), "process group")
    };
    events::started(child.pid(), child.pid(), sid);
    let tty = handed_over.then_some(", terminal handed over");
    let tty = tty.unwrap_or_default();
    verbose!("started pid {} in a new {kind}{tty}", child.pid());
    let mut jobs = JobControl::new(handed_over, config.foreground);
    jobs.follows_fg &= !config.setsid;
    let pid1 = reap::is_pid1();

    let status = loop {
        // A read that fails now waits a while (see drain_into): no spin.
        // Only a wake that may tell of a change of COMMAND's looks at it.
        let _ = signals.drain_into(&mut received);
        let look = signals.children_may_have_changed(&received);
        for r in received.drain(..).filter(|r| r.signal != Signal::CHLD) {
            pass_on(&config, &child, &mut jobs, r);
        }
        relay.iter_mut().for_each(notify::Relay::relay);
        if pid1 {
            // Init of its namespace: orphans are re-parented to pgwrap and
            // reaped as they exit; COMMAND stays pinned for its group.
            let _ = reap::reap_except(Some(child.pid()));
        }
        if look {
            if let Some(status) = child.peek_exit() {
                break status;
            }
            jobs.follow(&mut child);
        }
        let mut fds = vec![signals.as_fd()];
        fds.extend(child.pidfd());
        fds.extend(relay.as_ref().map(|r| r.as_fd()));
        poll::wait(&fds, None);
    };
    jobs.release(child.pid());
    child.reap();
    events::exited("reaped", child.pid(), status);
    events::exit_as(status);
    if pid1 {
        let _ = reap::reap_except(None);
    }
    verbose!("COMMAND {status}");
    // What COMMAND said last is sent on; then the socket goes.
    relay.iter_mut().for_each(notify::Relay::relay);
    drop(relay);
    exit::finish(status)
}

/// Forward, map or drop one signal received by pgwrap; follow job control.
fn pass_on(config: &Config, child: &Child, jobs: &mut JobControl, received: Received) {
    let Received { signal, from, .. } = received;
    let Some(out) = config.route.route(signal) else {
        if !jobs.on_signal(child, signal, from) {
            events::signal(signal, from, "dropped", None);
            verbose!("received {signal} from pid {from}: dropped");
        }
        return;
    };
    // Nothing is formatted before the signal is sent (and only with -v).
    let (to, _) = config.route.to.words();
    let pid = child.pid();
    let sent = child.signal(config.route.to, out);
    let action = if out == signal { "forwarded" } else { "mapped" };
    events::signal(signal, from, action, Some(out));
    match sent {
        Ok(()) if out == signal => {
            verbose!("received {signal} from pid {from}: forwarded to {to} {pid}")
        }
        Ok(()) => verbose!("received {signal} from pid {from}: passed on as {out} to {to} {pid}"),
        Err(e) if pgkit::child::refusal(&e) => {
            child.cannot_signal(config.route.to, out, &e, config.pdeathsig)
        }
        Err(e) => {
            verbose!("received {signal} from pid {from}: cannot send {out} to {to} {pid}: {e}")
        }
    }
    // A stopped process acts on nothing but KILL until continued; as
    // systemd and timeout(1) do, continue it so it can act on a stop request.
    if jobs.is_stopped() && SigSet::stop_requests().contains(out) {
        let _ = child.signal(config.route.to, Signal::CONT);
    }
}
