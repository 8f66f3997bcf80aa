"""The checked-in models are what clients/python/generate makes from this server's
/openapi.json: any difference fails, with the diff."""

import os
import subprocess
import sys

GENERATE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "generate")


def test_the_models_regenerate_identically_from_the_servers_openapi(live):
    out = subprocess.run([sys.executable, GENERATE, "--url", live.url, "--check"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, f"the models differ from the server's:\n{out.stdout}{out.stderr}"
