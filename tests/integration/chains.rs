//! The chain matrix: every chain of one to three tools (pgwrap, graceful
//! and reap in any order, with repetition: 3 + 9 + 27 = 39 chains) × the
//! ways a job ends × job shapes, each cell checked against the contract's
//! chain rules (design.md, "Chains"):
//!
//! - what the equivalent single tool would have stopped is gone (a reap in
//!   the chain: everything; a graceful: what holds its stop up, its group
//!   through inner tools that left; pgwrap alone: what obeys the signal it
//!   passes on), a
//!   member that holds the stop up with the stop signal before the kill
//!   wherever a grace applies;
//! - no stranger is signalled (a decoy in a session of its own);
//! - each reap's cleanup runs once, with the right `REAP_CAUSE`, even where
//!   an outer graceful's deadline came first;
//! - the outermost exit status is the one the contract derives from
//!   COMMAND's;
//! - no stderr line blames one of the suite's own tools, and no budget is
//!   capped (the graces agree: each outer one is the inner one plus 700 ms).
//!
//! Ways a job ends: TERM to the outermost tool; TERM to the outermost
//! group (a CI agent's cancel); that, then SIGKILL of the group 300 ms
//! later; the innermost graceful's `--timeout` (chains with a graceful);
//! COMMAND exiting by itself. Shapes: a leader that traps TERM and exits 3;
//! a member that catches TERM and goes on; a `setsid` escapee; a
//! double-forked orphan; a member in a process group of its own.
//!
//! `chain_matrix_slice` (in scripts/check) runs the cells of the one-tool
//! chains and of five longer ones; `chain_matrix_all` (ignored;
//! scripts/chain-matrix) runs them all, and with PGWRAP_CHAIN_MATRIX_DOC=PATH
//! writes the table of docs/chains.md there. PGWRAP_CHAIN_MATRIX_FILTER
//! keeps the cells whose name contains it.

use crate::kit::{bin, Run, TIMEOUT};
use crate::procfs;
use crate::reap_kit::{sigprobe, Guard};
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const TOOLS: [&str; 3] = ["pgwrap", "graceful", "reap"];

/// The innermost grace; each outer graceful or reap adds [`STEP_MS`].
const INNER_MS: u64 = 800;
/// graceful's 500 ms margin and 200 ms to spare.
const STEP_MS: u64 = 700;
/// The innermost graceful's `--timeout` in the timeout cells.
const TIMEOUT_MS: u64 = 400;
/// Between the TERM to the group and its SIGKILL.
const AGENT_GRACE_MS: u64 = 300;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum End {
    TermTool,
    TermGroup,
    TermThenKill,
    Timeout,
    Exits,
}

impl End {
    const ALL: [End; 5] = [
        End::TermTool,
        End::TermGroup,
        End::TermThenKill,
        End::Timeout,
        End::Exits,
    ];

    fn name(self) -> &'static str {
        match self {
            End::TermTool => "term-tool",
            End::TermGroup => "term-group",
            End::TermThenKill => "term-then-kill",
            End::Timeout => "timeout",
            End::Exits => "exits",
        }
    }

    fn signalled(self) -> bool {
        self != End::Exits
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Shape {
    TrapLeader,
    Holder,
    Escapee,
    Orphan,
    SubGroup,
}

impl Shape {
    const ALL: [Shape; 5] = [
        Shape::TrapLeader,
        Shape::Holder,
        Shape::Escapee,
        Shape::Orphan,
        Shape::SubGroup,
    ];

    fn name(self) -> &'static str {
        match self {
            Shape::TrapLeader => "trap-leader",
            Shape::Holder => "holder",
            Shape::Escapee => "escapee",
            Shape::Orphan => "orphan",
            Shape::SubGroup => "sub-group",
        }
    }

    /// The role of the probe besides the leader.
    fn role(self) -> &'static str {
        match self {
            Shape::TrapLeader => "helper",
            Shape::Holder => "holder",
            Shape::Escapee => "escapee",
            Shape::Orphan => "orphan",
            Shape::SubGroup => "subgroup",
        }
    }

    /// The probe is in the leader's group.
    fn in_group(self) -> bool {
        matches!(self, Shape::TrapLeader | Shape::Holder | Shape::Orphan)
    }

    /// The probe ends on TERM.
    fn obeys_term(self) -> bool {
        self != Shape::Holder
    }
}

/// Every chain of one to three tools.
pub fn chains() -> Vec<Vec<&'static str>> {
    let mut out: Vec<Vec<&'static str>> = TOOLS.iter().map(|t| vec![*t]).collect();
    for n in 2..=3 {
        let mut next = Vec::new();
        for c in out.iter().filter(|c| c.len() == n - 1) {
            for t in TOOLS {
                let mut c = c.clone();
                c.push(t);
                next.push(c);
            }
        }
        out.extend(next);
    }
    out
}

#[derive(Clone, Debug)]
pub struct Cell {
    pub chain: Vec<&'static str>,
    pub end: End,
    pub shape: Shape,
}

impl Cell {
    pub fn name(&self) -> String {
        format!(
            "{} / {} / {}",
            self.chain.join(" -- "),
            self.end.name(),
            self.shape.name()
        )
    }

    fn has(&self, tool: &str) -> bool {
        self.chain.contains(&tool)
    }

    /// The index of the innermost graceful.
    fn innermost_graceful(&self) -> Option<usize> {
        self.chain.iter().rposition(|t| *t == "graceful")
    }
}

pub fn cells() -> Vec<Cell> {
    let mut out = Vec::new();
    for chain in chains() {
        for end in End::ALL {
            if end == End::Timeout && !chain.contains(&"graceful") {
                continue;
            }
            for shape in Shape::ALL {
                out.push(Cell {
                    chain: chain.clone(),
                    end,
                    shape,
                });
            }
        }
    }
    out
}

/// The graces, innermost first: INNER_MS, then STEP_MS more per layer.
fn graces(chain: &[&str]) -> Vec<Option<u64>> {
    let mut out = vec![None; chain.len()];
    let mut next = INNER_MS;
    for i in (0..chain.len()).rev() {
        if chain[i] != "pgwrap" {
            out[i] = Some(next);
            next += STEP_MS;
        }
    }
    out
}

/// What the contract gives for a cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Exit(i32),
    Signal(i32),
}

fn expected_status(cell: &Cell) -> Status {
    let mut status = match (cell.end, cell.shape) {
        (End::Exits, _) => Status::Exit(5),
        (_, Shape::TrapLeader) => Status::Exit(3),
        _ => Status::Signal(libc::SIGTERM),
    };
    for (i, _) in cell.chain.iter().enumerate().rev() {
        if cell.end == End::Timeout && Some(i) == cell.innermost_graceful() {
            status = Status::Exit(124);
        }
    }
    status
}

/// REAP_CAUSE for the reap at layer `i`.
fn expected_cause(cell: &Cell, i: usize) -> &'static str {
    match cell.end {
        End::TermTool | End::TermGroup | End::TermThenKill => "cancel",
        End::Timeout => match cell.innermost_graceful() {
            Some(g) if g < i => "cancel",
            _ => "exit",
        },
        End::Exits => "exit",
    }
}

/// Whether the shape's probe must be gone when the chain has ended.
fn must_end(cell: &Cell) -> bool {
    if cell.has("reap") {
        return true;
    }
    if !cell.end.signalled() {
        return false;
    }
    // A SIGKILL of the outermost group without a reap ends what the kill
    // reaches; the rest is the supervisor's (its cgroup).
    if cell.end == End::TermThenKill {
        return cell.shape.in_group() && cell.shape.obeys_term();
    }
    // graceful waits for what holds the stop up (its group, through inner
    // tools that left), and its deadline kills it; a process that left for
    // a group of its own is not waited for (as under `graceful -- JOB`).
    if cell.has("graceful") {
        return cell.shape.in_group();
    }
    cell.shape.in_group() && cell.shape.obeys_term()
}

/// What one cell did, for the table.
#[derive(Debug, Clone)]
pub struct Seen {
    pub status: Status,
    /// The probe besides the leader: "stopped", "killed" (at a deadline,
    /// after the stop signal), "killed unwarned", "left".
    pub probe: &'static str,
    pub causes: Vec<String>,
}

fn script(cell: &Cell) -> String {
    let p = sigprobe();
    let role = cell.shape.role();
    let life = if cell.end == End::Exits {
        " --sleep-ms 800"
    } else {
        " --sleep-ms 30000"
    };
    let probe = match cell.shape {
        Shape::TrapLeader => format!("{p} --role {role}{life} &"),
        Shape::Holder => format!("{p} --role {role} --exit-on none{life} &"),
        Shape::Escapee => format!("setsid {p} --role {role}{life} &"),
        Shape::Orphan => format!("({p} --role {role}{life} &) ;"),
        Shape::SubGroup => {
            format!("perl -e 'setpgrp(0,0); exec @ARGV' {p} --role {role}{life} &")
        }
    };
    let trap = if cell.shape == Shape::TrapLeader {
        "trap 'exit 3' TERM; "
    } else {
        ""
    };
    if cell.end == End::Exits {
        return format!("{trap}echo leader $$; {probe} sleep 0.4; exit 5");
    }
    // A trapped TERM interrupts `wait` at once (a foreground command would
    // be waited for first). The sleep is started before the probe, whose
    // ready line the test waits for before it signals: started after it,
    // a TERM could come first and the sleep never get it (CI at 52d24e7:
    // `pgwrap / term-group / trap-leader: left running: 9240 (sleep)`).
    // And the probe starts only once the sleep is `sleep`: the shell's
    // child before its exec still runs the leader's TERM trap, and clears
    // the trap, and the TERM with it, before it becomes `sleep` (CI at
    // 2016f30: `pgwrap / term-then-kill / trap-leader: left running:
    // 37005 (sleep)`, the probe gone).
    format!(
        "{trap}echo leader $$; sleep 1000 & \
         until read c < /proc/$!/comm && [ \"$c\" = sleep ]; do :; done; {probe} wait"
    )
}

/// Run one cell; the failures found (empty: it passed).
pub fn run_cell(cell: &Cell) -> (Vec<String>, Option<Seen>) {
    let mut fails = Vec::new();
    let dir = crate::kit::temp_dir("chain-matrix");
    let causes_file = dir.join("causes");
    let graces = graces(&cell.chain);
    let mut argv: Vec<String> = Vec::new();
    for (i, tool) in cell.chain.iter().enumerate() {
        argv.push(bin(tool).display().to_string());
        if let Some(g) = graces[i] {
            argv.extend(["--grace".into(), format!("{g}ms")]);
        }
        if *tool == "reap" {
            argv.push("--cleanup".into());
            argv.push(format!(
                "echo layer={i} cause=$REAP_CAUSE >> '{}'",
                causes_file.display()
            ));
        }
        if *tool == "graceful" && cell.end == End::Timeout && Some(i) == cell.innermost_graceful() {
            argv.extend(["--timeout".into(), format!("{TIMEOUT_MS}ms")]);
        }
        argv.push("--".into());
    }
    argv.extend(["sh".into(), "-c".into(), script(cell)]);

    // A stranger: in a session of its own, never below the chain.
    let mut decoy = Run::new(bin("sigprobe"))
        .args(["--role", "decoy", "--exit-on", "none"])
        .setpgid(true)
        .spawn();
    decoy.expect_ready(TIMEOUT);

    let mut run = Run::new(&argv[0])
        .args(&argv[1..])
        .env_remove("GRACEFUL_GRACE_MS")
        .env_remove("GRACEFUL_GUARD")
        .setpgid(true)
        .stderr_piped()
        .spawn();
    let leader_line = run.expect_line("leader ", TIMEOUT);
    let leader: i32 = leader_line[7..].trim().parse().unwrap_or(0);
    let probe = run
        .expect_readies(1, TIMEOUT)
        .pop()
        .expect("the shape's probe");
    let mut guard = Guard::new();
    guard.watch_tree(run.pid());
    guard.watch(probe.pid);
    match cell.end {
        End::TermTool => run.signal(libc::SIGTERM),
        End::TermGroup => run.signal_group(libc::SIGTERM),
        End::TermThenKill => {
            run.signal_group(libc::SIGTERM);
            std::thread::sleep(Duration::from_millis(AGENT_GRACE_MS));
            if run.try_exit().is_none() {
                run.signal_group(libc::SIGKILL);
            }
        }
        End::Timeout | End::Exits => {}
    }
    let status = run.wait_exit(TIMEOUT + Duration::from_secs(10));
    let got = match (status.code(), status.signal()) {
        (Some(c), _) => Status::Exit(c),
        (_, Some(s)) => Status::Signal(s),
        _ => Status::Exit(-1),
    };
    let want = expected_status(cell);
    let killed_ok = cell.end == End::TermThenKill && got == Status::Signal(libc::SIGKILL);
    if got != want && !killed_ok {
        fails.push(format!("exit status {got:?}, the contract gives {want:?}"));
    }
    // The machinery that outlives the outermost (reap's back after a kill
    // of its front, the cleanup) ends too; then judge what is left.
    let must = must_end(cell);
    let settled = wait_for(Duration::from_secs(15), || {
        let left = guard.alive();
        left.iter().all(|&p| p == probe.pid) && (!must || !left.contains(&probe.pid))
    });
    if !settled {
        let left: Vec<String> = guard
            .alive()
            .iter()
            .map(|&p| format!("{p} ({})", procfs_name(p)))
            .collect();
        fails.push(format!("left running: {}", left.join(", ")));
    }
    if leader > 0 && guard.alive().contains(&leader) {
        fails.push("the job's leader is left".into());
    }
    // The probe's last lines may still be on their way through the pipe:
    // wait for its exit line, or for the pipe's end (every writer gone).
    // Its `got TERM` alone is not enough: its exit line comes in a write
    // of its own, and a cell once read "killed" for a probe that exited
    // on TERM (`reap -- pgwrap -- pgwrap`, COMMAND exiting by itself).
    let exit_line = format!("exit pid={}", probe.pid);
    if !procfs::alive(probe.pid) {
        wait_for(Duration::from_secs(1), || {
            run.lines_so_far().iter().any(|l| l.starts_with(&exit_line)) || run.stdout_done()
        });
    }
    let lines = run.lines_so_far();
    let got_term = lines
        .iter()
        .any(|l| l.starts_with(&format!("got TERM pid={} ", probe.pid)));
    let probe_left = procfs::alive(probe.pid)
        && procfs::start_time(probe.pid).is_some()
        && guard.alive().contains(&probe.pid);
    let exited = lines
        .iter()
        .any(|l| l.starts_with(&format!("exit pid={}", probe.pid)));
    let probe_seen = if probe_left {
        "left"
    } else if exited {
        "stopped"
    } else if got_term {
        "killed"
    } else {
        "killed unwarned"
    };
    // The stop signal before the kill, wherever a grace applies.
    let grace_applies = cell.end != End::TermThenKill
        && cell.end.signalled()
        && (cell.has("graceful") || cell.has("reap"));
    if grace_applies && cell.shape == Shape::Holder && !got_term {
        fails.push("the member holding the stop up got no TERM before its kill".into());
    }
    // The cleanups: each reap's once, with its cause.
    let text = std::fs::read_to_string(&causes_file).unwrap_or_default();
    let mut causes = Vec::new();
    for (i, tool) in cell.chain.iter().enumerate() {
        if *tool != "reap" {
            continue;
        }
        let mine: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with(&format!("layer={i} ")))
            .collect();
        let want = format!("layer={i} cause={}", expected_cause(cell, i));
        if mine != [want.as_str()] {
            fails.push(format!(
                "reap at layer {i}: cleanup lines {mine:?}, want [{want:?}]"
            ));
        }
        causes.push(
            mine.first()
                .and_then(|l| l.split("cause=").nth(1))
                .unwrap_or("none")
                .to_string(),
        );
    }
    // No stranger signalled.
    if decoy.lines_so_far().iter().any(|l| l.starts_with("got ")) {
        fails.push(format!(
            "the decoy was signalled: {:?}",
            decoy.lines_so_far()
        ));
    }
    drop(decoy);
    // No line blames a tool; no budget capped.
    let err = run.stderr_all();
    for line in err.lines() {
        let blames = ["(pgwrap)", "(graceful)", "(reap)"]
            .iter()
            .any(|t| line.contains(t));
        if blames || line.contains("grace capped") {
            fails.push(format!("stderr: {line}"));
        }
    }
    drop(guard);
    (
        fails,
        Some(Seen {
            status: got,
            probe: probe_seen,
            causes,
        }),
    )
}

fn procfs_name(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Run `cells`, `parallel` at a time; each cell's failures, and what it did.
fn run_all(cells: Vec<Cell>, parallel: usize) -> Vec<(Cell, Vec<String>, Option<Seen>)> {
    let queue = Mutex::new(cells.into_iter().enumerate().collect::<Vec<_>>());
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..parallel {
            scope.spawn(|| loop {
                let Some((n, cell)) = queue.lock().unwrap().pop() else {
                    break;
                };
                let outcome =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_cell(&cell)));
                let (fails, seen) = match outcome {
                    Ok(r) => r,
                    Err(e) => {
                        let msg = e
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        (vec![format!("panicked: {msg}")], None)
                    }
                };
                results.lock().unwrap().push((n, cell, fails, seen));
            });
        }
    });
    let mut out = results.into_inner().unwrap();
    out.sort_by_key(|r| r.0);
    out.into_iter().map(|(_, c, f, s)| (c, f, s)).collect()
}

fn filtered(cells: Vec<Cell>) -> Vec<Cell> {
    match std::env::var("PGWRAP_CHAIN_MATRIX_FILTER") {
        Ok(f) if !f.is_empty() => cells
            .into_iter()
            .filter(|c| c.name().contains(&f))
            .collect(),
        _ => cells,
    }
}

fn judge(results: &[(Cell, Vec<String>, Option<Seen>)]) {
    let mut report = String::new();
    let mut failed = 0;
    for (cell, fails, _) in results {
        if !fails.is_empty() {
            failed += 1;
            report.push_str(&format!("{}:\n", cell.name()));
            for f in fails {
                report.push_str(&format!("    {f}\n"));
            }
        }
    }
    println!("chain matrix: {} cells, {failed} failed", results.len());
    assert!(failed == 0, "{failed} cells failed:\n{report}");
}

/// The slice scripts/check runs: the one-tool chains, and a fixed dozen of
/// the longer ones, every way of ending and every shape.
#[test]
fn chain_matrix_slice() {
    let picked: [&[&str]; 5] = [
        &["graceful", "pgwrap"],
        &["pgwrap", "graceful"],
        &["graceful", "reap"],
        &["reap", "graceful", "pgwrap"],
        &["reap", "reap", "graceful"],
    ];
    let cells: Vec<Cell> = cells()
        .into_iter()
        .filter(|c| c.chain.len() == 1 || picked.contains(&c.chain.as_slice()))
        .collect();
    judge(&run_all(filtered(cells), 8));
}

/// The whole matrix (scripts/chain-matrix), and docs/chains.md.
#[test]
#[ignore]
fn chain_matrix_all() {
    let results = run_all(filtered(cells()), 8);
    if let Ok(path) = std::env::var("PGWRAP_CHAIN_MATRIX_DOC") {
        std::fs::write(&path, table(&results)).unwrap();
    }
    judge(&results);
}

/// What one chain did, by ending and shape.
type Row<'a> = BTreeMap<(End, Shape), &'a Seen>;

/// docs/chains.md: for each chain, what becomes of each job shape when the
/// job is stopped (TERM to the outermost tool) and when it exits by itself.
fn table(results: &[(Cell, Vec<String>, Option<Seen>)]) -> String {
    let mut by_chain: BTreeMap<(usize, String), Row> = BTreeMap::new();
    let order: Vec<String> = chains().iter().map(|c| c.join(" -- ")).collect();
    for (cell, _, seen) in results {
        let Some(seen) = seen else { continue };
        let name = cell.chain.join(" -- ");
        let pos = order.iter().position(|o| *o == name).unwrap_or(0);
        by_chain
            .entry((pos, name))
            .or_default()
            .insert((cell.end, cell.shape), seen);
    }
    let mut out = String::new();
    out.push_str(
        "# What each chain does with each job\n\n\
         Generated by `scripts/chain-matrix` (tests/integration/chains.rs) from a run of every\n\
         cell; do not edit. Each chain runs `sh -c JOB`, whose leader starts one more process\n\
         of the shape named in the column: a helper (the leader traps TERM and exits 3), a\n\
         member that catches TERM and goes on (*holder*), a `setsid` *escapee*, a\n\
         double-forked *orphan*, a member in a process group of its own (*sub-group*). The\n\
         innermost graceful or reap has a grace of 0.8 s, each outer one 0.7 s more.\n\n\
         What becomes of that process: **stopped** (it ended on the stop signal), **killed**\n\
         (at a deadline, after the stop signal), **killed unwarned** (at a deadline, never sent\n\
         the stop signal: it left COMMAND's group), **left** (still running when the chain has\n\
         ended: only where no tool of the chain owns it). `cleanup` is each reap's\n\
         `REAP_CAUSE`.\n\n\
         ## Stopped: TERM to the outermost tool\n\n",
    );
    let header = |out: &mut String| {
        out.push_str("| chain | exit |");
        for s in Shape::ALL {
            out.push_str(&format!(" {} |", s.name()));
        }
        out.push_str(" cleanup |\n|---|---|");
        for _ in Shape::ALL {
            out.push_str("---|");
        }
        out.push_str("---|\n");
    };
    for end in [End::TermTool, End::Exits] {
        if end == End::Exits {
            out.push_str(
                "\n## COMMAND exits by itself (status 5)\n\n\
                 Here **stopped** means the chain waited for it to end by itself (it lives\n\
                 0.8 s); **left**, that the chain ended first.\n\n",
            );
        }
        header(&mut out);
        for ((_, name), cells) in &by_chain {
            let status = cells
                .get(&(end, Shape::Holder))
                .map(|s| match s.status {
                    Status::Exit(n) => n.to_string(),
                    Status::Signal(s) => format!("killed by {}", sig_name(s)),
                })
                .unwrap_or_default();
            out.push_str(&format!("| `{name}` | {status} |"));
            for s in Shape::ALL {
                let what = cells.get(&(end, s)).map_or("", |seen| seen.probe);
                out.push_str(&format!(" {what} |"));
            }
            let causes = cells
                .get(&(end, Shape::Holder))
                .map(|s| s.causes.join(", "))
                .unwrap_or_default();
            let causes = if causes.is_empty() {
                "—".into()
            } else {
                causes
            };
            out.push_str(&format!(" {causes} |\n"));
        }
    }
    out.push_str(
        "\nThe other ways a job ends (TERM to the outermost group, as a CI agent sends it;\n\
         that, then SIGKILL of the group 0.3 s later; an inner graceful's `--timeout`) are\n\
         checked in every cell by the same run; under a SIGKILL of the group only a reap in the\n\
         chain still ends what the kill did not reach, and runs its cleanup.\n",
    );
    out
}

fn sig_name(s: i32) -> String {
    match s {
        libc::SIGTERM => "TERM".into(),
        libc::SIGKILL => "KILL".into(),
        n => n.to_string(),
    }
}
