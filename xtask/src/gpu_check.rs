//! `cargo xtask gpu-check`: the device paths checked on a real GPU, with real peers.
//!
//! 1. refuses at once, with a clear message, on a machine without an NVIDIA GPU (no `nvidia-smi`
//!    or no GPU listed);
//! 2. creates `target/gpu-venv` (apart from the test environment, which needs no GPU) and
//!    installs crates/py-bindings/gpu/requirements-gpu.txt (a CUDA build of torch,
//!    `cupy-cuda13x`, numpy, pyarrow, maturin); `cudf-cu12` then `pylibcudf-cu12` are tried from
//!    NVIDIA's index, and when neither wheel installs that part of the check is skipped with a
//!    printed note (the only skip, reported in the summary line);
//! 3. builds the wheel in release mode into `target/gpu-wheels` and installs it;
//! 4. runs crates/py-bindings/gpu/gpu_check.py, which prints one summary line.

use std::fs;
use std::path::Path;

use crate::Result;
use crate::process::Cmd;

/// The script that checks the device paths, relative to the project root.
const SCRIPT: &str = "crates/py-bindings/gpu/gpu_check.py";
/// What the GPU environment needs besides cuDF.
const REQUIREMENTS: &str = "crates/py-bindings/gpu/requirements-gpu.txt";
/// Where NVIDIA publishes the cuDF wheels.
const NVIDIA_INDEX: &str = "https://pypi.nvidia.com";

/// Runs the GPU check; arguments after `--` go to the script.
pub(crate) fn run(root: &Path, forwarded: &[String]) -> Result {
    require_gpu(root)?;
    let venv = root.join("target").join("gpu-venv");
    let python = venv.join("bin").join("python");
    if !python.exists() {
        let base = std::env::var_os("ARROW_DLPACK_PYTHON").unwrap_or_else(|| "python3".into());
        Cmd::new(root, base).args(["-m", "venv"]).arg(&venv).run()?;
    }
    let pip = |args: &[&str]| {
        Cmd::new(root, &python)
            .env_remove("PYTHONPATH")
            .args(["-m", "pip", "install"])
            .args(args)
    };
    pip(&["--upgrade", "pip"]).run()?;
    pip(&["--requirement", REQUIREMENTS]).run()?;
    let mut cudf = false;
    for package in ["cudf-cu12", "pylibcudf-cu12"] {
        let status = pip(&["--extra-index-url", NVIDIA_INDEX, package]).status()?;
        if status.success() {
            cudf = true;
            break;
        }
    }
    if !cudf {
        println!(
            "note: neither cudf-cu12 nor pylibcudf-cu12 installed; the cuDF part of the check is \
             skipped, and the summary line says so"
        );
    }
    let wheels = root.join("target").join("gpu-wheels");
    let _ = fs::remove_dir_all(&wheels);
    Cmd::new(root, &python)
        .env_remove("PYTHONPATH")
        .args(["-m", "maturin", "build", "--release", "--manifest-path"])
        .arg(root.join("crates/py-bindings/Cargo.toml"))
        .arg("--out")
        .arg(&wheels)
        .arg("--interpreter")
        .arg(&python)
        .run()?;
    let wheel = fs::read_dir(&wheels)
        .map_err(|error| format!("could not read {}: {error}", wheels.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .ok_or_else(|| format!("maturin left no wheel in {}", wheels.display()))?;
    pip(&["--force-reinstall", "--no-deps"]).arg(&wheel).run()?;
    let cwd = root.join("target").join("python-cwd");
    fs::create_dir_all(&cwd)
        .map_err(|error| format!("could not create {}: {error}", cwd.display()))?;
    let mut script = Cmd::new(root, &python)
        .env_remove("PYTHONPATH")
        .current_dir(&cwd)
        .arg(root.join(SCRIPT));
    if !cudf {
        script = script.arg("--no-cudf");
    }
    script.args(forwarded).run()
}

/// Fails unless `nvidia-smi -L` lists a GPU.
fn require_gpu(root: &Path) -> Result {
    let listed = Cmd::new(root, "nvidia-smi").arg("-L").read_stdout();
    match listed {
        Ok(gpus) if gpus.lines().any(|line| line.starts_with("GPU ")) => Ok(()),
        Ok(_) => Err(no_gpu("nvidia-smi -L lists no GPU")),
        Err(error) => Err(no_gpu(&error)),
    }
}

fn no_gpu(why: &str) -> String {
    format!(
        "gpu-check needs an NVIDIA GPU with its driver, and this machine has none ({why}); \
         run it on a GPU machine, and record its summary line in docs/compatibility.md"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_and_requirements_exist() {
        let root = crate::project_root();
        assert!(root.join(SCRIPT).is_file());
        assert!(root.join(REQUIREMENTS).is_file());
    }

    #[test]
    fn no_gpu_message_says_what_to_do() {
        let message = no_gpu("nvidia-smi not found");
        assert!(message.contains("needs an NVIDIA GPU"));
        assert!(message.contains("nvidia-smi not found"));
    }
}
