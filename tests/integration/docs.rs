//! The documentation matches the parsers: every long option in a tool's
//! `--help` is in its man page, and the man page's OPTIONS section names no
//! option the tool does not have.

/// The chains the documentation shows, run.
mod chains;

use crate::kit::{bin, Run, TIMEOUT};
use std::collections::BTreeSet;
use std::path::Path;

/// Every `--long-option` in `text`.
fn long_options(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(pos) = text[i..].find("--") {
        let start = i + pos + 2;
        let mut end = start;
        while end < bytes.len() && (bytes[end].is_ascii_lowercase() || bytes[end] == b'-') {
            end += 1;
        }
        if end > start && bytes[start] != b'-' {
            out.insert(format!("--{}", &text[start..end]));
        }
        i = end.max(start);
    }
    out
}

fn help(tool: &str) -> String {
    let mut run = Run::new(bin(tool)).arg("--help").spawn();
    let text = run.expect_eof(TIMEOUT).join("\n");
    assert_eq!(run.wait_exit(TIMEOUT).code(), Some(0));
    text
}

/// The man page with roff's `\-` turned back into `-`.
fn man(tool: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("packaging/man/{tool}.1"));
    std::fs::read_to_string(&path).unwrap().replace("\\-", "-")
}

/// The text between `.SH OPTIONS` and the next `.SH`.
fn options_section(page: &str) -> &str {
    let start = page.find(".SH OPTIONS").expect("an OPTIONS section");
    let rest = &page[start + 11..];
    &rest[..rest.find("\n.SH ").unwrap_or(rest.len())]
}

pub fn check_tool(tool: &str) {
    let help = help(tool);
    let page = man(tool);
    let in_help = long_options(&help);
    assert!(
        in_help.len() >= 5,
        "{tool}: --help lists too few options: {in_help:?}"
    );
    for opt in &in_help {
        assert!(
            page.contains(opt.as_str()),
            "{tool}: {opt} is in --help but not in {tool}.1"
        );
    }
    for opt in long_options(options_section(&page)) {
        assert!(
            in_help.contains(&opt),
            "{tool}.1 documents {opt}, which {tool} --help lacks"
        );
    }
    for section in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "OPTIONS",
        "EXIT STATUS",
        "SIGNALS",
        "TERMINAL",
        "EXAMPLES",
    ] {
        assert!(
            page.contains(&format!(".SH {section}")),
            "{tool}.1 has no {section} section"
        );
    }
    // TERMINAL comes right after SIGNALS; its table is checked against the
    // behaviour by terminal/matrix.rs.
    let after_signals = &page[page.find(".SH SIGNALS").unwrap() + 4..];
    assert!(
        after_signals[after_signals.find("\n.SH ").unwrap()..].starts_with("\n.SH TERMINAL"),
        "{tool}.1: TERMINAL does not follow SIGNALS"
    );
    // The table is a tbl(1) one: man runs tbl only when told on line one.
    assert!(
        page.starts_with("'\\\" t\n"),
        "{tool}.1 does not start with the tbl preprocessor line"
    );
}

#[test]
fn pgwrap_help_and_man_page_agree() {
    check_tool("pgwrap");
}

/// `--help` fits a terminal of 80 columns: no line longer than 79.
#[test]
fn help_is_wrapped_at_79_columns() {
    for tool in ["pgwrap", "graceful", "reap"] {
        let long: Vec<String> = help(tool)
            .lines()
            .filter(|l| l.chars().count() > 79)
            .map(|l| format!("{} columns: {l}", l.chars().count()))
            .collect();
        assert!(long.is_empty(), "{tool} --help:\n{}", long.join("\n"));
    }
}
