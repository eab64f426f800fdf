fn main() -> std::process::ExitCode {
    taskexec::cli::main()
}
