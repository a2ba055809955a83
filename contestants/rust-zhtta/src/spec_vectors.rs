//! The spec's own test vectors (spec/vectors/, shared by every contestant's tests), read
//! into this binary's unit tests at compile time. Every string of theirs stands for bytes,
//! one character a byte.

use serde_json::Value;

/// spec/vectors/syslog.json: parsed and malformed messages, framed streams.
pub fn syslog() -> Value {
    let text = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../spec/vectors/syslog.json"
    ));
    serde_json::from_str(text).expect("spec/vectors/syslog.json is JSON")
}

/// The bytes a vector's string stands for.
pub fn latin1(text: &str) -> Vec<u8> {
    text.chars().map(|c| c as u32 as u8).collect()
}

/// A vector's string for bytes (the inverse of `latin1`).
pub fn text(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| b as char).collect()
}

/// The entries of a vector list, with the name and string fields they hold.
pub fn entries<'a>(vectors: &'a Value, list: &str) -> &'a Vec<Value> {
    vectors[list].as_array().expect("a list of vectors")
}

/// A string field of a vector.
pub fn string<'a>(vector: &'a Value, field: &str) -> &'a str {
    vector[field].as_str().expect("a string field")
}
