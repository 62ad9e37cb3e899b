//! The event log (`--events FD|PATH`): one JSON line per event, each written
//! whole, in the order of the contract; a log nobody reads never blocks or
//! ends the tool.

use crate::kit::{bin, temp_dir, Run, TIMEOUT};
use std::time::Duration;

/// The `"event"` of each line, checking the common fields on the way.
fn events_of(text: &str, tool: &str) -> Vec<String> {
    text.lines()
        .map(|line| {
            assert!(
                line.starts_with("{\"v\":1,\"t\":") && line.ends_with('}'),
                "not an event line: {line}"
            );
            assert!(line.contains(&format!("\"tool\":\"{tool}\"")), "{line}");
            let at = line.find("\"event\":\"").expect("an event field") + 9;
            line[at..line[at..].find('"').unwrap() + at].to_string()
        })
        .collect()
}

#[test]
fn a_graceful_run_logs_its_events_in_the_contracts_order() {
    let dir = temp_dir("events");
    let log = dir.join("events.jsonl");
    let mut run = Run::new(bin("graceful"))
        .arg("--events")
        .arg(&log)
        .args(["--grace", "300ms", "--", "sh", "-c"])
        .arg("trap '' TERM USR1; echo up; sleep 30")
        .stderr_piped()
        .spawn();
    run.expect_line("up", TIMEOUT);
    run.signal(libc::SIGUSR1);
    run.signal(libc::SIGTERM);
    let status = run.wait_exit(TIMEOUT);
    assert_eq!(status.code(), None, "killed: {status:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    let events = events_of(&text, "graceful");
    // Both the shell and its sleep ignore TERM (and USR1): two survivors.
    let want = [
        "started", "signal", "signal", "stop", "survivor", "survivor", "kill", "reaped", "exit",
    ];
    assert_eq!(events, want, "{text}");
    assert!(text.contains("\"name\":\"USR1\",") && text.contains("\"action\":\"forwarded\""));
    assert!(text.contains("\"name\":\"TERM\",") && text.contains("\"action\":\"trigger\""));
    assert!(text.contains("\"reason\":\"ignores\""), "{text}");
    assert!(text.contains("\"event\":\"exit\",\"status\":137,\"cause\":\"signal\",\"dropped\":0"));
}

#[test]
fn a_pgwrap_run_logs_to_a_descriptor_of_the_caller() {
    let dir = temp_dir("events-fd");
    let log = dir.join("events.jsonl");
    let mut run = Run::new("sh")
        .arg("-c")
        .arg(format!(
            "exec 3>'{}'; exec '{}' --events 3 -- sh -c 'exit 4'",
            log.display(),
            bin("pgwrap").display()
        ))
        .spawn();
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(4));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        events_of(&text, "pgwrap"),
        ["started", "reaped", "exit"],
        "{text}"
    );
    assert!(text.contains("\"event\":\"exit\",\"status\":4,\"cause\":\"exit\""));
}

/// A log on a descriptor the caller shares with COMMAND (its stdout, a
/// pipe): each tool writes the log without changing that descriptor, so
/// COMMAND's own writes to it block as they would without the log, and
/// none fails. (A non-blocking flag on the shared open file description
/// made `head` fail with EAGAIN after 61549 of 10000000 bytes.)
#[test]
fn a_log_on_a_shared_descriptor_leaves_it_as_the_caller_made_it() {
    let bytes = 3_000_000;
    for tool in ["pgwrap", "graceful", "reap"] {
        let script = format!(
            "{} --events 1 -- sh -c 'grep ^flags /proc/self/fdinfo/1 >&2; head -c {bytes} /dev/zero' \
             | (sleep 0.5; wc -c)",
            bin(tool).display()
        );
        let mut run = Run::new("sh").args(["-c", &script]).stderr_piped().spawn();
        let count = run.expect_line("", TIMEOUT);
        let status = run.wait_exit(TIMEOUT);
        let err = run.stderr_all();
        assert_eq!(status.code(), Some(0), "{tool}: {err}");
        let flags = err
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
            .unwrap_or_else(|| panic!("{tool}: no flags line: {err}"));
        assert_eq!(
            flags & libc::O_NONBLOCK as u32,
            0,
            "{tool}: COMMAND's stdout was made non-blocking"
        );
        assert!(!err.contains("temporarily unavailable"), "{tool}: {err}");
        let total: usize = count.trim().parse().unwrap();
        assert!(
            total > bytes,
            "{tool}: {total} bytes: COMMAND's and the log's lines, all of them"
        );
    }
}

/// A log whose reader is gone: the writes fail, the tool goes on and ends
/// as COMMAND did, saying so once on stderr.
#[test]
fn a_log_nobody_reads_neither_blocks_nor_ends_the_tool() {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: our read end, closed at once: nobody will read.
    unsafe { libc::close(fds[0]) };
    let w = fds[1];
    let mut run = Run::new(bin("pgwrap"))
        .args(["--events", "3", "--", "sh", "-c", "sleep 0.3; exit 6"])
        .stderr_piped()
        .configure(move |cmd| {
            use std::os::unix::process::CommandExt;
            // SAFETY: dup2 between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::dup2(w, 3) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        })
        .spawn();
    // SAFETY: the child has its copy.
    unsafe { libc::close(w) };
    let status = run.wait_exit(TIMEOUT + Duration::from_secs(1));
    let err = run.stderr_all();
    assert_eq!(status.code(), Some(6), "{status:?}: {err}");
    assert_eq!(err.matches("event log").count(), 1, "{err}");
}

#[test]
fn an_unusable_log_is_refused_before_anything_starts() {
    crate::command_line::assert_rejected("pgwrap", &[&["--events", "987", "--"]]);
    crate::command_line::assert_rejected(
        "graceful",
        &[&["--events", "/nonexistent/dir/log", "--"]],
    );
}

/// A JSON value of an event line (the log writes flat objects only).
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Int(i64),
    Str(String),
    Bool(bool),
}

/// Parse one event line as a flat JSON object, strictly: every line must
/// be one, with its keys in order.
fn parse_object(line: &str) -> Vec<(String, Json)> {
    let b = line.as_bytes();
    let mut i = 0;
    let fail = |why: &str, at: usize| -> ! { panic!("not a JSON event ({why} at {at}): {line}") };
    let string = |i: &mut usize| -> String {
        if b.get(*i) != Some(&b'"') {
            fail("expected a string", *i);
        }
        *i += 1;
        let mut out = String::new();
        loop {
            match b.get(*i) {
                None => fail("unterminated string", *i),
                Some(b'"') => {
                    *i += 1;
                    return out;
                }
                Some(b'\\') => {
                    match b.get(*i + 1) {
                        Some(b'"') => out.push('"'),
                        Some(b'\\') => out.push('\\'),
                        Some(b'u') => {
                            let hex = &line[*i + 2..*i + 6];
                            out.push(
                                char::from_u32(u32::from_str_radix(hex, 16).unwrap()).unwrap(),
                            );
                            *i += 4;
                        }
                        _ => fail("bad escape", *i),
                    }
                    *i += 2;
                }
                Some(_) => {
                    let c = line[*i..].chars().next().unwrap();
                    out.push(c);
                    *i += c.len_utf8();
                }
            }
        }
    };
    if b.first() != Some(&b'{') || b.last() != Some(&b'}') {
        fail("not an object", 0);
    }
    i += 1;
    let mut fields = Vec::new();
    loop {
        let key = string(&mut i);
        if b.get(i) != Some(&b':') {
            fail("expected ':'", i);
        }
        i += 1;
        let value = match b.get(i) {
            Some(b'"') => Json::Str(string(&mut i)),
            Some(b't') if line[i..].starts_with("true") => {
                i += 4;
                Json::Bool(true)
            }
            Some(b'f') if line[i..].starts_with("false") => {
                i += 5;
                Json::Bool(false)
            }
            Some(c) if c.is_ascii_digit() || *c == b'-' => {
                let end = i + line[i..]
                    .find(|c: char| c != '-' && !c.is_ascii_digit())
                    .unwrap_or(line.len() - i);
                let n = line[i..end]
                    .parse()
                    .unwrap_or_else(|_| fail("bad number", i));
                i = end;
                Json::Int(n)
            }
            _ => fail("bad value", i),
        };
        fields.push((key, value));
        match b.get(i) {
            Some(b',') => i += 1,
            Some(b'}') if i + 1 == b.len() => return fields,
            _ => fail("expected ',' or the end", i),
        }
    }
}

fn get<'a>(fields: &'a [(String, Json)], key: &str) -> &'a Json {
    &fields
        .iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("no {key} in {fields:?}"))
        .1
}

/// A full reap run: every event parses, carries the common fields in
/// order, with a clock that never goes back, and the events come in the
/// contract's order of events: started, the stop request (signal, stop),
/// the survivors at the deadline, kill, the tree reaped, the cleanup
/// (started, exited, reaped), exit with REAP_CAUSE.
#[test]
fn a_full_reap_run_logs_every_event_in_the_contracts_order() {
    let dir = temp_dir("events-reap");
    let log = dir.join("events.jsonl");
    let mut run = Run::new(bin("reap"))
        .arg(format!("--events={}", log.display()))
        .args(["--grace", "300ms", "--cleanup", "exit 0", "--", "sh", "-c"])
        .arg("trap '' TERM USR1; (echo up; exec sleep 30) & wait")
        .stderr_piped()
        .spawn();
    run.expect_line("up", TIMEOUT);
    run.signal(libc::SIGUSR1);
    run.signal(libc::SIGTERM);
    let status = run.wait_exit(TIMEOUT);
    assert_eq!(status.code(), None, "killed, as COMMAND was: {status:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    let mut last_t = 0;
    let mut names = Vec::new();
    for line in text.lines() {
        let fields = parse_object(line);
        let keys: Vec<&str> = fields.iter().take(5).map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["v", "t", "tool", "pid", "event"], "{line}");
        assert_eq!(get(&fields, "v"), &Json::Int(1), "{line}");
        assert_eq!(get(&fields, "tool"), &Json::Str("reap".into()), "{line}");
        let Json::Int(t) = *get(&fields, "t") else {
            panic!("{line}")
        };
        assert!(t >= last_t, "the clock went back: {text}");
        last_t = t;
        let Json::Str(name) = get(&fields, "event").clone() else {
            panic!("{line}")
        };
        names.push((name, fields));
    }
    let mut order: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
    order.dedup();
    assert_eq!(
        order,
        [
            "started",
            "signal",
            "stop",
            "survivor",
            "kill",
            "reaped",
            "cleanup_started",
            "cleanup_exited",
            "reaped",
            "exit"
        ],
        "{text}"
    );
    let of = |event: &str| -> Vec<&Vec<(String, Json)>> {
        names
            .iter()
            .filter(|(n, _)| n == event)
            .map(|(_, f)| f)
            .collect()
    };
    let signals = of("signal");
    assert_eq!(signals.len(), 2, "{text}");
    assert_eq!(get(signals[0], "action"), &Json::Str("forwarded".into()));
    assert_eq!(get(signals[1], "name"), &Json::Str("TERM".into()));
    assert_eq!(get(signals[1], "action"), &Json::Str("trigger".into()));
    assert_eq!(get(of("stop")[0], "grace_ms"), &Json::Int(300));
    assert_eq!(of("survivor").len(), 2, "the shell and the sleep: {text}");
    for s in of("survivor") {
        assert_eq!(get(s, "reason"), &Json::Str("ignores".into()));
    }
    let exit = of("exit")[0];
    assert_eq!(get(exit, "status"), &Json::Int(137));
    assert_eq!(get(exit, "cause"), &Json::Str("cancel".into()));
    assert_eq!(get(exit, "dropped"), &Json::Int(0));
    assert_eq!(get(of("cleanup_exited")[0], "status"), &Json::Int(0));
}

/// reap's stop delay in the log: the request is logged when it arrives
/// (not again when it is passed on), the one that ends the delay too, and
/// the `stop` follows the second.
#[test]
fn reaps_stop_delay_logs_each_request_once_when_it_arrives() {
    let dir = temp_dir("events-delay");
    let log = dir.join("events.jsonl");
    let mut run = Run::new(bin("reap"))
        .args(["--events"])
        .arg(&log)
        .args(["--stop-delay", "10m", "--"])
        .arg(bin("sigprobe"))
        .spawn();
    let probe = run.expect_ready(TIMEOUT);
    run.signal(libc::SIGTERM);
    // USR1 passes on during the delay: its line says the TERM was read.
    run.signal(libc::SIGUSR1);
    run.expect_line(&format!("got USR1 pid={}", probe.pid), TIMEOUT);
    run.signal(libc::SIGINT);
    run.expect_line(&format!("got TERM pid={}", probe.pid), TIMEOUT);
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    let text = std::fs::read_to_string(&log).unwrap();
    let signals: Vec<(String, String)> = text
        .lines()
        .map(parse_object)
        .filter(|f| get(f, "event") == &Json::Str("signal".into()))
        .map(|f| match (get(&f, "name"), get(&f, "action")) {
            (Json::Str(n), Json::Str(a)) => (n.clone(), a.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    // TERM and USR1 may be read together: the kernel hands out pending
    // standard signals lowest first.
    let pair = |n: &str, a: &str| (n.to_string(), a.to_string());
    assert_eq!(signals.len(), 3, "{text}");
    let mut first = signals[..2].to_vec();
    first.sort();
    assert_eq!(
        first,
        [pair("TERM", "trigger"), pair("USR1", "forwarded")],
        "{text}"
    );
    assert_eq!(signals[2], pair("INT", "trigger"), "{text}");
    let order: Vec<String> = text
        .lines()
        .map(|l| match get(&parse_object(l), "event") {
            Json::Str(e) => e.clone(),
            _ => unreachable!(),
        })
        .collect();
    let stop = order
        .iter()
        .position(|e| e == "stop")
        .expect("a stop event");
    assert_eq!(order[stop - 1], "signal", "{text}");
}

/// For the programs that read the log: every event that carries a signal
/// carries its number and its name (`signal`/`name`, `as`/`as_name`); a
/// field with no value is left out (no `"group":0` for reap's leftovers);
/// `started` has `wall`, the wall-clock time in RFC 3339 with nanoseconds.
#[test]
fn signals_have_names_empty_fields_are_left_out_and_started_has_wall() {
    let dir = temp_dir("events-fields");
    let mut texts = Vec::new();
    let runs: [&[&str]; 3] = [
        &["graceful", "--grace", "300ms", "--"],
        &["reap", "--grace", "300ms", "--"],
        &["pgwrap", "--map", "USR1:USR2", "--"],
    ];
    for (i, argv) in runs.iter().enumerate() {
        let log = dir.join(format!("events-{i}.jsonl"));
        let script = match argv[0] {
            // The sleep, left behind by reap's COMMAND, ignores TERM: a
            // stop and a kill of the leftovers.
            "reap" => "trap '' TERM; sleep 30 & echo up",
            "pgwrap" => "trap 'exit 0' USR2; echo up; while :; do sleep 0.1; done",
            _ => "trap '' TERM; echo up; sleep 30",
        };
        let before = std::time::SystemTime::now();
        let mut run = Run::new(bin(argv[0]))
            .arg("--events")
            .arg(&log)
            .args(&argv[1..])
            .args(["sh", "-c", script])
            .stderr_piped()
            .spawn();
        run.expect_line("up", TIMEOUT);
        match argv[0] {
            "graceful" => run.signal(libc::SIGTERM),
            "pgwrap" => run.signal(libc::SIGUSR1),
            _ => {}
        }
        run.wait_exit(TIMEOUT);
        let _ = run.stderr_all();
        let text = std::fs::read_to_string(&log).unwrap();
        let started = text.lines().next().map(parse_object).unwrap();
        let Json::Str(wall) = get(&started, "wall").clone() else {
            panic!("{text}")
        };
        // 2026-12-02T06:10:21.123456789Z
        let b = wall.as_bytes();
        assert!(
            wall.len() == 30
                && b[4] == b'-'
                && b[7] == b'-'
                && b[10] == b'T'
                && b[13] == b':'
                && b[16] == b':'
                && b[19] == b'.'
                && b[29] == b'Z',
            "{wall}"
        );
        let secs = before
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let (days, rest) = (secs / 86_400, secs % 86_400);
        let hour: u64 = wall[11..13].parse().unwrap();
        assert!(
            hour == rest / 3600 || hour == (rest / 3600 + 1) % 24,
            "{wall}: not now ({days} days, {rest} s)"
        );
        texts.push(text);
    }
    let all = texts.join("");
    let mut saw = Vec::new();
    for line in all.lines() {
        let fields = parse_object(line);
        let event = get(&fields, "event").clone();
        for (num, name) in [("signal", "name"), ("as", "as_name")] {
            if let Some((_, Json::Int(n))) = fields.iter().find(|(k, _)| k == num) {
                let named = fields.iter().find(|(k, _)| k == name);
                assert!(named.is_some(), "{num}={n} without {name}: {line}");
                saw.push(format!("{event:?}/{num}"));
            }
        }
        assert!(!line.contains("\"group\":0"), "{line}");
    }
    for want in ["stop", "kill", "signal"] {
        assert!(
            saw.iter().any(|s| s.contains(&format!("\"{want}\""))),
            "no {want} event with a signal: {all}"
        );
    }
    assert!(
        saw.iter().any(|s| s.ends_with("/as")),
        "no mapped signal: {all}"
    );
}
