#!/usr/bin/env python3
"""A stand-in OpenAI chat server that logs what a client sends (stdlib; for checking promptfoo's requests).

    python3 echo.py PORT LOGFILE

Every POST body is appended to LOGFILE as one JSON line; the answer is a fixed chat completion
(`{"echo": true}` as content, or a tool call when the request forces one). GET /v1/models answers too."""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, LOG = int(sys.argv[1]), sys.argv[2]


class Handler(BaseHTTPRequestHandler):
    def _send(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send({"object": "list", "data": [{"id": "echo", "object": "model"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        with open(LOG, "a") as f:
            f.write(json.dumps({"path": self.path, "headers": dict(self.headers), "body": body}) + "\n")
        message = {"role": "assistant", "content": '{"echo": true}'}
        finish = "stop"
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": choice["function"]["name"], "arguments": "{}"}}]}
            finish = "tool_calls"
        self._send({"id": "x", "object": "chat.completion", "created": 0, "model": body.get("model", "echo"),
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    def log_message(self, *_):
        pass


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
