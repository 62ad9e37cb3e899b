//! `Timeout::parse`: no panic, no overflow; a refusal is one line; `inf`
//! only from `inf`/`infinity`; a duration parsed prints without a panic.
#![no_main]

#[path = "common.rs"]
#[allow(dead_code)]
mod common;

use libfuzzer_sys::fuzz_target;
use pgkit::Timeout;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Timeout::parse(text) {
        Ok(Timeout::After(d)) => {
            // Printing must not panic either.
            let _ = Timeout::After(d).to_string();
        }
        Ok(Timeout::Never) => {
            assert!(text.eq_ignore_ascii_case("inf") || text.eq_ignore_ascii_case("infinity"))
        }
        Err(msg) => assert!(common::one_line(&msg), "{msg:?}"),
    }
});
