fn main() -> std::process::ExitCode {
    agentctl::cli::main()
}
