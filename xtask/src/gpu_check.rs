//! `cargo xtask gpu-check`: the device paths checked on a real GPU, with real peers.
//!
//! 1. refuses at once, with a clear message, on a machine without an NVIDIA GPU (no `nvidia-smi`
//!    or no GPU listed);
//! 2. takes the machine's Python (`ARROW_DLPACK_PYTHON`, else `python3`) when a CUDA build of
//!    torch and CuPy import there: GPU machines often have them and no network, so nothing is
//!    installed but the wheel; otherwise creates `target/gpu-venv` and installs
//!    gpu/requirements-gpu.txt (torch, `cupy-cuda13x`, numpy, pyarrow,
//!    maturin), then tries `cudf-cu13` and `pylibcudf-cu13` from NVIDIA's index (the CUDA 13
//!    builds, which share CuPy's CUDA version; a miss is reported by the script, which skips cuDF
//!    when it does not import);
//! 3. builds the wheel in release mode into `target/gpu-wheels` (with that Python's maturin, or
//!    a `maturin` on the path) and installs it without dependencies;
//! 4. runs gpu/gpu_check.py, which prints one summary line.

use std::fs;
use std::path::{Path, PathBuf};

use crate::Result;
use crate::process::Cmd;

/// The script that checks the device paths, relative to the project root.
const SCRIPT: &str = "gpu/gpu_check.py";
/// What the GPU environment needs when the machine's Python lacks it.
const REQUIREMENTS: &str = "gpu/requirements-gpu.txt";
/// Where NVIDIA publishes the cuDF wheels.
const NVIDIA_INDEX: &str = "https://pypi.nvidia.com";
/// Succeeds where a CUDA build of torch and CuPy import and see a GPU.
const PROBE: &str = "import torch, cupy; assert torch.cuda.is_available()";

/// The help of `cargo xtask gpu-check`.
pub(crate) fn help() -> String {
    crate::wrap(
        &format!(
            "On a machine with an NVIDIA GPU (it fails at once, saying so, without one): uses the \
             machine's Python ($ARROW_DLPACK_PYTHON or python3) when a CUDA torch and CuPy import \
             there; otherwise creates target/gpu-venv with {REQUIREMENTS} and tries cudf-cu13 \
             then pylibcudf-cu13 from {NVIDIA_INDEX}. Builds and installs the release wheel and \
             runs {SCRIPT}, which prints one summary line; arguments after `--` go to the script."
        ),
        0,
    )
}

/// Runs the GPU check; arguments after `--` go to the script.
pub(crate) fn run(root: &Path, forwarded: &[String]) -> Result {
    require_gpu(root)?;
    let base: PathBuf = std::env::var_os("ARROW_DLPACK_PYTHON")
        .unwrap_or_else(|| "python3".into())
        .into();
    let probe = Cmd::new(root, &base).args(["-c", PROBE]).status();
    let python = if probe.is_ok_and(|status| status.success()) {
        println!(
            "gpu-check: using {} and its installed torch and CuPy",
            base.display()
        );
        base
    } else {
        make_venv(root, &base)?
    };
    let wheels = root.join("target").join("gpu-wheels");
    let _ = fs::remove_dir_all(&wheels);
    let has_maturin = Cmd::new(root, &python)
        .args(["-c", "import maturin"])
        .status()
        .is_ok_and(|status| status.success());
    let maturin = if has_maturin {
        Cmd::new(root, &python).args(["-m", "maturin"])
    } else {
        Cmd::new(root, "maturin")
    };
    maturin
        .env_remove("PYTHONPATH")
        .args(["build", "--release", "--manifest-path"])
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
    Cmd::new(root, &python)
        .env_remove("PYTHONPATH")
        .args(["-m", "pip", "install", "--force-reinstall", "--no-deps"])
        .arg(&wheel)
        .run()?;
    let cwd = root.join("target").join("python-cwd");
    fs::create_dir_all(&cwd)
        .map_err(|error| format!("could not create {}: {error}", cwd.display()))?;
    Cmd::new(root, &python)
        .env_remove("PYTHONPATH")
        .current_dir(&cwd)
        .arg(root.join(SCRIPT))
        .args(forwarded)
        .run()
}

/// Creates (or updates) `target/gpu-venv` from the network, and returns its Python.
fn make_venv(root: &Path, base: &Path) -> Result<PathBuf> {
    let venv = root.join("target").join("gpu-venv");
    let python = venv.join("bin").join("python");
    if !python.exists() {
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
    for package in ["cudf-cu13", "pylibcudf-cu13"] {
        if pip(&["--extra-index-url", NVIDIA_INDEX, package])
            .status()?
            .success()
        {
            break;
        }
    }
    Ok(python)
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
