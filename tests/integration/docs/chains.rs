//! Every chain the documentation shows (`reap ... -- graceful ...`,
//! `pgwrap ... graceful ...`, a graceful inside a graceful) in README.md,
//! the man pages, the systemd units and the examples, checked against what
//! the text around it says. Run as documented (COMMAND `true`): the budgets
//! agree, so no tool announces a cap at start. Run with its times scaled
//! down (1 s -> 100 ms; graceful's fixed 0.5 s margin, which does not
//! scale, added back to every grace that has a graceful below it): after a
//! stop request the step gets its grace (the shortest along the chain: it
//! stops in 60% of it and exits 0, not killed by an outer grace), and the
//! cleanup runs.

use crate::kit::{bin, Run, TIMEOUT};
use std::path::Path;
use std::time::Duration;

const TOOLS: [&str; 3] = ["pgwrap", "graceful", "reap"];

/// Options that take a value, per tool (`--cleanup-exec`'s vector aside).
fn takes_value(tool: &str, opt: &str) -> bool {
    let opts: &[&str] = match tool {
        "pgwrap" => &[
            "-f",
            "--forward",
            "-i",
            "--ignore",
            "-m",
            "--map",
            "--to",
            "--pdeathsig",
            "--events",
        ],
        "graceful" => &[
            "-t",
            "--timeout",
            "-g",
            "--grace",
            "-s",
            "--signal",
            "-k",
            "--kill-signal",
            "--on",
            "-f",
            "--forward",
            "--pdeathsig",
            "--stop-delay",
            "--events",
        ],
        _ => &[
            "-f",
            "--forward",
            "-c",
            "--cleanup",
            "-g",
            "--grace",
            "-s",
            "--signal",
            "--cleanup-timeout",
            "--stop-delay",
            "--events",
        ],
    };
    opts.contains(&opt)
}

/// Split a shell line into words (single and double quotes, no expansion).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == c {
                        break;
                    }
                    cur.push(q);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

fn tool_of(word: &str) -> Option<&'static str> {
    let base = word.rsplit('/').next().unwrap_or(word);
    TOOLS.iter().copied().find(|t| *t == base)
}

/// One layer of a chain: the tool and its options.
#[derive(Debug, Clone)]
struct Layer {
    tool: &'static str,
    opts: Vec<String>,
}

/// The layers of `argv`, if it is a chain of two tools or more.
fn layers(argv: &[String]) -> Option<Vec<Layer>> {
    tools(argv).filter(|l| l.len() >= 2)
}

/// The tools `argv` starts with, one in another: a tool's COMMAND that is
/// `sh -c 'STRING'` with a tool in STRING goes on there.
fn tools(argv: &[String]) -> Option<Vec<Layer>> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(tool) = argv.get(i).and_then(|w| tool_of(w)) {
        i += 1;
        let mut opts = Vec::new();
        while let Some(w) = argv.get(i) {
            if w == "--" {
                i += 1;
                break;
            }
            if !w.starts_with('-') {
                break;
            }
            opts.push(w.clone());
            i += 1;
            if !w.contains('=') && takes_value(tool, w) {
                opts.push(argv.get(i)?.clone());
                i += 1;
            }
        }
        out.push(Layer { tool, opts });
        if argv.get(i).map(String::as_str) == Some("sh")
            && argv.get(i + 1).map(String::as_str) == Some("-c")
        {
            if let Some(inner) = argv
                .get(i + 2)
                .filter(|s| s.split_whitespace().any(|w| tool_of(w).is_some()))
            {
                let from = inner
                    .split(';')
                    .find(|part| part.split_whitespace().any(|w| tool_of(w).is_some()))?;
                let rest: Vec<String> = words(from.trim().trim_start_matches("exec "));
                return Some(
                    out.into_iter()
                        .chain(tools(&rest).unwrap_or_default())
                        .collect(),
                );
            }
        }
    }
    Some(out)
}

/// The command lines a documentation file shows.
fn shown(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let mut lines = Vec::new();
    if name.ends_with(".1") {
        for l in text.replace("\\-", "-").replace("\\ ", " ").lines() {
            if let Some(q) = l.strip_prefix(".B \"").and_then(|q| q.strip_suffix('"')) {
                lines.push(q.to_string());
            } else if !l.starts_with('.') {
                lines.push(l.to_string());
            }
        }
    } else if name.ends_with(".yaml") {
        // command: [...] and args: [...] of a container, joined.
        let list = |key: &str| -> Vec<String> {
            text.lines()
                .find_map(|l| l.trim().strip_prefix(key))
                .map(|v| {
                    v.trim()
                        .trim_start_matches('[')
                        .trim_end_matches(']')
                        .split(", ")
                        .map(|s| s.trim_matches('"').to_string())
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut argv = list("command:");
        argv.extend(list("args:"));
        lines.push(
            argv.iter()
                .map(|w| format!("'{w}'"))
                .collect::<Vec<_>>()
                .join(" "),
        );
    } else {
        for l in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
            let l = l.trim_start_matches("ExecStart=");
            lines.push(l.to_string());
        }
    }
    lines
        .into_iter()
        .map(|l| {
            let l = l.trim().trim_start_matches("exec ").to_string();
            // The quick start builds first.
            match l.find("&& ") {
                Some(at) => l[at + 3..].to_string(),
                None => l,
            }
        })
        .collect()
}

/// Every documented chain: (where, line, layers).
fn chains() -> Vec<(String, String, Vec<Layer>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    for dir in ["packaging/man", "packaging/systemd", "packaging/examples"] {
        let mut entries: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        files.extend(entries);
    }
    let mut out = Vec::new();
    for file in files {
        for line in shown(&file) {
            if let Some(l) = layers(&words(&line)) {
                out.push((
                    file.strip_prefix(root).unwrap().display().to_string(),
                    line,
                    l,
                ));
            }
        }
    }
    out
}

/// A documented duration, scaled: 1 s -> 250 ms (bare numbers are seconds).
/// Not shorter: a documented `-g 1` is then a 250 ms grace, of which the
/// step takes 60%, and the rest must carry the stop signal down the chain
/// (three processes, each woken in turn) on a loaded machine.
fn scaled(value: &str) -> String {
    let (num, unit) = value.split_at(
        value
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(value.len()),
    );
    let n: f64 = num.parse().unwrap_or_else(|_| panic!("duration {value}"));
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        other => panic!("unit {other} in {value}"),
    };
    format!("{}ms", (secs * 250.0).round() as u64)
}

/// The grace of a layer as documented, scaled, in ms (the tool's default
/// when none is given).
fn grace_ms(layer: &Layer) -> u64 {
    let mut g = match layer.tool {
        "graceful" => "10s".to_string(),
        "reap" => "5s".to_string(),
        _ => return u64::MAX,
    };
    let mut it = layer.opts.iter();
    while let Some(o) = it.next() {
        if o == "-g" || o == "--grace" {
            g = it.next().unwrap().clone();
        } else if let Some(v) = o.strip_prefix("--grace=") {
            g = v.to_string();
        }
    }
    scaled(&g).trim_end_matches("ms").parse().unwrap()
}

/// graceful's margin below an outer grace (crates/graceful/budget.rs).
const MARGIN_MS: u64 = 500;

/// The argv of a layer to run: durations scaled (unless `full`), the grace
/// of an `outer` layer with the margin added back, the cleanup an echo.
fn run_opts(layer: &Layer, full: bool, outer: bool) -> Vec<String> {
    let mut out = Vec::new();
    let scale = |v: &str| if full { v.to_string() } else { scaled(v) };
    let grace = if full || !outer || layer.tool == "pgwrap" {
        None
    } else {
        Some(format!("{}ms", grace_ms(layer) + MARGIN_MS))
    };
    if let Some(g) = grace.clone().filter(|_| layer.tool != "pgwrap") {
        out.extend(["--grace".into(), g]);
    }
    let mut it = layer.opts.iter();
    while let Some(o) = it.next() {
        match o.as_str() {
            "-g" | "--grace" if grace.is_some() => {
                it.next();
            }
            "-t" | "--timeout" | "--cleanup-timeout" | "--stop-delay" | "-g" | "--grace" => {
                out.push(o.clone());
                out.push(scale(it.next().unwrap()));
            }
            "-c" | "--cleanup" => {
                it.next();
                out.extend(["--cleanup".into(), "echo cleanup-ran".into()]);
            }
            _ if layer.tool != "pgwrap" && takes_value(layer.tool, o) => {
                out.push(o.clone());
                out.push(it.next().unwrap().clone());
            }
            _ => out.push(o.clone()),
        }
    }
    out
}

/// The shortest grace along the chain, scaled (each deadline is kept where
/// it is set, so the step must stop within every one): each layer's own,
/// or, for a graceful given no `--grace`, its default under the budget the
/// layer above exports (that layer's run grace, margin added back, less
/// the margin), taken silently.
fn innermost_grace_ms(layers: &[Layer]) -> u64 {
    let mut budget: Option<u64> = None;
    let mut inner = None;
    for (i, layer) in layers.iter().enumerate() {
        let mut g = grace_ms(layer);
        if g == u64::MAX {
            continue;
        }
        let given = layer
            .opts
            .iter()
            .any(|o| o == "-g" || o == "--grace" || o.starts_with("--grace="));
        if let (Some(b), "graceful", false) = (budget, layer.tool, given) {
            g = g.min(b.saturating_sub(MARGIN_MS));
        }
        let outer = layers[i + 1..].iter().any(|l| l.tool == "graceful");
        budget = Some(if outer { g + MARGIN_MS } else { g });
        inner = Some(inner.map_or(g, |i: u64| i.min(g)));
    }
    inner.unwrap()
}

#[test]
fn every_documented_chain_does_what_its_text_says() {
    let chains = chains();
    // README (2), graceful.1 (2), reap.1 (2), pgwrap.1 (1), the pod.
    assert!(chains.len() >= 8, "too few chains found: {chains:#?}");
    std::thread::scope(|scope| {
        for (file, line, layers) in &chains {
            scope.spawn(move || check_chain(file, line, layers));
        }
    });
}

/// The argv of a chain: its layers, then `command`.
fn argv_of(layers: &[Layer], full: bool, command: &[&str]) -> Vec<String> {
    let mut argv: Vec<String> = Vec::new();
    for (i, layer) in layers.iter().enumerate() {
        let outer = layers[i + 1..].iter().any(|l| l.tool == "graceful");
        argv.push(bin(layer.tool).display().to_string());
        argv.extend(run_opts(layer, full, outer));
        argv.push("--".into());
    }
    argv.extend(command.iter().map(|s| s.to_string()));
    argv
}

fn check_chain(file: &str, line: &str, layers: &[Layer]) {
    let what = format!("{file}: {line}");
    // As documented: the budgets agree, nothing is capped.
    let argv = argv_of(layers, true, &["true"]);
    let mut run = Run::new(&argv[0])
        .args(&argv[1..])
        .env_remove("GRACEFUL_GRACE_MS")
        .stderr_piped()
        .spawn();
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0), "{what}");
    let err = run.stderr_all();
    assert!(
        !err.contains("grace capped"),
        "{what}: the budgets disagree: {err}"
    );
    // The step: takes 60% of the innermost grace to stop, then exits 0.
    let inner = innermost_grace_ms(layers);
    let work = inner * 6 / 10;
    let step = format!(
        "trap 'echo step-got-term; sleep {}; echo step-done; exit 0' TERM; echo step-up; sleep 1000 & wait; wait",
        work as f64 / 1000.0
    );
    let argv = argv_of(layers, false, &["sh", "-c", &step]);
    let mut run = Run::new(&argv[0])
        .args(&argv[1..])
        .env_remove("GRACEFUL_GRACE_MS")
        .stderr_piped()
        .spawn();
    run.expect_line("step-up", TIMEOUT);
    run.signal(libc::SIGTERM);
    run.expect_line("step-got-term", TIMEOUT);
    run.expect_line("step-done", TIMEOUT + Duration::from_millis(work));
    let status = run.wait_exit(TIMEOUT);
    let err = run.stderr_all();
    assert!(
        !err.contains("grace capped"),
        "{what}: scaled, the budgets disagree: {err}"
    );
    assert_eq!(
        status.code(),
        Some(0),
        "{what}: the step's own status: {err}"
    );
    if layers
        .iter()
        .any(|l| l.opts.iter().any(|o| o == "-c" || o == "--cleanup"))
    {
        // The cleanup's line was written before the chain exited, but the
        // reader of its stdout may not have passed it on yet: wait for it
        // (the pipe's end comes without it if the cleanup did not run).
        run.expect_line_with(&format!("{what}: the cleanup's line"), TIMEOUT, |l| {
            l == "cleanup-ran"
        });
    }
}

/// The finder and the scaling themselves.
#[test]
fn chains_are_found_and_scaled() {
    let l = layers(&words(
        "reap --grace 35s --cleanup 'docker compose down' -- graceful --grace 30s -- ./run-tests",
    ))
    .unwrap();
    assert_eq!((l[0].tool, l[1].tool), ("reap", "graceful"));
    assert_eq!((grace_ms(&l[0]), grace_ms(&l[1])), (8750, 7500));
    let l = layers(&words(
        "graceful -g 60s -- sh -c 'prepare; exec graceful -g 30s -- ./serve'",
    ))
    .unwrap();
    assert_eq!(l.len(), 2);
    assert_eq!(grace_ms(&l[1]), 7500);
    assert!(layers(&words("graceful --grace 30s -- ./step")).is_none());
    assert_eq!(scaled("5"), "1250ms");
    assert_eq!(scaled("200ms"), "50ms");
}
