#!/usr/bin/env python3
"""Fails when a file of the core imports a module of a higher layer, or files of one layer
import each other in a circle.

The layer order is read from ONE place: the table between the `layers:begin` and
`layers:end` markers in docs/architecture.md (bottom layer first, one layer per row, its files
as paths under core/src: `dir/*` for every file below a directory as one unit, `dir/**` for
every file below a directory, each of its modules a unit of its own). An import is any
`crate::`, `super::` or child-module path in the code (comments and string literals are not
read). Prints each offending import as `core/src/<file>:<line>: ...` and exits 1.

`python3 tests/layers.py --graph` prints every arrow between files instead.
"""
import fnmatch
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCE = ROOT / "core" / "src"
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- layers:begin -->", "<!-- layers:end -->"


def parse_layers(text):
    """The layers of the table between the markers, bottom first: [(name, [pattern, ...])].

    A row is `| name | pattern pattern ... |`; patterns are in backticks. The header row and
    the separator row are skipped.
    """
    if BEGIN not in text or END not in text:
        raise ValueError(f"the layer table's markers {BEGIN} / {END} are missing")
    table = text.split(BEGIN, 1)[1].split(END, 1)[0]
    layers = []
    rows = [line for line in table.splitlines() if line.strip().startswith("|")]
    separator = next((i for i, row in enumerate(rows) if set(row) <= set("|-: ")), None)
    if separator is None:
        raise ValueError("the layer table has no header separator row (|---|---|)")
    for row in rows[separator + 1:]:
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        patterns = re.findall(r"`([^`]+)`", cells[1]) if len(cells) > 1 else []
        if not patterns:
            raise ValueError(f"a layer row without files in backticks: {row.strip()}")
        layers.append((cells[0].strip("*` "), patterns))
    if not layers:
        raise ValueError("the layer table has no rows")
    return layers


RAW_STRING = re.compile(r'(b?r(#*)")')
IDENTIFIER_CHAR = re.compile(r"\w")


def strip_code(text):
    """`text` with comments and string/char literals blanked (newlines kept, so line numbers
    stay), so that only code is scanned."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif RAW_STRING.match(text, i) and not (i and IDENTIFIER_CHAR.match(text[i - 1])):
            opening = RAW_STRING.match(text, i)
            closing = '"' + opening.group(2)
            j = text.find(closing, i + len(opening.group(1)))
            j = n if j < 0 else j + len(closing)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}'); otherwise a lifetime, left as it is.
            literal = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'\n])'", text[i:i + 12])
            if literal:
                out.append(" " * len(literal.group(0)))
                i += len(literal.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def module_of(path):
    """The module path of a file under core/src: `engine/mod.rs` -> ['engine']."""
    parts = list(pathlib.PurePosixPath(path).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts.pop()
    return parts


def expand_use(tree):
    """The paths of a `use` tree without its `use` and `;`: `a::{b, c::{d}}` -> a::b, a::c::d."""
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"\bas\w+$", "", tree)] if tree else []
    prefix, inner = tree[:brace], tree[brace + 1:tree.rfind("}")]
    parts, depth, start = [], 0, 0
    for i, c in enumerate(inner):
        depth += c == "{"
        depth -= c == "}"
        if c == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return [prefix + path for part in parts if part for path in expand_use(part)]


PATH = re.compile(r"(?<![\w:])(\$?crate|super|self)((?:::\w+)+)")
USE = re.compile(r"\buse\s+([^;]+);", re.S)
INLINE_MOD = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*\{\s*$")
CHILD_MOD = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", re.M)


def imports(relative, text):
    """The module paths `relative` (a file under core/src) names, as [(line, [segment, ...])],
    made absolute from the crate root (possibly ending in an item's name)."""
    code = strip_code(text)
    here = module_of(relative)
    children = set(CHILD_MOD.findall(code))
    lines = code.split("\n")
    # Inline modules (rustfmt closes each with a `}` at its own indentation): `super::` inside
    # one names the file's own module.
    # A file's unit tests (`mod tests`) may use the crate from its top: they are not counted.
    depth_at = [0] * (len(lines) + 1)
    in_tests = [False] * (len(lines) + 1)
    open_blocks = []
    for number, line in enumerate(lines, 1):
        if open_blocks and line == open_blocks[-1][0] + "}":
            open_blocks.pop()
        depth_at[number] = len(open_blocks)
        in_tests[number] = any(name == "tests" for _, name in open_blocks)
        opened = INLINE_MOD.match(line)
        if opened:
            open_blocks.append((opened.group(1), opened.group(2)))
    found = []

    def add(number, path):
        if in_tests[number]:
            return
        segments = path.split("::")
        base = list(here) + [None] * depth_at[number]
        head = segments[0]
        if head in ("crate", "$crate"):
            resolved = segments[1:]
        elif head in ("super", "self"):
            while segments and segments[0] in ("super", "self"):
                if segments.pop(0) == "super":
                    base.pop()
            if None in base:
                return  # inside an inline module: the file's own module
            resolved = base + segments
        elif head in children:
            resolved = list(here) + segments
        else:
            return
        found.append((number, resolved))

    for match in USE.finditer(code):
        number = code.count("\n", 0, match.start()) + 1
        for path in expand_use(match.group(1)):
            add(number, path)
    used = {m.span() for m in USE.finditer(code)}
    for match in PATH.finditer(code):
        if any(start <= match.start() < end for start, end in used):
            continue
        number = code.count("\n", 0, match.start()) + 1
        add(number, match.group(1) + match.group(2))
    return found


def reexports(lib_text):
    """What lib.rs re-exports at the crate root: {name: [module, ...]} (`pub use a::b::C`)."""
    names = {}
    for match in USE.finditer(strip_code(lib_text)):
        for path in expand_use(match.group(1)):
            segments = [s for s in path.split("::") if s not in ("crate", "self")]
            if len(segments) > 1:
                names[segments[-1]] = segments[:-1]
    return names


def file_of(segments, files, roots):
    """The file that defines the longest module prefix of `segments` (an item re-exported by
    lib.rs counts as its module's, a module re-exported by lib.rs as its own file, through
    re-exports of re-exports too), or None (lib.rs's own items)."""
    followed = set()
    while segments and segments[0] in roots and segments[0] not in followed and not any(
        segments[0] + suffix in files for suffix in (".rs", "/mod.rs")
    ):
        followed.add(segments[0])
        segments = roots[segments[0]] + segments
    for length in range(len(segments), 0, -1):
        prefix = "/".join(segments[:length])
        for candidate in (prefix + ".rs", prefix + "/mod.rs"):
            if candidate in files:
                return candidate
    return None


def expand_braces(pattern):
    """`{a,b}.rs` -> [`a.rs`, `b.rs`] (one level)."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if not match:
        return [pattern]
    return [pattern[:match.start()] + choice + pattern[match.end():]
            for choice in match.group(1).split(",")]


def place_of(layers, relative):
    """(layer index, unit) of a file: the first pattern that matches it, bottom layer first.
    A unit is one pattern: a file, or files that may use each other freely (a directory
    module's parent and children, `dir/*`; files listed together, `{a,b}.rs`). A folder of
    separate modules, `dir/**`, matches every file below `dir` too, but each of its modules is a
    unit of its own: a file directly in `dir`, or a subfolder as one directory module
    (`dir/sub/*`)."""
    for index, (_, patterns) in enumerate(layers):
        for pattern in patterns:
            if pattern.endswith("/**"):
                folder = pattern[:-len("/**")]
                if relative.startswith(folder + "/"):
                    module = relative[len(folder) + 1:].split("/")
                    return index, (f"{folder}/{module[0]}/*" if len(module) > 1 else relative)
            elif any(fnmatch.fnmatch(relative, p) for p in expand_braces(pattern)):
                return index, pattern
    return None, None


def find_cycles(edges, nodes):
    """Strongly connected components with more than one file (Tarjan's algorithm)."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(nodes):
        if node not in index:
            visit(node)
    return components


def check(source, layers):
    """The problems found under `source` (a core/src directory), as strings."""
    files = {p.relative_to(source).as_posix(): p for p in source.rglob("*.rs")}
    problems = []
    level, unit = {}, {}
    for relative in sorted(files):
        level[relative], unit[relative] = place_of(layers, relative)
        if level[relative] is None:
            problems.append(f"core/src/{relative}: in no layer of {DOC.relative_to(ROOT)}")
    roots = reexports((source / "lib.rs").read_text())
    arrows = {}  # (from, to) -> first line
    for relative, path in sorted(files.items()):
        for number, segments in imports(relative, path.read_text()):
            target = file_of(segments, files, roots)
            if target is None or target == relative:
                continue
            arrows.setdefault((relative, target), number)
    same_layer = {}  # unit -> units of its layer it imports
    where = {}  # (unit, unit) -> the first import's place
    for (source_file, target), number in sorted(arrows.items()):
        low, high = level[source_file], level[target]
        if low is None or high is None:
            continue
        if high > low:
            problems.append(
                f"core/src/{source_file}:{number}: imports {target} of layer "
                f"'{layers[high][0]}', above its own layer '{layers[low][0]}'"
            )
        elif high == low and unit[source_file] != unit[target]:
            pair = (unit[source_file], unit[target])
            same_layer.setdefault(pair[0], set()).add(pair[1])
            where.setdefault(pair, f"core/src/{source_file}:{number} -> {target}")
    units = {u: level[f] for f, u in unit.items() if u is not None}
    for component in find_cycles(same_layer, units):
        steps = ", ".join(
            where[(a, b)]
            for a in component for b in sorted(same_layer.get(a, ())) if b in component
        )
        problems.append(
            f"a cycle in layer '{layers[units[component[0]]][0]}' between "
            f"{', '.join(component)}: {steps}"
        )
    return problems, arrows


def files_at_the_root(source):
    """The source files directly under `source` but the crate root: each belongs in the folder
    of its layer, so that the tree says what the table says."""
    return sorted(path.name for path in source.iterdir()
                  if path.is_file() and path.suffix in (".rs", ".lua") and path.name != "lib.rs")


def main(arguments):
    layers = parse_layers(DOC.read_text())
    problems, arrows = check(SOURCE, layers)
    problems += [f"core/src/{name}: a file at the root of src; move it into its layer's folder"
                 for name in files_at_the_root(SOURCE)]
    if "--graph" in arguments:
        for (a, b), number in sorted(arrows.items()):
            print(f"{a}:{number} -> {b}")
        return 0
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} layering problem(s); the layer order is in "
              f"{DOC.relative_to(ROOT)}", file=sys.stderr)
        return 1
    print(f"layers: {len(arrows)} imports between core files, all downward "
          f"({len(layers)} layers)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
