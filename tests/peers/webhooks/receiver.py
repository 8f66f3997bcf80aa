"""A webhook receiver built on the Standard Webhooks reference library (`standardwebhooks`):
subscribes to every event on loopback, makes a change through the REST API, and verifies the
signature of every real delivery loadout sends; a tampered body and a wrong secret must fail."""

import http.server
import json
import sys
import threading
import time

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

sys.path.insert(0, __file__.rsplit("/", 2)[0])
from peerlib import Checks, rest, unique  # noqa: E402

checks = Checks("standardwebhooks")
received = []


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        received.append((dict(self.headers.items()), body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{server.server_address[1]}/hook"

created = rest("POST", "/v1/webhooks", {"url": url, "description": "standardwebhooks peer"})
secret = created["secret"]
checks.check("the secret is a whsec_ secret", secret.startswith("whsec_"), secret[:6])
subscription = created["subscription"]["id"]

# A change: a new soul publishes a revision and moves latest (and production, in direct mode).
rest("PATCH", "/v1/agents/assistant", {"soul": f"A soul the webhook peer set ({unique('s')})."})

deadline = time.monotonic() + 30
while time.monotonic() < deadline and len(received) < 3:
    time.sleep(0.1)
checks.check("three deliveries arrive", len(received) >= 3, f"got {len(received)}")

webhook = Webhook(secret)
types = []
for headers, body in received:
    try:
        payload = webhook.verify(body, headers)
        types.append(payload["type"])
        checks.check(f"{payload['type']} verifies", True)
    except WebhookVerificationError as e:
        checks.check("a delivery verifies", False, f"{e}: {headers} {body[:200]!r}")
checks.check("revision.published and label.moved arrived",
             "revision.published" in types and "label.moved" in types, types)

if received:
    headers, body = received[0]
    for name, secret_used, data in [("a tampered body", secret, body.replace(b'"type"', b'"typo"')),
                                    ("another secret", "whsec_" + "A" * 32, body)]:
        try:
            Webhook(secret_used).verify(data, headers)
            checks.check(f"{name} does not verify", False, "it verified")
        except WebhookVerificationError:
            checks.check(f"{name} does not verify", True)
    payload = json.loads(body)
    checks.check("the payload is {type, timestamp, data}", set(payload) == {"type", "timestamp", "data"}, payload)

log = rest("GET", f"/v1/webhooks/{subscription}/deliveries")
checks.check("the delivery log shows 2xx attempts",
             any(a["status"] == 204 for a in log["attempts"]), log)
rest("DELETE", f"/v1/webhooks/{subscription}")
server.shutdown()
checks.done()
