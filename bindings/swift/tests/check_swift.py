#!/usr/bin/env python3
"""Checks the Swift binding of polylock without a Swift compiler.

1. uniffi-bindgen (ours, same pinned uniffi as the library) generates polylock.swift,
   polylockFFI.h and polylockFFI.modulemap from target/debug/libpolylock_ffi.so.
2. polylock.swift parses without errors with the tree-sitter Swift grammar (and the check
   does catch a broken copy of it).
3. polylockFFI.h compiles with `gcc -fsyntax-only`.
4. Every function the header declares is exported by the library (`nm -D`).
5. The public API (public/open declarations, protocol requirements and enum cases, nested
   under their type) equals bindings/swift/tests/api.golden.
6. The Swift package (bindings/swift): Package.swift and the hand-written
   Sources/Polylock/Polylock+Idioms.swift parse without errors; the layout Package.swift
   declares exists (target paths, the binary target that build-xcframework.sh makes, the C
   module its module map declares, which is the one the generated Swift imports); and the
   idioms' public API is in bindings/swift/tests/api.golden too (after the generated API).
7. Every ```swift block of README.md and docs/*.md parses, and every method it calls on a value
   (`lock.acquire(waitMs: 5_000)`, `Client.connect(url:)`, `lock.withLock { }`) is a function of
   that name in the public API whose parameters have the labels the call uses (the blocks cannot
   be compiled here; this catches a renamed call or a wrong label). Package manifest lines
   (`.package(...)`) are skipped.

Usage (from anywhere; `make test-swift` builds the library and installs tree-sitter first):
    python3 bindings/swift/tests/check_swift.py                  # check
    python3 bindings/swift/tests/check_swift.py --update-golden  # rewrite api.golden after an API change
Ends with the line `N passed, N failed`; exit status 1 when a check failed.
"""

import argparse
import difflib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent.parent
GOLDEN = HERE / "api.golden"
PACKAGE = ROOT / "bindings" / "swift"
IDIOMS_NAME = "Polylock+Idioms.swift"

# Valid Swift that tree-sitter-swift 0.7.x cannot parse, each replaced (line count kept) by an
# equivalent the grammar knows before parsing. Anything else that fails to parse fails the check.
#  - SE-0367 conditional attributes: `#if swift(>=5.8) @_documentation(visibility: private) #endif`
#    before a declaration. The attribute only hides the declaration from generated docs; the
#    API extraction below skips such declarations, as documentation tools do.
#  - A closure whose body is the empty tuple, `{ () }`, which is the same as `{ Void() }`.
DOC_PRIVATE = re.compile(r"#if swift\(>=5\.8\)\n[ \t]*@_documentation\(visibility: private\)\n#endif")
EMPTY_TUPLE_CLOSURE = "{ () }"

DECLARATIONS = {
    "class_declaration",  # class, struct, enum, extension
    "protocol_declaration",
    "function_declaration",
    "init_declaration",
    "property_declaration",
    "typealias_declaration",
    "protocol_function_declaration",
    "protocol_property_declaration",
    "enum_entry",
}
BODIES = {"class_body", "protocol_body", "enum_class_body", "function_body", "computed_property"}

results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'}: {name}" + (f"\n{detail}" if detail and not ok else ""))
    return ok


def run(*command, cwd=ROOT):
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True)


def neutralize(source):
    """Applies the grammar workarounds; returns the text and the rows of doc-private attributes."""
    doc_private_rows = set()
    for match in DOC_PRIVATE.finditer(source):
        doc_private_rows.add(source.count("\n", 0, match.end()))  # row of the `#endif`
    source = DOC_PRIVATE.sub("\n\n", source)
    source = source.replace(EMPTY_TUPLE_CLOSURE, "{ Void() }")
    return source, doc_private_rows


def parse(source):
    import tree_sitter_swift
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_swift.language())).parse(source.encode())


def syntax_errors(tree, source):
    data = source.encode()
    errors = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            text = data[node.start_byte:node.end_byte].decode(errors="replace")[:80]
            kind = "missing" if node.is_missing else "error"
            errors.append(f"  line {node.start_point.row + 1}: {kind} at {text!r}")
        stack.extend(node.children)
    return sorted(errors)


def is_public(node):
    for child in node.children:
        if child.type == "modifiers":
            return any(
                m.type == "visibility_modifier" and m.text.decode() in ("public", "open")
                for m in child.children
            )
    return False


def signature(node):
    """The declaration up to its body, on one line."""
    end = node.end_byte
    for child in node.children:
        if child.type in BODIES:
            end = child.start_byte
            break
    data = node.text[: end - node.start_byte]
    comments = []
    stack = list(node.children)
    while stack:
        child = stack.pop()
        if child.start_byte >= end:
            continue
        if child.type in ("comment", "multiline_comment"):
            comments.append((child.start_byte - node.start_byte, child.end_byte - node.start_byte))
        else:
            stack.extend(child.children)
    for start, stop in sorted(comments, reverse=True):
        data = data[:start] + b" " + data[stop:]
    text = " ".join(data.decode().split())
    text = re.sub(r"\)(?=[A-Za-z])", ") ", text)  # uniffi writes `)async throws`
    return text.replace("( ", "(")


def is_extension(node):
    return any(child.type == "extension" or child.text == b"extension" for child in node.children[:3])


def public_api(tree, doc_private_rows):
    lines = []

    def visit(node, depth, inside_public_type):
        for child in node.children:
            if child.type not in DECLARATIONS:
                visit(child, depth, inside_public_type)
                continue
            if child.start_point.row - 1 in doc_private_rows:
                continue
            if child.type == "class_declaration" and not is_public(child) and is_extension(child):
                # `extension T { public func ... }`: listed when it adds public members.
                start = len(lines)
                visit(child, depth + 1, False)
                if len(lines) > start:
                    lines.insert(start, "    " * depth + signature(child))
                continue
            # Protocol requirements and enum cases have no modifiers: their type's visibility counts.
            implied = child.type.startswith("protocol_") or child.type == "enum_entry"
            if not (is_public(child) or (implied and inside_public_type)):
                continue
            lines.append("    " * depth + signature(child))
            visit(child, depth + 1, True)

    visit(tree.root_node, 0, False)
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--update-golden", action="store_true", help="rewrite bindings/swift/tests/api.golden")
    parser.add_argument("--target-dir", default=str(ROOT / "target"), help="cargo's target directory")
    args = parser.parse_args()

    target = Path(args.target_dir)
    library = target / "debug" / "libpolylock_ffi.so"
    bindgen = target / "debug" / "uniffi-bindgen"
    for needed in (library, bindgen):
        if not needed.exists():
            sys.exit(f"{needed} is missing: run `cargo build -p polylock-ffi -p uniffi-bindgen` (make build-uniffi)")

    out = target / "uniffi-swift"
    generated = run(str(bindgen), "generate", "--library", str(library), "--language", "swift",
                    "--no-format", "--out-dir", str(out))
    swift_file, header, modulemap = out / "polylock.swift", out / "polylockFFI.h", out / "polylockFFI.modulemap"
    if not check("uniffi-bindgen generates the Swift binding",
                 generated.returncode == 0 and swift_file.exists() and header.exists() and modulemap.exists(),
                 generated.stdout + generated.stderr):
        return finish()

    # 2. Syntax.
    source, doc_private_rows = neutralize(swift_file.read_text())
    tree = parse(source)
    errors = syntax_errors(tree, source)
    check(f"polylock.swift parses with tree-sitter-swift ({len(source.splitlines())} lines)",
          not errors, "\n".join(errors[:20]))
    broken = source.replace("open class Lock:", "open class Lock(:", 1)
    check("the parse check catches a syntax error in a broken copy", bool(syntax_errors(parse(broken), broken)))

    # 3. Header.
    with tempfile.TemporaryDirectory() as scratch:
        including = Path(scratch) / "include_header.c"
        including.write_text('#include "polylockFFI.h"\n')
        aux_info = Path(scratch) / "prototypes.txt"
        # The header uses Clang's nullability qualifiers (Swift imports it through Clang);
        # they are annotations only, so gcc gets them defined away.
        compiled = run("gcc", "-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
                       "-D_Nonnull=", "-D_Nullable=", "-fsyntax-only", "-aux-info", str(aux_info),
                       "-I", str(out), str(including))
        check("polylockFFI.h compiles with gcc -fsyntax-only", compiled.returncode == 0,
              compiled.stdout + compiled.stderr)
        prototypes = aux_info.read_text() if aux_info.exists() else ""

    # 4. Exports. gcc -aux-info lists every function prototype with the file it came from.
    declared = sorted(set(re.findall(r"polylockFFI\.h:\d+:\w+ \*/ .*?\b(\w+) \(", prototypes)))
    symbols = run("nm", "-D", "--defined-only", str(library))
    exported = {parts[2] for parts in (line.split() for line in symbols.stdout.splitlines())
                if len(parts) == 3 and parts[1] == "T"}
    missing = [name for name in declared if name not in exported]
    check(f"all {len(declared)} functions declared by the header are exported by libpolylock_ffi.so",
          symbols.returncode == 0 and len(declared) >= 20 and not missing,
          f"declared: {len(declared)}; not exported: {missing}\n{symbols.stderr}")

    # 6. The Swift package: syntax, layout, module names.
    idioms_api = check_package(out, swift_file.read_text())

    # 5. Public API against the golden file (the generated API, then the idioms').
    api = public_api(tree, doc_private_rows)
    if idioms_api is not None:
        api += [f"// {IDIOMS_NAME}"] + idioms_api
    text = "\n".join(api) + "\n"
    if args.update_golden:
        GOLDEN.write_text(text)
        print(f"wrote {GOLDEN} ({len(api)} lines)")
    golden = GOLDEN.read_text() if GOLDEN.exists() else ""
    diff = "".join(difflib.unified_diff(golden.splitlines(True), text.splitlines(True),
                                        "bindings/swift/tests/api.golden", "generated polylock.swift"))
    check(f"the public Swift API ({len(api)} declarations) matches bindings/swift/tests/api.golden", text == golden,
          diff + "\nIf the change is intended: python3 bindings/swift/tests/check_swift.py --update-golden")

    # 7. The docs' Swift examples against that API.
    check_docs_blocks(api)
    return finish()


def script_names(script):
    """The NAME=value settings of build-xcframework.sh."""
    return dict(re.findall(r"^([A-Z_]+)=([\w./+-]+)$", script, re.MULTILINE))


def check_package(generated, generated_swift):
    """Checks bindings/swift; returns the idioms' public API (None when they do not parse)."""
    manifest_path, script_path = PACKAGE / "Package.swift", PACKAGE / "build-xcframework.sh"
    manifest = manifest_path.read_text()
    errors = syntax_errors(parse(manifest), manifest)
    check("bindings/swift/Package.swift parses with tree-sitter-swift", not errors, "\n".join(errors[:20]))

    binaries = re.findall(r'\.binaryTarget\(\s*name:\s*"([^"]+)",\s*path:\s*"([^"]+)"\s*\)', manifest)
    targets = re.findall(r'\.target\(\s*name:\s*"([^"]+)",\s*dependencies:\s*\[([^\]]*)\],\s*path:\s*"([^"]+)"',
                         manifest)
    products = re.findall(r'\.library\(\s*name:\s*"([^"]+)",\s*targets:\s*\[([^\]]*)\]', manifest)
    if not check("Package.swift declares one binary target, one Swift target and a library of it",
                 len(binaries) == 1 and len(targets) == 1 and len(products) == 1,
                 f"binary targets {binaries}, targets {targets}, products {products}"):
        return None
    (binary_name, binary_path), (target_name, dependencies, target_path) = binaries[0], targets[0]
    product_targets = re.findall(r'"([^"]+)"', products[0][1])
    check("the library product is the Swift target, which depends on the binary target",
          product_targets == [target_name] and f'"{binary_name}"' in dependencies,
          f"product targets {product_targets}, dependencies {dependencies}")

    syntax = run("bash", "-n", str(script_path))
    check("build-xcframework.sh passes bash -n", syntax.returncode == 0, syntax.stderr)
    names = script_names(script_path.read_text())
    check("build-xcframework.sh makes the XCFramework and sources directory Package.swift declares",
          names.get("XCFRAMEWORK") == binary_path and names.get("SOURCES") == target_path
          and binary_path == f"{binary_name}.xcframework",
          f"script {names}; Package.swift binary {binary_name} at {binary_path}, sources at {target_path}")
    sources = PACKAGE / target_path
    idioms = sources / IDIOMS_NAME
    check(f"the Swift target's directory {target_path} exists with {IDIOMS_NAME}", idioms.is_file())

    # The C module: the module map's name and header, the generated Swift's import, the script.
    modulemap = (generated / "polylockFFI.modulemap").read_text()
    module = re.search(r"^module\s+(\w+)\s*\{", modulemap, re.MULTILINE)
    header = re.search(r'header\s+"([^"]+)"', modulemap)
    module_name = module.group(1) if module else None
    imported = set(re.findall(r"^\s*import\s+(\w+FFI)\s*$", generated_swift, re.MULTILINE))
    check("the module map's module is the one the generated Swift imports and the script packs",
          module_name is not None and header is not None and header.group(1) == f"{module_name}.h"
          and imported == {module_name} and names.get("FFI_MODULE") == module_name
          and (generated / header.group(1)).is_file(),
          f"module {module_name}, header {header and header.group(1)}, imports {imported}, script {names}")

    if not idioms.is_file():
        return None
    source = idioms.read_text()
    tree = parse(source)
    errors = syntax_errors(tree, source)
    if not check(f"{IDIOMS_NAME} parses with tree-sitter-swift ({len(source.splitlines())} lines)",
                 not errors, "\n".join(errors[:20])):
        return None
    broken = source.replace("extension Lock {", "extension Lock {{", 1)
    check(f"the parse check catches a syntax error in a broken copy of {IDIOMS_NAME}",
          broken != source and bool(syntax_errors(parse(broken), broken)))
    return public_api(tree, set())


def docs_swift_blocks():
    """The ```swift blocks of README.md and docs/*.md as (where, code), manifest lines left out."""
    blocks = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lines = page.read_text().splitlines()
        index = 0
        while index < len(lines):
            info = lines[index].strip()
            index += 1
            if not info.startswith("```"):
                continue
            start = index
            while index < len(lines) and lines[index].strip() != "```":
                index += 1
            code = "\n".join(lines[start:index]) + "\n"
            index += 1
            if info[3:].split(",")[0].strip() == "swift" and not code.lstrip().startswith(".package("):
                blocks.append((f"{page.relative_to(ROOT)}:{start + 1}", code))
    return blocks


def api_functions(api):
    """Each function name of the public API with the label sets of its declarations."""
    functions = {}
    for line in api:
        declared = re.search(r"\bfunc (\w+)(?:<[^>]*>)?\((.*)\)", line)
        if declared:
            labels = set(re.findall(r"(?:^|, )(\w+)(?: \w+)?:", declared.group(2)))
            functions.setdefault(declared.group(1), []).append(labels)
    return functions


def method_calls(tree, source):
    """The calls `x.name(label: ...)` and `x.name { }` of a parsed block: (row, name, labels)."""
    data = source.encode()

    def text(node):
        return data[node.start_byte:node.end_byte].decode()

    calls, stack = [], [tree.root_node]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type != "call_expression" or node.child_count < 2:
            continue
        callee, suffix = node.children[0], node.children[1]
        # `x.name`; an implicit member (`.seconds(5)`) has no receiver and is not polylock's.
        if callee.type != "navigation_expression" or callee.children[0].type == "navigation_suffix":
            continue
        name = text(callee.children[-1]).lstrip(".")
        labels = set()
        for arguments in (child for child in suffix.children if child.type == "value_arguments"):
            for argument in (child for child in arguments.children if child.type == "value_argument"):
                label = next((child for child in argument.children if child.type == "value_argument_label"), None)
                if label is not None:
                    labels.add(text(label))
        calls.append((node.start_point.row, name, labels))
    return sorted(calls)


def unknown_calls(code, functions):
    """The calls of a block that no function of the API accepts (name and labels)."""
    source, _ = neutralize(code)
    tree = parse(source)
    errors = syntax_errors(tree, source)
    if errors:
        return [f"does not parse: {errors[0].strip()}"]
    unknown = []
    for row, name, labels in method_calls(tree, source):
        if not any(labels <= declared for declared in functions.get(name, [])):
            unknown.append(f"line {row + 1}: {name}({', '.join(sorted(labels))})")
    return unknown


def check_docs_blocks(api):
    functions = api_functions(api)
    blocks = docs_swift_blocks()
    failures = []
    for where, code in blocks:
        failures += [f"  {where}: {problem}" for problem in unknown_calls(code, functions)]
    check(f"the {len(blocks)} Swift blocks of the docs parse and call only the public API",
          len(blocks) >= 5 and not failures, f"{len(blocks)} blocks\n" + "\n".join(failures))
    renamed = "let lock = try client.lock(name: \"x\")\n_ = try await lock.acquireOnce(waitMs: 0)\n"
    mislabelled = "let lock = try client.lock(name: \"x\")\n_ = try await lock.acquire(wait_ms: 0)\n"
    check("the docs check catches a renamed call and a wrong label",
          bool(unknown_calls(renamed, functions)) and bool(unknown_calls(mislabelled, functions))
          and not unknown_calls("let lock = try client.lock(name: \"x\")\n", functions))


def finish():
    passed = sum(results)
    failed = len(results) - passed
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
