#!/usr/bin/env bash
# Builds the Swift package's native part on macOS (needs Xcode's xcodebuild and lipo, and
# rustup): libpolylock_ffi as a static library for macOS (arm64 + x86_64), iOS (arm64) and the
# iOS simulator (arm64 + x86_64), packed with the generated C header and module map into
# PolylockFFI.xcframework, and the generated Swift into Sources/Polylock/polylock.swift.
# Also writes PolylockFFI.xcframework.zip and prints its SwiftPM checksum, for a release whose
# Package.swift points at the zip by URL.
#
# Usage: bindings/swift/build-xcframework.sh   (from anywhere; CARGO_TARGET_DIR is honoured)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
OUT="$TARGET_DIR/swift-package"

# Names the package depends on (bindings/swift/tests/check_swift.py checks them against Package.swift
# and the generated files).
FFI_MODULE=polylockFFI
XCFRAMEWORK=PolylockFFI.xcframework
SOURCES=Sources/Polylock
LIBRARY=libpolylock_ffi.a

if [[ "$(uname -s)" != Darwin ]]; then
  echo "build-xcframework.sh: needs macOS (xcodebuild, lipo)" >&2
  exit 1
fi

TARGETS=(aarch64-apple-darwin x86_64-apple-darwin aarch64-apple-ios aarch64-apple-ios-sim x86_64-apple-ios)
rustup target add "${TARGETS[@]}"
for target in "${TARGETS[@]}"; do
  cargo build --manifest-path "$ROOT/Cargo.toml" --release -p polylock-ffi --target "$target"
done

# The Swift, header and module map, generated from the library's metadata by the uniffi-bindgen
# of the same pinned uniffi (built for the host).
cargo build --manifest-path "$ROOT/Cargo.toml" -p uniffi-bindgen
rm -rf "$OUT"
mkdir -p "$OUT/generated" "$OUT/headers/$FFI_MODULE" "$OUT/macos" "$OUT/ios-simulator"
(cd "$ROOT" && "$TARGET_DIR/debug/uniffi-bindgen" generate \
  --library "$TARGET_DIR/aarch64-apple-darwin/release/libpolylock_ffi.dylib" \
  --language swift --out-dir "$OUT/generated")

# In a directory of its own, so the module map does not collide with other XCFrameworks'.
cp "$OUT/generated/$FFI_MODULE.h" "$OUT/headers/$FFI_MODULE/"
cp "$OUT/generated/$FFI_MODULE.modulemap" "$OUT/headers/$FFI_MODULE/module.modulemap"

lipo -create -output "$OUT/macos/$LIBRARY" \
  "$TARGET_DIR/aarch64-apple-darwin/release/$LIBRARY" \
  "$TARGET_DIR/x86_64-apple-darwin/release/$LIBRARY"
lipo -create -output "$OUT/ios-simulator/$LIBRARY" \
  "$TARGET_DIR/aarch64-apple-ios-sim/release/$LIBRARY" \
  "$TARGET_DIR/x86_64-apple-ios/release/$LIBRARY"

rm -rf "${HERE:?}/$XCFRAMEWORK"
xcodebuild -create-xcframework \
  -library "$OUT/macos/$LIBRARY" -headers "$OUT/headers" \
  -library "$TARGET_DIR/aarch64-apple-ios/release/$LIBRARY" -headers "$OUT/headers" \
  -library "$OUT/ios-simulator/$LIBRARY" -headers "$OUT/headers" \
  -output "$HERE/$XCFRAMEWORK"

cp "$OUT/generated/polylock.swift" "$HERE/$SOURCES/polylock.swift"

(cd "$HERE" && rm -f "$XCFRAMEWORK.zip" && ditto -c -k --keepParent "$XCFRAMEWORK" "$XCFRAMEWORK.zip")
echo "built $HERE/$XCFRAMEWORK and $HERE/$SOURCES/polylock.swift"
echo "checksum of $XCFRAMEWORK.zip: $(cd "$HERE" && swift package compute-checksum "$XCFRAMEWORK.zip")"
