#!/usr/bin/env bash
# The MCP endpoint's figures: tools/list latency over one session, and the delay
# from an admin edit to the list_changed notification an open session receives.
# Usage: bench/mcp.sh [LISTS] [EDITS]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run -q --release -p loadout --example mcp_latency -- "${1:-2000}" "${2:-20}"
