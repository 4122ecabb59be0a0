//! The functions our headers declare, for the tests that compare them with MIOpen's list and
//! with the library's exports.

use std::path::Path;

/// Every name declared with MIOPEN_EXPORT in `include/miopen/miopen*.h`, in file order.
pub fn declared_functions() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/miopen");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut names = Vec::new();
    for path in files {
        // export.h and config.h hold macros, not declarations.
        if !path.file_name().unwrap().to_string_lossy().starts_with("miopen") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for decl in text.split("MIOPEN_EXPORT").skip(1) {
            let Some(open) = decl.find('(') else { continue };
            if let Some(name) = decl[..open].split(|c: char| !(c.is_alphanumeric() || c == '_')).rfind(|s| !s.is_empty()) {
                names.push(name.to_string());
            }
        }
    }
    names
}
