//! `jtrace`: see the library (src/lib.rs) for the command line.

fn main() -> std::process::ExitCode {
    jtrace_cli::main()
}
