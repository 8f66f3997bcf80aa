#!/usr/bin/env python3
"""The evaluations' real model: llama-cpp-python's OpenAI-compatible server with Gemma 3 270M, on 127.0.0.1.

    python3 tests/peers/model/serve.py [--port N] [--threads 1] [--ctx 2048] [--chat-format template|gemma]

Needs `tests/peers/install` (venv-model and models/gemma3-270m-q4_k_m.gguf under .peers/). Starts

    .peers/venv-model/bin/python model/llama_server.py --model .peers/models/gemma3-270m-q4_k_m.gguf
        --model_alias gemma3-270m --host 127.0.0.1 --port N
        --chat_format hf-tokenizer-config --hf_tokenizer_config_path model/chat_template.json
        --n_threads 1 --n_threads_batch 1 --n_ctx 2048 --seed 1 --logits_all false

with OMP_WAIT_POLICY=PASSIVE in its environment (unless set). One thread: this small model decodes
35-41 tokens/s on one core, and keeps that while other processes load the machine, where two
threads (OpenMP spinning on each other) fell to 2-13 tokens/s; PASSIVE helps when --threads is 2.

(llama_server.py is `python -m llama_cpp.server` that evaluates every prompt whole, so an answer does not
depend on the request before it; port 0 or none: a free port), waits until GET /v1/models answers 200, then prints
`MODEL_READY http://127.0.0.1:<port>/v1` on stdout (the OpenAI base URL); the server's own log goes
to stderr. SIGTERM or SIGINT stops the server and exits 0; if the server dies, exits 1.
Stdlib only: any python3 runs it. See NOTES.md for what the server does with requests."""

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.join(os.path.dirname(HERE), ".peers")
PYTHON = os.path.join(PEERS, "venv-model", "bin", "python")
MODEL = os.path.join(PEERS, "models", "gemma3-270m-q4_k_m.gguf")
ALIAS = "gemma3-270m"
TEMPLATE = os.path.join(HERE, "chat_template.json")
LAUNCHER = os.path.join(HERE, "llama_server.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(port, threads, ctx, chat_format):
    fmt = (["--chat_format", "gemma"] if chat_format == "gemma" else
           ["--chat_format", "hf-tokenizer-config", "--hf_tokenizer_config_path", TEMPLATE])
    # The file has no chat template, and without a chat format every chat reply is empty. The built-in
    # `gemma` format drops the system message; chat_template.json is Gemma 3's turns with the system
    # message before the first user message. --logits_all false: logits for every position of the
    # context would be n_ctx x 262,144 floats (2 GB at n_ctx 2048); only logprobs need them.
    # llama_server.py: llama_cpp.server with no reuse of the previous request's KV cache (determinism).
    return [PYTHON, LAUNCHER, "--model", MODEL, "--model_alias", ALIAS,
            "--host", "127.0.0.1", "--port", str(port), *fmt,
            "--n_threads", str(threads), "--n_threads_batch", str(threads), "--n_ctx", str(ctx), "--seed", "1",
            "--logits_all", "false"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--chat-format", choices=("template", "gemma"), default="template",
                    help="template: chat_template.json (the system message reaches the model); gemma: the built-in one (drops it)")
    ap.add_argument("--timeout", type=float, default=60, help="seconds to wait for /v1/models")
    args = ap.parse_args()
    for path in (PYTHON, MODEL):
        if not os.path.exists(path):
            sys.exit(f"model: {path} is missing; run tests/peers/install")
    port = args.port or free_port()
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    proc = subprocess.Popen(command(port, args.threads, args.ctx, args.chat_format), stdout=sys.stderr,
                            stderr=sys.stderr, env=env)

    def stop(*_):
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + args.timeout
    while True:
        if proc.poll() is not None:
            sys.exit(f"model: the server exited with {proc.returncode} before it answered")
        try:
            with urllib.request.urlopen(url + "/models", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            sys.exit(f"model: no answer from {url}/models within {args.timeout} s")
        time.sleep(0.1)
    print(f"MODEL_READY {url}", flush=True)
    proc.wait()
    sys.exit(0 if proc.returncode in (0, -signal.SIGTERM) else 1)


if __name__ == "__main__":
    main()
