//! The Python side shared by `test`, `demo` and `bench`: the virtual environment under
//! `target/venv` and the wheel built by maturin and installed into it.

use std::fs;
use std::path::{Path, PathBuf};

use crate::Result;
use crate::process::Cmd;

/// The file of test requirements, relative to the project root.
const REQUIREMENTS: &str = "crates/py-bindings/requirements-test.txt";

/// The manifest of the crate that maturin builds, relative to the project root.
const MANIFEST: &str = "crates/py-bindings/Cargo.toml";

/// The variable that names the interpreter the environment is created from.
const PYTHON_VARIABLE: &str = "ARROW_DLPACK_PYTHON";

/// A virtual environment with the test requirements installed.
pub(crate) struct PythonEnv {
    python: PathBuf,
}

impl PythonEnv {
    /// Creates `target/venv` when it does not exist and installs the requirements into it,
    /// unless the stamp file says that they are already installed.
    pub(crate) fn ensure(root: &Path) -> Result<PythonEnv> {
        let venv = root.join("target").join("venv");
        let env = PythonEnv {
            python: venv_python(&venv),
        };
        let requirements_path = root.join(REQUIREMENTS);
        let requirements = fs::read(&requirements_path)
            .map_err(|error| format!("could not read {}: {error}", requirements_path.display()))?;
        let base = std::env::var_os(PYTHON_VARIABLE).unwrap_or_else(|| "python3".into());
        let stamp = stamp_text(&requirements, &base.to_string_lossy());
        let stamp_path = venv.join(".requirements-stamp");
        let old_stamp = fs::read_to_string(&stamp_path).ok();

        if !env.python.exists()
            || old_stamp
                .as_deref()
                .is_some_and(|old| !same_base(old, &stamp))
        {
            // A new interpreter gets a new environment: packages built for one Python version
            // do not load in another.
            println!(
                "==> creating the Python environment target/venv from `{}`",
                base.to_string_lossy()
            );
            Cmd::new(root, &base)
                .args(["-m", "venv", "--clear"])
                .arg(&venv)
                .run()
                .map_err(|error| {
                    format!(
                        "{error}\n(set {PYTHON_VARIABLE} to a Python 3 interpreter with the venv \
                         module; on Debian and Ubuntu that is the python3-venv package)"
                    )
                })?;
        } else if old_stamp.as_deref() == Some(stamp.as_str()) {
            println!("==> reusing target/venv: {REQUIREMENTS} is unchanged since it was installed");
            return Ok(env);
        }

        println!("==> installing {REQUIREMENTS} into target/venv from the package registry");
        // A stale stamp must not survive a failed or interrupted install.
        let _ = fs::remove_file(&stamp_path);
        env.command(root)
            .args(["-m", "pip", "install", "--upgrade", "pip"])
            .run()?;
        env.command(root)
            .args(["-m", "pip", "install", "--requirement"])
            .arg(&requirements_path)
            .run()?;
        fs::write(&stamp_path, &stamp)
            .map_err(|error| format!("could not write {}: {error}", stamp_path.display()))?;
        Ok(env)
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
        let stamp_path = root
            .join("target")
            .join("venv")
            .join(format!(".{name}-stamp"));
        if fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str()) {
            println!("==> reusing target/venv: {relative} is unchanged since it was installed");
            return Ok(());
        }
        println!("==> installing {relative} into target/venv from the package registry");
        let _ = fs::remove_file(&stamp_path);
        self.command(root)
            .args(["-m", "pip", "install", "--requirement"])
            .arg(&path)
            .run()?;
        fs::write(&stamp_path, &stamp)
            .map_err(|error| format!("could not write {}: {error}", stamp_path.display()))
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
        let wheels = root.join("target").join("wheels");
        // Exactly one wheel must be left, so that the one installed is the one just built.
        remove_wheels(&wheels)?;
        let profile_args: &[&str] = match profile {
            WheelProfile::Release => &["--release"],
            // The dev profile keeps debug assertions and overflow checks, and with them the
            // standard library's checks of unsafe preconditions (alignment, non-overlap).
            WheelProfile::Debug => &["--profile", "dev"],
        };
        self.command(root)
            .args(["-m", "maturin", "build"])
            .args(profile_args)
            .arg("--manifest-path")
            .arg(root.join(MANIFEST))
            .arg("--out")
            .arg(&wheels)
            .arg("--interpreter")
            .arg(&self.python)
            .run()?;
        let wheel = only_wheel(&wheels)?;
        self.command(root)
            .args(["-m", "pip", "install", "--force-reinstall", "--no-deps"])
            .arg(&wheel)
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
}

/// The interpreter of a virtual environment.
fn venv_python(venv: &Path) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts").join("python.exe")
    } else {
        venv.join("bin").join("python")
    }
}

/// What the stamp file holds: the interpreter the environment was made from and a hash of the
/// requirements installed into it.
fn stamp_text(requirements: &[u8], base: &str) -> String {
    format!(
        "python: {base}\n{REQUIREMENTS} fnv1a64: {:016x}\n",
        fnv1a64(requirements)
    )
}

/// Whether two stamps name the same base interpreter.
fn same_base(a: &str, b: &str) -> bool {
    a.lines().next() == b.lines().next()
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
    fn stamp_changes_with_the_requirements_but_keeps_the_base_line() {
        let one = stamp_text(b"numpy\n", "python3");
        let two = stamp_text(b"numpy\npyarrow\n", "python3");
        assert_ne!(one, two);
        assert!(same_base(&one, &two));
        assert!(!same_base(
            &one,
            &stamp_text(b"numpy\n", "/usr/bin/python3.12")
        ));
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
