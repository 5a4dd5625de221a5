//! Test certificates, made at test time by `tests/tls/make-certs.sh` (the one generator the
//! Rust, Python and Node test kits share) with the `openssl` CLI.

use std::path::PathBuf;
use std::process::Command;

/// A directory of test certificates (see `tests/tls/make-certs.sh` for the files), removed when
/// dropped.
pub struct TlsFiles {
    dir: PathBuf,
    /// Made by `make` (removed when dropped), not given to `existing`.
    owned: bool,
}

impl TlsFiles {
    /// Makes a fresh set into a new temporary directory. Panics if openssl fails.
    pub fn make() -> TlsFiles {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("polylock-tls-{}-{n}", std::process::id()));
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tls/make-certs.sh");
        let status = Command::new("sh")
            .arg(script)
            .arg(&dir)
            .status()
            .expect("could not run tests/tls/make-certs.sh");
        assert!(
            status.success(),
            "make-certs.sh failed; is openssl installed?"
        );
        TlsFiles { dir, owned: true }
    }

    /// A set made earlier into `dir` (by make-certs.sh), left in place when dropped.
    pub fn existing(dir: impl Into<PathBuf>) -> TlsFiles {
        TlsFiles {
            dir: dir.into(),
            owned: false,
        }
    }

    /// The path of one file, e.g. `ca.crt`.
    pub fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }

    /// The text of one file.
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).expect("test certificate file")
    }
}

impl Drop for TlsFiles {
    fn drop(&mut self) {
        if self.owned {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
