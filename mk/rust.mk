# The Rust crate `polylock` (core/) as crates.io users get it.
# test-rust-package: `cargo package` (metadata, README, license; builds the packaged sources),
#                    and the crate without its default `tls` feature (a rediss:// URL is refused
#                    by name there).

.PHONY: test-rust-package
# The packaged crate builds in the lint's target directory: `make test` runs this beside suites
# whose cargo calls must not wait for target/debug's lock.
test-rust-package:
	CARGO_TARGET_DIR=$(LINT_TARGET_DIR) cargo package -p polylock --allow-dirty --quiet
	cargo test -p polylock --no-default-features --lib --quiet
