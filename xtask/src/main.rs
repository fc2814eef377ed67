//! `cargo xtask`: the workspace's one command surface.
//!
//! Each command lives in its own module with a `run` function; `.cargo/config.toml` wires the
//! `cargo xtask` alias to this binary.
//! Children are started with argument vectors through `process::Cmd`, never through a shell,
//! from the project root, which comes from `CARGO_MANIFEST_DIR` at compile time.
//! Everything after `--` on the command line is forwarded to the tool a command wraps.

mod bench;
mod cache;
mod demo;
mod doc_examples;
mod gpu_check;
mod lint;
mod nginx;
mod process;
mod python;
mod stages;
mod test;
mod tidy;
mod valgrind;
mod venv;
mod workspace;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The error of every step: a message that says which step failed and why.
type Result<T = ()> = std::result::Result<T, String>;

/// One command of `cargo xtask`: the table below both dispatches the commands and writes their
/// help, so that the help names exactly the commands there are. Each command's text is its
/// module's `help()`, written beside the code it describes.
struct Command {
    /// The name on the command line.
    name: &'static str,
    /// What the command does, as `cargo xtask help` prints it (lines of at most 80 columns).
    help: fn() -> String,
    /// Whether arguments after `--` go to the tool the command wraps.
    forwards: bool,
    /// Whether the command builds (and so holds the build directory while it runs).
    builds: bool,
    /// Runs the command with the project root and the arguments after `--`.
    run: fn(&Path, &[String]) -> Result,
}

/// Every command, in the order the help lists them.
const COMMANDS: &[Command] = &[
    Command {
        name: "test",
        help: test::help,
        forwards: true,
        builds: true,
        run: test::run,
    },
    Command {
        name: "doc-examples",
        help: doc_examples::help,
        forwards: false,
        builds: true,
        run: |root, _| doc_examples::run(root),
    },
    Command {
        name: "demo",
        help: demo::help,
        forwards: true,
        builds: true,
        run: demo::run,
    },
    Command {
        name: "lint",
        help: lint::help,
        forwards: false,
        builds: true,
        run: |root, _| lint::run(root),
    },
    Command {
        name: "bench",
        help: bench::help,
        forwards: true,
        builds: true,
        run: bench::run,
    },
    Command {
        name: "tidy",
        help: tidy::help,
        forwards: false,
        builds: true,
        run: |root, _| tidy::run(root),
    },
    Command {
        name: "valgrind",
        help: valgrind::help,
        forwards: true,
        builds: true,
        run: valgrind::run,
    },
    Command {
        name: "venv",
        help: venv::help,
        forwards: false,
        builds: true,
        run: |root, _| venv::run(root),
    },
    Command {
        name: "gpu-check",
        help: gpu_check::help,
        forwards: true,
        builds: true,
        run: gpu_check::run,
    },
    Command {
        name: "help",
        help: || "This text.".to_string(),
        forwards: false,
        builds: false,
        run: |_, _| {
            print!("{}", help());
            Ok(())
        },
    },
];

/// What the help says after the commands: where builds and the Python environment live.
const HELP_FOOTER: &str = "\
Builds:
  Every Cargo and maturin command that xtask starts builds in <cache>/arrow-dlpack/target
  (<cache> is $XDG_CACHE_HOME or ~/.cache), shared by every clone on the machine, so that the
  dependencies are compiled once; CARGO_TARGET_DIR, when set, names another directory. One
  xtask command at a time builds there (the others wait), and when another clone built there
  last, the workspace's own crates are built again from this one.

The Python environment:
  One per machine, shared by every clone: <cache>/arrow-dlpack/venv-<key>, where <key> hashes
  the requirement lines (not the comments) of crates/py-bindings/requirements-test.txt and the
  interpreter's path and version. It is made with `python3 -m venv` (set ARROW_DLPACK_PYTHON
  to use another interpreter) and gets the requirements from the package registry; a changed
  file or interpreter makes a new one, and one whose stamp does not match its key exactly (an
  interrupted install) is made again. ARROW_DLPACK_VENV names another directory for it.
  target/venv is a link to it; environments of other keys unused for 14 days are removed when
  a new one is made.

Examples:
  cargo xtask test -- -k fixed_shape -x
  cargo xtask bench -- export
  cargo xtask valgrind -- import
";

/// The help text, generated from [`COMMANDS`].
fn help() -> String {
    let mut text =
        String::from("cargo xtask <command> [-- <arguments for the wrapped tool>]\n\nCommands:\n");
    // The names' column: the longest name and two spaces.
    let width = COMMANDS
        .iter()
        .map(|command| command.name.len())
        .max()
        .unwrap_or(0)
        + 2;
    for command in COMMANDS {
        for (index, line) in (command.help)().lines().enumerate() {
            let name = if index == 0 { command.name } else { "" };
            text.push_str(format!("  {name:<width$}{line}").trim_end());
            text.push('\n');
        }
    }
    text.push('\n');
    text.push_str(HELP_FOOTER);
    text
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (name, own, forwarded) = split_args(&args);
    let root = project_root();
    let Some(command) = COMMANDS
        .iter()
        .find(|command| Some(command.name) == name.map(|name| name.trim_start_matches("--")))
        .or(match name {
            None | Some("-h") => COMMANDS.iter().find(|command| command.name == "help"),
            Some(_) => None,
        })
    else {
        eprint!("{}", help());
        eprintln!(
            "error: unknown command `{}`; the commands are listed above",
            name.unwrap_or_default()
        );
        return ExitCode::FAILURE;
    };
    // Held until the command ends; `help` builds nothing and waits for nobody.
    let _build_dir = if command.builds {
        match cache::claim_build_dir(&root) {
            Ok(claim) => Some(claim),
            Err(message) => {
                eprintln!("error: {message}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    let result = if !own.is_empty() {
        Err(format!(
            "unexpected argument `{}` for `cargo xtask {}`; arguments for the wrapped tool go \
             after `--`",
            own[0], command.name
        ))
    } else if !command.forwards && !forwarded.is_empty() {
        Err(format!(
            "`cargo xtask {}` forwards no arguments, but got `{}`",
            command.name,
            forwarded.join(" ")
        ))
    } else {
        (command.run)(&root, forwarded)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Splits the command line into the command, the command's own arguments and the arguments
/// after the first `--`, which belong to the wrapped tool.
fn split_args(args: &[String]) -> (Option<&str>, &[String], &[String]) {
    let (before, forwarded) = match args.iter().position(|arg| arg == "--") {
        Some(separator) => (&args[..separator], &args[separator + 1..]),
        None => (args, &args[args.len()..]),
    };
    match before.split_first() {
        Some((command, own)) => (Some(command.as_str()), own, forwarded),
        None => (None, before, forwarded),
    }
}

/// `text` wrapped at 80 columns, the lines after the first indented by `indent`.
pub(crate) fn wrap(text: &str, indent: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > 80 {
            out.push_str(&line);
            out.push('\n');
            line = " ".repeat(indent);
        } else if !line.is_empty() && !line.ends_with(' ') {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// The workspace root: the parent of this crate's manifest directory.
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| arg.to_string()).collect()
    }

    #[test]
    fn split_args_forwards_everything_after_the_first_separator() {
        let args = strings(&["test", "--", "-k", "x", "--", "y"]);
        let (command, own, forwarded) = split_args(&args);
        assert_eq!(command, Some("test"));
        assert!(own.is_empty());
        assert_eq!(forwarded, strings(&["-k", "x", "--", "y"]));
    }

    #[test]
    fn split_args_keeps_arguments_before_the_separator_as_the_commands_own() {
        let args = strings(&["bench", "extra"]);
        let (command, own, forwarded) = split_args(&args);
        assert_eq!(command, Some("bench"));
        assert_eq!(own, strings(&["extra"]));
        assert!(forwarded.is_empty());
    }

    #[test]
    fn split_args_of_nothing_has_no_command() {
        let (command, own, forwarded) = split_args(&[]);
        assert_eq!(command, None);
        assert!(own.is_empty() && forwarded.is_empty());
    }

    #[test]
    fn help_lists_every_command_of_the_table_once_and_nothing_else() {
        let help = help();
        let listed: Vec<&str> = help
            .lines()
            .skip_while(|line| *line != "Commands:")
            .skip(1)
            .take_while(|line| !line.is_empty())
            .filter_map(|line| line.strip_prefix("  "))
            .filter(|line| !line.starts_with(' '))
            .filter_map(|line| line.split_whitespace().next())
            .collect();
        let names: Vec<&str> = COMMANDS.iter().map(|command| command.name).collect();
        assert_eq!(listed, names);
        assert!(help.contains("after `--`"));
        assert!(help.contains(python::PYTHON_VARIABLE));
        assert!(help.contains(cache::VENV_VARIABLE));
        for line in help.lines() {
            assert!(line.len() <= 100, "a help line is too long: {line:?}");
        }
    }

    #[test]
    fn the_help_of_test_lists_the_stages_test_runs() {
        let help = test::help();
        for (number, (stage, _)) in test::STAGES.iter().enumerate() {
            assert!(
                help.contains(&format!("{}. {stage}:", number + 1)),
                "the help of `test` does not list its stage {stage:?}: {help}"
            );
        }
    }

    #[test]
    fn project_root_is_the_workspace_root() {
        let manifest = std::fs::read_to_string(project_root().join("Cargo.toml")).unwrap();
        assert!(manifest.contains("[workspace]"));
    }
}
