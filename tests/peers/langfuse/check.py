"""The Langfuse Python SDK (langfuse==5.0.4) reads loadout's prompts through the
Langfuse-compatible API, unchanged: `get_prompt` by name, label and version, with the
agent key as the secret key of the pair. Nothing leaves 127.0.0.1 (tracing off).

Checks: AGENT/CHANNEL is loadout's rendered prompt and revision; AGENT is the template
in Langfuse's syntax, which `compile` fills; a version and a label pick revisions; what
loadout does not have is the SDK's NotFoundError with Langfuse's error body; a wrong
secret is refused; the SDK's own fallback still works."""

import os
import sys

from langfuse import Langfuse

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from peerlib import AGENT, AGENT_KEY, URL, Checks, rest, set_template, unique  # noqa: E402

c = Checks("langfuse 5.0.4 (Python)")


def client(secret=AGENT_KEY, public="pk-lf-loadout"):
    # The SDK keeps one client per public key: another pair needs another public key.
    return Langfuse(public_key=public, secret_key=secret, base_url=URL, tracing_enabled=False)


def main():
    marker = unique("langfuse")
    rendered = set_template(marker)
    revision = rest("GET", f"/v1/agents/{AGENT}/prompt?channel=web", key=AGENT_KEY)["provenance"]["revision"]
    lf = client()

    got = lf.get_prompt(f"{AGENT}/web", cache_ttl_seconds=0)
    c.eq("AGENT/CHANNEL is the revision production serves", got.version, revision)
    # The rendered prompt ends with the current minute: compare all but that line.
    c.eq("AGENT/CHANNEL is loadout's rendered prompt", got.prompt.rsplit("Now:", 1)[0], rendered.rsplit("Now:", 1)[0])
    c.check("the labels at that revision", "production" in got.labels and "latest" in got.labels, f"labels {got.labels}")
    c.eq("compile leaves a rendered prompt as it is", got.compile(anything="x"), got.prompt)

    template = lf.get_prompt(AGENT, cache_ttl_seconds=0)
    c.check("AGENT is the template in Langfuse's syntax",
            template.prompt.startswith("{{identity}}\n\n{{soul}}") and f"Peer marker: {marker}." in template.prompt,
            f"prompt {template.prompt!r:.200}")
    filled = template.compile(identity="I", soul="S", channel_guidance="G", current_time="T")
    c.eq("compile fills its variables", filled, f"I\n\nS\n\nPeer marker: {marker}.\n\nG\n\nNow: T")

    set_template(unique("langfuse-next"))
    by_version = lf.get_prompt(f"{AGENT}/web", version=revision, cache_ttl_seconds=0)
    c.check("a version is that revision", by_version.version == revision and marker in by_version.prompt,
            f"version {by_version.version}, prompt {by_version.prompt!r:.120}")
    latest = lf.get_prompt(f"{AGENT}/web", label="latest", cache_ttl_seconds=0)
    c.check("a label is the revision it points at", latest.version > revision and marker not in latest.prompt,
            f"version {latest.version}")

    try:
        lf.get_prompt(f"{AGENT}/no-such-channel", max_retries=0, cache_ttl_seconds=0)
        c.check("an unknown channel is not found", False, "no error")
    except Exception as e:  # noqa: BLE001 - the SDK's generated error class
        c.check("an unknown channel is the SDK's NotFoundError in Langfuse's shape",
                type(e).__name__ == "NotFoundError" and getattr(e, "body", {}).get("error") == "LangfuseNotFoundError",
                f"{type(e).__name__}: {e}")
    try:
        lf.get_prompt(f"{AGENT}/web", version=10**6, max_retries=0, cache_ttl_seconds=0)
        c.check("a version that does not exist is not found", False, "no error")
    except Exception as e:  # noqa: BLE001
        c.eq("a version that does not exist is not found", type(e).__name__, "NotFoundError")
    try:
        client("lo_not_a_key", public="pk-lf-wrong").get_prompt(f"{AGENT}/web", max_retries=0, cache_ttl_seconds=0)
        c.check("a wrong secret key is refused", False, "no error")
    except Exception as e:  # noqa: BLE001
        c.check("a wrong secret key is refused (401, UnauthorizedError)",
                type(e).__name__ == "UnauthorizedError" and getattr(e, "body", {}).get("error") == "UnauthorizedError",
                f"{type(e).__name__}: {e}")
    fallback = lf.get_prompt("nobody/web", fallback="fallback text", max_retries=0, cache_ttl_seconds=0)
    c.check("the SDK's fallback serves what loadout does not have", fallback.is_fallback and fallback.prompt == "fallback text",
            f"{fallback!r}")


c.run("langfuse python", main)
c.done()
