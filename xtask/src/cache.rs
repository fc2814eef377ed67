//! The project's directory in the user's cache, shared by every clone on the machine: the Python
//! environment (see `python.rs`) and the Cargo build directory of xtask's own builds.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use crate::{Result, workspace};

/// The variable that names the Python environment's directory instead of the cache.
pub(crate) const VENV_VARIABLE: &str = "ARROW_DLPACK_VENV";

/// The variable through which Cargo, and maturin through it, are told where to build.
const TARGET_DIR_VARIABLE: &str = "CARGO_TARGET_DIR";

/// `$XDG_CACHE_HOME/arrow-dlpack`, or `~/.cache/arrow-dlpack`.
pub(crate) fn dir() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_CACHE_HOME") {
        Some(dir) if Path::new(&dir).is_absolute() => PathBuf::from(dir),
        _ => match std::env::var_os("HOME").or_else(|| std::env::var_os("USERPROFILE")) {
            Some(home) if !home.is_empty() => PathBuf::from(home).join(".cache"),
            _ => {
                return Err(format!(
                    "neither XDG_CACHE_HOME nor HOME is set, so there is no cache directory for \
                     the Python environment and the builds; set {VENV_VARIABLE} and \
                     {TARGET_DIR_VARIABLE}"
                ));
            }
        },
    };
    Ok(base.join("arrow-dlpack"))
}

/// The build directory of every Cargo and maturin command that xtask starts: the one named by
/// `CARGO_TARGET_DIR` when that is set, and otherwise `<cache>/target`, shared by every clone.
///
/// Dependencies are then compiled once per machine and profile rather than once per clone: a
/// fresh clone rebuilds only the workspace's own crates. Cargo locks the directory, so two
/// clones building at once take turns. The choice is made once, here, and handed to the
/// children through the variable, so that all of them (cargo test, clippy, rustdoc, maturin)
/// build in the same place.
pub(crate) fn target_dir() -> Result<PathBuf> {
    match std::env::var_os(TARGET_DIR_VARIABLE) {
        Some(dir) if !dir.is_empty() => Ok(PathBuf::from(dir)),
        _ => Ok(dir()?.join("target")),
    }
}

/// The file in the build directory that names the clone whose sources were built there last.
const LAST_CLONE: &str = "xtask-last-clone";

/// The build directory, held by one xtask command at a time (see [`claim_build_dir`]).
pub(crate) struct BuildDirClaim {
    _lock: File,
}

/// Sets `CARGO_TARGET_DIR` for every child that xtask starts from now on (and takes the clone's
/// `CARGO_MANIFEST_DIR` from them), waits until no other xtask command uses the build
/// directory, and makes sure that the workspace's own crates are built from this clone's
/// sources.
///
/// Cargo names the artifacts of a workspace crate by its path inside the workspace, not by the
/// clone, and judges them fresh when they are newer than the sources it finds. Two clones that
/// share the directory would then share one artifact per crate: after clone A built, clone B,
/// whose files are older, would test A's code. So the directory is held for a whole command
/// (a lock beside it), and when the clone that built there last was another one, the
/// fingerprints of the workspace's crates are removed, so that Cargo builds them again from
/// this clone; the dependencies, the same for every clone, are kept.
pub(crate) fn claim_build_dir(root: &Path) -> Result<BuildDirClaim> {
    let target = target_dir()?;
    // SAFETY: called at the start of `main`, before xtask starts any thread, so no other thread
    // can read the environment while it changes.
    unsafe {
        std::env::set_var(TARGET_DIR_VARIABLE, &target);
        // `cargo xtask` gives xtask its clone's manifest path, which every child (cargo, maturin)
        // would inherit; ring's build script asks to run again when `CARGO_MANIFEST_DIR`
        // changes, so each clone rebuilt ring and the TLS stack above it (a minute on two
        // cores). No child needs them: cargo sets them itself for what it builds.
        std::env::remove_var("CARGO_MANIFEST_DIR");
        std::env::remove_var("CARGO_MANIFEST_PATH");
    }
    fs::create_dir_all(&target)
        .map_err(|error| format!("could not create {}: {error}", target.display()))?;
    let lock_path = target.join("xtask.lock");
    own_inode(&lock_path)?;
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|error| format!("could not open {}: {error}", lock_path.display()))?;
    if lock.try_lock().is_err() {
        println!(
            "==> waiting for another xtask command that builds in {}",
            target.display()
        );
        lock.lock()
            .map_err(|error| format!("could not lock {}: {error}", lock_path.display()))?;
    }
    let last_path = target.join(LAST_CLONE);
    let this = root.display().to_string();
    if fs::read_to_string(&last_path).ok().as_deref() != Some(this.as_str()) {
        // Every member, xtask included: its test binary holds the clone's path.
        let packages: Vec<String> = workspace::members(root)?
            .into_iter()
            .map(|(_, package)| package)
            .collect();
        let removed = remove_fingerprints(&target, &packages)?;
        if removed > 0 {
            println!(
                "==> another clone built in {} last: the workspace's crates will be built again \
                 from this one ({removed} fingerprints removed)",
                target.display()
            );
        }
        // Written beside and renamed over, so that a copy of the directory made with hard links
        // keeps its own record rather than writing through into this one.
        let written = target.join(format!("{LAST_CLONE}.{}", std::process::id()));
        fs::write(&written, &this)
            .and_then(|()| fs::rename(&written, &last_path))
            .map_err(|error| format!("could not write {}: {error}", last_path.display()))?;
    }
    Ok(BuildDirClaim { _lock: lock })
}

/// Gives `path` an inode of its own when it shares one with another name.
///
/// A build directory copied with hard links (`cp -al`, a cheap way to start a second one) shares
/// its lock file with the original, and a lock on one would then hold the other: two commands in
/// two directories would wait for each other. A shared file is replaced by a new one, renamed
/// over it, before it is locked.
fn own_inode(path: &Path) -> Result {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match fs::metadata(path) {
            Ok(metadata) if metadata.nlink() > 1 => {
                let fresh = path.with_extension(format!("lock.{}", std::process::id()));
                File::create(&fresh)
                    .and_then(|_| fs::rename(&fresh, path))
                    .map_err(|error| format!("could not replace {}: {error}", path.display()))?;
            }
            _ => {}
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Removes, in every profile's folder of `target`, the fingerprint folders of `packages`
/// (`<profile>/.fingerprint/<package>-<hash>`), and returns how many it removed.
fn remove_fingerprints(target: &Path, packages: &[String]) -> Result<usize> {
    let mut removed = 0;
    let Ok(profiles) = fs::read_dir(target) else {
        return Ok(0);
    };
    for profile in profiles.flatten() {
        let fingerprints = profile.path().join(".fingerprint");
        let Ok(entries) = fs::read_dir(&fingerprints) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let package = name
                .rsplit_once('-')
                .map_or(name.as_str(), |(package, _)| package);
            if packages.iter().any(|wanted| wanted == package) {
                fs::remove_dir_all(entry.path()).map_err(|error| {
                    format!("could not remove {}: {error}", entry.path().display())
                })?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_lock_file_shared_through_a_hard_link_gets_its_own_inode() {
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("xtask-inode-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let original = dir.join("original.lock");
        let copy = dir.join("xtask.lock");
        fs::write(&original, "").unwrap();
        fs::hard_link(&original, &copy).unwrap();
        assert_eq!(fs::metadata(&copy).unwrap().nlink(), 2);
        own_inode(&copy).unwrap();
        let (a, b) = (
            fs::metadata(&original).unwrap(),
            fs::metadata(&copy).unwrap(),
        );
        assert_eq!((a.nlink(), b.nlink()), (1, 1));
        assert_ne!(a.ino(), b.ino());
        // A file of its own is left as it is.
        own_inode(&copy).unwrap();
        assert_eq!(fs::metadata(&copy).unwrap().ino(), b.ino());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fingerprints_of_the_named_packages_only_are_removed_in_every_profile() {
        let target = std::env::temp_dir().join(format!("xtask-fp-{}", std::process::id()));
        let _ = fs::remove_dir_all(&target);
        let kept = [
            "debug/.fingerprint/parquet-0123",
            "debug/.fingerprint/arrow-dlpack-loader-extra-99",
            "release/.fingerprint/arrow-array-77",
        ];
        let gone = [
            "debug/.fingerprint/arrow-dlpack-1111",
            "debug/.fingerprint/arrow-dlpack-2222",
            "release/.fingerprint/arrow-dlpack-loader-3333",
            "profiling/.fingerprint/arrow-dlpack-4444",
        ];
        for dir in kept.iter().chain(&gone) {
            fs::create_dir_all(target.join(dir)).unwrap();
        }
        let packages = [
            "arrow-dlpack".to_string(),
            "arrow-dlpack-loader".to_string(),
        ];
        assert_eq!(remove_fingerprints(&target, &packages).unwrap(), gone.len());
        for dir in kept {
            assert!(target.join(dir).exists(), "{dir} was removed");
        }
        for dir in gone {
            assert!(!target.join(dir).exists(), "{dir} was kept");
        }
        fs::remove_dir_all(&target).unwrap();
    }
}
