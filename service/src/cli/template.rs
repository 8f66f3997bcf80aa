//! `loadout template render|lint`: the engine on stdin, the reference for parity checks.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::prompt::{lint, template};
use crate::registry::catalog::Seeds;

#[derive(Debug, clap::Subcommand)]
pub enum TemplateCommand {
    /// Substitute the values of a JSON object of strings into the template on stdin.
    Render {
        /// JSON file holding an object of string values.
        #[arg(long)]
        vars: std::path::PathBuf,
        /// Fail on the first unknown or invalid placeholder instead of leaving it verbatim.
        #[arg(long)]
        strict: bool,
    },
    /// Report problems in the template on stdin; exits 1 when there is an error.
    Lint,
}

pub fn run(command: &TemplateCommand, max_bytes: usize) -> anyhow::Result<ExitCode> {
    let text = read_template(std::io::stdin().lock(), max_bytes)?;
    match command {
        TemplateCommand::Render { vars, strict } => {
            let values = read_vars(vars)?;
            let rendered = if *strict {
                template::substitute(&text, &values)?
            } else {
                template::safe_substitute(&text, &values)
            };
            let mut out = std::io::stdout().lock();
            out.write_all(rendered.as_bytes())
                .and_then(|()| out.flush())
                .context("cannot write to stdout")?;
            Ok(ExitCode::SUCCESS)
        }
        TemplateCommand::Lint => {
            let problems = lint::lint(&text, &catalog_tool_names()?);
            if problems.is_empty() {
                eprintln!("no problems");
            }
            for p in &problems {
                let severity = match p.severity {
                    lint::Severity::Error => "error",
                    lint::Severity::Warning => "warning",
                };
                println!(
                    "{}:{}: {severity}: {} [{}]",
                    p.line, p.column, p.message, p.code
                );
            }
            Ok(if lint::has_errors(&problems) {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}

/// Reads at most `max_bytes` (+1, to tell "too large" from "exactly at the limit") and checks UTF-8.
pub fn read_template(input: impl Read, max_bytes: usize) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    input
        .take(max_bytes as u64 + 1)
        .read_to_end(&mut bytes)
        .context("cannot read the template from stdin")?;
    if bytes.len() > max_bytes {
        bail!(
            "the template is larger than the limit of {max_bytes} bytes (LOADOUT_MAX_TEMPLATE_BYTES)"
        );
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "the template is not valid UTF-8 (first bad byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

fn read_vars(path: &std::path::Path) -> anyhow::Result<BTreeMap<String, String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", path.display()))?;
    let serde_json::Value::Object(map) = value else {
        bail!(
            "{} must hold a JSON object of string values",
            path.display()
        );
    };
    map.into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => Ok((k, s)),
            other => bail!(
                "{}: value of {k:?} must be a string, not {other}",
                path.display()
            ),
        })
        .collect()
}

/// Offline, the catalog says which names are active and which are retired or renamed.
fn catalog_tool_names() -> anyhow::Result<lint::ToolNames> {
    let seeds = Seeds::embedded()?;
    let catalog = seeds.catalog;
    Ok(lint::ToolNames {
        active: catalog.tools.iter().map(|t| t.name.clone()).collect(),
        inactive: catalog
            .deactivated
            .into_iter()
            .chain(catalog.renamed.into_keys())
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::read_template;

    #[test]
    fn a_template_over_the_limit_is_refused_with_the_limit_named() {
        let err = read_template(&b"0123456789"[..], 9).expect_err("too large");
        assert!(err.to_string().contains("limit of 9 bytes"), "{err}");
        assert_eq!(
            read_template(&b"012345678"[..], 9).expect("at the limit"),
            "012345678"
        );
    }

    #[test]
    fn invalid_utf8_is_refused_with_its_offset() {
        let err = read_template(&b"ok\xff"[..], 100).expect_err("invalid");
        assert!(err.to_string().contains("offset 2"), "{err}");
    }
}
