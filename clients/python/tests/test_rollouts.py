"""A rollout against a real loadout: the client's prompt, tools and loadout for one subject
(the user, else the conversation) come from one revision, and the cache never serves one
subject's revision to another."""

import time

from conftest import AGENT, set_marker

from loadout import Client

LABEL = "py-canary"


def test_a_subjects_prompt_tools_and_loadout_come_from_one_revision_of_a_rollout(live):
    labels = live.rest("GET", f"/v1/agents/{AGENT}/labels", live.operator)
    base = next(label["revision"] for label in labels["labels"] if label["name"] == "production")
    live.rest("PUT", f"/v1/agents/{AGENT}/labels/{LABEL}", live.operator, {"revision": base})
    set_marker(live, f"rollout-{time.time_ns()}")  # a new revision; production moves, the label stays
    labels = live.rest("GET", f"/v1/agents/{AGENT}/labels", live.operator)
    candidate = next(label["revision"] for label in labels["labels"] if label["name"] == "production")
    assert candidate != base
    live.rest("POST", f"/v1/agents/{AGENT}/labels/{LABEL}/rollout", live.operator,
              {"candidate": candidate, "percent": 50})
    try:
        c = Client(live.url, live.agent_key, ttl=60)
        seen = {}
        for n in range(40):
            user = f"user-{n}"
            prompt = c.prompt(AGENT, "web", user_id=user, label=LABEL)
            tools = c.tools(AGENT, user_id=user, label=LABEL)
            both = c.loadout(AGENT, "web", user_id=user, label=LABEL)
            assert prompt.revision == tools.revision == both.revision, user
            # Sticky: asked again (from the cache and from a new client), the same revision.
            assert c.tools(AGENT, user_id=user, label=LABEL).revision == tools.revision
            assert Client(live.url, live.agent_key).prompt(AGENT, "web", user_id=user, label=LABEL).revision \
                == prompt.revision
            seen[user] = prompt.revision
        assert set(seen.values()) == {base, candidate}, seen
        # Without a user the conversation is the subject, for tools as for the prompt.
        for n in range(10):
            conversation = f"conv-{n}"
            prompt = c.prompt(AGENT, "web", conversation_id=conversation, label=LABEL)
            tools = c.tools(AGENT, conversation_id=conversation, label=LABEL)
            assert prompt.revision == tools.revision, conversation
    finally:
        live.rest("POST", f"/v1/agents/{AGENT}/labels/{LABEL}/rollout/abort", live.operator, {})
    after = Client(live.url, live.agent_key)
    assert {after.tools(AGENT, user_id=user, label=LABEL).revision for user in seen} == {base}
