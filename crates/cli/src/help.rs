//! The help rule of every binary (aesd, aescrypt, aesload): `-h` is a
//! summary of at most [`SHORT_HELP_LINES`] lines, `--help` (and the man
//! page) has every flag. Each binary's tests check its command with
//! [`summary_problems`].

/// The most lines `-h` may print.
pub const SHORT_HELP_LINES: usize = 30;

/// What breaks the rule in `command`'s help, one message each: `-h`
/// longer than [`SHORT_HELP_LINES`], `-h` listing a flag of `long_only`
/// (a line that starts with it), `--help` missing one. Empty when the
/// rule holds.
pub fn summary_problems(mut command: clap::Command, long_only: &[&str]) -> Vec<String> {
    let short = command.render_help().to_string();
    let long = command.render_long_help().to_string();
    let mut problems = Vec::new();
    let lines = short.lines().count();
    if lines > SHORT_HELP_LINES {
        problems.push(format!("-h is {lines} lines:\n{short}"));
    }
    for flag in long_only {
        if short
            .lines()
            .any(|line| line.trim_start().starts_with(flag))
        {
            problems.push(format!("{flag} in -h"));
        }
        if !long.contains(flag) {
            problems.push(format!("{flag} missing from --help"));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command with `count` flags, `--hidden` only in `--help`.
    fn command(count: usize) -> clap::Command {
        // clap takes 'static names (no `string` feature): leaked, in a test.
        let flags = (0..count).map(|n| {
            let name: &'static str = format!("flag{n}").leak();
            clap::Arg::new(name).long(name).help("A flag")
        });
        clap::Command::new("demo").args(flags).arg(
            clap::Arg::new("hidden")
                .long("hidden")
                .help("Only in --help")
                .hide_short_help(true),
        )
    }

    #[test]
    fn a_short_summary_with_the_rest_in_long_help_passes() {
        assert_eq!(
            summary_problems(command(3), &["--hidden"]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn each_way_to_break_the_rule_is_named() {
        let long = summary_problems(command(SHORT_HELP_LINES), &[]);
        assert!(long.len() == 1 && long[0].starts_with("-h is "), "{long:?}");
        let listed = summary_problems(command(3), &["--flag1"]);
        assert_eq!(listed, ["--flag1 in -h"]);
        let missing = summary_problems(command(3), &["--nowhere"]);
        assert_eq!(missing, ["--nowhere missing from --help"]);
    }
}
