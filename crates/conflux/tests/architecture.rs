//! The layering of docs/ARCHITECTURE.md, checked on the sources: no import circle between the
//! library's top-level modules, no upward import from the problem types, the backends or the
//! solvers, no source file over 600 lines, no comment naming a work session.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 600;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs" || e == "cu" || e == "cuh") {
            out.push(path);
        }
    }
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Top-level module of a source file (`src/solver/cuda/x.rs` → `solver`; `src/lib.rs` → None).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (name != "lib").then_some(name)
}

/// Code without `//` comments and string literals (so paths in docs or messages don't count).
fn code_only(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut in_str = false;
        let mut prev = ' ';
        let mut kept = String::new();
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if !in_str && c == '/' && chars.get(i + 1) == Some(&'/') {
                break;
            }
            if c == '"' && prev != '\\' {
                in_str = !in_str;
            } else if !in_str {
                kept.push(c);
            }
            prev = if prev == '\\' && c == '\\' { ' ' } else { c };
            i += 1;
        }
        out.push_str(&kept);
        out.push('\n');
    }
    out
}

/// Module → the other top-level modules its files name as `crate::module`.
fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(&src, f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "rs")) {
        let Some(from) = module_of(&src, f) else { continue };
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        for (i, _) in code.match_indices("crate::") {
            let name: String = code[i + 7..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if name != from && modules.contains(&name) {
                graph.get_mut(&from).unwrap().insert(name);
            }
        }
    }
    graph
}

#[test]
fn the_import_graph_was_read() {
    // A parser that finds nothing would pass every rule below.
    let g = import_graph();
    assert!(g.len() >= 15, "top-level modules found: {:?}", g.keys());
    assert!(g["solver"].contains("backend") && g["search"].contains("solver") && g["handle"].contains("search"), "{g:#?}");
}

#[test]
fn top_level_modules_form_no_circle() {
    let g = import_graph();
    // Depth-first search for a back edge; report the circle.
    fn visit(m: &str, g: &BTreeMap<String, BTreeSet<String>>, path: &mut Vec<String>, done: &mut BTreeSet<String>) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut circle = path[i..].to_vec();
            circle.push(m.to_string());
            return Some(circle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in &g[m] {
            if let Some(c) = visit(next, g, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for m in g.keys() {
        if let Some(circle) = visit(m, &g, &mut Vec::new(), &mut done) {
            panic!("import circle: {}", circle.join(" → "));
        }
    }
}

#[test]
fn lower_layers_do_not_import_upwards() {
    let g = import_graph();
    let above_solvers = ["search", "handle", "conv", "fusion", "ops", "find2"];
    let forbidden: [(&str, Vec<&str>); 3] = [
        ("problem", [&["backend", "solver"][..], &above_solvers].concat()),
        ("backend", [&["solver"][..], &above_solvers].concat()),
        ("solver", above_solvers.to_vec()),
    ];
    let mut bad = Vec::new();
    for (from, banned) in &forbidden {
        for to in &g[*from] {
            if banned.contains(&to.as_str()) {
                bad.push(format!("{from} → {to}"));
            }
        }
    }
    assert!(bad.is_empty(), "upward imports: {bad:?}");
}

#[test]
fn no_source_file_is_over_600_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for krate in ["conflux", "conflux-capi", "conflux-driver"] {
        rust_files(&root.join(krate).join("src"), &mut files);
    }
    assert!(files.len() > 100, "found only {} source files", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > MAX_LINES).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "files over {MAX_LINES} lines: {long:#?}");
}

#[test]
fn no_comment_names_a_work_session() {
    let ordinals = [
        "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh", "twelfth", "thirteenth",
        "fourteenth", "fifteenth", "sixteenth", "seventeenth", "eighteenth", "nineteenth", "twentieth",
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for krate in ["conflux", "conflux-capi", "conflux-driver"] {
        rust_files(&root.join(krate).join("src"), &mut files);
    }
    let mut hits = Vec::new();
    for f in &files {
        for (i, line) in std::fs::read_to_string(f).unwrap().lines().enumerate() {
            let Some(at) = line.find("//") else { continue };
            let comment = line[at..].to_ascii_lowercase();
            let words: Vec<&str> = comment.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
            let named = words.windows(2).any(|w| {
                (w[1] == "session" && (ordinals.contains(&w[0]) || w[0].trim_end_matches(|c: char| c.is_ascii_alphabetic()).parse::<u32>().is_ok()))
                    || ((w[0] == "session" || w[0] == "stop") && w[1].parse::<u32>().is_ok())
            });
            if named {
                hits.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(hits.is_empty(), "comments naming a work session: {hits:#?}");
}
