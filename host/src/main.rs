/// jemalloc rather than glibc's malloc: memory allocated on one runtime thread and freed on
/// another (requests, responses, plugin stores) contends on glibc's arena locks; the measured
/// difference is in docs/benchmarks.md ("The process's allocator").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    taskexec::cli::main()
}
