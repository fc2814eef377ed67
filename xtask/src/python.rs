//! The Python side shared by `test`, `demo` and `bench`: the virtual environment with the test
//! requirements, kept once per machine under the user's cache directory and reused by every
//! clone, and the wheel built by maturin and installed into it.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::Result;
use crate::cache::VENV_VARIABLE;
use crate::process::Cmd;

/// The file of test requirements, relative to the project root.
const REQUIREMENTS: &str = "crates/py-bindings/requirements-test.txt";

/// The manifest of the crate that maturin builds, relative to the project root.
const MANIFEST: &str = "crates/py-bindings/Cargo.toml";

/// The variable that names the interpreter the environment is created from.
pub(crate) const PYTHON_VARIABLE: &str = "ARROW_DLPACK_PYTHON";

/// The name of the stamp file inside an environment: what was installed into it, from what.
const STAMP: &str = ".requirements-stamp";

/// Cached environments of other keys that nobody used for this long are removed when a new
/// one is made (each holds several gigabytes).
const UNUSED_FOR: Duration = Duration::from_secs(14 * 24 * 3600);

/// A virtual environment with the test requirements installed.
pub(crate) struct PythonEnv {
    dir: PathBuf,
    python: PathBuf,
}

impl PythonEnv {
    /// Makes sure that the environment for this requirements file and interpreter exists with
    /// the requirements installed, and links `target/venv` to it.
    ///
    /// The environment lives in `$ARROW_DLPACK_VENV` when that is set, and otherwise in
    /// `<cache>/arrow-dlpack/venv-<key>` (`<cache>` is `$XDG_CACHE_HOME` or `~/.cache`), where
    /// the key hashes the requirements file and the interpreter's path and version: a changed
    /// file or interpreter gets a new environment, and every clone on the machine shares one.
    /// Its stamp file must match the key exactly, or the environment is made again from
    /// nothing: an interrupted install is never trusted.
    pub(crate) fn ensure(root: &Path) -> Result<PythonEnv> {
        PythonEnv::ensure_logged(root, None)
    }

    /// [`PythonEnv::ensure`], with the output of the installing commands written to files in
    /// the folder `logs` when it is given (and shown only when a command fails), so that the
    /// environment can be made beside a step that prints to the terminal.
    pub(crate) fn ensure_logged(root: &Path, logs: Option<&Path>) -> Result<PythonEnv> {
        let requirements_path = root.join(REQUIREMENTS);
        let requirements = fs::read(&requirements_path)
            .map_err(|error| format!("could not read {}: {error}", requirements_path.display()))?;
        let base = std::env::var_os(PYTHON_VARIABLE).unwrap_or_else(|| "python3".into());
        let identity = interpreter_identity(root, &base)?;
        let stamp = stamp_text(&requirements, &identity);
        let dir = match std::env::var_os(VENV_VARIABLE) {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => crate::cache::dir()?.join(format!("venv-{:016x}", fnv1a64(stamp.as_bytes()))),
        };
        let env = PythonEnv {
            python: venv_python(&dir),
            dir,
        };
        let parent = env.dir.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(parent)
            .map_err(|error| format!("could not create {}: {error}", parent.display()))?;
        // One clone at a time makes or checks an environment; the others wait for it.
        let _lock = lock(&env.dir.with_extension("lock"))?;
        let stamp_path = env.dir.join(STAMP);
        if env.python.exists()
            && fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str())
        {
            println!(
                "==> reusing the Python environment {} ({REQUIREMENTS} and the interpreter are \
                 unchanged since it was made)",
                env.dir.display()
            );
            // The stamp's time says when the environment was last used, for pruning.
            touch(&stamp_path);
        } else {
            env.create(root, &base, &requirements_path, &stamp, logs)?;
            if std::env::var_os(VENV_VARIABLE).is_none() {
                prune_unused(parent, &env.dir);
            }
        }
        link_target_venv(root, &env.dir);
        Ok(env)
    }

    /// Makes the environment from nothing and installs the requirements; the stamp is written
    /// last, so that only a complete install is ever reused.
    fn create(
        &self,
        root: &Path,
        base: &std::ffi::OsStr,
        requirements: &Path,
        stamp: &str,
        logs: Option<&Path>,
    ) -> Result {
        let step = |cmd: Cmd, name: &str| match logs {
            None => cmd.run(),
            Some(logs) => {
                fs::create_dir_all(logs)
                    .map_err(|error| format!("could not create {}: {error}", logs.display()))?;
                cmd.spawn_logged(&logs.join(name))?.wait_quiet()
            }
        };
        println!(
            "==> creating the Python environment {} from `{}`",
            self.dir.display(),
            base.to_string_lossy()
        );
        step(
            Cmd::new(root, base)
                .args(["-m", "venv", "--clear"])
                .arg(&self.dir),
            "venv.log",
        )
        .map_err(|error| {
            format!(
                "{error}\n(set {PYTHON_VARIABLE} to a Python 3 interpreter with the venv \
                     module; on Debian and Ubuntu that is the python3-venv package)"
            )
        })?;
        println!("==> installing {REQUIREMENTS} from the package registry");
        step(
            self.command(root)
                .args(["-m", "pip", "install", "--upgrade", "pip"]),
            "pip-upgrade.log",
        )?;
        step(
            self.command(root)
                .args(["-m", "pip", "install", "--requirement"])
                .arg(requirements),
            "pip-install.log",
        )?;
        let stamp_path = self.dir.join(STAMP);
        fs::write(&stamp_path, stamp)
            .map_err(|error| format!("could not write {}: {error}", stamp_path.display()))
    }

    /// Installs the extra requirements file `relative` (to the project root) into the
    /// environment on top of the test requirements, unless its stamp in the environment says
    /// that this exact file is already installed. A recreated environment has no stamp.
    pub(crate) fn install_extra_requirements(&self, root: &Path, relative: &str) -> Result {
        let path = root.join(relative);
        let requirements = fs::read(&path)
            .map_err(|error| format!("could not read {}: {error}", path.display()))?;
        let stamp = format!("{relative} fnv1a64: {:016x}\n", fnv1a64(&requirements));
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let stamp_path = self.dir.join(format!(".{name}-stamp"));
        let _lock = lock(&self.dir.with_extension("lock"))?;
        if fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str()) {
            println!("==> reusing the environment's {relative}: unchanged since it was installed");
            return Ok(());
        }
        println!(
            "==> installing {relative} into {} from the package registry",
            self.dir.display()
        );
        let _ = fs::remove_file(&stamp_path);
        self.command(root)
            .args(["-m", "pip", "install", "--requirement"])
            .arg(&path)
            .run()?;
        fs::write(&stamp_path, &stamp)
            .map_err(|error| format!("could not write {}: {error}", stamp_path.display()))
    }

    /// The environment's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The environment's interpreter.
    pub(crate) fn python(&self) -> &Path {
        &self.python
    }

    /// A command that runs the environment's interpreter, without a `PYTHONPATH` that could put
    /// the source tree in front of the installed wheel.
    pub(crate) fn command(&self, root: &Path) -> Cmd {
        Cmd::new(root, &self.python).env_remove("PYTHONPATH")
    }

    /// A command that runs the environment's interpreter from an empty directory under
    /// `target/`, so that neither the project root nor the Python sources are on `sys.path` and
    /// imports find only the installed wheel; caches that tools write there stay in `target/`.
    pub(crate) fn command_outside_sources(&self, root: &Path) -> Result<Cmd> {
        let dir = root.join("target").join("python-cwd");
        fs::create_dir_all(&dir)
            .map_err(|error| format!("could not create {}: {error}", dir.display()))?;
        Ok(self.command(root).current_dir(&dir))
    }

    /// Builds the wheel in release mode into `target/wheels` and installs it into the
    /// environment, replacing whatever version was there.
    pub(crate) fn build_and_install_wheel(&self, root: &Path) -> Result {
        self.build_and_install(root, WheelProfile::Release)
    }

    /// Builds the wheel in `profile` into `target/wheels` and installs it, replacing whatever
    /// build was installed.
    pub(crate) fn build_and_install(&self, root: &Path, profile: WheelProfile) -> Result {
        let wheel = self.build(root, profile)?;
        self.install(root, &wheel)
    }

    /// Builds the wheel in `profile` into its own folder under `target/wheels` and returns its
    /// path; nothing is installed, so a test run against the installed wheel may go on beside.
    pub(crate) fn build(&self, root: &Path, profile: WheelProfile) -> Result<PathBuf> {
        let wheels = root.join("target").join("wheels").join(profile.name());
        // Exactly one wheel must be left, so that the one installed is the one just built.
        remove_wheels(&wheels)?;
        // The dev profile keeps debug assertions and overflow checks, and with them the standard
        // library's checks of unsafe preconditions (alignment, non-overlap).
        self.command(root)
            .args(["-m", "maturin", "build", "--profile", profile.name()])
            .arg("--manifest-path")
            .arg(root.join(MANIFEST))
            .arg("--out")
            .arg(&wheels)
            .arg("--interpreter")
            .arg(&self.python)
            .run()?;
        only_wheel(&wheels)
    }

    /// Installs a built wheel, replacing whatever build was installed.
    pub(crate) fn install(&self, root: &Path, wheel: &Path) -> Result {
        self.command(root)
            .args(["-m", "pip", "install", "--force-reinstall", "--no-deps"])
            .arg(wheel)
            .run()
    }
}

/// The Cargo profile of a wheel build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WheelProfile {
    /// Optimised: what users install, and what the test suite and benchmarks run against.
    Release,
    /// Debug assertions and overflow checks on: undefined-behaviour preconditions abort.
    Debug,
    /// The `dist` build with line tables and symbols, for `cargo xtask bench`: the machine code
    /// users run, which a profiler can name; the wheel users install stays without them.
    Profiling,
    /// What `pip install` builds and what is published: link-time optimised, one codegen unit,
    /// symbols stripped (`[tool.maturin] profile` in pyproject.toml).
    Dist,
}

impl WheelProfile {
    /// The Cargo profile's name, which also names the wheel's folder.
    fn name(self) -> &'static str {
        match self {
            WheelProfile::Release => "release",
            WheelProfile::Debug => "dev",
            WheelProfile::Profiling => "profiling",
            WheelProfile::Dist => "dist",
        }
    }
}

/// The interpreter of a virtual environment.
fn venv_python(venv: &Path) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts").join("python.exe")
    } else {
        venv.join("bin").join("python")
    }
}

/// The interpreter's resolved path and full version, as it reports them itself: `python3` on the
/// `PATH` may change its meaning, and packages built for one version do not load in another.
fn interpreter_identity(root: &Path, base: &std::ffi::OsStr) -> Result<String> {
    Cmd::new(root, base)
        .args([
            "-c",
            "import sys; print(sys.executable); print(sys.version.replace(chr(10), ' '))",
        ])
        .read_stdout()
        .map_err(|error| {
            format!(
                "{error}\n(set {PYTHON_VARIABLE} to a Python 3 interpreter; the environment is \
                 made from it)"
            )
        })
}

/// What the stamp file holds, and what the cache key hashes: the interpreter and a hash of the
/// requirements installed into the environment. Only the requirement lines count, so that a
/// comment edited in the file does not cost a new environment of several gigabytes.
fn stamp_text(requirements: &[u8], interpreter: &str) -> String {
    let text = String::from_utf8_lossy(requirements);
    let lines: Vec<&str> = text
        .lines()
        .map(|line| {
            line.split_once('#')
                .map_or(line, |(before, _)| before)
                .trim()
        })
        .filter(|line| !line.is_empty())
        .collect();
    format!(
        "python: {}\n{REQUIREMENTS} fnv1a64: {:016x}\n",
        interpreter.trim_end().replace('\n', " | "),
        fnv1a64(lines.join("\n").as_bytes())
    )
}

/// An exclusive lock on the file at `path`, held until the returned handle is dropped.
pub(crate) fn lock(path: &Path) -> Result<File> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|error| format!("could not open the lock file {}: {error}", path.display()))?;
    file.lock()
        .map_err(|error| format!("could not lock {}: {error}", path.display()))?;
    Ok(file)
}

/// Sets a file's modification time to now; a failure only makes pruning earlier.
fn touch(path: &Path) {
    if let Ok(file) = File::options().write(true).open(path) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// Removes the cached environments beside `keep` whose stamps say that nobody used them for
/// [`UNUSED_FOR`], and those that never finished installing and are as old. Failures only
/// leave an environment behind, so they are reported and otherwise ignored.
fn prune_unused(cache: &Path, keep: &Path) {
    let Ok(entries) = fs::read_dir(cache) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_env = path.is_dir()
            && entry.file_name().to_string_lossy().starts_with("venv-")
            && path != keep;
        if !is_env {
            continue;
        }
        let used = fs::metadata(path.join(STAMP))
            .or_else(|_| fs::metadata(&path))
            .and_then(|meta| meta.modified());
        let stale = used
            .ok()
            .and_then(|time| time.elapsed().ok())
            .is_some_and(|age| age > UNUSED_FOR);
        if stale {
            println!(
                "==> removing the unused Python environment {}",
                path.display()
            );
            if let Err(error) = fs::remove_dir_all(&path) {
                eprintln!("warning: could not remove {}: {error}", path.display());
            }
            let _ = fs::remove_file(path.with_extension("lock"));
        }
    }
}

/// Points `target/venv` at the environment, so that `target/venv/bin/python` and
/// `source target/venv/bin/activate` work from the clone. Best effort: a failure is reported
/// and changes nothing else (the commands of xtask use the environment's own path).
fn link_target_venv(root: &Path, dir: &Path) {
    let link = root.join("target").join("venv");
    if fs::read_link(&link).ok().as_deref() == Some(dir) {
        return;
    }
    let result = (|| -> std::io::Result<()> {
        fs::create_dir_all(root.join("target"))?;
        match fs::symlink_metadata(&link) {
            // An environment of the old layout, made inside the clone, is replaced.
            Ok(meta) if meta.is_dir() => fs::remove_dir_all(&link)?,
            Ok(_) => fs::remove_file(&link)?,
            Err(_) => {}
        }
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir, &link)?;
        Ok(())
    })();
    if let Err(error) = result {
        eprintln!(
            "warning: could not link {} to {}: {error}",
            link.display(),
            dir.display()
        );
    }
}

/// The 64-bit FNV-1a hash: stable across Rust releases (unlike `DefaultHasher`) and a few lines
/// long, which is all that a change detector needs.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn wheel_files(wheels: &Path) -> Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(wheels) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(format!("could not list {}: {error}", wheels.display())),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|error| format!("could not list {}: {error}", wheels.display()))?
            .path();
        if path.extension().is_some_and(|ext| ext == "whl") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

fn remove_wheels(wheels: &Path) -> Result {
    for wheel in wheel_files(wheels)? {
        fs::remove_file(&wheel)
            .map_err(|error| format!("could not remove {}: {error}", wheel.display()))?;
    }
    Ok(())
}

fn only_wheel(wheels: &Path) -> Result<PathBuf> {
    let mut files = wheel_files(wheels)?;
    match files.len() {
        1 => Ok(files.remove(0)),
        n => Err(format!(
            "expected maturin to leave exactly one wheel in {}, found {n}: {files:?}",
            wheels.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_reference_values() {
        // Test vectors of the FNV reference implementation.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn stamp_changes_with_the_requirements_and_with_the_interpreter() {
        let interpreter = "/usr/bin/python3\n3.11.7 (main) [GCC 12.2.0]\n";
        let one = stamp_text(b"numpy\n", interpreter);
        assert_eq!(
            one,
            format!(
                "python: /usr/bin/python3 | 3.11.7 (main) [GCC 12.2.0]\n{REQUIREMENTS} fnv1a64: \
                 {:016x}\n",
                fnv1a64(b"numpy")
            )
        );
        assert_eq!(
            one,
            stamp_text(b"# The oracle.\n\nnumpy  # pinned\n", interpreter),
            "comments and blank lines changed the key"
        );
        assert_ne!(one, stamp_text(b"numpy\npyarrow\n", interpreter));
        assert_ne!(one, stamp_text(b"numpy\n", "/usr/bin/python3\n3.12.1\n"));
        assert_ne!(
            one,
            stamp_text(b"numpy\n", "/opt/python3\n3.11.7 (main) [GCC 12.2.0]\n")
        );
    }

    #[test]
    fn lock_is_exclusive_until_dropped() {
        let dir = std::env::temp_dir().join(format!("xtask-lock-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("venv.lock");
        let held = lock(&path).unwrap();
        let other = File::options().write(true).open(&path).unwrap();
        assert!(
            other.try_lock().is_err(),
            "a second lock was granted while the first is held"
        );
        drop(held);
        other.try_lock().unwrap();
        drop(other);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn prune_removes_only_stale_environments_of_other_keys() {
        let cache = std::env::temp_dir().join(format!("xtask-prune-{}", std::process::id()));
        let _ = fs::remove_dir_all(&cache);
        let keep = cache.join("venv-keep");
        let fresh = cache.join("venv-fresh");
        let stale = cache.join("venv-stale");
        let other = cache.join("not-an-env");
        for dir in [&keep, &fresh, &stale, &other] {
            fs::create_dir_all(dir).unwrap();
            fs::write(dir.join(STAMP), b"stamp").unwrap();
        }
        let old = SystemTime::now() - UNUSED_FOR - Duration::from_secs(60);
        for dir in [&keep, &stale, &other] {
            File::options()
                .write(true)
                .open(dir.join(STAMP))
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        prune_unused(&cache, &keep);
        assert!(keep.exists(), "the environment in use was removed");
        assert!(fresh.exists(), "an environment used recently was removed");
        assert!(
            other.exists(),
            "a directory that is no environment was removed"
        );
        assert!(!stale.exists(), "a stale environment was kept");
        fs::remove_dir_all(&cache).unwrap();
    }

    #[test]
    fn only_wheel_refuses_an_empty_directory() {
        let dir = std::env::temp_dir().join(format!("xtask-wheels-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let error = only_wheel(&dir).unwrap_err();
        assert!(error.contains("found 0"), "{error}");
        fs::write(dir.join("a-0.1.0-cp39-abi3-linux_x86_64.whl"), b"").unwrap();
        fs::write(dir.join("notes.txt"), b"").unwrap();
        assert_eq!(
            only_wheel(&dir).unwrap(),
            dir.join("a-0.1.0-cp39-abi3-linux_x86_64.whl")
        );
        remove_wheels(&dir).unwrap();
        assert!(wheel_files(&dir).unwrap().is_empty());
        assert!(dir.join("notes.txt").exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
