#!/usr/bin/env python3
"""Checks that every language has the same public API: tests/parity/api.toml lists each
capability of each class with its name in every language, and this script finds each name in
that language's real API, and fails on any public name a language has that the list lacks.

Where each language's API is read from (each must be built first: `make test-parity` does it):
  rust          `pub fn` in the inherent impls of core/src (the crate's public types)
  python        dir() of the classes of the installed package (python/.venv)
  python_async  the same, for the asyncio classes
  node          the prototypes and statics of the classes node/index.js exports (node/lib/)
  kotlin        the generated interfaces (uniffi) plus the package's hand-written extensions
  swift         bindings/swift/tests/api.golden (checked against the generated and hand-written Swift),
                plus the protocols the hand-written idioms make a type conform to

The [errors] table lists each error kind (the core's ErrorKind) with its name in every language:
the Python exception class, the Node error code, the Kotlin LockException subclass, the Swift
LockError case; each must exist, and a language may have no kind the table lacks.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LANGUAGES = ("rust", "python", "python_async", "node", "kotlin", "swift")


def rust_api(classes: dict[str, str]) -> dict[str, set[str]]:
    """Public methods of each type's inherent impl blocks in core/src, those a macro writes
    into it (`name!(Type)` of a `macro_rules! name` with an `impl $type {` block), and the
    methods of the trait `Hold` for each type that implements it (directly or by such a macro)."""
    api: dict[str, set[str]] = {name: set() for name in classes.values()}
    texts = [path.read_text() for path in sorted((ROOT / "core/src").rglob("*.rs"))]
    hold: set[str] = set()
    macros: dict[str, tuple[set[str], bool]] = {}
    for text in texts:
        trait = re.search(r"^pub trait Hold\b[^{]*\{\n(.*?)^\}", text, re.S | re.M)
        if trait:
            hold = set(re.findall(r"^    fn (\w+)", trait.group(1), re.M))
        for macro in re.finditer(r"^macro_rules! (\w+) \{\n(.*?)^\}", text, re.S | re.M):
            inherent = re.search(r"^(\s+)impl \$\w+ \{\n(.*?)^\1\}", macro.group(2), re.S | re.M)
            fns = set(re.findall(r"^\s+pub (?:async )?fn (\w+)", inherent.group(2), re.M)) if inherent else set()
            macros[macro.group(1)] = (fns, "::Hold for $" in macro.group(2))
    for text in texts:
        for match in re.finditer(r"^impl (\w+) \{\n(.*?)^\}", text, re.S | re.M):
            if match.group(1) in api:
                api[match.group(1)] |= set(
                    re.findall(r"^    pub (?:const )?(?:async )?fn (\w+)", match.group(2), re.M)
                )
        for name, (fns, implements_hold) in macros.items():
            for match in re.finditer(rf"^(?:[\w:]*::)?{name}!\((\w+)\);", text, re.M):
                if match.group(1) in api:
                    api[match.group(1)] |= fns | (hold if implements_hold else set())
        for match in re.finditer(r"^impl (?:[\w:]*::)?Hold for (\w+) \{", text, re.M):
            if match.group(1) in api:
                api[match.group(1)] |= hold
    return api


PY_DUNDERS = ("__enter__", "__exit__", "__aenter__", "__aexit__", "__version__")


def python_api(python: str, classes: dict[str, str]) -> dict[str, set[str]]:
    probe = f"""
import json, polylock
out = {{}}
for name in {sorted(set(classes.values()))!r}:
    if name == "polylock":
        obj = polylock
        names = [n for n in getattr(polylock, "__all__", [])]
        names += [n for n in {PY_DUNDERS!r} if hasattr(obj, n)]
    else:
        obj = getattr(polylock, name)
        names = [n for n in dir(obj) if not n.startswith("_")]
        names += [n for n in {PY_DUNDERS!r} if n in dir(obj)]
    out[name] = names
print(json.dumps(out))
"""
    result = subprocess.run([python, "-c", probe], check=True, capture_output=True, text=True, cwd=ROOT / "python")
    return {name: set(names) for name, names in json.loads(result.stdout).items()}


def node_api(classes: dict[str, str]) -> dict[str, set[str]]:
    probe = f"""
const polylock = require('./node/index.js')
const out = {{}}
for (const name of {json.dumps(sorted(set(classes.values())))}) {{
  const cls = polylock[name]
  if (typeof cls !== 'function') {{ out[name] = null; continue }}
  const names = []
  for (let proto = cls.prototype; proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {{
    names.push(...Object.getOwnPropertyNames(proto).filter(n => n !== 'constructor' && !n.startsWith('_')))
  }}
  for (const n of Object.getOwnPropertyNames(cls)) {{
    if (!['length', 'name', 'prototype'].includes(n) && !n.startsWith('_')) names.push(n)
  }}
  if (Symbol.asyncDispose in cls.prototype) names.push('[Symbol.asyncDispose]')
  out[name] = names
}}
console.log(JSON.stringify(out))
"""
    result = subprocess.run(["node", "-e", probe], check=True, capture_output=True, text=True, cwd=ROOT)
    return {name: set(names or []) for name, names in json.loads(result.stdout).items()}


def kotlin_api(generated: Path, idioms: list[Path], classes: dict[str, str]) -> dict[str, set[str]]:
    text = generated.read_text()
    api: dict[str, set[str]] = {}
    for name in set(classes.values()):
        names: set[str] = set()
        block = re.search(rf"^public interface {name}Interface \{{\n(.*?)^\}}", text, re.S | re.M)
        if block:
            names |= set(re.findall(r"^    (?:suspend )?fun `(\w+)`", block.group(1), re.M))
        # The class runs to the next top-level declaration; its statics are its companion's.
        klass = re.search(rf"^open class {name}\b.*?(?=^(?:open class|public interface|public object|sealed class) )", text, re.S | re.M)
        if klass:
            companion = klass.group(0).partition("companion object {")[2]
            names |= set(re.findall(r"^\s+(?:@Throws\(\w+::class\) )?(?:suspend )?fun `(\w+)`", companion, re.M))
        for path in idioms:
            names |= set(
                re.findall(rf"^(?:public )?(?:inline )?(?:suspend )?fun (?:<[^>]+> )?{name}(?:\.Companion)?\.(\w+)\(", path.read_text(), re.M)
            )
        api[name] = names
    return api


def swift_api(golden: Path, idioms: Path, classes: dict[str, str]) -> dict[str, set[str]]:
    """Members of each type in the golden file, plus those of the protocols the hand-written
    idioms make it conform to (`extension Lock: Held {}` gets the members of `extension Held`)."""
    members: dict[str, set[str]] = {}
    owner: str | None = None
    for line in golden.read_text().splitlines():
        if not line.startswith(" "):
            header = re.match(r"(?:public |open )*(?:protocol|class|struct|enum|extension) (\w+?)(?:Protocol)?\b", line)
            owner = header.group(1) if header else None
            continue
        if owner:
            member = re.match(r"\s+(?:public |open |static |nonisolated )*func (\w+)", line)
            if member:
                members.setdefault(owner, set()).add(member.group(1))
    api: dict[str, set[str]] = {name: set(members.get(name, ())) for name in classes.values()}
    for name, protocol in re.findall(r"^extension (\w+): (\w+) \{\}", idioms.read_text(), re.M):
        if name in api:
            api[name] |= members.get(protocol, set())
    return api


def error_kinds(language: str, python: str, kotlin_generated: Path) -> set[str]:
    """The error kinds a language has: the core's ErrorKind variants, Python's exception classes
    (LockError's subclasses in polylock.__all__), Node's codes (PolylockErrorCode in
    node/index.d.ts), Kotlin's LockException subclasses, Swift's LockError cases."""
    if language == "rust":
        # ErrorKind is declared from the one list in the core's `with_error_kinds!` macro.
        text = (ROOT / "core/src/foundation/error.rs").read_text()
        body = re.search(r"macro_rules! with_error_kinds \{(.*?)\n\}", text, re.S).group(1)
        return set(re.findall(r"^\s*(\w+) => \w+,", body, re.M))
    if language in ("python", "python_async"):
        probe = (
            "import json, polylock; print(json.dumps([n for n in polylock.__all__ "
            "if isinstance(getattr(polylock, n), type) and issubclass(getattr(polylock, n), polylock.LockError) "
            "and n != 'LockError']))"
        )
        out = subprocess.run([python, "-c", probe], check=True, capture_output=True, text=True, cwd=ROOT / "python").stdout
        return set(json.loads(out))
    if language == "node":
        text = (ROOT / "node/index.d.ts").read_text()
        body = re.search(r"export type PolylockErrorCode =(.*?)\n\n", text, re.S).group(1)
        return set(re.findall(r"'(ERR_\w+)'", body))
    if language == "kotlin":
        return set(re.findall(r"class (\w+)\(message: String\) : LockException\(message\)", kotlin_generated.read_text()))
    text = (ROOT / "bindings/swift/tests/api.golden").read_text()
    body = re.search(r"public enum LockError:.*?\n((?:    case .*\n)+)", text).group(1)
    return set(re.findall(r"case (\w+)\(", body))


def compare_errors(table: dict, found: dict[str, set[str]], languages: list[str]) -> list[str]:
    problems: list[str] = []
    for language in languages:
        listed = {kind: cells.get(language) for kind, cells in table["errors"].items()}
        for kind, name in listed.items():
            if name is None:
                problems.append(f"errors.{kind}: no {language} entry in api.toml")
            elif name not in found[language]:
                problems.append(f"{language}: error {name} ({kind}) is missing")
        for name in sorted(found[language] - set(listed.values())):
            problems.append(f"{language}: error {name} is not in the [errors] table of tests/parity/api.toml")
    return problems


def names_of(entry: object) -> list[str]:
    """A table cell: a name, a list of names (all must exist), or "-: why" (not applicable)."""
    if isinstance(entry, list):
        return [str(name) for name in entry]
    text = str(entry)
    return [] if text.startswith("-") else [text]


def compare(table: dict, found: dict[str, dict[str, set[str]]], languages: list[str]) -> list[str]:
    problems: list[str] = []
    for language in languages:
        for cls, spec in table["classes"].items():
            type_name = spec["types"].get(language, "-")
            if type_name == "-":
                continue
            listed: set[str] = set()
            for capability, cells in spec["api"].items():
                if language not in cells:
                    problems.append(f"{cls}.{capability}: no {language} entry in api.toml")
                    continue
                for name in names_of(cells[language]):
                    listed.add(name)
                    if name not in found[language][type_name]:
                        problems.append(f"{language}: {type_name}.{name} ({cls}.{capability}) is missing")
            for name in sorted(found[language][type_name] - listed):
                problems.append(
                    f"{language}: {type_name}.{name} is public but not in tests/parity/api.toml "
                    f"(add it to {cls} for every language, or say why a language has no such call)"
                )
    return problems


def self_test(table: dict, found: dict[str, dict[str, set[str]]], languages: list[str]) -> int:
    """The comparison must fail when one language gains a call the table lacks, and when it
    loses one the table lists."""
    language = languages[0]
    cells = table["classes"]["Lock"]["api"]["force_unlock"]
    type_name = table["classes"]["Lock"]["types"][language]
    extra = {lang: {t: set(n) for t, n in api.items()} for lang, api in found.items()}
    extra[language][type_name].add("onlyHere")
    missing = {lang: {t: set(n) for t, n in api.items()} for lang, api in found.items()}
    missing[language][type_name] -= set(names_of(cells[language]))
    caught = [compare(table, extra, languages), compare(table, missing, languages)]
    if all(caught) and not compare(table, found, languages):
        print(f"parity self-test: an extra and a missing {language} call are both caught")
        return 0
    print(f"parity self-test failed: {caught}")
    return 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", type=lambda p: str(Path(p).resolve()), default=str(ROOT / "python/.venv/bin/python"))
    parser.add_argument("--kotlin-generated", default=str(ROOT / "target/uniffi/kotlin/polylock/polylock.kt"))
    parser.add_argument("--only", help="comma-separated languages to check (default: all)")
    parser.add_argument("--dump", action="store_true", help="print the API found, as JSON, and stop")
    parser.add_argument("--self-test", action="store_true", help="check that a name missing from the table, or from a language, is caught")
    args = parser.parse_args()
    table = tomllib.loads((ROOT / "tests/parity/api.toml").read_text())
    languages = args.only.split(",") if args.only else list(LANGUAGES)
    classes = {language: {cls: spec["types"][language] for cls, spec in table["classes"].items() if spec["types"].get(language, "-") != "-"} for language in languages}
    extractors = {
        "rust": lambda c: rust_api(c),
        "python": lambda c: python_api(args.python, c),
        "python_async": lambda c: python_api(args.python, c),
        "node": lambda c: node_api(c),
        "kotlin": lambda c: kotlin_api(Path(args.kotlin_generated), [ROOT / p for p in table["kotlin_idioms"]], c),
        "swift": lambda c: swift_api(ROOT / "bindings/swift/tests/api.golden", ROOT / "bindings/swift/Sources/Polylock/Polylock+Idioms.swift", c),
    }
    if args.dump:
        print(json.dumps({lang: {t: sorted(n) for t, n in extractors[lang](classes[lang]).items()} for lang in languages}, indent=1))
        return 0
    found = {language: extractors[language](classes[language]) for language in languages}
    if args.self_test:
        errors = {language: error_kinds(language, args.python, Path(args.kotlin_generated)) for language in languages}
        extra = {language: kinds | {"OnlyHere"} for language, kinds in errors.items()}
        if compare_errors(table, errors, languages) or not compare_errors(table, extra, languages):
            print("parity self-test failed: the [errors] table check")
            return 1
        return self_test(table, found, languages)
    problems = compare(table, found, languages)
    errors = {language: error_kinds(language, args.python, Path(args.kotlin_generated)) for language in languages}
    problems += compare_errors(table, errors, languages)
    for problem in problems:
        print(problem)
    checked = ", ".join(languages)
    if problems:
        print(f"parity: {len(problems)} problem(s) ({checked})")
        return 1
    print(f"parity: every language has the listed API and nothing else ({checked})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
