//! Child processes: one builder that prints each step and fails with the command and its status.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};

use crate::Result;

/// A child process started from an argument vector, never through a shell.
///
/// Running it prints one progress line, `==> PROGRAM ARGS...`, with paths under the project
/// root shown relative to it and the variables set for the child shown in front, so that the
/// line can be pasted into a shell at the root to repeat the step.
pub(crate) struct Cmd {
    command: Command,
    program: OsString,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    root: PathBuf,
}

impl Cmd {
    /// A command that runs `program` in `root`, the project root.
    pub(crate) fn new(root: &Path, program: impl AsRef<OsStr>) -> Cmd {
        let mut command = Command::new(program.as_ref());
        command.current_dir(root);
        Cmd {
            command,
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            envs: Vec::new(),
            root: root.to_path_buf(),
        }
    }

    /// `cargo`, as the one that started xtask when there is one.
    pub(crate) fn cargo(root: &Path) -> Cmd {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Cmd::new(root, cargo);
        // Show plain `cargo` rather than the toolchain's absolute path.
        cmd.program = "cargo".into();
        cmd
    }

    /// Appends one argument.
    pub(crate) fn arg(mut self, arg: impl AsRef<OsStr>) -> Cmd {
        self.command.arg(arg.as_ref());
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Appends several arguments.
    pub(crate) fn args<I>(mut self, args: I) -> Cmd
    where
        I: IntoIterator,
        I::Item: AsRef<OsStr>,
    {
        for arg in args {
            self = self.arg(arg);
        }
        self
    }

    /// Sets a variable in the child's environment.
    pub(crate) fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Cmd {
        self.command.env(key.as_ref(), value.as_ref());
        self.envs
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Removes a variable from the child's environment.
    pub(crate) fn env_remove(mut self, key: impl AsRef<OsStr>) -> Cmd {
        self.command.env_remove(key);
        self
    }

    /// Runs the child somewhere other than the project root.
    pub(crate) fn current_dir(mut self, dir: &Path) -> Cmd {
        self.command.current_dir(dir);
        self
    }

    /// Runs the child with the terminal's streams and fails unless it exits with status 0.
    pub(crate) fn run(self) -> Result {
        let display = self.display();
        let status = self.status()?;
        check(&display, status)
    }

    /// Runs the child with the terminal's streams and returns its exit status, whatever it is.
    pub(crate) fn status(mut self) -> Result<ExitStatus> {
        let display = self.display();
        println!("==> {display}");
        self.command
            .status()
            .map_err(|error| could_not_start(&display, &self.program, &error))
    }

    /// Starts the child in the background with its standard output and error written to the
    /// file `log`, so that it can run beside a step that prints to the terminal.
    pub(crate) fn spawn_logged(mut self, log: &Path) -> Result<Background> {
        let display = self.display();
        println!(
            "==> (in the background, output to {}) {display}",
            log.display()
        );
        let file = std::fs::File::create(log)
            .map_err(|error| format!("could not create {}: {error}", log.display()))?;
        let err = file
            .try_clone()
            .map_err(|error| format!("could not open {} twice: {error}", log.display()))?;
        let child = self
            .command
            .stdout(file)
            .stderr(err)
            .spawn()
            .map_err(|error| could_not_start(&display, &self.program, &error))?;
        Ok(Background {
            child,
            display,
            log: log.to_path_buf(),
        })
    }

    /// Runs the child with its standard output captured (standard error still goes to the
    /// terminal) and returns that output once the child has exited with status 0.
    pub(crate) fn read_stdout(mut self) -> Result<String> {
        let display = self.display();
        println!("==> {display}");
        let output = self
            .command
            .stderr(Stdio::inherit())
            .output()
            .map_err(|error| could_not_start(&display, &self.program, &error))?;
        check(&display, output.status)?;
        String::from_utf8(output.stdout)
            .map_err(|_| format!("`{display}` printed something that is not UTF-8"))
    }

    /// The command as the progress line shows it.
    pub(crate) fn display(&self) -> String {
        let mut words: Vec<String> = self
            .envs
            .iter()
            .map(|(key, value)| format!("{}={}", key.to_string_lossy(), quote(value)))
            .collect();
        words.push(self.shorten(&self.program));
        words.extend(self.args.iter().map(|arg| self.shorten(arg)));
        words.join(" ")
    }

    /// Shows a path under the project root, alone or as the value of an `--option=`, relative
    /// to the root, and quotes what a shell would split.
    fn shorten(&self, word: &OsStr) -> String {
        let text = word.to_string_lossy();
        let (option, path) = match text.split_once('=') {
            Some((option, path)) if option.starts_with('-') => (format!("{option}="), path),
            _ => (String::new(), text.as_ref()),
        };
        match Path::new(path).strip_prefix(&self.root) {
            Ok(relative) if Path::new(path).is_absolute() => {
                quote(format!("{option}{}", relative.display()).as_ref())
            }
            _ => quote(word),
        }
    }
}

/// A child started by [`Cmd::spawn_logged`]. Dropping it without [`Background::wait`] kills
/// the child, so that a failed step beside it leaves nothing running.
pub(crate) struct Background {
    child: Child,
    display: String,
    log: PathBuf,
}

impl Background {
    /// Waits for the child, prints what it wrote, and fails unless it exited with status 0.
    pub(crate) fn wait(self) -> Result {
        self.finish(true)
    }

    /// Waits for the child and fails unless it exited with status 0; what it wrote is printed
    /// only when it failed, and otherwise stays in its log.
    pub(crate) fn wait_quiet(self) -> Result {
        self.finish(false)
    }

    fn finish(mut self, always_print: bool) -> Result {
        let status = self
            .child
            .wait()
            .map_err(|error| format!("could not wait for `{}`: {error}", self.display))?;
        if always_print || !status.success() {
            println!("==> output of `{}`:", self.display);
            match std::fs::read_to_string(&self.log) {
                Ok(text) => print!("{text}"),
                Err(error) => println!("(could not read {}: {error})", self.log.display()),
            }
        } else {
            println!(
                "==> done: `{}` (its output is in {})",
                self.display,
                self.log.display()
            );
        }
        check(&self.display, status)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        // Already reaped after `wait`; otherwise the step beside it failed: stop the child.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Turns an exit status other than 0 into an error that names the command.
pub(crate) fn check(display: &str, status: ExitStatus) -> Result {
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{display}` failed: {status}"))
    }
}

fn could_not_start(display: &str, program: &OsStr, error: &std::io::Error) -> String {
    format!(
        "could not start `{display}`: {error} (is `{}` installed and on PATH?)",
        program.to_string_lossy()
    )
}

/// Quotes a word for display when a shell would not read it back as one word.
fn quote(word: &OsStr) -> String {
    let word = word.to_string_lossy();
    let plain = !word.is_empty()
        && word.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | ':' | '=' | ',' | '+')
        });
    if plain {
        word.into_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_shows_variables_program_and_paths_relative_to_the_root() {
        let root = Path::new("/repo");
        let cmd = Cmd::new(root, "/repo/target/venv/bin/python")
            .env("CI", "true")
            .args([
                "-m",
                "pytest",
                "/repo/crates/py-bindings/tests",
                "-k",
                "a and b",
            ]);
        assert_eq!(
            cmd.display(),
            "CI=true target/venv/bin/python -m pytest crates/py-bindings/tests -k 'a and b'"
        );
    }

    #[test]
    fn display_shortens_paths_given_as_option_values() {
        let cmd = Cmd::new(Path::new("/repo"), "valgrind")
            .arg("--log-file=/repo/target/valgrind/a.log")
            .arg("--tool=memcheck");
        assert_eq!(
            cmd.display(),
            "valgrind --log-file=target/valgrind/a.log --tool=memcheck"
        );
    }

    #[test]
    fn display_names_cargo_plainly() {
        let cmd = Cmd::cargo(Path::new("/repo")).args(["test", "--workspace"]);
        assert_eq!(cmd.display(), "cargo test --workspace");
    }

    #[test]
    fn failing_command_reports_the_command_and_its_status() {
        let error = Cmd::new(Path::new("/"), "false").run().unwrap_err();
        assert_eq!(error, "`false` failed: exit status: 1");
    }

    #[test]
    fn missing_program_reports_that_it_could_not_start() {
        let error = Cmd::new(Path::new("/"), "no-such-program-for-xtask")
            .run()
            .unwrap_err();
        assert!(
            error.starts_with("could not start `no-such-program-for-xtask`"),
            "{error}"
        );
    }

    #[test]
    fn background_child_logs_its_output_and_reports_its_status() {
        let dir = std::env::temp_dir().join(format!("xtask-bg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("out.log");
        let ok = Cmd::new(Path::new("/"), "sh")
            .args(["-c", "echo out; echo err >&2"])
            .spawn_logged(&log)
            .unwrap();
        ok.wait().unwrap();
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("out\n") && text.contains("err\n"), "{text}");
        let failed = Cmd::new(Path::new("/"), "false")
            .spawn_logged(&log)
            .unwrap()
            .wait()
            .unwrap_err();
        assert_eq!(failed, "`false` failed: exit status: 1");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn read_stdout_returns_what_the_child_printed() {
        let output = Cmd::new(Path::new("/"), "echo")
            .arg("hello")
            .read_stdout()
            .unwrap();
        assert_eq!(output, "hello\n");
    }
}
