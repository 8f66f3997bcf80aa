"""OpenFeature's Python SDK (openfeature-sdk==0.10.0) with the official OFREP provider
(openfeature-provider-ofrep==0.3.0) evaluates loadout's flags, unchanged: one
`POST /ofrep/v1/evaluate/flags/{key}` per evaluation, the agent key from `headers_factory`.

Checks: `AGENT:prompt:web` for targeting key alice is REST's rendered prompt for user alice
(her standing instructions in it, bob's prompt without them), its variant is REST's revision
and its reason STATIC; the context's `tz` renders the time line in that zone;
`AGENT:tools:openai` is REST's tools body for alice; a template edit is the next
evaluation's revision (the provider has no cache); an unknown key, an agent the key does not
reach, a label the agent lacks, a malformed label and a wrong key each give the code default
with OFREP's error code or reason; `AGENT:model:web` with no model settings is DISABLED and
the default, no exception; the key as `X-API-Key` works as `Authorization: Bearer` does."""

import os
import sys

from openfeature import api
from openfeature.contrib.provider.ofrep import OFREPProvider
from openfeature.evaluation_context import EvaluationContext
from openfeature.exception import ErrorCode
from openfeature.flag_evaluation import Reason

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from peerlib import AGENT, AGENT_KEY, URL, Checks, rest, short, unique  # noqa: E402

c = Checks("openfeature-provider-ofrep 0.3.0 (Python)")
DEFAULT = "the code default"


def use_template(marker):
    """The agent's template with `marker` and the user's instructions in it (as an admin edit)."""
    template = f"$identity\n\nPeer marker: {marker}.\n\nUser: $user_instructions\n\n$channel_guidance\n\nNow: $current_time"
    rest("PUT", f"/v1/agents/{AGENT}/prompt-template", {"template": template})


def rest_prompt(user, tz=None):
    query = f"channel=web&user_id={user}" + (f"&tz={tz}" if tz else "")
    return rest("GET", f"/v1/agents/{AGENT}/prompt?{query}", key=AGENT_KEY)


def but_time(text):
    """The rendered prompt ends with the current minute: all but that line."""
    return text.rsplit("Now:", 1)[0]


def details(name, fn, *args):
    """An evaluation that must not raise (the SDK turns every provider error into details)."""
    return c.run(f"{name} (evaluated without raising)", fn, *args)


def main():
    provider = OFREPProvider(URL, headers_factory=lambda: {"Authorization": f"Bearer {AGENT_KEY}"}, timeout=10.0)
    api.set_provider_and_wait(provider)
    client = api.get_client()
    alice, bob = EvaluationContext(targeting_key="alice"), EvaluationContext(targeting_key="bob")

    marker, wish = unique("ofrep-py"), unique("alice-wish")
    rest("PUT", f"/v1/agents/{AGENT}/users/alice/instructions", {"instructions": f"Alice wants {wish}."})
    use_template(marker)
    served = rest_prompt("alice")
    revision = served["provenance"]["revision"]

    got = details("AGENT:prompt:web", client.get_string_details, f"{AGENT}:prompt:web", DEFAULT, alice)
    if got is not None:
        c.check("the string flag is no error", got.error_code is None, f"{got.error_code}: {got.error_message}")
        c.eq("AGENT:prompt:web for alice is REST's prompt for alice (but the time line)",
             but_time(got.value), but_time(served["text"]))
        c.check("alice's standing instructions are in it (targetingKey is the user)",
                wish in got.value and marker in got.value, f"value {short(got.value, 300)}")
        c.eq("its variant is REST's revision", got.variant, str(revision))
        c.eq("its reason is STATIC", got.reason, Reason.STATIC)
        c.eq("its metadata names the agent, label and revision", dict(got.flag_metadata),
             {"agent": AGENT, "label": "production", "revision": revision})

    other = details("AGENT:prompt:web for bob", client.get_string_value, f"{AGENT}:prompt:web", DEFAULT, bob)
    if other is not None:
        c.check("bob's prompt is REST's for bob, without alice's instructions",
                but_time(other) == but_time(rest_prompt("bob")["text"]) and wish not in other, f"value {short(other, 300)}")

    berlin = EvaluationContext(targeting_key="alice", attributes={"tz": "Europe/Berlin"})
    zoned = details("AGENT:prompt:web in Europe/Berlin", client.get_string_value, f"{AGENT}:prompt:web", DEFAULT, berlin)
    if zoned is not None:
        want = rest_prompt("alice", "Europe/Berlin")["text"]
        c.check("the context's tz renders the time line in that zone, as REST's ?tz=",
                "(Europe/Berlin" in zoned.rsplit("Now:", 1)[-1] and but_time(zoned) == but_time(want),
                f"time line {zoned.rsplit('Now:', 1)[-1]!r}, REST's {want.rsplit('Now:', 1)[-1]!r}")

    tools = details("AGENT:tools:openai", client.get_object_details, f"{AGENT}:tools:openai", {}, alice)
    if tools is not None:
        want = rest("GET", f"/v1/agents/{AGENT}/tools?format=openai&user_id=alice", key=AGENT_KEY)
        c.check("the object flag is no error", tools.error_code is None, f"{tools.error_code}: {tools.error_message}")
        c.eq("AGENT:tools:openai is REST's tools body (format=openai, user alice)", tools.value, want)
        c.check("it has the agent's tools", len(want.get("tools", [])) > 0, f"REST {short(want, 200)}")
        c.check("its variant and reason", tools.variant == str(revision) and tools.reason == Reason.STATIC,
                f"variant {tools.variant!r}, reason {tools.reason!r}")

    next_marker = unique("ofrep-py-next")
    use_template(next_marker)
    next_revision = rest_prompt("alice")["provenance"]["revision"]
    after = details("AGENT:prompt:web after an edit", client.get_string_details, f"{AGENT}:prompt:web", DEFAULT, alice)
    if after is not None:
        c.check("a template edit is the next evaluation's revision and text (no cache)",
                next_revision > revision and after.variant == str(next_revision) and next_marker in after.value,
                f"variant {after.variant!r}, REST revision {next_revision} (was {revision}), value {short(after.value, 200)}")

    unknown = details("an unknown key", client.get_string_details, f"{AGENT}:nothing:web", DEFAULT, alice)
    if unknown is not None:
        c.check("an unknown key is FLAG_NOT_FOUND and the code default",
                unknown.error_code == ErrorCode.FLAG_NOT_FOUND and unknown.value == DEFAULT and unknown.reason == Reason.ERROR,
                f"error {unknown.error_code} ({unknown.error_message}), reason {unknown.reason}, value {short(unknown.value, 100)}")
    channel = details("an unknown channel", client.get_string_details, f"{AGENT}:prompt:no-such-channel", DEFAULT, alice)
    if channel is not None:
        c.check("an unknown channel is FLAG_NOT_FOUND and the code default",
                channel.error_code == ErrorCode.FLAG_NOT_FOUND and channel.value == DEFAULT,
                f"error {channel.error_code} ({channel.error_message}), value {short(channel.value, 100)}")
    unreached = details("another agent's flag", client.get_string_details, "nobody:prompt:web", DEFAULT, alice)
    if unreached is not None:
        c.check("a flag of an agent the key does not reach is FLAG_NOT_FOUND and the code default",
                unreached.error_code == ErrorCode.FLAG_NOT_FOUND and unreached.value == DEFAULT,
                f"error {unreached.error_code} ({unreached.error_message}), value {short(unreached.value, 100)}")

    no_label = EvaluationContext(targeting_key="alice", attributes={"label": "ofrep-no-such-label"})
    absent = details("a label the agent lacks", client.get_string_details, f"{AGENT}:prompt:web", DEFAULT, no_label)
    if absent is not None:
        c.check("a label the agent lacks is DISABLED and the code default, no error",
                absent.reason == Reason.DISABLED and absent.value == DEFAULT and absent.error_code is None
                and absent.variant == "disabled",
                f"reason {absent.reason}, variant {absent.variant!r}, error {absent.error_code}, value {short(absent.value, 100)}")
    bad_label = EvaluationContext(targeting_key="alice", attributes={"label": "Not A Label"})
    invalid = details("a malformed label", client.get_string_details, f"{AGENT}:prompt:web", DEFAULT, bad_label)
    if invalid is not None:
        c.check("a malformed label is INVALID_CONTEXT and the code default",
                invalid.error_code == ErrorCode.INVALID_CONTEXT and invalid.value == DEFAULT,
                f"error {invalid.error_code} ({invalid.error_message}), value {short(invalid.value, 100)}")

    settings = rest("GET", f"/v1/agents/{AGENT}/model")["settings"]
    model_default = {"model": "code-default"}
    model = details("AGENT:model:web", client.get_object_details, f"{AGENT}:model:web", model_default, alice)
    if model is not None and settings is None:
        c.check("AGENT:model:web without model settings is DISABLED and the code default",
                model.reason == Reason.DISABLED and model.value == model_default and model.error_code is None
                and model.variant == "disabled",
                f"reason {model.reason}, variant {model.variant!r}, error {model.error_code} ({model.error_message}), value {short(model.value, 100)}")
    elif model is not None:
        c.check("AGENT:model:web with model settings is an object", isinstance(model.value, dict) and model.error_code is None,
                f"settings {short(settings, 200)}: {model}")

    by_header = OFREPProvider(URL, headers_factory=lambda: {"X-API-Key": AGENT_KEY})
    api.set_provider_and_wait(by_header, domain="x-api-key")
    keyed = details("the key as X-API-Key", api.get_client(domain="x-api-key").get_string_details, f"{AGENT}:prompt:web", DEFAULT, alice)
    if keyed is not None:
        c.check("the key as X-API-Key evaluates as Bearer does",
                keyed.error_code is None and keyed.variant == str(next_revision) and next_marker in keyed.value,
                f"error {keyed.error_code} ({keyed.error_message}), variant {keyed.variant!r}")

    wrong = OFREPProvider(URL, headers_factory=lambda: {"Authorization": "Bearer lo_not_a_key"})
    api.set_provider_and_wait(wrong, domain="wrong-key")
    refused = details("a wrong key", api.get_client(domain="wrong-key").get_string_details, f"{AGENT}:prompt:web", DEFAULT, alice)
    if refused is not None:
        c.check("a wrong key is 401 (the provider's GENERAL \"unauthorized\") and the code default",
                refused.error_code == ErrorCode.GENERAL and refused.error_message == "unauthorized"
                and refused.value == DEFAULT and refused.reason == Reason.ERROR,
                f"error {refused.error_code} ({refused.error_message}), reason {refused.reason}, value {short(refused.value, 100)}")
    api.shutdown()


c.run("ofrep python", main)
c.done()
