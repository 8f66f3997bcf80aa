#!/usr/bin/env python3
"""What the model server does with the requests loadout's evaluations send (the source of NOTES.md's figures).

    python3 tests/peers/model/probe.py http://127.0.0.1:PORT/v1 [SERVER_PID]

Stdlib only. Prints one block per question: the request's shape, what came back (finish_reason,
content, tool calls, usage), the wall time; with SERVER_PID, the server's RSS and peak RSS."""

import json
import sys
import time
import urllib.error
import urllib.request

BASE = sys.argv[1].rstrip("/")
PID = sys.argv[2] if len(sys.argv) > 2 else None

SYSTEM = "You are a helpful assistant. Answer in one short sentence."
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"], "additionalProperties": False}}}
VERDICT_PARAMS = {"type": "object", "properties": {"pass": {"type": "boolean"}, "score": {"type": "number"},
                                                   "reason": {"type": "string"}},
                  "required": ["pass", "score", "reason"], "additionalProperties": False}
VERDICT = {"type": "function", "function": {
    "name": "verdict", "description": "Record whether the answer meets the rubric", "parameters": VERDICT_PARAMS}}


def post(body):
    req = urllib.request.Request(BASE + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer dummy"})
    t = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            status, data = r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        status, data = e.code, e.read().decode()[:400]
    return status, data, time.monotonic() - t


def chat(messages, **kw):
    return dict({"model": "gemma3-270m", "messages": messages, "temperature": 0, "seed": 1, "max_tokens": 48}, **kw)


def user(text, system=SYSTEM):
    return [{"role": "system", "content": system}, {"role": "user", "content": text}]


def summary(status, data, secs):
    if status != 200:
        return {"status": status, "body": data, "secs": round(secs, 2)}
    c = data["choices"][0]
    m = c["message"]
    out = {"status": status, "finish_reason": c["finish_reason"], "content": m.get("content"),
           "tool_calls": m.get("tool_calls"), "usage": data.get("usage"), "secs": round(secs, 2)}
    u = data.get("usage") or {}
    if u.get("completion_tokens"):
        out["tokens_per_s"] = round(u["completion_tokens"] / secs, 1)
    return out


def show(title, body):
    s = summary(*post(body))
    print(f"## {title}\nrequest: {json.dumps({k: v for k, v in body.items() if k != 'messages'})}")
    print(json.dumps(s, indent=1))
    return s


def valid_verdict(args):
    try:
        v = json.loads(args)
    except ValueError:
        return False
    return (isinstance(v, dict) and set(v) == {"pass", "score", "reason"} and isinstance(v["pass"], bool)
            and isinstance(v["score"], (int, float)) and not isinstance(v["score"], bool)
            and isinstance(v["reason"], str))


def rss():
    if not PID:
        return None
    with open(f"/proc/{PID}/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return {"VmRSS": fields["VmRSS"].strip(), "VmHWM": fields["VmHWM"].strip()}


def main():
    print("rss at start:", rss())
    q = user("What is the capital of France?")
    runs = [summary(*post(chat(q))) for _ in range(3)]
    print("## determinism: temperature 0, seed 1, the same request 3 times")
    print(json.dumps(runs[0], indent=1))
    print("identical contents:", len({r["content"] for r in runs}) == 1)
    runs = [summary(*post(chat(q, temperature=0.9, seed=7)))["content"] for _ in range(2)]
    print("temperature 0.9, seed 7, twice identical:", runs[0] == runs[1], json.dumps(runs))
    runs = [summary(*post(chat(q, temperature=0.9)))["content"] for _ in range(2)]
    print("temperature 0.9, no seed, twice identical:", runs[0] == runs[1], json.dumps(runs))
    runs = [summary(*post({k: v for k, v in chat(q).items() if k != "seed"}))["content"] for _ in range(2)]
    print("temperature 0, no seed, twice identical:", runs[0] == runs[1])
    show("max_tokens 5", chat(q, max_tokens=5))
    # Without max_tokens a chat completion runs to the end of the context (n_ctx less the prompt: 2,032 tokens,
    # finish_reason "length", over a minute): always send it.
    s = show("throughput: max_tokens 200, a long answer", chat(user("Write a long story about a dragon.", system="You are a storyteller."), max_tokens=200))

    w = user("What is the weather in Paris?")
    show("tools, tool_choice names the function", chat(w, tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "get_weather"}}))
    show("tools, tool_choice auto", chat(w, tools=[WEATHER], tool_choice="auto"))
    show("tools, no tool_choice", chat(w, tools=[WEATHER]))
    show("tools, tool_choice required", chat(w, tools=[WEATHER], tool_choice="required"))
    show("tools, tool_choice none", chat(w, tools=[WEATHER], tool_choice="none"))

    schema = {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
              "required": ["city", "country"], "additionalProperties": False}
    show("response_format json_object + schema (llama.cpp's extension)", chat(q, response_format={"type": "json_object", "schema": schema}))
    show("response_format json_object alone", chat(q, response_format={"type": "json_object"}))
    show("response_format json_schema (OpenAI's)", chat(q, response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}))

    judge_system = ("You are a strict grader. Read the question, the answer and the rubric, then call verdict: "
                    "pass is true only if the answer meets the rubric, score from 0 to 1, reason in one sentence.")
    cases = [("What is the capital of France?", "Paris.", "The answer names Paris."),
             ("What is the capital of France?", "Berlin.", "The answer names Paris."),
             ("What is 2 + 2?", "5", "The answer is 4."),
             ("Say hello.", "Hello there!", "The answer is a greeting.")]
    short = json.loads(json.dumps(VERDICT))
    short["function"]["parameters"]["properties"]["reason"]["maxLength"] = 80
    for label, tool in (("the parameters as given", VERDICT), ("reason with maxLength 80", short)):
        print(f"## judge: a forced tool call `verdict`, {label}")
        for question, answer, rubric in cases:
            body = chat(user(f"Question: {question}\nAnswer: {answer}\nRubric: {rubric}", system=judge_system),
                        max_tokens=128, tools=[tool], tool_choice={"type": "function", "function": {"name": "verdict"}})
            s = summary(*post(body))
            args = (s.get("tool_calls") or [{}])[0].get("function", {}).get("arguments")
            print(json.dumps({"answer": answer, "rubric": rubric, "finish_reason": s.get("finish_reason"),
                              "content": s.get("content"), "arguments": args, "valid": bool(args) and valid_verdict(args),
                              "secs": s["secs"], "completion_tokens": (s.get("usage") or {}).get("completion_tokens")}))
    print("## judge: response_format json_object with the verdict schema (no tool)")
    for question, answer, rubric in cases:
        body = chat(user(f"Question: {question}\nAnswer: {answer}\nRubric: {rubric}", system=judge_system),
                    max_tokens=128, response_format={"type": "json_object", "schema": short["function"]["parameters"]})
        s = summary(*post(body))
        print(json.dumps({"answer": answer, "finish_reason": s.get("finish_reason"), "content": s.get("content"),
                          "valid": bool(s.get("content")) and valid_verdict(s["content"]), "secs": s["secs"]}))
    print("rss at end:", rss())


if __name__ == "__main__":
    main()
