//! How each language's demo worker is started: which languages were asked for, and whether
//! each can run here (its package loads and has the calls the scenario needs).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{DemoArgs, Scenario};
use polylock_cli_common::error::{CliError, CliResult};

const LANGUAGES: [&str; 3] = ["rust", "python", "node"];
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// How to start one language's worker.
pub(crate) struct Launcher {
    pub(crate) language: &'static str,
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<String>,
}

/// Where the worker scripts are in the repository.
const WORKERS_DIR: &str = "tests/demo/workers";

/// The repository root: `POLYLOCK_REPO`, else the checkout this crate was built from (it is
/// `tests/demo/` there).
pub(crate) fn repo_root() -> PathBuf {
    if let Some(repo) = std::env::var_os("POLYLOCK_REPO") {
        return PathBuf::from(repo);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Runs a probe command with a bound; Ok(()) when it exits 0, else what it printed.
fn probe(program: &Path, args: &[&str]) -> Result<(), String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| format!("cannot run {}: {err}", program.display()))?;
    let deadline = Instant::now() + PROBE_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                if status.success() {
                    return Ok(());
                }
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    let _ = pipe.read_to_string(&mut stderr);
                }
                let last = stderr.lines().rev().find(|line| !line.trim().is_empty());
                return Err(last.unwrap_or("failed").trim().to_owned());
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{} did not answer in {PROBE_TIMEOUT:?}",
                    program.display()
                ));
            }
        }
    }
}

/// The worker script `file` of this repository; the binary finds it through `POLYLOCK_REPO`
/// when it runs away from the checkout it was built in.
fn worker_script(repo: &Path, file: &str) -> Result<PathBuf, String> {
    let script = repo.join(WORKERS_DIR).join(file);
    if script.is_file() {
        Ok(script)
    } else {
        Err(format!(
            "{} not found: the demo's workers are in the polylock repository, so run it from a \
             checkout (`make demo`) or set POLYLOCK_REPO to one",
            script.display()
        ))
    }
}

fn script_launcher(language: &'static str, program: PathBuf, script: &Path) -> Launcher {
    Launcher {
        language,
        program,
        args: vec![script.display().to_string()],
    }
}

fn python_program(repo: &Path) -> PathBuf {
    if let Some(python) = std::env::var_os("POLYLOCK_PYTHON") {
        return PathBuf::from(python);
    }
    let venv = repo.join("python/.venv/bin/python");
    if venv.is_file() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// The worker launcher of `language`, or why it cannot run here.
pub(crate) fn launcher(
    language: &'static str,
    repo: &Path,
    scenario: Scenario,
    fair: bool,
) -> Result<Launcher, String> {
    let (python_needs, node_needs) = scenario.needs(fair);
    match language {
        "rust" => {
            let program = std::env::current_exe().map_err(|err| {
                format!("cannot find this program (it runs the Rust workers too): {err}")
            })?;
            Ok(Launcher {
                language,
                program,
                args: vec![crate::WORKER_COMMAND.into()],
            })
        }
        "python" => {
            let script = worker_script(repo, "worker.py")?;
            let program = python_program(repo);
            let mut check = "import polylock".to_owned();
            for call in python_needs {
                check.push_str(&format!(
                    "; assert hasattr(polylock.Client, '{call}'), \
                     'this polylock Python package has no Client.{call} yet'"
                ));
            }
            probe(&program, &["-c", &check]).map_err(|why| {
                format!(
                    "`{} -c \"import polylock\"` failed ({why}); build it with `make build-python` \
                     or set POLYLOCK_PYTHON to an interpreter that has it",
                    program.display()
                )
            })?;
            Ok(script_launcher(language, program, &script))
        }
        "node" => {
            let script = worker_script(repo, "worker.mjs")?;
            let package = repo.join("node/index.js");
            if !package.is_file() {
                return Err(format!(
                    "{} not found; build it with `make build-node`",
                    package.display()
                ));
            }
            let program = PathBuf::from("node");
            let mut check = format!(
                "const {{ Client }} = require({:?});",
                package.display().to_string()
            );
            for call in node_needs {
                check.push_str(&format!(
                    " if (typeof Client.prototype.{call} !== 'function') \
                     throw new Error('this polylock Node package has no Client.{call} yet');"
                ));
            }
            probe(&program, &["-e", &check]).map_err(|why| {
                format!(
                    "the Node package at {} does not load ({why}); build it with `make build-node`",
                    package.display()
                )
            })?;
            Ok(script_launcher(language, program, &script))
        }
        _ => Err(format!("unknown language '{language}'")),
    }
}

pub(crate) fn chosen_languages(args: &DemoArgs) -> CliResult<(Vec<&'static str>, bool)> {
    let Some(requested) = &args.languages else {
        return Ok((LANGUAGES.to_vec(), false));
    };
    let mut chosen = Vec::new();
    for language in requested {
        let language = language.trim().to_lowercase();
        let known = LANGUAGES
            .iter()
            .find(|known| **known == language)
            .ok_or_else(|| {
                CliError::Usage(format!(
                    "unknown language '{language}' in --languages; choose from rust, python, node \
                     (Kotlin workers are not part of the demo)"
                ))
            })?;
        if !chosen.contains(known) {
            chosen.push(*known);
        }
    }
    if chosen.is_empty() {
        return Err(CliError::Usage("--languages is empty".into()));
    }
    Ok((chosen, true))
}
