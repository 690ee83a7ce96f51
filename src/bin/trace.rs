//! `trace`: a second name of `jtrace`, so that `sudo trace run -- java …`
//! works as typed; the same command line (src/lib.rs).

fn main() -> std::process::ExitCode {
    jtrace_cli::main()
}
