//! `cargo xtask bench`: the criterion benchmarks, then the Python exchange benchmark, then the
//! loader benchmark.
//!
//! The exchange script owns `docs/benchmarks.md`: xtask runs it after criterion and passes it
//! `--output docs/benchmarks.md` (where to write the page) and `--criterion-dir target/criterion`
//! (where criterion left its estimates), as absolute paths. The loader's criterion bench keeps
//! its estimates apart, in `target/criterion-loader`, so that the exchange script's Rust table
//! stays as it was. The loader script writes its section to `target/bench/loader.md`, and xtask
//! puts that section into the page under `## The loader`. Last, `charts.py` draws the page's
//! tables as `docs/benchmarks-exchange.svg` and `docs/benchmarks-loader.svg`, which the page
//! embeds.

use std::fs;
use std::path::Path;

use crate::Result;
use crate::process::Cmd;
use crate::python::{PythonEnv, WheelProfile};

/// The Python benchmark script, relative to the project root.
const PYTHON_BENCH: &str = "bench/bench_exchange.py";

/// The loader benchmark script, relative to the project root.
const LOADER_BENCH: &str = "bench/bench_loader.py";

/// The images benchmark script, relative to the project root; it splices its own section
/// (`## Images`) into the page.
const IMAGES_BENCH: &str = "bench/images.py";

/// The anchors the loader benchmark needs beyond the test requirements.
const BENCH_REQUIREMENTS: &str = "bench/requirements-bench.txt";

/// The page the Python benchmark writes, relative to the project root.
const OUTPUT: &str = "docs/benchmarks.md";

/// The loader's section, as the loader script writes it, relative to the project root.
const LOADER_OUTPUT: &str = "target/bench/loader.md";

/// The script that draws the page's tables as SVG charts, relative to the project root.
const CHARTS: &str = "bench/charts.py";

/// Where the charts go, relative to the project root: beside the page that embeds them.
const CHARTS_DIR: &str = "docs";

/// The heading of the wheel's section in the page.
const WHEEL_HEADING: &str = "## The wheel";

/// The heading of the loader's section in the page.
const LOADER_HEADING: &str = "## The loader";

/// The help of `cargo xtask bench`.
pub(crate) fn help() -> String {
    crate::wrap(
        &format!(
            "cargo bench -p arrow-dlpack-tensor -p arrow-dlpack (CRITERION_HOME=target/criterion) \
             and cargo bench -p arrow-dlpack-loader (CRITERION_HOME=target/criterion-loader); \
             then the profiling wheel (the dist build with line tables and symbols) built and \
             installed, and \
             {PYTHON_BENCH} --output {OUTPUT}; then {BENCH_REQUIREMENTS} installed (and \
             nginx, Debian's nginx-light, where it is missing and apt-get may run) and \
             {LOADER_BENCH} (about 10 minutes), its section put into {OUTPUT} under \
             `{LOADER_HEADING}`; then {IMAGES_BENCH} --output {OUTPUT} (its `## Images` \
             section); then the dist wheel (what pip install builds) built, not \
             installed, and its size printed and put under `{WHEEL_HEADING}`; last, {CHARTS} \
             draws the page's tables as SVG charts in {CHARTS_DIR}/. Arguments after `--` go to \
             both criterion runs."
        ),
        0,
    )
}

/// Runs criterion with `forwarded` as its arguments, then the Python benchmarks if they exist.
pub(crate) fn run(root: &Path, forwarded: &[String]) -> Result {
    // Criterion writes under the build directory unless told otherwise, and xtask builds in the
    // shared one; the estimates belong to this clone.
    let criterion_dir = root.join("target").join("criterion");
    let mut criterion = Cmd::cargo(root)
        .args(["bench", "-p", "arrow-dlpack-tensor", "-p", "arrow-dlpack"])
        .env("CRITERION_HOME", &criterion_dir);
    if !forwarded.is_empty() {
        criterion = criterion.arg("--").args(forwarded);
    }
    criterion.run()?;

    let loader_criterion = root.join("target").join("criterion-loader");
    let mut loader = Cmd::cargo(root)
        .args(["bench", "-p", "arrow-dlpack-loader"])
        .env("CRITERION_HOME", &loader_criterion);
    if !forwarded.is_empty() {
        loader = loader.arg("--").args(forwarded);
    }
    loader.run()?;

    let script = root.join(PYTHON_BENCH);
    if !script.is_file() {
        println!("==> skipping the Python benchmark: {PYTHON_BENCH} does not exist");
        return Ok(());
    }
    let env = PythonEnv::ensure(root)?;
    // Line tables in the measured wheel, so that a profile of it names the code.
    env.build_and_install(root, WheelProfile::Profiling)?;
    env.command_outside_sources(root)?
        .arg(script)
        .arg("--output")
        .arg(root.join(OUTPUT))
        .arg("--criterion-dir")
        .arg(&criterion_dir)
        .run()?;

    let loader_script = root.join(LOADER_BENCH);
    if !loader_script.is_file() {
        println!("==> skipping the loader benchmark: {LOADER_BENCH} does not exist");
        return Ok(());
    }
    env.install_extra_requirements(root, BENCH_REQUIREMENTS)?;
    crate::nginx::ensure(root, "the object-storage rows from nginx will be left out");
    let section_path = root.join(LOADER_OUTPUT);
    env.command_outside_sources(root)?
        .arg(loader_script)
        .arg("--output")
        .arg(&section_path)
        .arg("--criterion-dir")
        .arg(&loader_criterion)
        .run()?;
    let read = |path: &Path| {
        fs::read_to_string(path)
            .map_err(|error| format!("could not read {}: {error}", path.display()))
    };
    let page_path = root.join(OUTPUT);
    let page = splice_section(&read(&page_path)?, LOADER_HEADING, &read(&section_path)?);
    fs::write(&page_path, page)
        .map_err(|error| format!("could not write {}: {error}", page_path.display()))?;
    println!("==> put {LOADER_OUTPUT} into {OUTPUT} under `{LOADER_HEADING}`");

    // The images benchmark (about 15 minutes): its section replaces the page's `## Images`.
    env.command_outside_sources(root)?
        .arg(root.join(IMAGES_BENCH))
        .arg("--output")
        .arg(&page_path)
        .run()?;

    // The wheel users install (the `dist` profile, as `pip install` builds it): built, not
    // installed, and its size printed and put into the page.
    let wheel = env.build(root, WheelProfile::Dist)?;
    let bytes = fs::metadata(&wheel)
        .map_err(|error| format!("could not read {}: {error}", wheel.display()))?
        .len();
    // The extension module's size once unpacked, read by the environment's Python (xtask reads
    // no zip files itself).
    let unpacked = env
        .command(root)
        .args(["-c", UNPACKED_SIZE])
        .arg(&wheel)
        .read_stdout()?;
    let unpacked: u64 = unpacked
        .trim()
        .parse()
        .map_err(|_| format!("could not read the extension module's size from {unpacked:?}"))?;
    let name = wheel.file_name().unwrap_or_default().to_string_lossy();
    let section = wheel_section(&name, bytes, unpacked);
    print!("{section}");
    let page = splice_section(&read(&page_path)?, WHEEL_HEADING, &section);
    fs::write(&page_path, page)
        .map_err(|error| format!("could not write {}: {error}", page_path.display()))?;
    println!("==> put the dist wheel's size into {OUTPUT} under `{WHEEL_HEADING}`");

    // The charts read the finished page, loader section included, so they are drawn last.
    env.command_outside_sources(root)?
        .arg(root.join(CHARTS))
        .arg("--page")
        .arg(&page_path)
        .arg("--out")
        .arg(root.join(CHARTS_DIR))
        .run()
}

/// Prints the unpacked size of the extension module of the wheel named by `sys.argv[1]`.
const UNPACKED_SIZE: &str = "import sys, zipfile; \
    print(sum(i.file_size for i in zipfile.ZipFile(sys.argv[1]).infolist() \
    if i.filename.endswith(('.so', '.pyd', '.dylib'))))";

/// The section of the page that gives the size of the wheel users install.
fn wheel_section(name: &str, bytes: u64, unpacked: u64) -> String {
    format!(
        "{WHEEL_HEADING}\n\n\
         The wheel that `pip install ./crates/py-bindings` builds and installs (the `dist` \
         profile of the workspace's `Cargo.toml`: optimised, link-time optimised into one \
         codegen unit, symbols stripped): `{name}`, {:.1} MB ({} bytes); its extension module \
         unpacked {:.1} MB ({} bytes).\n\
         The profile that `cargo xtask bench` measures (`profiling`) is this build with line \
         tables and its symbols kept, so that a profiler names the code: the same machine code \
         as the wheel users get, in a larger file.\n",
        bytes as f64 / 1e6,
        thousands(bytes),
        unpacked as f64 / 1e6,
        thousands(unpacked)
    )
}

/// A number with commas between groups of three digits, as the page writes counts.
fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `page` with the section that starts at the line `heading` (up to the next `## ` heading or
/// the end) replaced by `section`, or with `section` appended when there is no such line.
fn splice_section(page: &str, heading: &str, section: &str) -> String {
    let section = section.trim_end_matches('\n');
    let lines: Vec<&str> = page.lines().collect();
    let Some(start) = lines.iter().position(|line| line.trim_end() == heading) else {
        return format!("{}\n\n{section}\n", page.trim_end_matches('\n'));
    };
    let end = lines[start + 1..]
        .iter()
        .position(|line| line.starts_with("## "))
        .map_or(lines.len(), |offset| start + 1 + offset);
    let mut out: Vec<&str> = lines[..start].to_vec();
    out.push(section);
    if end < lines.len() {
        out.push("");
        out.extend(&lines[end..]);
    }
    out.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wheel_section_gives_the_size_in_megabytes_and_bytes() {
        let section = wheel_section("a.whl", 3_321_400, 9_876_543);
        assert!(section.starts_with("## The wheel\n\n"), "{section}");
        assert!(
            section.contains("`a.whl`, 3.3 MB (3,321,400 bytes); its extension module unpacked 9.9 MB (9,876,543 bytes)"),
            "{section}"
        );
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
    }

    #[test]
    fn splice_appends_a_missing_section() {
        let page = "# Page\n\n## One\n\ntext\n";
        assert_eq!(
            splice_section(page, "## The loader", "## The loader\n\nnew\n"),
            "# Page\n\n## One\n\ntext\n\n## The loader\n\nnew\n"
        );
    }

    #[test]
    fn splice_replaces_the_section_and_keeps_the_rest() {
        let page = "# Page\n\n## The loader\n\nold\n### sub\n\nold\n\n## After\n\nkept\n";
        assert_eq!(
            splice_section(page, "## The loader", "## The loader\n\nnew\n"),
            "# Page\n\n## The loader\n\nnew\n\n## After\n\nkept\n"
        );
        let last = "# Page\n\n## The loader\n\nold\n";
        assert_eq!(
            splice_section(last, "## The loader", "## The loader\n\nnew\n"),
            "# Page\n\n## The loader\n\nnew\n"
        );
    }
}
