//! pgwrap's command line, as the binary parses it: any argument vector
//! gives a configuration, help, version, or a one-line refusal (125).
#![no_main]

#[path = "common.rs"]
mod common;
#[allow(dead_code)]
#[path = "../../crates/pgwrap/config.rs"]
mod config;

use libfuzzer_sys::fuzz_target;
use pgkit::cli::Parsed;

fuzz_target!(|data: &[u8]| {
    pgkit::log::set_tool("pgwrap");
    match config::parse(common::args(data)) {
        Ok(Parsed::Run(c)) => assert!(!c.command.is_empty()),
        Ok(Parsed::Help(text)) => assert!(text.starts_with("Usage: pgwrap ")),
        Ok(Parsed::Version) => {}
        Err(e) => common::check(&e),
    }
});
