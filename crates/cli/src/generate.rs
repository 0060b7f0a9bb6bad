//! `--generate man|complete-bash|complete-zsh|complete-fish`: a man page
//! or a shell completion script, made from a binary's own clap
//! definition, so they always say what `--help` says. One implementation
//! for aesd, aescrypt and aesload.

use std::io::{self, Write};
use std::process::ExitCode;

use clap_complete::Shell;

/// What `--generate` writes to stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Generate {
    /// A man page (roff), for `man -l`: `--generate man > PROGRAM.1`.
    Man,
    /// A bash completion script.
    CompleteBash,
    /// A zsh completion script.
    CompleteZsh,
    /// A fish completion script.
    CompleteFish,
}

/// `command` with its required arguments required only when `--generate`
/// is absent (an argument `generate`), so `aescrypt --generate man` needs
/// no MODE, --server, -i or -o.
pub fn unless_generating(command: clap::Command) -> clap::Command {
    command.mut_args(|arg| match arg.is_required_set() {
        true => arg.required(false).required_unless_present("generate"),
        false => arg,
    })
}

/// Writes `kind` for `command` to `out`.
pub fn generate(kind: Generate, mut command: clap::Command, out: &mut dyn Write) -> io::Result<()> {
    let shell = match kind {
        Generate::Man => return clap_mangen::Man::new(command).render(out),
        Generate::CompleteBash => Shell::Bash,
        Generate::CompleteZsh => Shell::Zsh,
        Generate::CompleteFish => Shell::Fish,
    };
    let name = command.get_name().to_owned();
    clap_complete::generate(shell, &mut command, name, out);
    out.flush()
}

/// `--generate KIND` as every binary answers it: `kind` for `command` on
/// stdout and success, or one line on stderr (`PROGRAM: cannot write to
/// stdout: ...`, the program being the command's name) and failure.
pub fn print(kind: Generate, command: clap::Command) -> ExitCode {
    let program = command.get_name().to_owned();
    match generate(kind, command, &mut io::stdout()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{program}: cannot write to stdout: {err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small command with one flag.
    fn command() -> clap::Command {
        clap::Command::new("demo")
            .about("Demonstrates")
            .arg(clap::Arg::new("level").long("level").help("How much"))
    }

    #[test]
    fn each_kind_names_the_command_and_its_flag() {
        for (kind, marker) in [
            (Generate::Man, ".TH demo"),
            (Generate::CompleteBash, "complete -F _demo"),
            (Generate::CompleteZsh, "#compdef demo"),
            (Generate::CompleteFish, "complete -c demo"),
        ] {
            let mut out = Vec::new();
            generate(kind, command(), &mut out).expect("generate");
            let text = String::from_utf8(out).expect("utf-8");
            assert!(text.contains(marker), "{kind:?}: no {marker:?} in\n{text}");
            assert!(text.contains("level"), "{kind:?}: no flag in\n{text}");
        }
    }

    #[test]
    fn generate_is_required_only_while_absent() {
        let command = || {
            unless_generating(
                command().arg(clap::Arg::new("file").required(true)).arg(
                    clap::Arg::new("generate")
                        .long("generate")
                        .value_parser(clap::value_parser!(Generate)),
                ),
            )
        };
        assert!(command().try_get_matches_from(["demo"]).is_err());
        assert!(
            command()
                .try_get_matches_from(["demo", "--generate", "man"])
                .is_ok()
        );
        assert!(command().try_get_matches_from(["demo", "f"]).is_ok());
    }
}
