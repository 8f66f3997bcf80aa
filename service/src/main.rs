use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = loadout::cli::Cli::parse();
    let _logs = loadout::telemetry::init(cli.log_format);
    match loadout::cli::run(cli).await {
        Ok(code) => code,
        Err(err) => {
            // One line, the whole cause chain; URLs in it were redacted where they were formatted.
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
