"""Unit tests of tests/layers.py: its table parser, its reading of Rust imports, and that it
finds an upward import and a cycle in a small tree (`python3 -m unittest tests/test_layers.py`)."""
import pathlib
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import layers  # noqa: E402

TABLE = """
text before
<!-- layers:begin -->
| layer | files (under `core/src`) |
|---|---|
| bottom | `error.rs` `keys.rs` |
| middle | `engine/*` `{lock,guard}.rs` |
| top | `lib.rs` |
<!-- layers:end -->
text after, `ignored.rs`
"""

FOLDERS = """
<!-- layers:begin -->
| layer | files |
|---|---|
| bottom | `base/**` |
| handles | `handles/{semaphore,permits}.rs` `handles/**` |
| top | `lib.rs` |
<!-- layers:end -->
"""


class ParseLayers(unittest.TestCase):
    def test_rows_bottom_first_header_skipped(self):
        self.assertEqual(
            layers.parse_layers(TABLE),
            [("bottom", ["error.rs", "keys.rs"]),
             ("middle", ["engine/*", "{lock,guard}.rs"]),
             ("top", ["lib.rs"])],
        )

    def test_missing_markers_or_files_are_errors(self):
        with self.assertRaises(ValueError):
            layers.parse_layers("| a | `b.rs` |")
        with self.assertRaises(ValueError):
            layers.parse_layers(TABLE.replace("`lib.rs`", "lib.rs"))

    def test_units(self):
        table = layers.parse_layers(TABLE)
        self.assertEqual(layers.place_of(table, "engine/acquire.rs"), (1, "engine/*"))
        self.assertEqual(layers.place_of(table, "guard.rs"), (1, "{lock,guard}.rs"))
        self.assertEqual(layers.place_of(table, "other.rs"), (None, None))

    def test_a_folder_of_modules_is_a_unit_per_module(self):
        table = layers.parse_layers(FOLDERS)
        # `dir/**`: each file directly in the folder its own unit, a subfolder one unit.
        self.assertEqual(layers.place_of(table, "base/mod.rs"), (0, "base/mod.rs"))
        self.assertEqual(layers.place_of(table, "base/error.rs"), (0, "base/error.rs"))
        self.assertEqual(layers.place_of(table, "handles/lock.rs"), (1, "handles/lock.rs"))
        self.assertEqual(layers.place_of(table, "handles/multi/mod.rs"), (1, "handles/multi/*"))
        self.assertEqual(layers.place_of(table, "handles/multi/group.rs"),
                         (1, "handles/multi/*"))
        # A pattern before it in the row still wins.
        self.assertEqual(layers.place_of(table, "handles/permits.rs"),
                         (1, "handles/{semaphore,permits}.rs"))
        # The folder's own name is not a file below it, nor is a folder whose name extends it.
        self.assertEqual(layers.place_of(table, "handles.rs"), (None, None))
        self.assertEqual(layers.place_of(table, "handlesx/lock.rs"), (None, None))


class ReadImports(unittest.TestCase):
    def test_use_trees_expand(self):
        self.assertEqual(
            layers.expand_use("crate::kinds::{self, script::LockScript, fair::{A, B}}"),
            ["crate::kinds::self", "crate::kinds::script::LockScript",
             "crate::kinds::fair::A", "crate::kinds::fair::B"],
        )

    def test_comments_strings_and_unit_tests_are_not_imports(self):
        source = "\n".join([
            "mod child;",
            "use crate::error::Error; // crate::client in a comment",
            'const S: &str = "crate::client::Client";',
            "const R: &str = r#\"crate::client \"quoted\"\"#;",
            "fn f<'a>(c: char) -> bool { c == '{' || super::sibling::g() }",
            "use child::Thing;",
            "#[cfg(test)]",
            "mod tests {",
            "    use super::*;",
            "    use crate::client::Client;",
            "}",
            "use crate::keys::name;",
        ])
        found = layers.imports("engine/mod.rs", source)
        self.assertEqual(found, [
            (2, ["error", "Error"]),
            (6, ["engine", "child", "Thing"]),
            (12, ["keys", "name"]),
            (5, ["sibling", "g"]),
        ])


class Check(unittest.TestCase):
    def tree(self, files):
        root = pathlib.Path(self.enterContext(tempfile.TemporaryDirectory()))
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        return root

    def test_upward_import_and_cycle_named_with_file_and_line(self):
        root = self.tree({
            "lib.rs": "pub use keys::Key;\n",
            "error.rs": "\nuse crate::engine::Core;\n",
            "keys.rs": "",
            "engine/mod.rs": "mod acquire;\nuse acquire::Wait;\n",
            "engine/acquire.rs": "use crate::engine::Core;\n",
            "lock.rs": "use crate::guard::Guard;\n",
            "guard.rs": "use crate::lock::Lock;\nuse crate::Key;\n",
        })
        problems, _ = layers.check(root, layers.parse_layers(TABLE))
        self.assertEqual(problems, [
            "core/src/error.rs:2: imports engine/mod.rs of layer 'middle', above its own "
            "layer 'bottom'",
        ])
        # Two units of one layer that import each other: a cycle.
        table = TABLE.replace("`{lock,guard}.rs`", "`lock.rs` `guard.rs`")
        problems, _ = layers.check(root, layers.parse_layers(table))
        self.assertEqual(problems[1:], [
            "a cycle in layer 'middle' between guard.rs, lock.rs: "
            "core/src/guard.rs:1 -> lock.rs, core/src/lock.rs:1 -> guard.rs",
        ])

    def test_modules_of_a_folder_must_not_import_each_other_in_a_circle(self):
        root = self.tree({
            "lib.rs": "pub use base::keys;\npub use keys::name;\nmod base;\nmod handles;\n",
            "base/mod.rs": "pub mod error;\npub mod keys;\n",
            "base/error.rs": "",
            "base/keys.rs": "use crate::base::error::Error;\n",
            "handles/mod.rs": "mod lock;\nmod multi;\nmod semaphore;\nmod permits;\n",
            "handles/lock.rs": "use crate::keys::name;\nuse crate::handles::multi::Group;\n",
            "handles/multi/mod.rs": "mod group;\npub use group::Group;\n",
            "handles/multi/group.rs": "use super::Group;\nuse crate::handles::lock::Lock;\n",
            "handles/semaphore.rs": "use crate::handles::permits::Permits;\nuse crate::name;\n",
            "handles/permits.rs": "use crate::handles::semaphore::Semaphore;\n",
        })
        problems, arrows = layers.check(root, layers.parse_layers(FOLDERS))
        # A module re-exported by lib.rs (`crate::keys`) is its own file, and an item
        # re-exported through it (`crate::name`, from `keys::name`) is that file's too.
        self.assertIn(("handles/lock.rs", "base/keys.rs"), arrows)
        self.assertIn(("handles/semaphore.rs", "base/keys.rs"), arrows)
        # The semaphore and its permits are one unit, as are the files of `handles/multi/`;
        # the lock and the group are not.
        self.assertEqual(problems, [
            "a cycle in layer 'handles' between handles/lock.rs, handles/multi/*: "
            "core/src/handles/lock.rs:2 -> handles/multi/mod.rs, "
            "core/src/handles/multi/group.rs:2 -> handles/lock.rs",
        ])

    def test_only_the_crate_root_may_sit_at_the_root_of_src(self):
        with tempfile.TemporaryDirectory() as tmp:
            source = pathlib.Path(tmp)
            (source / "engine").mkdir()
            for name in ("lib.rs", "engine/mod.rs", "hold.rs", "inspect.lua", "notes.md"):
                (source / name).write_text("")
            self.assertEqual(layers.files_at_the_root(source), ["hold.rs", "inspect.lua"])

    def test_a_file_in_no_layer_is_a_problem(self):
        root = self.tree({"lib.rs": "", "stray.rs": ""})
        problems, _ = layers.check(root, layers.parse_layers(TABLE))
        self.assertEqual(problems, ["core/src/stray.rs: in no layer of docs/architecture.md"])


if __name__ == "__main__":
    unittest.main()
