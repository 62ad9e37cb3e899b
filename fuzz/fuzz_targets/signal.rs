//! `Signal::parse` and `Signal::parse_list`: no panic; a refusal is one
//! line; a signal parsed prints as a name that parses back to it.
#![no_main]

#[path = "common.rs"]
#[allow(dead_code)]
mod common;

use libfuzzer_sys::fuzz_target;
use pgkit::Signal;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Signal::parse(text) {
        Ok(sig) => {
            let name = sig.to_string();
            assert!(!name.starts_with("SIG"), "{name}");
            assert_eq!(Signal::parse(&name), Ok(sig), "{text:?} -> {name}");
        }
        Err(msg) => assert!(common::one_line(&msg), "{msg:?}"),
    }
    if let Err(msg) = Signal::parse_list(text) {
        assert!(common::one_line(&msg), "{msg:?}");
    }
});
