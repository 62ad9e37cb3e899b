//! What every argument target shares: raw bytes to an argument vector, and
//! the one rule for every refusal.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

/// Split the input at NUL bytes into arguments (an argument never holds a
/// NUL); anything else, UTF-8 or not, is kept as it is.
pub fn args(data: &[u8]) -> Vec<OsString> {
    if data.is_empty() {
        return Vec::new();
    }
    data.split(|&b| b == 0)
        .map(|a| OsString::from_vec(a.to_vec()))
        .collect()
}

/// A refusal is status 125 and one line, as printed.
pub fn check(e: &pgkit::Error) {
    assert_eq!(e.code, 125, "{}", e.msg);
    assert!(!e.msg.is_empty());
    assert!(one_line(&e.msg), "more than one line: {:?}", e.msg);
}

/// What the tool prints of `msg` holds no line break.
pub fn one_line(msg: &str) -> bool {
    !pgkit::log::one_line(msg).contains(['\n', '\r'])
}
