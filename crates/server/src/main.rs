//! `aesd`: the encryption server binary ([`aesd_server::cli`]).

fn main() -> std::process::ExitCode {
    aesd_server::cli::main()
}
