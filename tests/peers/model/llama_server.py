"""`python -m llama_cpp.server`, with every prompt evaluated whole (serve.py runs this under venv-model).

llama-cpp-python's Llama.generate keeps the previous request's KV cache and evaluates only the part of
a new prompt past their common prefix. The suffix then goes through llama.cpp in a batch of another
size than the whole prompt would, the logits differ in their last bits, and greedy decoding of this
small base model often flips a token: the same request (temperature 0, seed 1) gave different answers
depending on the request before it. Resetting first makes an answer a function of its request alone,
at the cost of re-reading the prompt (about 100-170 tokens/s here)."""

import runpy
import sys

import llama_cpp.llama

_generate = llama_cpp.llama.Llama.generate


def generate(self, tokens, *args, **kwargs):
    if kwargs.get("reset", True):
        self.reset()
    return _generate(self, tokens, *args, **kwargs)


llama_cpp.llama.Llama.generate = generate
sys.argv[0] = "llama_cpp.server"
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
