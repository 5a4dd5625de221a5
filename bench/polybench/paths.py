"""Where the driver, the workers and their build outputs are."""

import os
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
ROOT = BENCH.parent
RUST_BIN = Path(
    os.environ.get("BENCH_RUST_BIN", ROOT / "target" / "bench-rust" / "release" / "polylock-bench")
)
# The Java worker (Redisson): bench/java, built by `make bench-java` into a jar and a classpath
# file.
JAVA_TARGET = BENCH / "java" / "target"
