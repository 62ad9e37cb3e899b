//! systemd's protocols through the tools (issue 14): `Type=notify` with the
//! default `NotifyAccess=main`, the watchdog, `MAINPID=`, socket activation,
//! the descriptor store, a chain of the three tools, and reap's
//! `STOPPING=1` while its cleanup runs.
//!
//! Each scenario runs once per tool and once in its twin: the same service
//! under a plain parent process (`sh -c 'SERVICE & wait'`), which is what the
//! tools were to systemd before they relayed: a main process that passes
//! `NOTIFY_SOCKET`, `LISTEN_PID` and `WATCHDOG_PID` on unchanged. The twin
//! fails the way the issue says; the tools do not.
//!
//! The service is `tests/systemd/helpers/notify-svc`, which speaks the
//! protocols itself as libsystemd would (one datagram per message, the
//! kernel adding its credentials; `LISTEN_PID` and `WATCHDOG_PID` honoured
//! only when they name its own pid).

use super::manager::{self, Manager, UnitFile};
use super::wait_for;
use crate::kit::{bin, Run};
use crate::procfs;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::time::Duration;

/// The three tools, and the twin's plain parent.
const TOOLS: [&str; 3] = ["pgwrap", "graceful", "reap"];
const PLAIN: &str = "plain";

/// `ExecStart=` for `mode` of the service under `tool` (or the plain parent).
fn exec_start(tool: &str, mode: &str) -> String {
    let svc = format!("@HELPERS@/notify-svc @OUT@ {mode}");
    match tool {
        PLAIN => format!("/bin/sh -c '{svc} & wait'"),
        "reap" => format!("@BIN@/reap --cleanup '@HELPERS@/cleanup-report @OUT@' -- {svc}"),
        _ => format!("@BIN@/{tool} -- {svc}"),
    }
}

fn unit_name(scenario: &str, tool: &str) -> String {
    format!("notify-{scenario}-{tool}.service")
}

/// The units of every scenario, for the shared manager.
pub fn units(out_root: &Path) -> Vec<UnitFile> {
    let mut units = Vec::new();
    let add = |units: &mut Vec<UnitFile>, name: String, text: String| {
        units.push(manager::render(&name, &text, out_root))
    };
    for tool in TOOLS.iter().copied().chain([PLAIN]) {
        // The twins that need systemd to take messages from any process to
        // get as far as the failure they show.
        let any = if tool == PLAIN {
            "NotifyAccess=all\n"
        } else {
            ""
        };
        let service = |extra: &str, mode: &str| {
            format!(
                "[Unit]\nDescription=notify test\n[Service]\nType=notify\nTimeoutStartSec=5\n\
                 TimeoutStopSec=10\n{extra}ExecStart={}\n",
                exec_start(tool, mode)
            )
        };
        add(&mut units, unit_name("ready", tool), service("", "ready"));
        add(
            &mut units,
            unit_name("watchdog", tool),
            service(&format!("WatchdogSec=2\n{any}"), "watchdog"),
        );
        add(
            &mut units,
            unit_name("dogstop", tool),
            service("WatchdogSec=2\n", "dogstop"),
        );
        add(
            &mut units,
            unit_name("mainpid", tool),
            service(any, "mainpid"),
        );
        add(
            &mut units,
            unit_name("fdstore", tool),
            service(&format!("FileDescriptorStoreMax=4\n{any}"), "fdstore"),
        );
        let listen = unit_name("listen", tool);
        add(
            &mut units,
            listen.clone(),
            // KillMode=mixed, as reap(1) says to run reap under systemd:
            // with the default control-group, systemd's stop signals every
            // process of the unit at once and may end the cleanup with the
            // rest (the contract's "a kill of the whole cgroup").
            format!(
                "[Unit]\nDescription=socket activation test\n[Service]\nTimeoutStopSec=10\n\
                 KillMode=mixed\nExecStart={}\n",
                exec_start(tool, "listen")
            ),
        );
        let socket = listen.replace(".service", ".socket");
        units.push(UnitFile {
            name: socket,
            text: format!(
                "[Unit]\nDescription=socket activation test\n[Socket]\nListenStream={}\n",
                out_root.join(&listen).join("sock").display()
            ),
        });
    }
    add(
        &mut units,
        "notify-chain.service".into(),
        "[Unit]\nDescription=chain test\n[Service]\nType=notify\nTimeoutStartSec=5\n\
         WatchdogSec=2\nTimeoutStopSec=10\n\
         ExecStart=@BIN@/reap -- @BIN@/graceful -- @BIN@/pgwrap -- \
         @HELPERS@/notify-svc @OUT@ watchdog\n"
            .into(),
    );
    let slow = "@HELPERS@/cleanup-report @OUT@ wait";
    add(
        &mut units,
        "notify-stopping-reap.service".into(),
        format!(
            "[Unit]\nDescription=STOPPING test\n[Service]\nType=notify\nTimeoutStartSec=5\n\
             TimeoutStopSec=30\n\
             ExecStart=@BIN@/reap --cleanup '{slow}' -- @HELPERS@/notify-svc @OUT@ exit\n"
        ),
    );
    add(
        &mut units,
        "notify-stopping-plain.service".into(),
        format!(
            "[Unit]\nDescription=STOPPING twin\n[Service]\nType=notify\nNotifyAccess=all\n\
             TimeoutStartSec=5\nTimeoutStopSec=30\n\
             ExecStart=/bin/sh -c '@HELPERS@/notify-svc @OUT@ exit; {slow}'\n"
        ),
    );
    units
}

/// One property of a unit (`systemctl show -p NAME --value`).
fn prop(m: &Manager, unit: &str, name: &str) -> String {
    let out = m.systemctl(&["show", "-p", name, "--value", unit]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `systemctl start UNIT`, whether it worked.
fn try_start(m: &Manager, unit: &str) -> bool {
    m.exec(&["systemctl", "start", unit]).status.success()
}

/// Stop `unit` and forget its failure, if any, so it can be started again.
fn stop(m: &Manager, unit: &str) {
    m.exec(&["systemctl", "stop", unit]);
    m.exec(&["systemctl", "reset-failed", unit]);
}

/// The service's log.
fn svc_log(m: &Manager, unit: &str) -> String {
    super::read(&m.out(unit).join("svc.log"))
}

/// Run `check` for every tool and the twin at once (the twins wait for
/// systemd's timeouts); each gets the unit of `scenario`.
fn each(m: &Manager, scenario: &str, check: impl Fn(&Manager, &str, &str) + Sync) {
    std::thread::scope(|s| {
        let handles: Vec<_> = TOOLS
            .iter()
            .copied()
            .chain([PLAIN])
            .map(|tool| {
                let unit = unit_name(scenario, tool);
                let check = &check;
                s.spawn(move || check(m, tool, &unit))
            })
            .collect();
        for h in handles {
            if let Err(panic) = h.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
}

#[test]
fn notify_ready_and_status_reach_systemd_through_each_tool() {
    let Some(m) = super::manager("notify_ready_and_status_reach_systemd_through_each_tool") else {
        return;
    };
    each(&m, "ready", |m, tool, unit| {
        let started = try_start(m, unit);
        if tool == PLAIN {
            // READY=1 comes from a pid that is not the main process.
            assert!(!started, "{unit}: started without the relay");
            assert_eq!(prop(m, unit, "Result"), "timeout", "{unit}");
            let journal = m.journal(unit);
            assert!(
                journal.contains("reception only permitted for main PID"),
                "{unit}: {journal}"
            );
        } else {
            assert!(started, "{unit}: did not start\n{}", m.journal(unit));
            assert_eq!(prop(m, unit, "StatusText"), "serving", "{unit}");
            let main = prop(m, unit, "MainPID");
            assert_eq!(main, prop(m, unit, "ExecMainPID"), "{unit}");
            let log = svc_log(m, unit);
            // Nothing of the relay reached the service: its three standard
            // descriptors and the directory it read them from.
            assert!(log.contains("fds=0,1,2,3\n"), "{unit}: {log}");
            assert!(
                !m.journal(unit).contains("reception only permitted"),
                "{unit}"
            );
        }
        stop(m, unit);
    });
}

#[test]
fn notify_watchdog_keepalives_reach_systemd_and_silence_is_killed() {
    let Some(m) = super::manager("notify_watchdog_keepalives_reach_systemd_and_silence_is_killed")
    else {
        return;
    };
    each(&m, "watchdog", |m, tool, unit| {
        assert!(try_start(m, unit), "{unit}\n{}", m.journal(unit));
        let main = prop(m, unit, "MainPID");
        if tool == PLAIN {
            // WATCHDOG_PID names the shell: the service sends no keep-alive.
            procfs::wait_until(
                &format!("{unit} killed by its watchdog"),
                super::PATIENCE,
                || prop(m, unit, "Result") == "watchdog",
            );
            let log = svc_log(m, unit);
            assert!(log.contains("no keep-alives"), "{unit}: {log}");
        } else {
            // Over twice WatchdogSec: alive only if the keep-alives arrive.
            std::thread::sleep(Duration::from_secs(5));
            assert_eq!(prop(m, unit, "ActiveState"), "active", "{unit}");
            assert_eq!(prop(m, unit, "MainPID"), main, "{unit}");
            assert_eq!(prop(m, unit, "Result"), "success", "{unit}");
        }
        stop(m, unit);
    });
    for tool in TOOLS {
        let unit = unit_name("dogstop", tool);
        assert!(try_start(&m, &unit), "{unit}\n{}", m.journal(&unit));
        wait_for(&m.out(&unit).join("svc.log"), "silent");
        procfs::wait_until(
            &format!("{unit} killed by its watchdog"),
            super::PATIENCE,
            || prop(&m, &unit, "Result") == "watchdog",
        );
        stop(&m, &unit);
    }
}

#[test]
fn notify_mainpid_from_command_leaves_the_tool_the_main_process() {
    let Some(m) = super::manager("notify_mainpid_from_command_leaves_the_tool_the_main_process")
    else {
        return;
    };
    each(&m, "mainpid", |m, tool, unit| {
        assert!(try_start(m, unit), "{unit}\n{}", m.journal(unit));
        let log = wait_for(&m.out(unit).join("svc.log"), "sent MAINPID");
        let svc = log
            .split_once("start pid=")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .unwrap_or_default()
            .to_string();
        let (main, exec_main) = (prop(m, unit, "MainPID"), prop(m, unit, "ExecMainPID"));
        if tool == PLAIN {
            // The service made itself the main process: KillMode=mixed
            // would now send the stop signal past the wrapper.
            assert_eq!(main, svc, "{unit}: MAINPID= ignored");
        } else {
            assert_ne!(main, svc, "{unit}: MAINPID= changed the main process");
            assert_eq!(
                main, exec_main,
                "{unit}: the tool is no longer the main process"
            );
        }
        stop(m, unit);
    });
}

/// Connect to the activated socket (inside the manager) and read the answer.
fn ask(m: &Manager, unit: &str) -> String {
    let sock = m.out(unit).join("sock");
    let script = "import socket,sys\n\
                  s=socket.socket(socket.AF_UNIX)\ns.settimeout(3)\n\
                  s.connect(sys.argv[1])\n\
                  try:\n print(s.recv(100).decode(),end='')\n\
                  except Exception as e:\n print('no answer:',e)\n";
    let out = m.exec(&["python3", "-c", script, &sock.to_string_lossy()]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn socket_activation_hands_the_socket_to_command() {
    let Some(m) = super::manager("socket_activation_hands_the_socket_to_command") else {
        return;
    };
    each(&m, "listen", |m, tool, unit| {
        let socket = unit.replace(".service", ".socket");
        m.start(&socket);
        let answer = ask(m, unit);
        let log = svc_log(m, unit);
        if tool == PLAIN {
            // LISTEN_PID names the shell: sd_listen_fds() gives nothing.
            assert!(!answer.contains("hello"), "{unit}: {answer}");
            assert!(log.contains("no descriptors"), "{unit}: {log}");
        } else {
            assert!(answer.contains("hello from pid"), "{unit}: {answer}\n{log}");
            // The activated socket and nothing else of the tool's.
            assert!(log.contains("fds=0,1,2,3,4\n"), "{unit}: {log}");
        }
        // The socket first: stopped while it still listens, the service
        // could be activated again by a connection still queued on it.
        m.exec(&["systemctl", "stop", &socket]);
        stop(m, unit);
        if tool == "reap" {
            // The cleanup got neither the socket nor the variables.
            let path = m.out(unit).join("cleanup");
            let t0 = std::time::Instant::now();
            while !super::read(&path).contains("end") {
                assert!(
                    t0.elapsed() < super::PATIENCE,
                    "{unit}: the cleanup never wrote its report; journal:\n{}",
                    m.journal(unit)
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let cleanup = super::read(&path);
            assert!(cleanup.starts_with("fds: 0,1,2,3\n"), "{cleanup}");
            assert!(!cleanup.contains("LISTEN_"), "{cleanup}");
            assert!(!cleanup.contains("NOTIFY_SOCKET"), "{cleanup}");
        }
    });
}

#[test]
fn fdstore_descriptors_survive_a_restart() {
    let Some(m) = super::manager("fdstore_descriptors_survive_a_restart") else {
        return;
    };
    each(&m, "fdstore", |m, tool, unit| {
        assert!(try_start(m, unit), "{unit}\n{}", m.journal(unit));
        wait_for(&m.out(unit).join("svc.log"), "stored");
        m.systemctl(&["restart", unit]);
        procfs::wait_until(&format!("{unit} restarted"), super::PATIENCE, || {
            svc_log(m, unit).matches("mode=fdstore").count() == 2
        });
        let log = if tool == PLAIN {
            wait_for(&m.out(unit).join("svc.log"), "no descriptors")
        } else {
            wait_for(&m.out(unit).join("svc.log"), "found generation 1")
        };
        if tool == PLAIN {
            assert!(!log.contains("found"), "{unit}: {log}");
        }
        stop(m, unit);
    });
}

#[test]
fn chain_reap_graceful_pgwrap_relays_to_systemd() {
    let Some(m) = super::manager("chain_reap_graceful_pgwrap_relays_to_systemd") else {
        return;
    };
    let unit = "notify-chain.service";
    assert!(try_start(&m, unit), "{unit}\n{}", m.journal(unit));
    assert_eq!(prop(&m, unit, "StatusText"), "serving");
    let main = prop(&m, unit, "MainPID");
    assert_eq!(main, prop(&m, unit, "ExecMainPID"));
    // The keep-alives of the innermost service cross the three relays.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(prop(&m, unit, "ActiveState"), "active", "{unit}");
    assert_eq!(prop(&m, unit, "MainPID"), main);
    let log = svc_log(&m, unit);
    assert!(!log.contains("no keep-alives"), "{log}");
    stop(&m, unit);
    // The twin of the chain is the plain parent of the other scenarios.
}

#[test]
fn reap_says_stopping_while_its_cleanup_runs() {
    let Some(m) = super::manager("reap_says_stopping_while_its_cleanup_runs") else {
        return;
    };
    std::thread::scope(|s| {
        for tool in ["reap", PLAIN] {
            let m = &m;
            s.spawn(move || {
                let unit = format!("notify-stopping-{tool}.service");
                let out = m.out(&unit);
                assert!(try_start(m, &unit), "{unit}\n{}", m.journal(&unit));
                assert_eq!(prop(m, &unit, "SubState"), "running");
                // COMMAND ends by itself: the cleanup starts, and waits.
                std::fs::write(out.join("go"), "").unwrap();
                wait_for(&out.join("cleanup"), "end");
                let state = (prop(m, &unit, "ActiveState"), prop(m, &unit, "SubState"));
                std::fs::write(out.join("cleanup-go"), "").unwrap();
                if tool == PLAIN {
                    assert_eq!(state, ("active".into(), "running".into()), "{unit}");
                } else {
                    assert_eq!(
                        state,
                        ("deactivating".into(), "stop-sigterm".into()),
                        "{unit}\n{}",
                        m.journal(&unit)
                    );
                }
                procfs::wait_until(&format!("{unit} ended"), super::PATIENCE, || {
                    prop(m, &unit, "ActiveState") == "inactive"
                });
                assert_eq!(prop(m, &unit, "Result"), "success", "{unit}");
            });
        }
    });
}

/// With the relay open and nothing said, the tool sleeps: no wake-up.
#[test]
fn idle_tools_do_not_wake_up_with_the_relay_open() {
    let dir = crate::kit::temp_dir("notify-idle");
    let path = dir.join("notify");
    let upstream = UnixDatagram::bind(&path).unwrap();
    upstream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let script = "import os,socket\n\
                  s=socket.socket(socket.AF_UNIX,socket.SOCK_DGRAM)\n\
                  s.sendto(b'READY=1',os.environ['NOTIFY_SOCKET'])\n\
                  print('ready pid=%d'%os.getpid(),flush=True)\n\
                  os.execvp('sleep',['sleep','60'])\n";
    for tool in TOOLS {
        let mut run = Run::new(bin(tool))
            .args(["--", "python3", "-c", script])
            .env("NOTIFY_SOCKET", &path)
            .spawn();
        run.expect_line("ready pid=", Duration::from_secs(10));
        // The previous tool's stop extended the stop timeout: not this one's.
        let mut buf = [0u8; 64];
        let mut n = upstream.recv(&mut buf).unwrap();
        while buf[..n].starts_with(b"EXTEND_TIMEOUT_USEC=") {
            n = upstream.recv(&mut buf).unwrap();
        }
        assert_eq!(&buf[..n], b"READY=1\n", "{tool}: relayed");
        // reap: the front (which relays) and the back.
        let mut pids = vec![run.pid()];
        if tool == "reap" {
            pids.extend(procfs::children_of(run.pid()));
        }
        for &pid in &pids {
            procfs::wait_until(&format!("{tool} pid {pid} asleep"), super::PATIENCE, || {
                procfs::state(pid) == Some('S')
            });
        }
        std::thread::sleep(Duration::from_millis(300));
        let before: Vec<_> = pids.iter().map(|&p| procfs::ctxt_switches(p)).collect();
        std::thread::sleep(Duration::from_secs(2));
        let after: Vec<_> = pids.iter().map(|&p| procfs::ctxt_switches(p)).collect();
        eprintln!("{tool}: pids {pids:?} context switches over 2 s: {before:?} -> {after:?}");
        assert_eq!(before, after, "{tool} woke up while nothing happened");
        run.signal(libc::SIGTERM);
        run.wait_exit(Duration::from_secs(10));
    }
}

/// reap started from a shell with `systemd-run`, as a transient scope
/// (`--scope`) or a transient service, with `KillMode=` `kill_mode`, then
/// stopped with `systemctl stop`. Returns the cleanup's record with reap's
/// log, and the unit's journal.
fn transient_stop(
    m: &Manager,
    name: &str,
    scope: bool,
    kill_mode: Option<&str>,
) -> (String, String) {
    let out = m.out("notify-ready-reap.service").join(name);
    std::fs::create_dir_all(&out).unwrap();
    let helpers = manager::systemd_dir().join("helpers");
    let bin = manager::bin_dir();
    let mode = kill_mode.map_or(String::new(), |k| format!("-p KillMode={k} "));
    let (kind, unit) = if scope {
        ("--scope ", format!("{name}.scope"))
    } else {
        ("", format!("{name}.service"))
    };
    let line = format!(
        "systemd-run {kind}--unit={name} {mode}-p TimeoutStopSec=20 \
         --setenv=SIGPROBE={bin}/sigprobe -- \
         {bin}/reap -v --grace 1s --cleanup '{helpers}/cleanup {out}' -- {helpers}/leaver {out} \
         < /dev/null > {out}/log 2>&1 &",
        bin = bin.display(),
        helpers = helpers.display(),
        out = out.display()
    );
    let started = m.exec(&["sh", "-c", &line]);
    assert!(started.status.success(), "{started:?}");
    procfs::wait_until("two leftovers ready", super::PATIENCE, || {
        super::read(&out.join("leftovers"))
            .matches("ready pid=")
            .count()
            == 2
    });
    m.systemctl(&["stop", &unit]);
    let cleanup = super::read(&out.join("cleanup"));
    (cleanup + &super::read(&out.join("log")), m.journal(&unit))
}

/// The recipe of reap(1), SYSTEMD, for reap started from a shell: a
/// transient scope keeps the default `KillMode=control-group`; with
/// `KillMode=mixed` a scope (it has no main process) gets no stop signal at
/// all and is SIGKILLed whole at once, so the cleanup never runs. A
/// transient service has a main process: there `KillMode=mixed` is right.
#[test]
fn systemd_run_recipes_for_reap_scope_and_service() {
    let Some(m) = super::manager("systemd_run_recipes_for_reap_scope_and_service") else {
        return;
    };
    let done = "cause=cancel status=143 signal=TERM\nalive=\n";
    let (scope, journal) = transient_stop(&m, "reap-scope", true, None);
    assert!(scope.starts_with(done), "{scope}\n{journal}");
    let (service, journal) = transient_stop(&m, "reap-run", false, Some("mixed"));
    assert!(service.starts_with(done), "{service}\n{journal}");
    assert!(!journal.contains("SIGKILL"), "{journal}");
    // The twin: a scope with KillMode=mixed.
    let (mixed, journal) = transient_stop(&m, "reap-scope-mixed", true, Some("mixed"));
    assert!(!mixed.contains("cause="), "the cleanup ran: {mixed}");
    assert!(
        journal.contains("Killing process") && journal.contains("(reap) with signal SIGKILL"),
        "{journal}"
    );
}

/// reap as PID 1 of a PID namespace has no front: it relays, and sends
/// `STOPPING=1` when its cleanup starts, itself.
#[test]
fn reap_as_pid1_relays_and_says_stopping_itself() {
    let test = "reap_as_pid1_relays_and_says_stopping_itself";
    if let Some(why) =
        crate::skip::needs_root().or_else(|| crate::skip::needs_program("unshare", "util-linux"))
    {
        return crate::skip::skip(test, &why);
    }
    let dir = crate::kit::temp_dir("notify-pid1");
    let path = dir.join("notify");
    let upstream = UnixDatagram::bind(&path).unwrap();
    upstream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let script = "import os,socket\n\
                  s=socket.socket(socket.AF_UNIX,socket.SOCK_DGRAM)\n\
                  s.sendto(b'READY=1',os.environ['NOTIFY_SOCKET'])\n";
    let mut run = Run::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(bin("reap"))
        .args(["-c", "echo cleanup ran", "--", "python3", "-c", script])
        .env("NOTIFY_SOCKET", &path)
        .spawn();
    let mut got = Vec::new();
    for _ in 0..2 {
        let mut buf = [0u8; 64];
        let n = upstream.recv(&mut buf).unwrap();
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    assert_eq!(got, ["READY=1\n", "STOPPING=1"]);
    run.expect_line("cleanup ran", Duration::from_secs(10));
    assert_eq!(run.wait_exit(Duration::from_secs(10)).code(), Some(0));
}

/// Outside systemd, by hand: `LISTEN_PID` and `WATCHDOG_PID` naming the
/// tool become COMMAND's pid, one naming another process is left alone; the
/// activated descriptor (3) reaches COMMAND and not the cleanup, nor do the
/// variables; an unreachable `NOTIFY_SOCKET` is one warning and unset.
#[test]
fn own_pid_variables_are_rewritten_and_kept_from_the_cleanup() {
    for tool in TOOLS {
        let cleanup = "echo cleanup: ${LISTEN_PID-none} ${LISTEN_FDS-none} ${WATCHDOG_USEC-none}; \
                       [ -e /proc/$$/fd/3 ] && echo cleanup has fd 3; true";
        let command = "echo command: $LISTEN_PID $WATCHDOG_PID $$ ${NOTIFY_SOCKET-unset}; \
                       [ -e /proc/$$/fd/3 ] && echo command has fd 3; true";
        let options = if tool == "reap" {
            format!("-c '{cleanup}'")
        } else {
            String::new()
        };
        let script = format!(
            "exec 3</dev/null; LISTEN_PID=$$ LISTEN_FDS=1 WATCHDOG_PID=$$ WATCHDOG_USEC=9000000 \
             exec {} {options} -- sh -c '{}'",
            bin(tool).display(),
            command.replace('\'', "'\\''")
        );
        let mut run = Run::new("sh")
            .args(["-c", &script])
            .env("NOTIFY_SOCKET", "/nonexistent/notify")
            .stderr_piped()
            .spawn();
        let line = run.expect_line("command: ", Duration::from_secs(10));
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            words[1], words[3],
            "{tool}: LISTEN_PID is COMMAND's: {line}"
        );
        assert_eq!(
            words[2], words[3],
            "{tool}: WATCHDOG_PID is COMMAND's: {line}"
        );
        assert_eq!(words[4], "unset", "{tool}: {line}");
        run.expect_line("command has fd 3", Duration::from_secs(10));
        if tool == "reap" {
            run.expect_line("cleanup: none none none", Duration::from_secs(10));
        }
        run.wait_exit(Duration::from_secs(10));
        let lines = run.lines_so_far();
        assert!(
            !lines.iter().any(|l| l.contains("cleanup has fd 3")),
            "{lines:?}"
        );
        let err = run.stderr_all();
        assert_eq!(
            err.matches("is unreachable").count(),
            1,
            "{tool}: one warning: {err}"
        );
    }
    // A LISTEN_PID of another process is not the tool's to change.
    let mut run = Run::new(bin("pgwrap"))
        .args(["--", "sh", "-c", "echo listen_pid=$LISTEN_PID"])
        .env("LISTEN_PID", "12345")
        .spawn();
    run.expect_line("listen_pid=12345", Duration::from_secs(10));
    run.wait_exit(Duration::from_secs(10));
}

/// How many starts [`no_message_of_a_sender_that_exited_at_once_is_lost`]
/// makes per tool: `PGWRAP_NOTIFY_STARTS`, else 200 (the suite's share;
/// `PGWRAP_NOTIFY_STARTS=1000` for the full count).
fn starts() -> usize {
    std::env::var("PGWRAP_NOTIFY_STARTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(200)
}

/// Every message waiting on `upstream` now (it does not wait).
fn drain(upstream: &UnixDatagram) -> Vec<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = upstream.recv(&mut buf) {
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    got
}

/// A sender that exits at once, reaped by COMMAND (a shell) before the
/// tool reads its datagram: `TOOL -- sh -c 'sigprobe --notify STATUS=I'`,
/// many times per tool. Every message reaches the service manager.
#[test]
fn no_message_of_a_sender_that_exited_at_once_is_lost() {
    let dir = crate::kit::temp_dir("notify-short");
    let path = dir.join("notify");
    let upstream = UnixDatagram::bind(&path).unwrap();
    upstream.set_nonblocking(true).unwrap();
    let n = starts();
    let mut report = Vec::new();
    for tool in TOOLS {
        let began = std::time::Instant::now();
        let mut lost = Vec::new();
        for i in 0..n {
            let mut run = Run::new(bin(tool))
                .args(["--", "sh", "-c", "\"$0\" --notify \"STATUS=$1\"; exit 0"])
                .arg(bin("sigprobe"))
                .arg(i.to_string())
                .env("NOTIFY_SOCKET", &path)
                .spawn();
            assert_eq!(
                run.wait_exit(Duration::from_secs(30)).code(),
                Some(0),
                "{tool}"
            );
            // The tool relays what COMMAND's tree said before it exits.
            let got = drain(&upstream);
            if got != [format!("STATUS={i}\n")] {
                lost.push((i, got));
            }
        }
        let took = began.elapsed();
        eprintln!(
            "{tool}: {n} starts, {} lost, {:.1} s",
            lost.len(),
            took.as_secs_f64()
        );
        report.push(format!("{tool}: {} of {n} lost", lost.len()));
        if !lost.is_empty() {
            report.push(format!("  first: {:?}", &lost[..lost.len().min(3)]));
        }
    }
    assert!(
        report.iter().all(|l| l.contains(": 0 of")),
        "{}",
        report.join("\n")
    );
}

/// COMMAND becomes another user (`setpriv` to nobody) before it speaks:
/// the socket is writable whatever user COMMAND's tree becomes, as
/// systemd's own is.
#[test]
fn a_command_that_becomes_nobody_reaches_the_relay() {
    let test = "supervisors::notify::a_command_that_becomes_nobody_reaches_the_relay";
    if let Some(why) =
        crate::skip::needs_root().or_else(|| crate::skip::needs_program("setpriv", "util-linux"))
    {
        return crate::skip::skip(test, &why);
    }
    let dir = crate::kit::temp_dir("notify-nobody");
    let path = dir.join("notify");
    let upstream = UnixDatagram::bind(&path).unwrap();
    upstream.set_nonblocking(true).unwrap();
    for tool in TOOLS {
        let mut run = Run::new(bin(tool))
            .args([
                "--",
                "setpriv",
                "--reuid=nobody",
                "--regid=nogroup",
                "--clear-groups",
                "--",
            ])
            .arg(bin("sigprobe"))
            .args(["--notify", "READY=1"])
            .env("NOTIFY_SOCKET", &path)
            .stderr_piped()
            .spawn();
        let status = run.wait_exit(Duration::from_secs(30));
        let err = run.stderr_all();
        assert_eq!(status.code(), Some(0), "{tool}: {err}");
        assert_eq!(drain(&upstream), ["READY=1\n"], "{tool}: {err}");
    }
}

/// `systemd-notify --ready` sends `READY=1`, then `BARRIER=1` with the
/// write end of a pipe and waits until every copy of it is closed: the
/// relay sends on what came before, then releases the barrier on purpose,
/// and `-v` reports no dropped message.
#[test]
fn systemd_notify_barrier_is_released_after_what_came_before() {
    let test = "supervisors::notify::systemd_notify_barrier_is_released_after_what_came_before";
    if let Some(why) = crate::skip::needs_program("systemd-notify", "systemd") {
        return crate::skip::skip(test, &why);
    }
    let dir = crate::kit::temp_dir("notify-barrier");
    let path = dir.join("notify");
    let upstream = UnixDatagram::bind(&path).unwrap();
    upstream.set_nonblocking(true).unwrap();
    for tool in TOOLS {
        let mut run = Run::new(bin(tool))
            .args(["-v", "--", "systemd-notify", "--ready", "--status=up"])
            .env("NOTIFY_SOCKET", &path)
            .stderr_piped()
            .spawn();
        let status = run.wait_exit(Duration::from_secs(30));
        let err = run.stderr_all();
        assert_eq!(status.code(), Some(0), "{tool}: {err}");
        assert_eq!(drain(&upstream), ["READY=1\nSTATUS=up\n"], "{tool}: {err}");
        assert!(!err.contains("dropped"), "{tool}: {err}");
        assert!(err.contains("barrier released"), "{tool}: {err}");
    }
}

/// reap's front SIGKILLed: the back, which knows the relay's socket,
/// removes it and its directory.
#[test]
fn reap_back_removes_the_relay_directory_when_the_front_is_killed() {
    let dir = crate::kit::temp_dir("notify-front-killed");
    let path = dir.join("notify");
    let _upstream = UnixDatagram::bind(&path).unwrap();
    let mut run = Run::new(bin("reap"))
        .args([
            "--",
            "sh",
            "-c",
            "echo \"sock=$NOTIFY_SOCKET\"; exec sleep 100",
        ])
        .env("NOTIFY_SOCKET", &path)
        .spawn();
    let line = run.expect_line("sock=", Duration::from_secs(10));
    let sock = std::path::PathBuf::from(line.trim().strip_prefix("sock=").unwrap());
    let relay_dir = sock.parent().unwrap().to_path_buf();
    assert!(sock.exists() && relay_dir.is_dir(), "{line}");
    let back = procfs::children_of(run.pid());
    assert_eq!(back.len(), 1, "reap's back: {back:?}");
    run.signal(libc::SIGKILL);
    run.wait_exit(Duration::from_secs(10));
    procfs::wait_until("reap's back ended", super::PATIENCE, || {
        !procfs::alive(back[0])
    });
    let left = relay_dir.exists();
    if left {
        let _ = std::fs::remove_file(&sock);
        let _ = std::fs::remove_dir(&relay_dir);
    }
    assert!(!left, "{} left behind", relay_dir.display());
}

/// reap --exec-cleanup, its front SIGKILLed while the cleanup (which has
/// replaced the back) runs: the relay's socket and directory are gone all
/// the same (COMMAND's tree, the only one that could use them, is gone).
#[test]
fn reap_exec_cleanup_leaves_no_relay_directory_when_the_front_is_killed() {
    let dir = crate::kit::temp_dir("notify-exec-cleanup");
    let path = dir.join("notify");
    let _upstream = UnixDatagram::bind(&path).unwrap();
    let mut run = Run::new(bin("reap"))
        .args([
            "--exec-cleanup",
            "-c",
            "echo \"cleanup pid=$$\"; exec sleep 100",
            "--",
            "sh",
            "-c",
            "echo \"sock=$NOTIFY_SOCKET\"",
        ])
        .env("NOTIFY_SOCKET", &path)
        .spawn();
    let line = run.expect_line("sock=", Duration::from_secs(10));
    let sock = std::path::PathBuf::from(line.trim().strip_prefix("sock=").unwrap());
    let relay_dir = sock.parent().unwrap().to_path_buf();
    let cleanup = run.expect_line("cleanup pid=", Duration::from_secs(10));
    let mut guard = crate::reap_kit::Guard::new();
    if let Some(pid) = cleanup.trim().strip_prefix("cleanup pid=") {
        guard.watch(pid.parse().unwrap_or(0));
    }
    run.signal(libc::SIGKILL);
    run.wait_exit(Duration::from_secs(10));
    let left = relay_dir.exists();
    if left {
        let _ = std::fs::remove_file(&sock);
        let _ = std::fs::remove_dir(&relay_dir);
    }
    assert!(!left, "{} left behind", relay_dir.display());
}
