//! `cargo run -p uniffi-bindgen -- generate --library target/debug/libpolylock_ffi.so --language kotlin --out-dir DIR`
//!
//! uniffi's own generator, built from the same pinned uniffi as `polylock-ffi`, so the generated
//! Kotlin and Swift match the scaffolding compiled into the library.

fn main() {
    uniffi::uniffi_bindgen_main()
}
