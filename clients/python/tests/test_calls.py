"""Tool calls, approvals and outcomes against a real loadout; errors as typed exceptions."""

import threading
import time

import httpx
import pytest
from conftest import AGENT, free_port, openapi

from loadout import AsyncClient, Client, Proposal, ToolResult, errors


def propose(c, user):
    # update_instructions is user_configurable and builtin: proposed for a user who did not
    # allow it, and run inside loadout once approved.
    return c.call_tool(AGENT, "update_instructions", {"instructions": f"{user} likes tea."},
                       conversation_id=f"conv-{user}", user_id=user)


def later(seconds, fn):
    t = threading.Timer(seconds, fn)
    t.start()
    return t


def test_a_proposal_approved_by_an_approver_ends_wait_with_its_result(live):
    c = Client(live.url, live.agent_key)
    user = f"u{time.time_ns()}"
    proposal = propose(c, user)
    assert isinstance(proposal, Proposal) and proposal.status == "proposed_for_approval"
    assert proposal.description.startswith("Update instructions")
    later(0.5, lambda: live.rest("POST", f"/v1/proposals/{proposal.proposal_id}/approve", live.approver))
    done = c.wait(proposal, timeout=30)
    assert isinstance(done, ToolResult) and done.proposal_id == proposal.proposal_id
    assert done.result is not None
    shown = live.rest("GET", f"/v1/agents/{AGENT}/users/{user}/instructions", live.operator)
    assert f"{user} likes tea." in str(shown)


def test_a_declined_proposal_raises_from_wait(live):
    c = Client(live.url, live.agent_key)
    proposal = propose(c, f"d{time.time_ns()}")
    later(0.3, lambda: live.rest("POST", f"/v1/proposals/{proposal.proposal_id}/decline", live.approver))
    with pytest.raises(errors.ProposalDeclined) as raised:
        c.wait(proposal, timeout=30)
    assert raised.value.details == {"proposal_id": proposal.proposal_id}


def test_wait_gives_up_after_its_timeout_and_the_proposal_goes_on_waiting(live):
    c = Client(live.url, live.agent_key)
    proposal = propose(c, f"t{time.time_ns()}")
    t0 = time.monotonic()
    with pytest.raises(errors.WaitTimeout) as raised:
        c.wait(proposal, timeout=1.0, interval=0.2)
    assert 0.9 < time.monotonic() - t0 < 5 and isinstance(raised.value, TimeoutError)
    assert live.rest("GET", f"/v1/proposals/{proposal.proposal_id}", live.approver)["state"] == "proposed"


async def test_the_async_client_waits_for_an_approval_too(live):
    c = AsyncClient(live.url, live.agent_key)
    user = f"a{time.time_ns()}"
    proposal = await c.call_tool(AGENT, "update_instructions", {"instructions": "Short answers."},
                                 conversation_id="conv-async", user_id=user)
    later(0.3, lambda: live.rest("POST", f"/v1/proposals/{proposal.proposal_id}/approve", live.approver))
    done = await c.wait(proposal, timeout=30)
    assert done.proposal_id == proposal.proposal_id
    await c.aclose()


def test_errors_are_typed_and_carry_loadouts_code_message_status_and_details(live):
    c = Client(live.url, live.agent_key)
    with pytest.raises(errors.InvalidArguments) as bad:
        c.call_tool(AGENT, "delete_tasks", {"ids": "not-a-list"}, conversation_id="conv-e")
    assert bad.value.status == 422 and bad.value.code == "invalid_arguments"
    assert bad.value.details["errors"][0]["path"] == "/ids" and isinstance(bad.value, errors.Unprocessable)
    with pytest.raises(errors.NotFound) as missing:
        c.prompt("no-such-agent", "web")
    assert (missing.value.status, missing.value.code) == (404, "not_found")
    with pytest.raises(errors.NotFound) as channel:
        c.prompt(AGENT, "no-such-channel")
    assert "web" in channel.value.details["known_channels"]
    with pytest.raises(errors.BadRequest) as tz:
        c.prompt(AGENT, "web", tz="Mars/Olympus")
    assert tz.value.status == 400 and "time zone" in tz.value.message
    with pytest.raises(errors.Unauthorized) as unauthorized:
        Client(live.url, "lo_not_a_key").prompt(AGENT, "web")
    assert unauthorized.value.status == 401
    with pytest.raises(errors.Forbidden) as forbidden:
        Client(live.url, live.approver).call_tool(AGENT, "delete_tasks", {"ids": ["x"]}, conversation_id="c")
    assert forbidden.value.status == 403 and isinstance(forbidden.value, errors.LoadoutError)


def test_report_outcome_stores_the_outcome_of_a_served_revision(live):
    if "/v1/agents/{agent}/outcomes" not in openapi(live)["paths"]:
        pytest.skip("this loadout has no POST /v1/agents/{agent}/outcomes yet (issue 26)")
    c = Client(live.url, live.agent_key)
    revision = c.prompt(AGENT, "web").revision
    stored = c.report_outcome(AGENT, revision=revision, conversation_id="conv-outcome", user_id="ann",
                              outcome="success", score=0.9)
    assert stored["revision"] == revision and stored["outcome"] == "success"
    assert (stored["conversation_id"], stored["user_id"], stored["agent"]) == ("conv-outcome", "ann", AGENT)
    with pytest.raises(errors.NotFound) as unknown:
        c.report_outcome(AGENT, revision=10**6, conversation_id="conv-outcome", outcome="failure")
    assert unknown.value.code == "revision_not_found"
    with pytest.raises(errors.LoadoutError) as bad:
        c.report_outcome(AGENT, revision=revision, conversation_id="conv-outcome", outcome="maybe")
    assert bad.value.status in (400, 422)




def stopped_server():
    """The address of a loadout that is not running: a port bound once, then closed."""
    return f"http://127.0.0.1:{free_port()}"


def assert_unreachable(raised):
    e = raised.value
    assert type(e) is errors.Unreachable and isinstance(e, errors.LoadoutError)
    assert (e.code, e.status) == ("unreachable", None) and str(e).startswith("unreachable: loadout could not be reached")
    assert isinstance(e.__cause__, httpx.TransportError)  # the httpx error, kept as the cause


def test_a_call_to_a_stopped_loadout_raises_unreachable_never_an_httpx_error():
    c = Client(stopped_server(), "lo_any_key", timeout=2)
    with pytest.raises(errors.Unreachable) as call:
        c.call_tool(AGENT, "delete_tasks", {"ids": ["t-1"]}, conversation_id="quickstart")
    assert_unreachable(call)
    waiting = Proposal(agent=AGENT, tool="delete_tasks", proposal_id=1, status="proposed_for_approval",
                       description="", preview=None, request={"tool": "delete_tasks", "arguments": {}})
    with pytest.raises(errors.Unreachable) as wait:
        c.wait(waiting, timeout=5, interval=0.01)
    assert_unreachable(wait)
    with pytest.raises(errors.Unreachable) as outcome:
        c.report_outcome(AGENT, revision=1, conversation_id="quickstart", outcome="success")
    assert_unreachable(outcome)


async def test_the_async_clients_call_to_a_stopped_loadout_raises_unreachable_too():
    c = AsyncClient(stopped_server(), "lo_any_key", timeout=2)
    with pytest.raises(errors.Unreachable) as call:
        await c.call_tool(AGENT, "delete_tasks", {"ids": ["t-1"]}, conversation_id="quickstart")
    assert_unreachable(call)
    with pytest.raises(errors.Unreachable) as outcome:
        await c.report_outcome(AGENT, revision=1, conversation_id="quickstart", outcome="success")
    assert_unreachable(outcome)
    await c.aclose()


def test_the_quickstart_after_serve_stops_gets_its_prompt_from_disk_and_unreachable_from_call_tool(live, tmp_path):
    """The root README's quickstart, run again with serve stopped: prompt and tools from the disk
    copies, and the tool call (never served from a cache) raises Unreachable, also on a client
    whose pooled connection went to the server that was killed, and on a frozen server (a timeout)."""
    c = Client(live.url, live.agent_key, cache_dir=tmp_path, timeout=1)
    assert c.prompt(AGENT, "web").source == "fresh" and c.tools(AGENT).source == "fresh"
    assert isinstance(c.call_tool(AGENT, "delete_tasks", {"ids": ["t-1"]}, conversation_id="quickstart"), Proposal)
    live.pause()
    with pytest.raises(errors.Unreachable) as frozen:
        c.call_tool(AGENT, "delete_tasks", {"ids": ["t-1"]}, conversation_id="quickstart")
    assert_unreachable(frozen)
    assert isinstance(frozen.value.__cause__, httpx.TimeoutException)
    live.stop()
    with pytest.raises(errors.Unreachable) as same_client:
        c.call_tool(AGENT, "delete_tasks", {"ids": ["t-1"]}, conversation_id="quickstart")
    assert_unreachable(same_client)
    again = Client(live.url, live.agent_key, cache_dir=tmp_path, timeout=1)  # the script run again
    assert again.prompt(AGENT, "web").source == "disk" and again.tools(AGENT).source == "disk"
    with pytest.raises(errors.Unreachable) as restarted:
        again.call_tool(AGENT, "delete_tasks", {"ids": ["t-1"]}, conversation_id="quickstart")
    assert_unreachable(restarted)
