//! Where output goes: MIOpen-style text lines on stdout, or, with `--json`, the lines on stderr
//! and one JSON document on stdout at the end (so stdout stays parseable).

use serde_json::{Map, Value};
use std::cell::RefCell;

pub struct Report {
    json: bool,
    doc: RefCell<Map<String, Value>>,
}

impl Report {
    pub fn new(json: bool) -> Report {
        Report { json, doc: RefCell::new(Map::new()) }
    }

    /// One text line (MIOpen's format).
    pub fn line(&self, s: impl std::fmt::Display) {
        if self.json {
            eprintln!("{s}");
        } else {
            println!("{s}");
        }
    }

    pub fn set(&self, key: &str, v: Value) {
        self.doc.borrow_mut().insert(key.to_string(), v);
    }

    /// Append `v` to the array under `key` (created on first use).
    pub fn push(&self, key: &str, v: Value) {
        let mut doc = self.doc.borrow_mut();
        let e = doc.entry(key.to_string()).or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(a) = e {
            a.push(v);
        }
    }

    /// Print the JSON document (only in `--json` mode).
    pub fn finish(&self, ok: bool) {
        if self.json {
            let mut doc = self.doc.take();
            doc.insert("ok".into(), Value::Bool(ok));
            println!("{}", serde_json::to_string_pretty(&Value::Object(doc)).expect("JSON of plain values"));
        }
    }
}
