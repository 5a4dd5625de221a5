//! Every Markdown page with a ```rust block is compiled as doc tests by `src/lib.rs`: a page
//! added (or given its first Rust example) without being included there would go untested.

use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The pages users read: the READMEs and `docs/`.
fn pages() -> Vec<PathBuf> {
    let root = repo_root();
    let mut pages = vec![root.join("README.md"), root.join("core/README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/ is readable") {
        let path = entry.expect("a docs/ entry").path();
        if path.extension().is_some_and(|extension| extension == "md") {
            pages.push(path);
        }
    }
    pages.sort();
    pages
}

fn has_rust_block(text: &str) -> bool {
    text.lines()
        .any(|line| line.trim_start().starts_with("```rust"))
}

#[test]
fn every_page_with_rust_examples_is_a_doc_test() {
    let root = repo_root();
    let lib = std::fs::read_to_string(root.join("core/src/lib.rs")).expect("lib.rs is readable");
    let mut missing = Vec::new();
    let mut included = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("the page is readable");
        if !has_rust_block(&text) {
            continue;
        }
        let relative = page.strip_prefix(&root).expect("under the repository");
        // lib.rs is core/src/lib.rs: core/README.md is "../README.md", the others "../../<path>".
        let from_lib = if relative == Path::new("core/README.md") {
            "../README.md".to_string()
        } else {
            format!("../../{}", relative.display())
        };
        if lib.contains(&format!("#[doc = include_str!(\"{from_lib}\")]")) {
            included += 1;
        } else {
            missing.push(relative.display().to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "pages with ```rust blocks that core/src/lib.rs does not include as doc tests: {missing:?}"
    );
    // README.md, docs/rust.md, docs/redisson.md and core/README.md have Rust examples today.
    assert!(
        included >= 4,
        "only {included} pages with Rust examples found"
    );
}
