//! The `loadout` binary; everything it does is in the library (`loadout::cli`).

/// mimalloc: allocation is a large share of a request's work (BENCHMARKS.md, issue 36).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    loadout::cli::main()
}
