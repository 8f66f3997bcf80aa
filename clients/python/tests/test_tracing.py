"""OpenTelemetry: the current span names the prompt and its revision; without opentelemetry
installed nothing is imported."""

import subprocess
import sys

import pytest
from conftest import AGENT
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loadout import Client

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module")
def tracer():
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)
    return trace.get_tracer("loadout-client-tests")


def test_a_span_records_the_prompts_name_revision_and_label(live, tracer, tmp_path):
    EXPORTER.clear()
    c = Client(live.url, live.agent_key, ttl=60)
    with tracer.start_as_current_span("turn"):
        fresh = c.prompt(AGENT, "web")
    with tracer.start_as_current_span("turn-cached"):
        c.prompt(AGENT, "web")
    with tracer.start_as_current_span("turn-loadout"):
        c.loadout(AGENT, "telegram", label="production")
    spans = {s.name: dict(s.attributes) for s in EXPORTER.get_finished_spans()}
    assert spans["turn"] == {"gen_ai.prompt.name": AGENT, "gen_ai.prompt.version": str(fresh.revision),
                             "loadout.label": "production", "loadout.source": "fresh"}
    assert spans["turn-cached"]["loadout.source"] == "cached"
    assert spans["turn-cached"]["gen_ai.prompt.version"] == str(fresh.revision)
    assert spans["turn-loadout"]["gen_ai.prompt.version"] == str(fresh.revision)


def test_a_fallback_names_no_version(live, tracer):
    EXPORTER.clear()
    live.stop()
    c = Client(live.url, live.agent_key, timeout=2)
    with tracer.start_as_current_span("offline"):
        c.prompt(AGENT, "web", fallback="Be kind.")
    (span,) = EXPORTER.get_finished_spans()
    assert dict(span.attributes) == {"loadout.source": "fallback"}


def test_without_opentelemetry_nothing_is_imported_and_fetching_works(live):
    code = ("import sys\n"
            "sys.modules['opentelemetry'] = None  # as if not installed\n"
            "from loadout import Client\n"
            f"p = Client({live.url!r}, {live.agent_key!r}).prompt({AGENT!r}, 'web')\n"
            "assert p.revision >= 1\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry') and sys.modules[m] is not None))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
