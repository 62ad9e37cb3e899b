//! Under a real systemd (252, PID 1 of private namespaces; see
//! `supervisors/manager.rs`): each tool as the `ExecStart=` prefix of a
//! service, started and stopped with `systemctl`, judged by `systemctl
//! show`, the journal and the files the helper scripts write. Each fix has
//! a twin unit without the tool, whose test asserts the failure it fixes.
//!
//! The units are `tests/systemd/units/*.service` and the examples shipped in
//! `packaging/systemd/`; the helper scripts are in `tests/systemd/helpers/`.
//! One manager serves every test here; they run in parallel against it, each
//! with its own unit.

/// A CI agent cancels a job (TERM, grace, SIGKILL to its group): with and without reap + graceful.
mod ci_agent;
mod manager;
/// systemd's protocols (notify, watchdog, socket activation, fd store) through the tools.
mod notify;

use crate::kit::Ready;
use crate::procfs;
use manager::{Manager, Props, UnitFile};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Patience for a helper's handshake file: generous, as the manager runs many
/// units at once on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(30);

/// Every unit the manager gets, rendered for output under `out_root`.
fn units(out_root: &Path) -> Vec<UnitFile> {
    let dir = manager::systemd_dir().join("units");
    let mut units = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("tests/systemd/units") {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".service") || name.ends_with(".socket") {
            let template = std::fs::read_to_string(&path).unwrap();
            units.push(manager::render(&name, &template, out_root));
        }
    }
    units.extend(packaged_units(out_root));
    units.extend(notify::units(out_root));
    units
}

/// The shared manager, or `None` after recording why this machine cannot
/// run it.
fn manager(test: &str) -> Option<Arc<Manager>> {
    match manager::shared() {
        Ok(manager) => Some(manager),
        Err(why) => {
            crate::skip::skip(test, &why);
            None
        }
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Wait until the file at `path` contains `needle`; returns its text.
fn wait_for(path: &Path, needle: &str) -> String {
    procfs::wait_until(
        &format!("{} contains {needle:?}", path.display()),
        PATIENCE,
        || read(path).contains(needle),
    );
    read(path)
}

/// `systemctl show` as `KEY=VALUE` lines, for failure messages.
fn fmt(props: &Props) -> String {
    let mut lines: Vec<String> = props.iter().map(|(k, v)| format!("{k}={v}")).collect();
    lines.sort();
    lines.join(" ")
}

/// Assert how the main process ended and the unit's result.
fn assert_ended(m: &Manager, unit: &str, result: &str, code: &str, status: &str) {
    let props = m.show(unit);
    let got = (
        props["Result"].as_str(),
        props["ExecMainCode"].as_str(),
        props["ExecMainStatus"].as_str(),
    );
    assert_eq!(
        got,
        (result, code, status),
        "{unit}: Result, ExecMainCode (1 exited, 2 killed), ExecMainStatus\n{}\njournal:\n{}",
        fmt(&props),
        m.journal(unit)
    );
    assert_eq!(props["ActiveState"], "inactive", "{unit}: {}", fmt(&props));
}

/// What the GitLab stand-ins left after a stop.
struct Stopped {
    runner: String,
    plugin: String,
    /// Name of the runner's parent, and whether the runner leads a process
    /// group of its own (both seen before the stop).
    runner_parent: String,
    runner_own_group: bool,
}

/// The journal of a unit whose stop left systemd nothing to kill.
fn assert_systemd_killed_nothing(journal: &str) {
    assert!(
        !journal.contains("timed out") && !journal.contains("Killing process"),
        "systemd had to kill:\n{journal}"
    );
}

/// Start the GitLab stand-ins in `unit`, stop the unit, return their logs.
fn stop_runner(m: &Manager, unit: &str) -> Stopped {
    let out = m.out(unit);
    m.start(unit);
    wait_for(&out.join("runner.log"), "runner: ready");
    let plugin = wait_for(&out.join("plugin.log"), "plugin: ready");
    let runner_pid = m.show(unit)["MainPID"].clone();
    assert!(
        !plugin.contains(&format!("pgid={runner_pid}\n")),
        "the plugin runs in a process group of its own: {plugin}"
    );
    // The same from the host, which sees the unit's cgroup.
    let is_runner = |pid: i32| {
        procfs::cmdline(pid).is_some_and(|c| c.get(1).is_some_and(|a| a.ends_with("/runner")))
    };
    let runner = m.unit_pids(unit).into_iter().find(|&p| is_runner(p));
    let runner =
        runner.unwrap_or_else(|| panic!("{unit}: no runner among {:?}", m.unit_pids(unit)));
    let parent = procfs::ppid(runner)
        .and_then(procfs::cmdline)
        .unwrap_or_default();
    let runner_parent = parent
        .first()
        .map_or("", |a| a.rsplit('/').next().unwrap_or(a));
    let stopped = Stopped {
        runner_parent: runner_parent.to_string(),
        runner_own_group: procfs::pgid(runner) == Some(runner),
        runner: String::new(),
        plugin: String::new(),
    };
    m.stop(unit);
    Stopped {
        runner: read(&out.join("runner.log")),
        plugin: read(&out.join("plugin.log")),
        ..stopped
    }
}

// ---------------------------------------------------------------------------------------------
// The GitLab case: QUIT for the runner, not for its plugin.

#[test]
fn gitlab_pgwrap_mixed_plugin_never_gets_quit_and_scales_down() {
    let Some(m) = manager("gitlab_pgwrap_mixed_plugin_never_gets_quit_and_scales_down") else {
        return;
    };
    let unit = "gitlab-pgwrap.service";
    let Stopped {
        runner,
        plugin,
        runner_parent,
        runner_own_group,
    } = stop_runner(&m, unit);
    assert!(
        runner_parent == "pgwrap" && runner_own_group,
        "the runner runs under pgwrap ({runner_parent}), in a group of its own ({runner_own_group})"
    );
    assert!(
        runner.contains("runner: got QUIT"),
        "the runner gets QUIT:\n{runner}"
    );
    assert!(
        !plugin.contains("got QUIT"),
        "the plugin never gets QUIT:\n{plugin}"
    );
    assert!(
        plugin.contains("plugin: scaled down") && m.out(unit).join("scaled-down").exists(),
        "the scale-down completes:\n{plugin}"
    );
    assert!(
        runner.contains("plugin ended with status 0"),
        "the runner waited for the plugin:\n{runner}"
    );
    // pgwrap exits with the runner's 0.
    assert_ended(&m, unit, "success", "1", "0");
}

#[test]
fn gitlab_pgwrap_control_group_plugin_gets_quit() {
    // Kept so that the documentation's claim stays true: pgwrap needs
    // KillMode=mixed, because systemd's default signals every process.
    let Some(m) = manager("gitlab_pgwrap_control_group_plugin_gets_quit") else {
        return;
    };
    let unit = "gitlab-pgwrap-cgroup.service";
    let plugin = stop_runner(&m, unit).plugin;
    assert!(
        plugin.contains("plugin: got QUIT"),
        "with KillMode=control-group systemd itself sends QUIT to the plugin:\n{plugin}\n{}",
        m.journal(unit)
    );
}

#[test]
fn gitlab_without_pgwrap_plugin_gets_quit() {
    // The unit as the report describes it: the runner is the main process,
    // systemd's QUIT goes to every process, the plugin dies unscaled.
    let Some(m) = manager("gitlab_without_pgwrap_plugin_gets_quit") else {
        return;
    };
    let unit = "gitlab-plain.service";
    let Stopped { runner, plugin, .. } = stop_runner(&m, unit);
    assert!(
        plugin.contains("plugin: got QUIT"),
        "the plugin gets QUIT:\n{plugin}\n{runner}"
    );
}

#[test]
fn gitlab_mixed_alone_spares_the_plugin_too() {
    // Not a failure mode: KillMode=mixed by itself keeps systemd's QUIT
    // away from every process but the main one, and with the runner as the
    // main process that suffices. pgwrap's own part is what the mixed test
    // above checks beyond this: the runner runs as pgwrap's child, in a
    // group of its own, and gets QUIT from pgwrap.
    let Some(m) = manager("gitlab_mixed_alone_spares_the_plugin_too") else {
        return;
    };
    let unit = "gitlab-mixed-plain.service";
    let Stopped { runner, plugin, .. } = stop_runner(&m, unit);
    assert!(runner.contains("runner: got QUIT"), "{runner}");
    assert!(!plugin.contains("got QUIT"), "{plugin}");
    assert!(plugin.contains("plugin: scaled down"), "{plugin}");
    assert_ended(&m, unit, "success", "1", "0");
}

// ---------------------------------------------------------------------------------------------
// graceful: a stop is TERM to the whole group, the grace, then KILL.

#[test]
fn graceful_stop_terms_the_group_kills_after_grace_and_is_success() {
    let Some(m) = manager("graceful_stop_terms_the_group_kills_after_grace_and_is_success") else {
        return;
    };
    let unit = "graceful.service";
    let out = m.out(unit);
    m.start(unit);
    let member = Ready::parse(&wait_for(&out.join("member"), "ready pid=")).unwrap();
    let graceful = m.show(unit)["MainPID"].clone();
    let took = m.stop(unit);
    let report = read(&out.join("member"));
    assert!(
        report.contains(&format!("got TERM pid={} from={graceful}", member.pid)),
        "the group member got TERM from graceful (pid {graceful}):\n{report}"
    );
    assert!(
        !report.contains("exit pid="),
        "the member never exits on its own:\n{report}"
    );
    // The member ignored TERM: the stop lasted the grace (exact lower bound),
    // and ended well before systemd's own TimeoutStopSec=20 (loose).
    assert!(took >= Duration::from_secs(1), "stopped after {took:?}");
    assert!(took < Duration::from_secs(15), "stopped after {took:?}");
    // graceful killed the member itself: systemd found nothing left to kill.
    let journal = m.journal_has(unit, "graceful: ");
    assert_systemd_killed_nothing(&journal);
    // The leader died of TERM; graceful died of it too (not `exit 143`), so
    // systemd counts the stop as clean.
    assert_ended(&m, unit, "success", "2", "15");
}

/// On the journal's stream (`JOURNAL_STREAM`, set by systemd) each line of
/// graceful's starts with its priority, which journald takes as the
/// entry's PRIORITY, then `graceful: ` without the PID; the entries carry
/// the unit's `SyslogIdentifier=` (COMMAND's name).
#[test]
fn graceful_on_the_journal_gives_each_line_its_priority() {
    let Some(m) = manager("graceful_on_the_journal_gives_each_line_its_priority") else {
        return;
    };
    let unit = "graceful-journal.service";
    let out = m.out(unit);
    m.start(unit);
    wait_for(&out.join("member"), "ready pid=");
    m.stop(unit);
    m.journal_has(unit, "is still running after the grace");
    let json = m.exec(&["journalctl", "-u", unit, "-o", "json", "--no-pager"]);
    let field = |entry: &str, key: &str| -> String {
        let at = entry
            .find(&format!("\"{key}\":\""))
            .map(|i| i + key.len() + 4);
        at.map(|i| entry[i..].split('"').next().unwrap_or_default().to_string())
            .unwrap_or_default()
    };
    let ours: Vec<(String, String, String)> = String::from_utf8_lossy(&json.stdout)
        .lines()
        .map(|e| {
            (
                field(e, "PRIORITY"),
                field(e, "SYSLOG_IDENTIFIER"),
                field(e, "MESSAGE"),
            )
        })
        .filter(|(_, id, _)| id == "member-job")
        .collect();
    let has = |priority: &str, start: &str, end: &str| {
        ours.iter()
            .any(|(p, _, msg)| p == priority && msg.starts_with(start) && msg.ends_with(end))
    };
    assert!(has("6", "graceful: sent TERM to group ", ""), "{ours:#?}");
    assert!(
        has(
            "4",
            "graceful: pid ",
            "(sigprobe) is still running after the grace: it blocks TERM"
        ),
        "{ours:#?}"
    );
    assert!(
        ours.iter().all(|(_, _, msg)| msg.starts_with("graceful: ")),
        "{ours:#?}"
    );
}

/// `JOURNAL_STREAM` naming the tools' stderr (here a file, by its device
/// and inode) makes each line `<PRIORITY>TOOL: `; naming another file
/// changes nothing.
#[test]
fn journal_stream_naming_stderr_gives_priorities_and_no_pids() {
    let dir = crate::kit::temp_dir("journal-stream");
    let (err, other) = (dir.join("stderr"), dir.join("other"));
    std::fs::write(&other, "").unwrap();
    let script = r#"exec 2>"$1"; export JOURNAL_STREAM=$(stat -L -c %d:%i "$2")
        "$3" --grace 10x -- true; GRACEFUL_GRACE_MS=1000 "$4" -g 5s -- true; shift 3; exec "$@""#;
    for (named, journal) in [(&err, true), (&other, false)] {
        let mut run = crate::kit::Run::new("sh")
            .args([
                "-c",
                script,
                "sh",
                err.to_str().unwrap(),
                named.to_str().unwrap(),
            ])
            .arg(crate::kit::bin("reap"))
            .arg(crate::kit::bin("graceful"))
            .args(["-v", "--grace", "0.3", "--", "sh", "-c"])
            .arg("trap '' TERM; echo up; exec sleep 30")
            .spawn();
        run.expect_line("up", PATIENCE);
        let mut guard = crate::reap_kit::Guard::new();
        guard.watch_tree(run.pid());
        run.signal(libc::SIGTERM);
        run.wait_exit(PATIENCE);
        guard.wait_all_gone("nothing is left below graceful", PATIENCE);
        let text = read(&err);
        let pid = run.pid();
        let (usage, sent, survivor) = if journal {
            (
                "<3>reap: ",
                "<6>graceful: sent TERM to group ",
                "<4>graceful: pid ",
            )
        } else {
            (
                "reap: ",
                &*format!("graceful[{pid}]: sent TERM to group "),
                &*format!("graceful[{pid}]: pid "),
            )
        };
        let cap = if journal {
            "<5>graceful: grace capped"
        } else {
            "graceful["
        };
        let has = |start: &str, end: &str| {
            text.lines()
                .any(|l| l.starts_with(start) && l.ends_with(end))
        };
        assert!(has(usage, ""), "{text}");
        assert!(
            has(cap, "(the outer grace less a 500ms margin; --grace 5s)"),
            "{text}"
        );
        assert!(has(sent, ""), "{text}");
        assert!(
            has(
                survivor,
                "(sleep) is still running after the grace: it ignores TERM"
            ),
            "{text}"
        );
        let journal_line =
            |l: &str| l.len() > 3 && l.starts_with('<') && l[1..2] < *"8" && &l[2..3] == ">";
        assert!(text.lines().all(|l| journal_line(l) == journal), "{text}");
    }
}

#[test]
fn graceful_without_it_members_never_get_the_stop_signal() {
    let Some(m) = manager("graceful_without_it_members_never_get_the_stop_signal") else {
        return;
    };
    let unit = "graceful-plain.service";
    let out = m.out(unit);
    m.start(unit);
    wait_for(&out.join("member"), "ready pid=");
    m.stop(unit);
    let report = read(&out.join("member"));
    assert!(
        !report.contains("got TERM"),
        "without graceful (KillMode=mixed) the member gets no stop signal, only SIGKILL:\n{report}"
    );
    let journal = m.journal_has(unit, "with signal SIGKILL");
    assert!(journal.contains("(sigprobe)"), "{journal}");
}

// ---------------------------------------------------------------------------------------------
// reap: leftovers gone, then the cleanup; ExecStopPost= sees the result.

#[test]
fn reap_stop_removes_leftovers_before_the_cleanup() {
    let Some(m) = manager("reap_stop_removes_leftovers_before_the_cleanup") else {
        return;
    };
    let unit = "reap.service";
    let out = m.out(unit);
    m.start(unit);
    procfs::wait_until("two leftovers ready", PATIENCE, || {
        read(&out.join("leftovers")).matches("ready pid=").count() == 2
    });
    let leftovers = read(&out.join("leftovers"));
    assert!(leftovers.contains("role=escapee"), "{leftovers}");
    let took = m.stop(unit);
    let cleanup = read(&out.join("cleanup"));
    assert_eq!(
        cleanup,
        "cause=cancel status=143 signal=TERM\nalive=\n",
        "the cleanup ran after every leftover was gone\nleftovers:\n{leftovers}\njournal:\n{}",
        m.journal(unit)
    );
    // Both leftovers ignore TERM: they lasted the grace.
    assert!(took >= Duration::from_secs(1), "stopped after {took:?}");
    assert_eq!(
        read(&out.join("stop-post")).trim(),
        "SERVICE_RESULT=success EXIT_CODE=killed EXIT_STATUS=TERM"
    );
    assert_systemd_killed_nothing(&m.journal_has(unit, "reap: "));
    assert_ended(&m, unit, "success", "2", "15");
}

#[test]
fn reap_without_it_the_cleanup_runs_beside_the_leftovers() {
    let Some(m) = manager("reap_without_it_the_cleanup_runs_beside_the_leftovers") else {
        return;
    };
    let unit = "reap-plain.service";
    let out = m.out(unit);
    m.start(unit);
    procfs::wait_until("two leftovers ready", PATIENCE, || {
        read(&out.join("leftovers")).matches("ready pid=").count() == 2
    });
    m.stop(unit);
    let cleanup = read(&out.join("cleanup"));
    let alive = cleanup
        .lines()
        .find_map(|l| l.strip_prefix("alive="))
        .unwrap_or_default();
    assert_eq!(
        alive.split_whitespace().count(),
        2,
        "a cleanup in ExecStop= runs while both leftovers still live:\n{cleanup}"
    );
}

#[test]
fn reap_cgroup_with_delegate_yes_kills_leftovers_by_cgroup_before_the_cleanup() {
    let test = "reap_cgroup_with_delegate_yes_kills_leftovers_by_cgroup_before_the_cleanup";
    let Some(m) = manager(test) else {
        return;
    };
    let unit = "reap-cgroup.service";
    let out = m.out(unit);
    m.start(unit);
    procfs::wait_until("two leftovers ready", PATIENCE, || {
        read(&out.join("leftovers")).matches("ready pid=").count() == 2
    });
    // COMMAND's cgroup is below the unit's, which holds reap alone.
    let journal = m.journal_has(unit, "in cgroup ");
    assert!(
        journal.contains("/system.slice/reap-cgroup.service/reap."),
        "{journal}"
    );
    m.stop(unit);
    let cleanup = read(&out.join("cleanup"));
    assert_eq!(
        cleanup,
        "cause=cancel status=143 signal=TERM\nalive=\n",
        "the cleanup ran after every leftover was gone\njournal:\n{}",
        m.journal(unit)
    );
    let journal = m.journal_has(unit, "(cgroup.kill)");
    assert!(journal.contains("removed cgroup"), "{journal}");
    assert_systemd_killed_nothing(&journal);
    assert_ended(&m, unit, "success", "2", "15");
}

/// Where clone3 is refused (ENOSYS from a seccomp filter, as on kernels
/// before 5.3), COMMAND still starts in its cgroup: the vfork child writes
/// itself to cgroup.procs before exec.
#[test]
fn reap_cgroup_without_clone3_still_starts_command_in_its_cgroup() {
    let test = "reap_cgroup_without_clone3_still_starts_command_in_its_cgroup";
    let Some(m) = manager(test) else {
        return;
    };
    let unit = "reap-cgroup-noclone3.service";
    let out = m.out(unit);
    m.start(unit);
    procfs::wait_until("two leftovers ready", PATIENCE, || {
        read(&out.join("leftovers")).matches("ready pid=").count() == 2
    });
    let cgroup = read(&out.join("cgroup"));
    assert!(
        cgroup.contains("/system.slice/reap-cgroup-noclone3.service/reap."),
        "COMMAND's cgroup: {cgroup:?}\n{}",
        m.journal(unit)
    );
    m.stop(unit);
    let journal = m.journal_has(unit, "(cgroup.kill)");
    assert!(journal.contains("removed cgroup"), "{journal}");
    assert_systemd_killed_nothing(&journal);
}

/// The twin: without Delegate=yes the unit's cgroup is systemd's, and
/// reap --cgroup refuses with 125, starting nothing.
#[test]
fn reap_cgroup_without_delegate_refuses_and_starts_nothing() {
    let test = "reap_cgroup_without_delegate_refuses_and_starts_nothing";
    let Some(m) = manager(test) else {
        return;
    };
    let unit = "reap-cgroup-undelegated.service";
    let out = m.out(unit);
    m.start(unit);
    procfs::wait_until("the unit has ended", PATIENCE, || {
        m.show(unit)["ActiveState"] != "active"
    });
    let journal = m.journal_has(unit, "Delegate=yes");
    assert!(journal.contains("reap: --cgroup: "), "{journal}");
    assert!(
        read(&out.join("leftovers")).is_empty() && read(&out.join("cleanup")).is_empty(),
        "nothing was started"
    );
    let props = m.show(unit);
    let got = (
        props["ActiveState"].as_str(),
        props["Result"].as_str(),
        props["ExecMainStatus"].as_str(),
    );
    assert_eq!(got, ("failed", "exit-code", "125"), "{}", fmt(&props));
}

// ---------------------------------------------------------------------------------------------
// The examples shipped in packaging/systemd/.

/// The shipped example units (`packaging/systemd/*.service`), installed as
/// `packaged-NAME`: the tools' installed paths become the built binaries,
/// each workload a stand-in from the helpers (the GitLab runner for pgwrap,
/// a worker for graceful, a job with leftovers for reap), the cleanups the
/// recording script, `ExecStopPost=` the recorder of systemd's verdict.
/// Network dependencies are dropped: the manager has no network.
fn packaged_units(out_root: &Path) -> Vec<UnitFile> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/systemd");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut units = Vec::new();
    for entry in entries {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if !file.ends_with(".service") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let name = format!("packaged-{file}");
        units.push(manager::render(
            &name,
            &adapt_packaged(&file, &text),
            out_root,
        ));
    }
    units
}

/// Rewrite one shipped unit for the test manager (see [`packaged_units`]).
fn adapt_packaged(file: &str, text: &str) -> String {
    let mut out = String::new();
    let mut tool = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') {
            continue;
        }
        if let Some(value) = trimmed.strip_prefix("ExecStart=") {
            let (front, _workload) = value
                .split_once(" -- ")
                .unwrap_or_else(|| panic!("{file}: ExecStart= has no ` -- `: {value}"));
            let mut words = front.splitn(2, ' ');
            let program = words.next().unwrap_or_default();
            let name = program.rsplit('/').next().unwrap_or_default();
            let workload = match name {
                // A Type=notify daemon: the service that speaks the protocols.
                _ if text.contains("\nType=notify\n") => "@HELPERS@/notify-svc @OUT@ watchdog",
                "pgwrap" => "@HELPERS@/runner @OUT@",
                "graceful" => "@HELPERS@/worker @OUT@",
                "reap" => "@HELPERS@/leaver @OUT@ TERM",
                _ => panic!("{file}: ExecStart= runs {program}, not one of the tools"),
            };
            tool = Some(name.to_string());
            let mut options = words.next().unwrap_or_default().to_string();
            if let Some(start) = options.find("--cleanup '") {
                let rest = &options[start + "--cleanup '".len()..];
                let end = rest.find('\'').expect("closing quote of --cleanup");
                let cleanup = "@HELPERS@/cleanup @OUT@";
                options = format!(
                    "{}--cleanup '{cleanup}'{}",
                    &options[..start],
                    &rest[end + 1..]
                );
            }
            out.push_str(&format!("ExecStart=@BIN@/{name} {options} -- {workload}\n"));
        } else if trimmed.starts_with("ExecStopPost=") {
            out.push_str("ExecStopPost=@HELPERS@/stop-post @OUT@\n");
        } else if trimmed.contains("network-online.target") {
            continue;
        } else if trimmed.starts_with("TimeoutStopSec=") {
            // Hours in the GitLab example: a broken stop must fail the test,
            // not hold it until the manager's lifetime runs out.
            out.push_str("TimeoutStopSec=30s\n");
        } else {
            out.push_str(line);
            out.push('\n');
            if trimmed == "[Service]" {
                out.push_str("Environment=SIGPROBE=@BIN@/sigprobe\n");
            }
        }
    }
    assert!(tool.is_some(), "{file}: no ExecStart=");
    out
}

/// The shipped example of `tool`, as installed by [`packaged_units`].
fn packaged(m: &Manager, tool: &str) -> Option<String> {
    let name = format!("packaged-{tool}-example.service");
    let exists = m.out(&name).exists();
    assert!(
        exists
            || !Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("packaging/systemd")
                .exists(),
        "packaging/systemd/ has no {tool}-example.service"
    );
    exists.then_some(name)
}

#[test]
fn packaged_pgwrap_example_spares_the_plugin() {
    let Some(m) = manager("packaged_pgwrap_example_spares_the_plugin") else {
        return;
    };
    let Some(unit) = packaged(&m, "pgwrap") else {
        return;
    };
    let stopped = stop_runner(&m, &unit);
    let Stopped { runner, plugin, .. } = &stopped;
    assert_eq!(stopped.runner_parent, "pgwrap");
    assert!(runner.contains("runner: got QUIT"), "{runner}");
    assert!(!plugin.contains("got QUIT"), "{plugin}");
    assert!(plugin.contains("plugin: scaled down"), "{plugin}");
    assert_ended(&m, &unit, "success", "1", "0");
}

#[test]
fn packaged_graceful_example_lets_the_worker_finish() {
    let Some(m) = manager("packaged_graceful_example_lets_the_worker_finish") else {
        return;
    };
    let Some(unit) = packaged(&m, "graceful") else {
        return;
    };
    let out = m.out(&unit);
    m.start(&unit);
    let worker = Ready::parse(&wait_for(&out.join("worker"), "ready pid=")).unwrap();
    let graceful = m.show(&unit)["MainPID"].clone();
    m.stop(&unit);
    let report = read(&out.join("worker"));
    assert!(
        report.contains(&format!("got TERM pid={} from={graceful}", worker.pid))
            && report.contains("exit pid="),
        "the worker got TERM from graceful and finished:\n{report}"
    );
    assert_ended(&m, &unit, "success", "1", "0");
}

#[test]
fn packaged_reap_example_cleans_up_after_the_leftovers() {
    let Some(m) = manager("packaged_reap_example_cleans_up_after_the_leftovers") else {
        return;
    };
    let Some(unit) = packaged(&m, "reap") else {
        return;
    };
    let out = m.out(&unit);
    m.start(&unit);
    procfs::wait_until("two leftovers ready", PATIENCE, || {
        read(&out.join("leftovers")).matches("ready pid=").count() == 2
    });
    m.stop(&unit);
    assert_eq!(
        read(&out.join("cleanup")),
        "cause=cancel status=143 signal=TERM\nalive=\n",
        "journal:\n{}",
        m.journal(&unit)
    );
    assert_eq!(
        read(&out.join("stop-post")).trim(),
        "SERVICE_RESULT=success EXIT_CODE=killed EXIT_STATUS=TERM"
    );
    assert_ended(&m, &unit, "success", "2", "15");
}

#[test]
fn packaged_notify_example_is_ready_and_fed_through_graceful() {
    let Some(m) = manager("packaged_notify_example_is_ready_and_fed_through_graceful") else {
        return;
    };
    let unit = "packaged-notify-example.service";
    m.start(unit);
    let status = m.systemctl(&["show", "-p", "StatusText,MainPID,ExecMainPID", unit]);
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(status.contains("StatusText=serving"), "{status}");
    let log = wait_for(&m.out(unit).join("svc.log"), "ready");
    assert!(!log.contains("no keep-alives"), "{log}");
    m.stop(unit);
    assert_ended(&m, unit, "success", "1", "0");
}

// ---------------------------------------------------------------------------------------------
// TimeoutStopSec= shorter than the tool's budget: EXTEND_TIMEOUT_USEC= with NotifyAccess=main.

/// Start `unit` (its job is `ready-wait`), stop it; returns its output
/// directory and the journal.
fn stop_after_ready(m: &Manager, unit: &str) -> (std::path::PathBuf, String) {
    let out = m.out(unit);
    m.start(unit);
    wait_for(&out.join("ready"), "ready");
    m.stop(unit);
    let journal = m.journal(unit);
    (out, journal)
}

/// systemd's own kill at TimeoutStopSec=, as its journal says it.
fn systemd_timed_out(journal: &str) -> bool {
    journal.contains("timed out. Killing") || journal.contains("with signal SIGKILL")
}

#[test]
fn reap_extends_the_stop_timeout_for_its_cleanup() {
    let Some(m) = manager("reap_extends_the_stop_timeout_for_its_cleanup") else {
        return;
    };
    let unit = "reap-extend.service";
    let (out, journal) = stop_after_ready(&m, unit);
    assert_eq!(
        read(&out.join("cleanup")),
        "done\n",
        "the 4 s cleanup completes under TimeoutStopSec=2:\n{journal}"
    );
    assert!(
        !systemd_timed_out(&journal),
        "systemd had to kill:\n{journal}"
    );
    // The job exited 0 on TERM, the cleanup with 0.
    assert_ended(&m, unit, "success", "1", "0");
}

#[test]
fn reap_without_notify_access_its_cleanup_is_killed_at_the_stop_timeout() {
    let test = "reap_without_notify_access_its_cleanup_is_killed_at_the_stop_timeout";
    let Some(m) = manager(test) else {
        return;
    };
    let unit = "reap-extend-plain.service";
    let (out, journal) = stop_after_ready(&m, unit);
    assert_eq!(
        read(&out.join("cleanup")),
        "",
        "systemd killed the cleanup:\n{journal}"
    );
    assert!(systemd_timed_out(&journal), "{journal}");
}

#[test]
fn graceful_extends_the_stop_timeout_for_its_grace() {
    let Some(m) = manager("graceful_extends_the_stop_timeout_for_its_grace") else {
        return;
    };
    let unit = "graceful-extend.service";
    let (out, journal) = stop_after_ready(&m, unit);
    assert_eq!(
        read(&out.join("job")),
        "done\n",
        "COMMAND, 3 s to stop, gets them under TimeoutStopSec=2:\n{journal}"
    );
    assert!(
        !systemd_timed_out(&journal),
        "systemd had to kill:\n{journal}"
    );
    assert_ended(&m, unit, "success", "1", "0");
}

#[test]
fn graceful_without_notify_access_command_is_killed_at_the_stop_timeout() {
    let test = "graceful_without_notify_access_command_is_killed_at_the_stop_timeout";
    let Some(m) = manager(test) else {
        return;
    };
    let unit = "graceful-extend-plain.service";
    let (out, journal) = stop_after_ready(&m, unit);
    assert_eq!(
        read(&out.join("job")),
        "",
        "systemd killed COMMAND:\n{journal}"
    );
    assert!(systemd_timed_out(&journal), "{journal}");
}
