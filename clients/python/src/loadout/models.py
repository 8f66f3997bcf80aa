# Generated from loadout's /openapi.json by clients/python/generate (datamodel-code-generator 0.89.0); do not edit.

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, RootModel


class Action(Enum):
    """
    What happens to one object.
    """

    create = 'create'
    update = 'update'
    remove = 'remove'
    keep = 'keep'


class Annotations(BaseModel):
    """
    MCP tool annotations (`title` and the behaviour hints), serialised in camelCase.
    """

    destructiveHint: bool
    """
    The tool may remove or overwrite data.
    """
    idempotentHint: bool
    """
    Calling it twice with the same input has the same effect as once.
    """
    openWorldHint: bool
    """
    The tool reaches outside the service; always `false` here.
    """
    readOnlyHint: bool
    """
    The tool does not change anything.
    """
    title: str
    """
    The name with `_` as spaces and the first letter capitalised: `Get tasks`.
    """


class AnthropicTool(BaseModel):
    """
    An Anthropic Messages API tool.
    """

    description: str
    input_schema: dict[str, Any]
    name: str


class AssertionCount(BaseModel):
    """
    One assertion type's (and metric's) passes on both revisions.
    """

    base_passed: int = Field(..., ge=0)
    candidate_passed: int = Field(..., ge=0)
    metric: str | None = None
    total: int = Field(..., ge=0)
    """
    The paired verdicts counted.
    """
    type: str
    """
    The type as written (`not-contains`).
    """


class AttemptView(BaseModel):
    """
    One attempt in a subscription's delivery log.
    """

    at: AwareDatetime
    attempt: int
    """
    1 for a delivery's first attempt.
    """
    delivery: int
    delivery_state: str
    """
    `pending`, `delivered` or `failed`: the delivery's state now.
    """
    duration_ms: int
    error: str | None = None
    event_type: str
    excerpt: str | None = None
    """
    The first bytes of the receiver's answer.
    """
    message_id: str
    """
    The `webhook-id` (the same for every attempt of one event).
    """
    status: int | None = None
    """
    The receiver's HTTP status, if it answered.
    """


class BTreeMap(RootModel[dict[str, dict[str, list[str]]]]):
    root: dict[str, dict[str, list[str]]]


class Binding(BaseModel):
    """
    The body of `PUT /v1/tools/{tool}/connector`.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    connector: str | None = None
    """
    A connector name, or `null` to disconnect the tool.
    """


class BindingView(BaseModel):
    """
    A tool's binding as set.
    """

    connector: str | None = None
    tool: str


class ChangeKind(Enum):
    """
    What approving a change request does.
    """

    move = 'move'
    rollout_start = 'rollout_start'
    rollout_complete = 'rollout_complete'
    rollout_share = 'rollout_share'


class ChangeState(Enum):
    """
    Where a change request is.
    """

    pending = 'pending'
    approved = 'approved'
    declined = 'declined'
    expired = 'expired'
    superseded = 'superseded'


class ChannelContent(BaseModel):
    """
    A channel's guidance and which optional sections it gets.
    """

    guidance: str
    include_interaction_learning: bool
    include_operating_model: bool
    include_session_section: bool


class ChannelDoc(BaseModel):
    """
    A channel.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    description: str
    guidance: str
    include_interaction_learning: bool
    include_operating_model: bool
    include_session_section: bool
    name: str


class ChannelUpdate(BaseModel):
    """
    The fields of `PATCH /v1/channels/{channel}`.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    description: str | None = None
    guidance: str | None = None
    """
    At most 65536 bytes.
    """
    include_interaction_learning: bool | None = None
    include_operating_model: bool | None = None
    include_session_section: bool | None = None


class ChannelView(BaseModel):
    """
    A channel.
    """

    description: str
    guidance: str
    """
    `$channel_guidance`.
    """
    include_interaction_learning: bool
    include_operating_model: bool
    include_session_section: bool
    name: str
    updated_at: AwareDatetime


class CheckCounts(BaseModel):
    """
    What was looked at.
    """

    active_links: int = Field(..., ge=0)
    active_tools: int = Field(..., ge=0)
    agents: int = Field(..., ge=0)
    catalog_tools: int = Field(..., ge=0)
    tools: int = Field(..., ge=0)


class CheckName(Enum):
    """
    A release check.
    """

    registry = 'registry'
    breaking = 'breaking'
    replay = 'replay'
    policy_tests = 'policy_tests'
    render = 'render'
    evals = 'evals'


class CheckSeverity(Enum):
    """
    How bad a problem is: errors exit 1, warnings alone exit 0.
    """

    error = 'error'
    warning = 'warning'


class CheckStatus(Enum):
    """
    How a check came out.
    """

    pass_ = 'pass'
    warn = 'warn'
    fail = 'fail'
    pending = 'pending'


class Comparison(BaseModel):
    """
    The candidate against its base.
    """

    alpha: float
    base_pass_rate: float
    """
    0 to 1; 0 when there are no cases.
    """
    base_passed: int = Field(..., ge=0)
    candidate_pass_rate: float
    candidate_passed: int = Field(..., ge=0)
    cases: int = Field(..., ge=0)
    p_worse: float
    """
    One-sided exact McNemar p-value that the candidate is worse (1 when no case turned).
    """
    turned_fail: int = Field(..., ge=0)
    """
    Cases that passed on the base and fail on the candidate.
    """
    turned_pass: int = Field(..., ge=0)
    """
    Cases that failed on the base and pass on the candidate.
    """
    worse: bool
    """
    `p_worse < alpha`.
    """


class Compat(Enum):
    """
    What a change means for the callers of a tool.
    """

    breaking = 'breaking'
    compatible = 'compatible'


class ConfigState(BaseModel):
    """
    Fingerprints of an instance's configuration.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    instance: str
    """
    `sha256:` and the hex SHA-256 of the object fingerprints' list.
    """
    objects: dict[str, str]
    """
    Each object's fingerprint by `kind/name` (`agent/support`, `tool/get_tasks`,
    `dataset/support/smoke`).
    """


class ConnectorPin(BaseModel):
    """
    A connector as a revision pins it for one of its tools (issue 35): which
    connector, and where and how calls go. Header values are not pinned (a
    credential rotates without a release); they are sent only while the live
    connector still has the pinned origin.
    """

    kind: str
    """
    `http` or `mcp`.
    """
    method: str
    name: str
    timeout_ms: int
    url: str


class ConnectorUpdate(BaseModel):
    """
    The fields of `PATCH /v1/connectors/{connector}`. Its `Debug` shows header
    names, never values.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    headers: dict[str, str] | None = None
    """
    Replaces every header. When `url` moves the connector to another scheme,
    host or port and this is absent, every header is dropped.
    """
    method: str | None = None
    timeout_ms: int | None = None
    trusted: bool | None = None
    """
    Apply the server's new and changed tools at once on sync, or hold them.
    """
    url: str | None = None


class ConnectorView(BaseModel):
    """
    A connector; `headers` lists the names only.
    """

    created_at: AwareDatetime
    headers: list[str]
    """
    Header names; values are never shown.
    """
    kind: str
    """
    `http` (an HTTP API) or `mcp` (an MCP server over Streamable HTTP).
    """
    method: str
    """
    `POST` or `PUT`.
    """
    name: str
    timeout_ms: int
    trusted: bool
    """
    `true`: a sync applies the server's new and changed tools at once; `false`:
    it holds them as pending changes for an operator (`docs/contracts.md`).
    """
    updated_at: AwareDatetime
    url: str


class ContractKind(Enum):
    """
    What kind of change (the table in `docs/contracts.md`).
    """

    tool_removed = 'tool_removed'
    tool_added = 'tool_added'
    required_argument_added = 'required_argument_added'
    optional_argument_added = 'optional_argument_added'
    property_removed = 'property_removed'
    argument_made_required = 'argument_made_required'
    argument_made_optional = 'argument_made_optional'
    type_narrowed = 'type_narrowed'
    type_widened = 'type_widened'
    type_changed = 'type_changed'
    enum_value_removed = 'enum_value_removed'
    enum_value_added = 'enum_value_added'
    enum_added = 'enum_added'
    enum_removed = 'enum_removed'
    constraint_tightened = 'constraint_tightened'
    constraint_loosened = 'constraint_loosened'
    additional_properties_closed = 'additional_properties_closed'
    additional_properties_opened = 'additional_properties_opened'
    description_changed = 'description_changed'
    approval_tier_raised = 'approval_tier_raised'
    approval_tier_lowered = 'approval_tier_lowered'
    other = 'other'


class CreatedKey(BaseModel):
    """
    A key just made: the only answer that holds the key itself.
    """

    agent: str | None = None
    key: str
    """
    The key. Store it now: it is never shown again.
    """
    name: str
    role: str
    tenant: str


class DatasetSummary(BaseModel):
    """
    A dataset version, without its cases.
    """

    agent: str
    case_count: int
    """
    How many cases it holds.
    """
    created_at: AwareDatetime
    created_by: str
    hash: str
    """
    SHA-256 of the cases' canonical JSON.
    """
    name: str
    version: int


class DecidedBy(BaseModel):
    """
    Which revision and policy decided a call.
    """

    policy: str | None = None
    """
    The deciding policy's id; `null` when the policy could not decide (then the
    call waits for an approver, and `reason` says why).
    """
    reason: str | None = None
    revision: int
    """
    The revision (its number) whose policy decided.
    """


class Decision(BaseModel):
    """
    The body of an approve or decline.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    reason: str | None = None
    """
    Why, kept with the decision.
    """


class DryRunStatus(Enum):
    """
    Always `dry_run`.
    """

    dry_run = 'dry_run'


class ErrorDetail(BaseModel):
    """
    What went wrong: a stable code to branch on, a sentence for people, and
    structured details where there are any (JSON paths, problems, known values).
    """

    code: str
    """
    Stable and machine-readable, e.g. `not_found`, `invalid_arguments`.
    """
    details: Any
    """
    `null` unless the code documents details.
    """
    message: str


class EvalAssertion(BaseModel):
    """
    What a reply must satisfy, in promptfoo's terms.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    metric: str | None = None
    """
    promptfoo's named metric; kept, and counted apart in comparisons.
    """
    threshold: float | None = None
    """
    `latency` (ms), `cost`, and `llm-rubric`'s lowest passing score.
    """
    type: str
    """
    promptfoo's type (`contains`, `llm-rubric`, ...), possibly with `not-`.
    """
    value: Any | None = None
    """
    Any JSON: a string, a number, a list or a schema, as the type takes.
    """
    weight: float | None = None
    """
    promptfoo's weight; 0 makes the assertion always pass, as in promptfoo.
    """


class EvalGate(BaseModel):
    """
    What a label requires of a candidate's evaluation.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    alpha: float | None = None
    """
    The test's level (default 0.05).
    """
    connection: str
    dataset: str
    """
    The agent's dataset (its latest version when the request opens).
    """
    judge_connection: str | None = None
    judge_model: str | None = None
    min_pass_rate: float | None = None
    """
    The least pass rate (0 to 1) the candidate must reach; absent: any.
    """
    model: str | None = None
    not_worse: bool | None = None
    """
    Fail when the candidate is worse than the base with confidence (default on).
    """


class EvalRuns(BaseModel):
    """
    The runs an `evals` check compared: `GET /v1/eval-runs/{candidate}/compare?base={base}`.
    """

    base: int | None = None
    candidate: int | None = None


class EvalToolCall(BaseModel):
    """
    A tool call as the model made it.
    """

    arguments: str
    """
    The arguments' JSON text as the model sent it (it may not parse).
    """
    name: str


class EvalVerdict(BaseModel):
    """
    How one assertion came out.
    """

    metric: str | None = None
    """
    The assertion's named metric, when it has one.
    """
    pass_: bool = Field(..., alias='pass')
    reason: str
    """
    promptfoo's wording where it has one ("Assertion passed").
    """
    score: float
    """
    1 or 0, except for llm-rubric (the judge's score).
    """
    type: str
    """
    The assertion's type as written (`not-contains`).
    """


class EventKind(Enum):
    """
    One step of a rollout's history.
    """

    started = 'started'
    share_changed = 'share_changed'
    paused = 'paused'
    resumed = 'resumed'
    completed = 'completed'
    aborted = 'aborted'
    held = 'held'


class EventView(BaseModel):
    """
    One transition in a proposal's history.
    """

    actor: str
    """
    The key name, `auto`, `sweeper` or `system`.
    """
    at: AwareDatetime
    from_: str | None = Field(None, alias='from')
    """
    `null` for the creation event.
    """
    to: str


class Format(Enum):
    """
    A wire format for [`render`].
    """

    openai = 'openai'
    anthropic = 'anthropic'
    mcp = 'mcp'


class GrantRequest(BaseModel):
    """
    The body of a grant request.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    reason: str | None = None
    """
    Why, kept with the grant.
    """
    tenant: str | None = None
    """
    The member's tenant (`default` if absent).
    """


class GrantState(Enum):
    """
    Where a signer grant is.
    """

    pending = 'pending'
    approved = 'approved'
    declined = 'declined'
    expired = 'expired'


class GrantView(BaseModel):
    """
    One grant or revocation of sign-off power.
    """

    created_at: AwareDatetime
    decided_at: AwareDatetime | None = None
    decided_by: str | None = None
    expires_at: AwareDatetime
    grant: bool
    """
    `true` grants, `false` revokes.
    """
    id: int
    member: str
    reason: str | None = None
    requested_by: str
    state: GrantState


class GroupView(BaseModel):
    """
    A group and its members.
    """

    created_at: AwareDatetime
    members: list[str]
    """
    User ids, sorted.
    """
    name: str


class Guard(BaseModel):
    """
    A guard: once each side has `min_outcomes` outcomes, a candidate that fails
    more often than the base at confidence `1 - alpha`, in one tenant's outcomes,
    holds the rollout; two tenants agreeing, or the only tenant that reported,
    abort it (`releases::guard::joint`).
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    alpha: float
    """
    The false-alarm rate, in (0, 0.5].
    """
    min_outcomes: int
    """
    Outcomes each side needs before the guard judges (at least 1).
    """


class HeaderValue1(BaseModel):
    """
    Where a header's value comes from. In files: `{ env = "NAME" }`, read from the
    environment of the `loadout apply` that applies it. Over HTTP: `{"value": ...}`
    (write-only: sealed on save, never echoed or logged), or `{"env": ...}` to keep
    the value the instance holds (a server never reads its own environment for a
    caller: that would hand its secrets to whoever names them).
    """

    env: str


class HeaderValue2(BaseModel):
    """
    Where a header's value comes from. In files: `{ env = "NAME" }`, read from the
    environment of the `loadout apply` that applies it. Over HTTP: `{"value": ...}`
    (write-only: sealed on save, never echoed or logged), or `{"env": ...}` to keep
    the value the instance holds (a server never reads its own environment for a
    caller: that would hand its secrets to whoever names them).
    """

    value: str


class HeaderValue(RootModel[HeaderValue1 | HeaderValue2]):
    root: HeaderValue1 | HeaderValue2
    """
    Where a header's value comes from. In files: `{ env = "NAME" }`, read from the
    environment of the `loadout apply` that applies it. Over HTTP: `{"value": ...}`
    (write-only: sealed on save, never echoed or logged), or `{"env": ...}` to keep
    the value the instance holds (a server never reads its own environment for a
    caller: that would hand its secrets to whoever names them).
    """


class InstructionsPut(BaseModel):
    """
    The body of `PUT .../users/{user_id}/instructions`.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    instructions: str | None = None
    """
    `null` switches the user's instructions off (the row is kept, inactive).
    """


class InstructionsView(BaseModel):
    """
    A user's instructions; `null` when there are none (or they are switched off).
    """

    agent: str
    instructions: str | None = None
    user_id: str


class KeyInfo(BaseModel):
    """
    One key as `keys list` shows it: never the secret or the hash.
    """

    agent: str | None = None
    """
    The agent a scoped agent key reaches (`None`: every agent).
    """
    created_at: AwareDatetime
    name: str
    prefix: str
    revoked_at: AwareDatetime | None = None
    role: str
    tenant: str


class KeyList(BaseModel):
    """
    The keys of the caller's tenant.
    """

    keys: list[KeyInfo]


class Kind(Enum):
    """
    The protocol a connector speaks.
    """

    http = 'http'
    mcp = 'mcp'


class LabelMoved(BaseModel):
    """
    A label as a move left it.
    """

    agent: str
    from_revision: int | None = None
    """
    The revision it left; `null` if it did not move or was new.
    """
    kind: str | None = None
    """
    `move` or `rollback`; `null`: it already pointed there (only `protected`
    may have changed).
    """
    label: str
    protected: bool
    revision: int
    """
    The revision's number it points at now.
    """


class LabelPut(BaseModel):
    """
    The body of `PUT /v1/agents/{agent}/labels/{label}`.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    protected: bool | None = None
    """
    Protect (or unprotect) the label; unchanged when absent. `production` is
    always protected, and a protected label of a `gated` agent stays so.
    """
    reason: str | None = None
    """
    Why, kept in the label's history (or the change request).
    """
    require_checks: bool | None = None
    """
    Require a change request's release checks to pass before anyone may
    approve it; unchanged when absent. Turned off only on a `direct` agent, or a
    label that is not protected.
    """
    require_evals: EvalGate | None = None
    revision: int
    """
    The revision's number the label is to point at.
    """


class LabelView(BaseModel):
    """
    Where a label points.
    """

    name: str
    protected: bool
    """
    In `gated` mode, moved only by an approved change request or a rollback
    (`production` always is).
    """
    require_checks: bool
    """
    Approving a change request for it needs its release checks to pass.
    """
    require_evals: dict[str, Any] | None = None
    """
    The evaluation a change request to it must pass (`evals`), as set.
    """
    revision: int
    """
    The revision's number.
    """
    updated_at: AwareDatetime


class LineKind(Enum):
    """
    A hunk line's part in the change (`' '`, `-` and `+` in a unified diff).
    """

    delete = 'delete'
    equal = 'equal'
    insert = 'insert'


class LinkSet(BaseModel):
    """
    A link as set.
    """

    active: bool
    agent: str
    tool: str


class LinkView(BaseModel):
    """
    One link of an agent to a tool.
    """

    active: bool
    """
    The link is on.
    """
    tool: str
    tool_active: bool
    """
    The tool itself is active and not deleted.
    """


class LintSeverity(Enum):
    """
    How bad a problem is: errors block a save, warnings are reported with it.
    """

    error = 'error'
    warning = 'warning'


class Format1(Enum):
    openai = 'openai'


class Format2(Enum):
    anthropic = 'anthropic'


class Format3(Enum):
    mcp = 'mcp'


class McpMeta(BaseModel):
    """
    loadout's `_meta` on an MCP tool.
    """

    io_loadout_approval_tier: str = Field(..., alias='io.loadout/approval-tier')
    """
    The approval tier as stored, so a drifted tier is visible (and reported by
    `loadout check`): `auto` runs at once, the others propose.
    """


class McpTool(BaseModel):
    """
    An MCP `Tool`, as in a `tools/list` result.
    """

    field_meta: McpMeta = Field(..., alias='_meta')
    annotations: Annotations
    description: str
    inputSchema: dict[str, Any]
    name: str
    title: str
    """
    For people: the name with `_` as spaces, capitalised (`Get tasks`).
    """


class MemberKind(Enum):
    """
    What a member is.
    """

    person = 'person'
    service = 'service'


class MemberView(BaseModel):
    """
    One member as lists show it.
    """

    created_at: AwareDatetime
    keys: list[str]
    """
    Its live keys' names (revoked ones are not listed: their number has no bound).
    """
    kind: MemberKind
    name: str
    oidc_subject: str | None = None
    """
    The single sign-on identity it signs in as, if bound.
    """
    signer: bool
    tenant: str


class MessageRole(Enum):
    """
    Who says a message in a case. The agent's prompt is the system message, so a
    case holds no system turn.
    """

    user = 'user'
    assistant = 'assistant'


class MoveView(BaseModel):
    """
    One move of a label.
    """

    actor: str | None = None
    """
    Who made it (for a `promote`: who asked), when known.
    """
    approver: str | None = None
    """
    Who signed off a `promote`.
    """
    change_request: int | None = None
    """
    The change request a `promote` carried out.
    """
    created_at: AwareDatetime
    from_revision: int | None = None
    """
    The revision it left; `null` for the label's first position.
    """
    id: int
    """
    The move's id: the order of moves, and the cursor of the next page.
    """
    kind: str
    """
    `publish`, `move` (by hand), `promote` (an approved change request) or
    `rollback` (back to the revision the label held just before).
    """
    reason: str | None = None
    """
    Why, as the one who asked said.
    """
    to_revision: int


class NewAgent(BaseModel):
    """
    The body of `POST /v1/agents`.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    identity: dict[str, Any]
    interaction_learning: str | None = None
    name: str
    operating_model: str | None = None
    prompt_template: str | None = None
    soul: str


class NewConnector(BaseModel):
    """
    The body of `POST /v1/connectors`. Its `Debug` shows header names, never values.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    headers: dict[str, str] | None = None
    """
    Sent with every call; values are write-only, and sealed at rest (a server
    without a secrets key refuses them with 422 `secrets_key_missing`).
    """
    kind: Kind | None = None
    """
    `http` (default) or `mcp`.
    """
    method: str | None = None
    """
    `POST` (default) or `PUT`.
    """
    name: str
    timeout_ms: int | None = None
    """
    1 to 30000 (the cap on every call); 30000 when absent.
    """
    trusted: bool | None = None
    """
    Apply the server's new and changed tools at once on sync (`false`, the
    default: hold them for an operator).
    """
    url: str
    """
    `https://` (or `http://`); every address it names or resolves to must be
    globally routable unless allowed by `--connector-allow`.
    """


class NewGroup(BaseModel):
    """
    The body of `POST /v1/groups`.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    members: list[str] | None = None
    """
    User ids to start with.
    """
    name: str
    """
    Lowercase letters, digits and `_`, as tool names.
    """


class NewKey(BaseModel):
    """
    The body of `POST /v1/keys`.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    agent: str | None = None
    """
    Scope an agent key to this agent; absent reaches every agent.
    """
    name: str
    """
    1 to 64 of a-z, 0-9, '-', '_', '.'; unique in its tenant.
    """
    role: str
    """
    `agent`, `approver`, `admin` or (by an operator only) `operator`.
    """
    tenant: str | None = None
    """
    The tenant (operators only; an admin's keys are always in its own tenant).
    Operator keys have none.
    """


class NewRun(BaseModel):
    """
    Starting a run.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    connection: str
    """
    The model connection asked.
    """
    dataset: str
    """
    The agent's dataset.
    """
    dataset_version: int | None = None
    """
    Its version (default: the latest).
    """
    judge_connection: str | None = None
    """
    Who judges `llm-rubric` assertions (default: `connection`).
    """
    judge_model: str | None = None
    label: str | None = None
    """
    Default `latest`.
    """
    model: str | None = None
    """
    One of the connection's models; default: the revision's model when the
    connection lists it, else the connection's first.
    """
    revision: int | None = None
    """
    The revision to evaluate, by number; default: what `label` serves.
    """
    token_budget: int | None = None
    """
    Tokens the run may use (default and most: `--eval-token-budget`).
    """


class NewSubscription(BaseModel):
    """
    What a new subscription asks.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    description: str | None = None
    events: list[str] | None = None
    """
    Event types (see the README); absent or `["*"]`: every type.
    """
    secret: str | None = None
    """
    A `whsec_` secret of your own (base64 of 24 to 64 bytes); absent: one is made.
    """
    tenant: str | None = None
    """
    The tenant (operators only; an admin's subscriptions are in its own tenant).
    """
    url: str
    """
    `https://...`; `http://` only to an address `--connector-allow` names.
    """


class OpenAiFunction(BaseModel):
    """
    The function of an [`OpenAiTool`].
    """

    description: str
    name: str
    parameters: dict[str, Any]
    """
    The tool's schema rewritten by [`strict_schema`] (as it is when `strict` is false).
    """
    strict: bool
    """
    `false` only for a synced tool taken loose on purpose (`allow_loose`).
    """


class OpenAiTool(BaseModel):
    """
    An OpenAI Chat Completions function tool, strict mode.
    """

    function: OpenAiFunction
    type: str
    """
    Always `function`.
    """


class Outcome(Enum):
    """
    What decided a call.
    """

    deny = 'deny'
    approval = 'approval'
    auto = 'auto'
    tier = 'tier'


class OutcomeKind(Enum):
    """
    What a client says a conversation came to.
    """

    success = 'success'
    failure = 'failure'


class OutcomeView(BaseModel):
    """
    A stored outcome: the latest report for its conversation.
    """

    agent: str
    conversation_id: str
    created_at: AwareDatetime
    """
    When the conversation's first report arrived.
    """
    id: int
    outcome: OutcomeKind
    revision: int
    score: float | None = None
    updated_at: AwareDatetime
    """
    When its latest report arrived (equal to `created_at` for the first).
    """
    user_id: str | None = None


class Parameters(BaseModel):
    """
    The model's sampling parameters.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    max_tokens: int | None = Field(None, ge=0)
    """
    At least 1.
    """
    provider_options: dict[str, Any] | None = None
    """
    Anything else the provider takes (`reasoning_effort`, `seed`, ...), passed on as given.
    """
    temperature: float | None = None
    """
    0 to 2.
    """
    top_p: float | None = None
    """
    0 to 1.
    """


class PlanBase(BaseModel):
    """
    The part of a plan an apply checks (its other fields are ignored).
    """

    against: str
    objects: dict[str, str]
    prune: bool
    target: str
    version: int = Field(..., ge=0)


class PolicyProblem(BaseModel):
    """
    A problem in a policy set: where (1-based line and column in its text) and what.
    """

    column: int = Field(..., ge=0)
    line: int = Field(..., ge=0)
    message: str


class Preference(BaseModel):
    """
    The body of `PUT /v1/users/{user_id}/tools/{tool}/preference`.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    auto_approve: bool


class PreferenceView(BaseModel):
    """
    A user's preference for a `user_configurable` tool.
    """

    auto_approve: bool
    tool: str
    user_id: str


class PreviewRequest(BaseModel):
    """
    The body of `POST .../prompt/preview`.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    channel: str | None = None
    """
    One channel, or every channel when absent.
    """
    last_message_at: AwareDatetime | None = None
    memory_notes: list[str] | None = None
    now: AwareDatetime | None = None
    """
    Render as of this moment (`$current_time`, the session section); now when absent.
    """
    template: str | None = None
    """
    The candidate; `null` previews the built-in assembly.
    """
    tz: str | None = None
    user_id: str | None = None


class PreviewRow(BaseModel):
    """
    One field a call would set (old values are not known to loadout).
    """

    field: str
    """
    A path such as `tasks[1].title`.
    """
    new: Any
    """
    Any JSON value.
    """


class ProblemCode(Enum):
    """
    What a problem is. Serialises to its code (`"missing_tier"`); the guide's
    `loadout check` table lists every code with its severity.

    Declared in the codes' alphabetical order: reports sort problems by code, and
    the derived order must be the order of the text.
    """

    agent_without_tools = 'agent_without_tools'
    breaking_change = 'breaking_change'
    catalog_tool_deleted = 'catalog_tool_deleted'
    catalog_tool_inactive = 'catalog_tool_inactive'
    duplicate_name = 'duplicate_name'
    invalid_schema = 'invalid_schema'
    label_tools_missing = 'label_tools_missing'
    label_tools_unconnected = 'label_tools_unconnected'
    link_to_inactive_tool = 'link_to_inactive_tool'
    link_to_missing_tool = 'link_to_missing_tool'
    loose_schema = 'loose_schema'
    missing_from_database = 'missing_from_database'
    missing_tier = 'missing_tier'
    name_outside_vocabulary = 'name_outside_vocabulary'
    no_executor = 'no_executor'
    not_connected = 'not_connected'
    not_in_catalog = 'not_in_catalog'
    policy_invalid = 'policy_invalid'
    policy_test_failed = 'policy_test_failed'
    prompt_names_inactive_tool = 'prompt_names_inactive_tool'
    remote_tool_gone = 'remote_tool_gone'
    retired_tool_active = 'retired_tool_active'
    schema_not_a_list = 'schema_not_a_list'
    schema_not_strict = 'schema_not_strict'
    secrets_not_sealed = 'secrets_not_sealed'
    secrets_unreadable = 'secrets_unreadable'
    template_lint_error = 'template_lint_error'
    unknown_type = 'unknown_type'


class RanStatus(Enum):
    """
    A call that ran or is running.
    """

    executing = 'executing'
    succeeded = 'succeeded'
    failed = 'failed'


class Rate(BaseModel):
    """
    A count and its rate over a denominator (`null` while the denominator is 0).
    """

    count: int = Field(..., ge=0)
    of: int = Field(..., ge=0)
    rate: float | None = None


class Refusal(BaseModel):
    """
    A recorded call the candidate would refuse, with the refusal a call would get.
    """

    code: str
    """
    The error code (`invalid_arguments`, `denied_by_policy`, `not_found`).
    """
    message: str
    """
    The error message, word for word.
    """
    proposal: int


class ReleaseMode(Enum):
    """
    How an agent's saves reach `production`.
    """

    direct = 'direct'
    gated = 'gated'


class RenderRequest(BaseModel):
    """
    Everything a render takes besides the agent (the body of `POST .../prompt/render`).
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    channel: str
    """
    A channel name, e.g. `web` (a missing one is 400 listing the known ones).
    """
    conversation_id: str | None = None
    """
    The subject a running rollout assigns by when there is no `user_id`.
    """
    last_message_at: AwareDatetime | None = None
    """
    When the user last wrote; decides the session section.
    """
    memory_notes: list[str] | None = None
    """
    Rendered as bullets under "What you remember"; at most 200.
    """
    tz: str | None = None
    """
    An IANA time zone for `$current_time`, e.g. `Europe/Berlin`; UTC when absent.
    """
    user_id: str | None = None
    """
    Brings the user's instructions into the prompt; the subject a running
    rollout assigns by.
    """


class RevisionSummary(BaseModel):
    """
    One revision, without its content.
    """

    author: str | None = None
    """
    Who first published this content (a key name, `seed`, `migration`), when known.
    """
    content_hash: str
    """
    Hex SHA-256 of the content's canonical JSON.
    """
    created_at: AwareDatetime
    number: int


class Rollback(BaseModel):
    """
    The body of a rollback.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    reason: str | None = None
    """
    Why, kept in the label's history.
    """


class RolloutEnd(BaseModel):
    """
    The body of a completion or an abort.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    reason: str | None = None
    """
    Why, kept in the history (or the change request).
    """


class RolloutEventView(BaseModel):
    """
    One event of a rollout's history.
    """

    at: AwareDatetime
    by: str | None = None
    """
    Who (a key name, `cli`); `null` for the service itself.
    """
    change_request_id: int | None = None
    """
    The change request whose sign-off made it.
    """
    kind: EventKind
    percent: float
    """
    The candidate's share after it, in percent.
    """
    reason: str | None = None


class RolloutPatch(BaseModel):
    """
    The body of a change: the share, a pause or a resume.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    paused: bool | None = None
    """
    `true` pauses (everyone gets the base), `false` resumes (the same
    subjects get the candidate again).
    """
    percent: float | None = None
    """
    The candidate's new share, 0 to 100 in steps of 0.01.
    """
    reason: str | None = None
    """
    Why, kept in the history.
    """


class RolloutStart(BaseModel):
    """
    The body of a start.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    candidate: int
    """
    The candidate revision's number.
    """
    guard: Guard | None = None
    percent: float
    """
    The candidate's share of subjects, 0 to 100 in steps of 0.01.
    """
    reason: str | None = None
    """
    Why, kept in the history (or the change request).
    """


class RolloutState(Enum):
    """
    Where a rollout is.
    """

    active = 'active'
    paused = 'paused'
    completed = 'completed'
    aborted = 'aborted'
    held = 'held'


class RolloutView(BaseModel):
    """
    A rollout with its history.
    """

    agent: str
    author: str
    """
    Who started it.
    """
    base_revision: int
    """
    The label's revision when it started (what the rest of the subjects get).
    """
    candidate_revision: int
    created_at: AwareDatetime
    end_reason: str | None = None
    """
    Why it completed or aborted.
    """
    ended_at: AwareDatetime | None = None
    events: list[RolloutEventView]
    """
    Oldest first.
    """
    guard: Guard | None = None
    id: int
    label: str
    percent: float
    """
    The candidate's share of subjects in percent (to 0.01).
    """
    state: RolloutState
    updated_at: AwareDatetime


class Rotation(BaseModel):
    """
    The body of a rotation: a secret of your own, or none to have one made.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    secret: str | None = None


class RunState(Enum):
    """
    Where a run is.
    """

    queued = 'queued'
    running = 'running'
    succeeded = 'succeeded'
    failed = 'failed'
    cancelled = 'cancelled'


class RunView(BaseModel):
    """
    A run as the API shows it.
    """

    agent: str
    cancel_requested: bool
    completion_tokens: int
    connection: str
    cost: float | None = None
    """
    From the connection's prices; absent without them.
    """
    created_at: AwareDatetime
    dataset: str
    dataset_version: int
    deadline_at: AwareDatetime
    done: int
    error: str | None = None
    errors: int
    """
    Cases whose model call failed (counted as not passed).
    """
    finished_at: AwareDatetime | None = None
    id: int
    judge_connection: str | None = None
    judge_model: str | None = None
    model: str
    pass_rate: float
    """
    `passed / total`, once the run has cases.
    """
    passed: int
    prompt_tokens: int
    requested_by: str
    revision: int
    """
    The revision's number.
    """
    started_at: AwareDatetime | None = None
    state: RunState
    tenant: str
    token_budget: int
    total: int


class Saved(DatasetSummary):
    """
    What saving a dataset answers: the version, and whether the save made it.
    """

    created: bool
    """
    `false`: the cases equal the latest version's; nothing was written.
    """


class ServedModel(BaseModel):
    """
    The settings one channel is served: the agent's with the channel's over them.
    """

    model: str | None = None
    parameters: Parameters | None = None
    response_schema: dict[str, Any] | None = None


class Side(Enum):
    """
    Which revision a subject was served by a running rollout.
    """

    base = 'base'
    candidate = 'candidate'


class SignalsView(BaseModel):
    """
    What loadout counted itself for a revision.
    """

    declined_proposals: Rate
    """
    Declined proposals over the proposals an approver decided.
    """
    failed_executions: Rate
    """
    Failed executions over the executions that ended.
    """
    invalid_arguments: Rate
    """
    Invalid-argument refusals over the tool calls checked.
    """


class SnapshotPut(BaseModel):
    """
    The body of `PUT /v1/agents/{agent}/snapshots`: record (or accept) one render.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    channel: str
    revision: int | None = None
    """
    The revision whose render becomes the expectation; default: `production`'s.
    Accepting a change request's difference is recording its candidate.
    """
    user_id: str | None = None


class SnapshotView(BaseModel):
    """
    A stored expectation.
    """

    agent: str
    channel: str
    expected: str
    updated_at: AwareDatetime
    user_id: str | None = None
    """
    `null`: rendered without a user.
    """


class Source(Enum):
    """
    Which path produced a prompt.
    """

    template = 'template'
    builtin = 'builtin'


class State(Enum):
    """
    A proposal's state.
    """

    proposed = 'proposed'
    approved = 'approved'
    executing = 'executing'
    succeeded = 'succeeded'
    failed = 'failed'
    declined = 'declined'
    expired = 'expired'


class Status(BaseModel):
    """
    `{"status": "ok"}` or `{"status": "ready"}`.
    """

    status: str


class Structured(Enum):
    """
    How a response schema is asked for: servers that speak the same API differ here.
    """

    json_schema = 'json_schema'
    json_object_schema = 'json_object_schema'


class SubscriptionPatch(BaseModel):
    """
    What a change to a subscription asks; absent fields stay.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    description: str | None = None
    enabled: bool | None = None
    """
    `false` switches it off, `true` on again (and resets the run of failures).
    """
    events: list[str] | None = None
    url: str | None = None


class SubscriptionView(BaseModel):
    """
    A subscription as the API shows it (never its secret).
    """

    created_at: AwareDatetime
    created_by: str
    description: str | None = None
    disabled_reason: str | None = None
    """
    Why it is disabled (by hand, or the run of failures and the last error).
    """
    events: list[str]
    """
    The event types it receives; `["*"]` for every type.
    """
    failures: int
    """
    Failed attempts in a row since the last success.
    """
    id: int
    state: str
    """
    `active` or `disabled`.
    """
    tenant: str
    updated_at: AwareDatetime
    url: str


class SyncEntry(BaseModel):
    """
    One remote tool in a sync's answer.
    """

    name: str | None = None
    """
    Its name in loadout (`null` when no name could be made).
    """
    reason: str | None = None
    """
    Why it was refused, or why a tool in `allow_loose` was taken loose.
    """
    remote: str
    """
    Its name on the server.
    """


class SyncReport(BaseModel):
    """
    What a sync did (or, with `dry_run`, would do).
    """

    added: list[SyncEntry]
    connector: str
    disabled: list[SyncEntry]
    """
    Tools whose remote tool is gone: switched off.
    """
    dry_run: bool
    held: list[SyncEntry]
    """
    New or changed remote tools held for an operator (a connector that is not
    `trusted`): a new one is stored switched off, a changed one serves its pin.
    """
    refused: list[SyncEntry]
    unchanged: list[SyncEntry]
    updated: list[SyncEntry]


class SyncRequest(BaseModel):
    """
    The body of `POST /v1/connectors/{connector}/sync`.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    agent: str | None = None
    """
    Also link the synced tools to this agent: missing links are made, on; a
    link an admin switched off stays off.
    """
    allow_loose: list[str] | None = None
    """
    Remote names of tools to take as they are when strict mode cannot express
    their schemas (open maps, `patternProperties`, ...): exported with
    `strict: false`, and `loadout check` warns. A schema that can be made strict
    is made strict anyway.
    """
    dry_run: bool | None = None
    """
    Plan and report, write nothing.
    """
    overwrite: bool | None = None
    """
    Replace admins' edits of synced descriptions and tiers with the server's.
    """
    rename: dict[str, str] | None = None
    """
    Remote name → loadout name, for names the verb mapping cannot place.
    """


class TemplatePut(BaseModel):
    """
    The body of `PUT .../prompt-template`.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    expected_version: int | None = None
    """
    Refuse the save (409) unless the template is still at this version.
    """
    force: bool | None = None
    """
    Save even with lint errors; recorded as forced.
    """
    reason: str | None = None
    """
    Why the save is forced (kept with the version; at most 500 characters).
    """
    template: str


class TemplateView(BaseModel):
    """
    The current template.
    """

    agent: str
    template: str | None = None
    """
    `null`: the built-in assembly.
    """
    version: int


class Tier(Enum):
    """
    When a tool call runs: at once, when the user allowed it, or after approval.
    """

    auto = 'auto'
    user_configurable = 'user_configurable'
    requires_approval = 'requires_approval'


class ToolCall(BaseModel):
    """
    The body of `POST /v1/agents/{agent}/tool-calls`.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    arguments: dict[str, Any]
    """
    Checked against the tool's JSON Schema.
    """
    conversation_id: str
    dry_run: bool | None = None
    """
    Answer how the call would be decided (`auto`, `approval` or `deny`, and the
    policy that decided) and write nothing, run nothing.
    """
    idempotency_key: str | None = None
    """
    The same key with the same request answers the first response; with another, 409.
    """
    message_id: str | None = None
    revision: int | None = None
    """
    The revision the caller was served (`Loadout-Revision`): the arguments are
    checked against its schema of the tool. When absent, the revision
    `production` serves this caller (while a rollout of it runs, the side its
    `user_id`, else its `conversation_id`, is on); 404 `revision_not_found` when the agent has no such revision.
    """
    tool: str
    """
    One of the agent's active tools.
    """
    user_id: str | None = None
    """
    Whose call; decides `user_configurable` tools' preference.
    """


class ToolChangeKind(Enum):
    """
    What the server did.
    """

    added = 'added'
    changed = 'changed'


class ToolChangeState(Enum):
    """
    Where a held change is in its life.
    """

    pending = 'pending'
    accepted = 'accepted'
    rejected = 'rejected'
    superseded = 'superseded'


class ToolContent(BaseModel):
    """
    One tool as the agent is served it.
    """

    approval_tier: str
    """
    `auto`, `user_configurable` or `requires_approval`.
    """
    connector: ConnectorPin | None = None
    description: str
    name: str
    parameters: dict[str, Any]
    """
    The JSON Schema of its input.
    """
    prompt_section: str | None = None
    strict: bool
    """
    `false`: served to OpenAI with `strict: false` (a loose synced schema).
    """
    type: str
    """
    `builtin`, `api` or `mcp`.
    """


class ToolDoc(BaseModel):
    """
    A tool.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    active: bool
    approval_tier: str
    connector: str | None = None
    """
    The connector that runs it (`api` and `mcp` tools).
    """
    description: str
    name: str
    parameters: dict[str, Any]
    """
    The arguments' JSON Schema.
    """
    prompt_section: str | None = None
    strict: bool
    """
    `false`: a synced schema taken loose on purpose.
    """
    type: str
    """
    `builtin`, `api` or `mcp`.
    """


class ToolType(Enum):
    """
    What carries out a tool call.
    """

    builtin = 'builtin'
    api = 'api'
    mcp = 'mcp'


class ToolUpdate(BaseModel):
    """
    The fields of `PATCH /v1/tools/{tool}`.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    approval_tier: Tier | None = None
    description: str | None = None
    is_active: bool | None = None
    parameters: dict[str, Any] | None = None
    prompt_section: str | None = None
    """
    `null` removes the section.
    """


class ToolView(BaseModel):
    """
    A tool as an admin sees it. `type` and `approval_tier` are shown as stored,
    so a drifted value is visible here (and reported by `loadout check`).
    """

    approval_tier: str
    """
    `auto`, `user_configurable` or `requires_approval`.
    """
    created_at: AwareDatetime
    deleted_at: AwareDatetime | None = None
    description: str
    is_active: bool
    name: str
    parameters: dict[str, Any]
    """
    The input's JSON Schema.
    """
    prompt_section: str | None = None
    strict: bool
    """
    `false` for a synced tool an admin accepted loose on purpose (`allow_loose`):
    its schema is as its server sent it, and OpenAI gets it with `strict: false`.
    """
    type: str
    """
    `builtin`, `api` or `mcp`.
    """
    updated_at: AwareDatetime


class Format4(Enum):
    openai = 'openai'


class Format5(Enum):
    anthropic = 'anthropic'


class Format6(Enum):
    mcp = 'mcp'


class TriedCall(BaseModel):
    """
    A call to decide under a policy being edited.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    arguments: dict[str, Any]
    groups: list[str] | None = None
    """
    The user's groups; absent: the groups the tenant gives that user now.
    """
    tool: str
    user_id: str | None = None


class ValueChange(BaseModel):
    """
    One field's old and new value; `null` where the field is absent.
    """

    after: Any
    before: Any
    field: str


class Verdict(Enum):
    """
    What a revision does with a call.
    """

    refused = 'refused'
    denied = 'denied'
    approval = 'approval'
    auto = 'auto'
    tier = 'tier'


class VersionView(BaseModel):
    """
    One template version.
    """

    author: str
    """
    The name of the key that saved it.
    """
    created_at: AwareDatetime
    forced: bool
    reason: str | None = None
    """
    Why it was forced, when the saver said.
    """
    template: str | None = None
    version: int


class WaitingStatus(Enum):
    """
    A call that has not run (yet), as the agent relays it.
    """

    proposed_for_approval = 'proposed_for_approval'
    approved = 'approved'
    declined = 'declined'
    expired = 'expired'


class WithSecret(BaseModel):
    """
    A subscription just made, or a secret just rotated: the only answers that hold
    the secret.
    """

    secret: str
    """
    The signing secret (`whsec_...`). Store it now: it is never shown again.
    """
    subscription: SubscriptionView


class AgentUpdate(BaseModel):
    """
    The fields an admin may change; anything else (ids, versions, timestamps) is refused.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    expected_soul_version: int | None = None
    """
    Refuse the write (409) unless the soul is still at this version.
    """
    identity: dict[str, Any] | None = None
    interaction_learning: str | None = None
    operating_model: str | None = None
    """
    `null` removes the section.
    """
    release_mode: ReleaseMode | None = None
    soul: str | None = None


class AgentView(BaseModel):
    """
    An agent as an admin sees it.
    """

    created_at: AwareDatetime
    identity: dict[str, Any]
    """
    `{display_name, role, description}`.
    """
    interaction_learning: str | None = None
    name: str
    operating_model: str | None = None
    prompt_template: str | None = None
    """
    `null`: the built-in assembly renders the prompt.
    """
    release_mode: ReleaseMode
    """
    How saves reach `production`: `direct` (at once) or `gated` (by promotion).
    """
    soul: str
    soul_version: int
    template_version: int
    updated_at: AwareDatetime


class AttemptList(BaseModel):
    """
    A subscription's delivery log, newest first (`GET /v1/webhooks/{id}/deliveries`,
    `loadout webhooks deliveries ID --json`).
    """

    attempts: list[AttemptView]


class CallDecision(BaseModel):
    """
    `dry_run`: what the call would be decided, with nothing written or run.
    """

    decided_by: DecidedBy | None = None
    decision: Outcome
    """
    `auto` (it would run at once), `approval` (it would wait for an approver)
    or `deny` (a policy refuses it); never `tier`: the tier's answer is given.
    """
    revision: int
    """
    The revision the call would be decided under.
    """
    status: DryRunStatus


class CallRan(BaseModel):
    """
    A call that ran, or is running: its result (`{error, retryable}` on failure).
    """

    decided_by: DecidedBy | None = None
    proposal_id: int
    result: dict[str, Any] | None = None
    status: RanStatus


class CallWaiting(BaseModel):
    """
    A call that has not run (yet): proposed, approved, declined or expired.
    """

    decided_by: DecidedBy | None = None
    description: str
    preview: list[PreviewRow]
    proposal_id: int
    status: WaitingStatus


class Case(BaseModel):
    """
    One test case.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    arguments: dict[str, Any]
    expect: Outcome
    """
    `deny`, `approval`, `auto` or `tier` (no policy applies).
    """
    groups: list[str] | None = None
    """
    The user's groups.
    """
    member: str | None = None
    name: str | None = None
    """
    Shown when the case fails (default: its position).
    """
    policy: str | None = None
    """
    The policy expected to decide, when it matters.
    """
    tenant: str | None = None
    """
    The caller's tenant (default `default`) and member (default `test`).
    """
    tool: str
    user: str | None = None
    """
    The user the agent acts for (absent: none).
    """


class CaseResult(BaseModel):
    """
    One case of a run.
    """

    channel: str
    completion_tokens: int
    description: str | None = None
    error: str | None = None
    errored: bool
    index: int
    """
    The case's place in the dataset version.
    """
    latency_ms: int
    output: str
    passed: bool
    prompt_tokens: int
    tool_calls: list[EvalToolCall]
    user_id: str | None = None
    verdicts: list[EvalVerdict]


class ChangeEvent(BaseModel):
    """
    One step of a request's life.
    """

    at: AwareDatetime
    by: str | None = None
    """
    Whose key made it (`null` for an expiry or a supersession).
    """
    reason: str | None = None
    state: ChangeState


class ChannelChange(BaseModel):
    """
    A channel both revisions have, differently.
    """

    fields: list[ValueChange]
    """
    The fields that differ: `guidance`, `include_operating_model`,
    `include_interaction_learning`, `include_session_section`.
    """
    name: str


class ChannelChanges(BaseModel):
    """
    The channels, by name.
    """

    added: list[str]
    changed: list[ChannelChange]
    removed: list[str]


class ChannelList(BaseModel):
    """
    Channels by name.
    """

    channels: list[ChannelView]


class ChannelModel(BaseModel):
    """
    A channel's settings: each field given replaces the agent's.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    model: str | None = None
    parameters: Parameters | None = None
    """
    Each parameter given replaces the agent's; provider options are merged by key.
    """
    response_schema: dict[str, Any] | None = None


class ChannelRender(BaseModel):
    """
    One channel's render of the candidate.
    """

    channel: str
    source: Source
    text: str


class CheckProblem(BaseModel):
    """
    One problem. `code` is stable: machines may match on it.
    """

    code: ProblemCode
    hint: str
    """
    What to do about it.
    """
    kind: str
    """
    `tool`, `agent`, `link`, `catalog` or `connector`.
    """
    message: str
    severity: CheckSeverity
    subject: str
    """
    The tool, agent or `agent/tool` the problem is about.
    """


class CheckReport(BaseModel):
    """
    The whole report, as `--format json` prints it.
    """

    checked: CheckCounts
    errors: int = Field(..., ge=0)
    ok: bool
    problems: list[CheckProblem]
    warnings: int = Field(..., ge=0)


class ConnectionPatch(BaseModel):
    """
    A change: each field given replaces the stored one; `api_key: ""` removes the key.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    api_key: str | None = None
    base_url: str | None = None
    input_price: float | None = None
    models: list[str] | None = None
    output_price: float | None = None
    structured: Structured | None = None
    timeout_ms: int | None = None


class ConnectionView(BaseModel):
    """
    A connection as the API shows it: never its key.
    """

    base_url: str
    created_at: AwareDatetime
    has_api_key: bool
    """
    Whether an API key is stored (it is never shown).
    """
    input_price: float | None = None
    """
    Price per million prompt tokens, for `cost` assertions.
    """
    models: list[str]
    name: str
    output_price: float | None = None
    """
    Price per million completion tokens.
    """
    structured: Structured
    timeout_ms: int
    updated_at: AwareDatetime


class ConnectorDoc(BaseModel):
    """
    A connector. Header values are never in a file, a plan or an answer.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    headers: dict[str, HeaderValue] | None = None
    """
    Header names and where each value comes from.
    """
    kind: str
    """
    `http` or `mcp`.
    """
    method: str
    name: str
    timeout_ms: int
    trusted: bool | None = None
    """
    Apply the server's new and changed tools on sync at once (`true`) or hold
    them for an operator (`false`); absent: a new connector holds them, an
    existing one keeps its setting.
    """
    url: str


class ConnectorList(BaseModel):
    """
    Live connectors by name.
    """

    connectors: list[ConnectorView]


class ContractChange(BaseModel):
    """
    One classified change to one tool.
    """

    compat: Compat
    detail: str
    """
    In words, with before and after where they are short.
    """
    kind: ContractKind
    path: str
    """
    JSON Pointer into the arguments (`/refunds/items/amount`); empty for the tool itself.
    """
    tool: str


class DatasetList(BaseModel):
    """
    An agent's datasets, the latest version of each.
    """

    datasets: list[DatasetSummary]


class DecisionChange(BaseModel):
    """
    A recorded call whose decision would change.
    """

    after: Verdict
    before: Verdict
    proposal: int


class DecisionView(BaseModel):
    """
    What a policy decided, and which policy decided it.
    """

    decision: Outcome
    policy: str | None = None
    """
    The deciding policy's id (`null`: none applied, or the set could not decide).
    """
    reason: str | None = None


class ErrorBody(BaseModel):
    """
    Every error body.
    """

    error: ErrorDetail


class EvalMessage(BaseModel):
    """
    One turn of a case's conversation.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    content: str
    role: MessageRole


class GrantList(BaseModel):
    """
    A page of grants, newest first.
    """

    grants: list[GrantView]
    next_before: int | None = None
    """
    Pass as `before` for the next (older) page; `null`: this page is the last.
    """


class GroupList(BaseModel):
    """
    The tenant's groups, by name.
    """

    groups: list[GroupView]


class LabelHistory(BaseModel):
    """
    A page of a label's moves, newest first.
    """

    agent: str
    label: str
    moves: list[MoveView]
    next_before: int | None = None
    """
    Pass as `before` for the next (older) page; `null`: this page is the last.
    """


class LabelList(BaseModel):
    """
    An agent's labels, by name.
    """

    agent: str
    labels: list[LabelView]


class Line(BaseModel):
    """
    One line of a hunk, without its line ending.
    """

    kind: LineKind
    text: str


class LinkList(BaseModel):
    """
    An agent's links, by tool name.
    """

    agent: str
    links: list[LinkView]


class LintProblem(BaseModel):
    """
    One problem, located by 1-based line and column (code points).
    """

    code: str
    column: int = Field(..., ge=0)
    line: int = Field(..., ge=0)
    message: str
    severity: LintSeverity


class MemberList(BaseModel):
    """
    A page of members, oldest first.
    """

    members: list[MemberView]
    next_after: int | None = None
    """
    Pass as `after` for the next page; `null`: this page is the last.
    """


class ModelSettings(BaseModel):
    """
    The model settings of an agent (`channels` override them per channel).
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    channels: dict[str, ChannelModel] | None = None
    """
    Per channel: what differs from the agent's settings there.
    """
    model: str | None = None
    """
    The model's name as the provider knows it (`gpt-4.1`, `claude-sonnet-4-5`).
    """
    parameters: Parameters | None = None
    response_schema: dict[str, Any] | None = None
    """
    The JSON Schema the model's answer must follow (structured output); an object schema.
    """


class ModelView(BaseModel):
    """
    An agent's model settings (`settings` `null`: none, the application chooses).
    """

    agent: str
    settings: ModelSettings | None = None


class NewConnection(BaseModel):
    """
    A new connection.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    api_key: str | None = None
    """
    Sent as `Authorization: Bearer …`; sealed at rest, never shown.
    """
    base_url: str
    """
    `https://api.openai.com/v1`; `/chat/completions` is added. `http://` and
    private or loopback addresses only where `--connector-allow` names them.
    """
    input_price: float | None = None
    models: list[str]
    """
    The model names runs may ask for; the first is the default.
    """
    name: str
    output_price: float | None = None
    structured: Structured | None = None
    timeout_ms: int | None = None
    """
    Per model call (default 120000).
    """


class NewOutcome(BaseModel):
    """
    The body of `POST /v1/agents/{agent}/outcomes`.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    conversation_id: str
    outcome: OutcomeKind
    revision: int
    """
    The revision that served the conversation (`Loadout-Revision`).
    """
    score: float | None = None
    """
    Any finite number the client scores with (its mean is reported).
    """
    user_id: str | None = None
    """
    Whose conversation, when known.
    """


class NewTool(BaseModel):
    """
    The body of `POST /v1/tools`.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    approval_tier: Tier
    """
    Required: a tool's tier is a decision, never a default. An unknown tier is
    refused by the definition rules (422).
    """
    description: str
    """
    The model-facing description, 1 to 4096 bytes.
    """
    name: str
    """
    `verb_resource`, the verb one of get, create, update, delete, search, set, link.
    """
    parameters: dict[str, Any]
    """
    A strict JSON Schema object for the arguments.
    """
    prompt_section: str | None = None
    type: ToolType | None = None
    """
    `api` when absent. Stored text; anything else is refused (422, `invalid_type`).
    """


class PolicyCheck(BaseModel):
    """
    The validator's answer.
    """

    decision: DecisionView | None = None
    problems: list[PolicyProblem]
    """
    Empty: the policy compiles against the agent's tools.
    """
    test_failures: list[str]
    """
    One message per failing test case.
    """


class PolicyPut(BaseModel):
    """
    The body of `PUT /v1/agents/{agent}/policy`.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    policy: str | None = None
    """
    Cedar text; `null` or empty: remove the policy.
    """
    tests: list[Case] | None = None


class PolicyTry(BaseModel):
    """
    The body of `POST /v1/agents/{agent}/policy/validate`: a policy to check
    against the agent's tools (nothing is saved), and optionally a call to try.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    call: TriedCall | None = None
    policy: str
    tests: list[Case] | None = None


class PolicyView(BaseModel):
    """
    An agent's policy and its tests.
    """

    agent: str
    policy: str | None = None
    """
    Cedar text; `null`: none (the tiers decide).
    """
    tests: list[Case]
    """
    The policy's test cases (`loadout check` runs them).
    """


class Preview(BaseModel):
    """
    The candidate's lint report and renders.
    """

    agent: str
    lint: list[LintProblem]
    renders: list[ChannelRender]


class ProposalView(BaseModel):
    """
    A proposal as an approver sees it.
    """

    arguments: dict[str, Any]
    attempts: int
    conversation_id: str
    created_at: AwareDatetime
    decided_by: DecidedBy | None = None
    description: str
    """
    One line for people, e.g. "Create tasks: Buy groceries".
    """
    expires_at: AwareDatetime
    id: int
    max_attempts: int
    message_id: str | None = None
    outcome_unknown: bool
    """
    A crash left the last execution's outcome unknown; it is never re-run automatically.
    """
    preview: list[PreviewRow]
    """
    `[{field, new}]`, one row per field the call sets.
    """
    result: dict[str, Any] | None = None
    """
    The executor's result, or `{error, retryable}`; `null` until it ran.
    """
    state: State
    tool: str
    updated_at: AwareDatetime
    user_id: str | None = None


class RevisionList(BaseModel):
    """
    A page of an agent's revisions, newest first.
    """

    agent: str
    next_before: int | None = None
    """
    Pass as `before` for the next (older) page; `null`: this page is the last.
    """
    revisions: list[RevisionSummary]


class RevisionOutcomes(BaseModel):
    """
    One revision's outcomes and signals.
    """

    failure_rate: float | None = None
    """
    Failures over reported outcomes; `null` with none.
    """
    failures: int = Field(..., ge=0)
    mean_score: float | None = None
    """
    The mean of the reported scores; `null` with none.
    """
    revision: int
    scored: int = Field(..., ge=0)
    """
    How many outcomes carried a score.
    """
    signals: SignalsView
    successes: int = Field(..., ge=0)


class RolloutStatus(BaseModel):
    """
    A label's running rollout (if any) and its past ones.
    """

    agent: str
    current: RolloutView | None = None
    label: str
    past: list[RolloutView]
    """
    Ended rollouts, newest first (at most [`PAST_LIMIT`]).
    """


class RunCases(BaseModel):
    """
    A run with its cases so far.
    """

    cases: list[CaseResult]
    run: RunView


class RunList(BaseModel):
    """
    Runs, newest first.
    """

    runs: list[RunView]


class SavedTemplate(BaseModel):
    """
    A saved template version, with the lint's warnings (or forced errors).
    """

    agent: str
    forced: bool
    """
    Saved over lint errors.
    """
    template: str | None = None
    version: int
    warnings: list[LintProblem]


class ServedRollout(BaseModel):
    """
    The running rollout that decided what was served, and the side it gave.
    """

    id: int
    """
    The rollout's id.
    """
    side: Side
    """
    `candidate`: the rollout's candidate; `base`: the label's revision.
    """


class SnapshotList(BaseModel):
    """
    An agent's snapshots for the key's tenant.
    """

    snapshots: list[SnapshotView]


class SubscriptionList(BaseModel):
    """
    Subscriptions, oldest first (`GET /v1/webhooks`, `loadout webhooks list --json`).
    """

    subscriptions: list[SubscriptionView]


class ToolChange(BaseModel):
    """
    A tool both revisions serve, differently.
    """

    fields: list[ValueChange]
    """
    The fields that differ: `description`, `parameters`, `approval_tier`, `type`,
    `strict`, `prompt_section`, in that order.
    """
    name: str


class ToolChanges(BaseModel):
    """
    The tools, by name.
    """

    added: list[ToolContent]
    """
    Tools only the new revision serves.
    """
    changed: list[ToolChange]
    removed: list[ToolContent]
    """
    Tools only the old revision serves, as it served them.
    """


class ToolList(BaseModel):
    """
    A page of tools by name.
    """

    next_after: str | None = None
    """
    Pass as `after` for the next page; `null`: this page is the last.
    """
    tools: list[ToolView]


class ToolReplay(BaseModel):
    """
    The replay of one changed tool.
    """

    changes: list[DecisionChange]
    """
    The first changed decisions (at most 20).
    """
    decisions_changed: int = Field(..., ge=0)
    """
    How many would be decided differently (refused, denied, waiting, run at once).
    """
    recorded: int = Field(..., ge=0)
    """
    Recorded calls replayed (at most the limit).
    """
    refusals: list[Refusal]
    """
    The first refusals, newest call first (at most 20).
    """
    refused: int = Field(..., ge=0)
    """
    How many the candidate would refuse.
    """
    tool: str


class ToolsView1(BaseModel):
    """
    OpenAI Chat Completions function tools, strict mode.
    """

    agent: str
    format: Format4
    label: str
    """
    The label asked for (`production` when none was).
    """
    revision: int
    """
    The revision served (also the `Loadout-Revision` header).
    """
    rollout: ServedRollout | None = None
    tools: list[OpenAiTool]


class ToolsView2(BaseModel):
    """
    Anthropic Messages API tools.
    """

    agent: str
    format: Format5
    label: str
    """
    The label asked for (`production` when none was).
    """
    revision: int
    """
    The revision served (also the `Loadout-Revision` header).
    """
    rollout: ServedRollout | None = None
    tools: list[AnthropicTool]


class ToolsView3(BaseModel):
    """
    MCP tools, as loadout's MCP server lists them.
    """

    agent: str
    format: Format6
    label: str
    """
    The label asked for (`production` when none was).
    """
    revision: int
    """
    The revision served (also the `Loadout-Revision` header).
    """
    rollout: ServedRollout | None = None
    tools: list[McpTool]


class ToolsView(RootModel[ToolsView1 | ToolsView2 | ToolsView3]):
    root: ToolsView1 | ToolsView2 | ToolsView3
    """
    An agent's active tools in one wire format, sorted by name: `format` says
    which shape `tools` has. Each format is a complete object in the document (a
    `oneOf` tagged by `format`), which client generators can read.
    """


class VersionList(BaseModel):
    """
    A page of the template's history, oldest first.
    """

    agent: str
    current_version: int
    next_after: int | None = None
    """
    Pass as `after` for the next (newer) page; `null`: this page is the last.
    """
    versions: list[VersionView]


class AgentList(BaseModel):
    """
    A page of live agents by name.
    """

    agents: list[AgentView]
    next_after: str | None = None
    """
    Pass as `after` for the next page; `null`: this page is the last.
    """


class CallResult(RootModel[CallWaiting | CallRan | CallDecision]):
    root: CallWaiting | CallRan | CallDecision
    """
    What a tool call answers: a proposal to relay, or the result of a call that ran.
    """


class CasePair(BaseModel):
    """
    One case of a comparison: the base's and the candidate's result.
    """

    base: CaseResult | None = None
    candidate: CaseResult | None = None
    change: str
    """
    `regressed` (pass → fail), `fixed` (fail → pass), `same`, or `missing`.
    """
    description: str | None = None
    index: int


class CheckResult(BaseModel):
    """
    One check's result.
    """

    contract: list[ContractChange] | None = None
    """
    The classified tool changes (`breaking` only).
    """
    name: CheckName
    runs: EvalRuns | None = None
    status: CheckStatus
    summary: list[str]
    """
    In words, e.g. "of 1000 recorded calls to create_tasks, 37 would now be refused (first: ...)".
    """


class ConnectionList(BaseModel):
    """
    The live connections.
    """

    connections: list[ConnectionView]


class Content(BaseModel):
    """
    An agent's served content. Fields are in a fixed order and maps are sorted
    (`serde_json`'s `Value` keeps object keys sorted, and channels are a
    `BTreeMap`), so equal content is equal JSON text and hashes alike.

    The soul and template version counters are left out: they count edits, and an
    edit that restores older text serves the older content.
    """

    channels: dict[str, ChannelContent]
    """
    Every live channel, by name.
    """
    groups: BTreeMap | None = None
    identity: dict[str, Any]
    """
    `{"display_name", "role", "description"}`.
    """
    interaction_learning: str
    """
    Empty when the agent has none.
    """
    model: ModelSettings | None = None
    operating_model: str
    """
    Empty when the agent has none (the section renders nothing).
    """
    policy: str | None = None
    """
    The agent's Cedar policy set (`policies`); absent when it has none, so the
    content of an agent without one hashes as it did before policies.
    """
    soul: str
    template: str | None = None
    """
    `null`: the built-in assembly.
    """
    tools: list[ToolContent]
    """
    The agent's active tools as served, sorted by name.
    """


class ConversationProposals(BaseModel):
    """
    A page of a conversation's proposals, oldest first.
    """

    conversation_id: str
    next: int | None = None
    """
    Pass as `after` for the next page; `null` on the last page.
    """
    proposals: list[ProposalView]


class CreatedAgent(AgentView):
    """
    A new agent, with the template's lint warnings.
    """

    warnings: list[LintProblem]


class EvalCase(BaseModel):
    """
    One case of a dataset.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    assert_: list[EvalAssertion] | None = Field(None, alias='assert')
    channel: str
    """
    The agent's channel whose prompt is rendered (the caller checks it exists).
    """
    description: str | None = None
    messages: list[EvalMessage]
    """
    The user's turn, or a short conversation that ends with one.
    """
    tool_choice: Any | None = None
    """
    Passed to the model: `"auto"`, `"required"`, `"none"` or
    `{"type": "function", "function": {"name": ...}}`.
    """
    user_id: str | None = None
    """
    The end user, whose instructions are rendered into the prompt.
    """
    vars: dict[str, str] | None = None
    """
    Substituted as `{{name}}` in the messages and the assertions' values.
    """


class Hunk(BaseModel):
    """
    One changed region, as a unified diff's `@@ -old_start,old_lines +new_start,new_lines @@`.
    """

    lines: list[Line]
    new_lines: int = Field(..., ge=0)
    new_start: int = Field(..., ge=0)
    """
    First line of the region in the new text, from 1 (0 when the region is empty there).
    """
    old_lines: int = Field(..., ge=0)
    old_start: int = Field(..., ge=0)
    """
    First line of the region in the old text, from 1 (0 when the region is empty there).
    """


class OutcomeReport(BaseModel):
    """
    An agent's outcomes per revision, newest revision first.
    """

    agent: str
    revisions: list[RevisionOutcomes]
    tenant: str | None = None
    """
    The tenant counted; `null`: every tenant (an operator's view).
    """


class ProposalDetail(ProposalView):
    """
    A proposal with its events, oldest first.
    """

    events: list[EventView]


class Provenance(BaseModel):
    """
    Where a served prompt came from: the path that built it, the version counters of
    its template and soul, the channel, and the revision and label it was served from.
    """

    channel: str
    label: str
    """
    The label asked for (`production` when none was).
    """
    revision: int
    """
    The revision served (also the `Loadout-Revision` header).
    """
    rollout: ServedRollout | None = None
    soul_version: int
    source: Source
    template_version: int


class ReleaseChecks(BaseModel):
    """
    A change request's release checks.
    """

    base: int
    """
    The revisions compared: what the label serves, and the candidate.
    """
    candidate: int
    checks: list[CheckResult]
    computed_at: AwareDatetime
    passed: bool
    """
    No check fails.
    """


class ReplayReport(BaseModel):
    """
    What a replay found.
    """

    agent: str
    base: int
    candidate: int
    decisions_changed: int = Field(..., ge=0)
    """
    Decisions changed, over every tool.
    """
    limit: int = Field(..., ge=0)
    refused: int = Field(..., ge=0)
    """
    Calls refused, over every tool.
    """
    tools: list[ToolReplay]
    """
    The tools the candidate changes, by name (tools with no recorded call too).
    """


class RevisionView(BaseModel):
    """
    One revision with what it serves.
    """

    agent: str
    author: str | None = None
    content: Content
    content_hash: str
    created_at: AwareDatetime
    number: int


class RunComparison(BaseModel):
    """
    A candidate's run against its base's.
    """

    assertions: list[AssertionCount]
    base: RunView
    candidate: RunView
    cases: list[CasePair]
    comparison: Comparison


class TextChange(BaseModel):
    """
    A text's line diff.
    """

    deleted: int = Field(..., ge=0)
    """
    Lines deleted, in all.
    """
    hunks: list[Hunk]
    """
    The changed regions with up to 3 unchanged lines around each, in order.
    """
    inserted: int = Field(..., ge=0)
    """
    Lines inserted, in all.
    """
    too_large: bool | None = None
    """
    The texts have more than 20,000 lines together: not compared, no hunks;
    `deleted` and `inserted` count every line of each.
    """


class ToolChangeView(BaseModel):
    """
    A held change, with what the tool serves now and what the server sent.
    """

    connector: str
    contract: list[ContractChange]
    """
    The input schema's changes from the served one, classified for callers.
    """
    created_at: AwareDatetime
    decided_at: AwareDatetime | None = None
    decided_by: str | None = None
    definition: dict[str, Any]
    """
    The server's definition: name, title, description, input and output
    schema, annotations.
    """
    description_diff: TextChange
    """
    The line diff from the served description to the server's.
    """
    fingerprint: str
    id: int
    kind: ToolChangeKind
    pinned_fingerprint: str | None = None
    """
    The fingerprint the tool serves (`null` for a tool synced before pins).
    """
    proposed_description: str
    """
    The description the server sent.
    """
    serving_description: str
    """
    The description the tool serves now.
    """
    state: ToolChangeState
    tool: str


class AgentDoc(BaseModel):
    """
    An agent: its texts, settings and the tools it is linked to (links switched on).
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    datasets: dict[str, list[EvalCase]] | None = None
    """
    Its evaluation datasets, the latest version of each: name → cases
    (`datasets/NAME.json`). Each is an object of its own (`dataset/AGENT/NAME`),
    fingerprinted, planned and applied apart from the agent.
    """
    identity: dict[str, Any]
    """
    `{display_name, role, description}` (null fields are left out).
    """
    interaction_learning: str | None = None
    model: ModelSettings | None = None
    name: str
    operating_model: str | None = None
    policy: str | None = None
    """
    Its Cedar policy (`policy.cedar`; absent: none).
    """
    policy_tests: list[Case] | None = None
    """
    The policy's test cases (`policy-tests.json`).
    """
    release_mode: str
    """
    `direct` or `gated`.
    """
    soul: str
    template: str | None = None
    """
    `null`: the built-in assembly renders the prompt.
    """
    tools: list[str] | None = None
    """
    The tools it is linked to, by name.
    """


class Bundle(BaseModel):
    """
    An instance's configuration, as files hold it and as `POST /v1/config/plan` and
    `/apply` take it. Lists are sorted by name.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    agents: list[AgentDoc] | None = None
    channels: list[ChannelDoc] | None = None
    connectors: list[ConnectorDoc] | None = None
    state: ConfigState | None = None
    tools: list[ToolDoc] | None = None
    version: int = Field(..., ge=0)
    """
    The layout version; 1.
    """


class ChangeRequestView(BaseModel):
    """
    A request to move a protected label.
    """

    agent: str
    checks: ReleaseChecks | None = None
    created_at: AwareDatetime
    decided_at: AwareDatetime | None = None
    decided_by: str | None = None
    decision_reason: str | None = None
    events: list[ChangeEvent]
    """
    The request, then its decision, oldest first.
    """
    expires_at: AwareDatetime
    from_revision: int
    """
    Where the label pointed when the request was made.
    """
    guard: Guard | None = None
    id: int
    kind: ChangeKind
    """
    What approving does: move the label, or start or complete a rollout.
    """
    label: str
    percent: float | None = None
    """
    A `rollout_start`'s or `rollout_share`'s share of subjects in percent.
    """
    reason: str | None = None
    """
    Why, as the author said.
    """
    requested_by: str
    """
    The author's key name.
    """
    require_checks: bool
    """
    Whether the label requires the checks to pass before approval.
    """
    rollout_id: int | None = None
    """
    The rollout a `rollout_complete` completes.
    """
    state: ChangeState
    to_revision: int
    """
    Where approving moves it.
    """


class ConfigRequest(BaseModel):
    """
    The body of `POST /v1/config/plan` and `/apply`.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    configuration: Bundle
    """
    The configuration wanted (what `GET /v1/config` answers, edited).
    """
    plan: PlanBase | None = None
    prune: bool | None = None
    """
    Remove (soft-delete) objects the configuration leaves out.
    """


class ConfigTextDiff(BaseModel):
    """
    A text field's line diff.
    """

    diff: TextChange
    field: str


class DatasetPut(BaseModel):
    """
    A dataset's cases: loadout's own, or a promptfoo test suite read into them.
    """

    model_config = ConfigDict(
        extra='forbid',
    )
    cases: list[EvalCase] | None = None
    """
    The cases, in loadout's shape.
    """
    channel: str | None = None
    """
    The channel promptfoo tests render for unless a test's `metadata.channel`
    names one (default `web`).
    """
    promptfoo: str | None = None
    """
    Or a promptfoo configuration (`promptfooconfig.yaml`, YAML or JSON) or test
    list, as its text.
    """


class DatasetView(DatasetSummary):
    """
    A dataset version with its cases.
    """

    cases: list[EvalCase]


class PromptBody(BaseModel):
    """
    A prompt inside a loadout.
    """

    provenance: Provenance
    text: str


class PromptView(BaseModel):
    """
    A rendered prompt.
    """

    agent: str
    provenance: Provenance
    text: str


class RenderCheck(BaseModel):
    """
    One snapshot compared with a candidate.
    """

    channel: str
    diff: TextChange | None = None
    error: str | None = None
    """
    Why the candidate could not be rendered (the channel is gone, ...).
    """
    matches: bool
    user_id: str | None = None


class SnapshotComparison(BaseModel):
    """
    Each snapshot compared with a revision's render.
    """

    agent: str
    renders: list[RenderCheck]
    revision: int


class TemplateChange(BaseModel):
    """
    The template's change: the text diff, a built-in side diffed as empty text.
    """

    builtin_after: bool
    """
    The new revision uses the built-in assembly.
    """
    builtin_before: bool
    """
    The old revision used the built-in assembly (no template of its own).
    """
    text: TextChange


class ToolChangeList(BaseModel):
    """
    Held changes, newest first (at most [`LIST_LIMIT`]).
    """

    changes: list[ToolChangeView]


class ChangeRequestList(BaseModel):
    """
    Change requests, newest first (at most [`LIST_LIMIT`]).
    """

    change_requests: list[ChangeRequestView]


class ConfigChange(BaseModel):
    """
    One object's change.
    """

    action: Action
    fields: list[ValueChange]
    """
    The fields that differ (an update), or are set (a create).
    """
    object: str
    """
    `agent/NAME`, `dataset/AGENT/NAME`, `tool/NAME`, `channel/NAME` or
    `connector/NAME`.
    """
    texts: list[ConfigTextDiff]
    """
    Texts that differ, as line diffs.
    """


class ConfigPlan(BaseModel):
    """
    What applying a bundle would do, and the state it was computed against.
    """

    against: str
    """
    The instance's fingerprint when the plan was made (`sha256:...`).
    """
    changes: list[ConfigChange]
    """
    The objects that differ, by kind then name.
    """
    changes_anything: bool
    """
    Something would change (`loadout plan` exits 2).
    """
    objects: dict[str, str]
    """
    Each object's fingerprint then, by `kind/name`.
    """
    prune: bool
    """
    Objects the bundle leaves out are removed (soft deletes).
    """
    reads: list[str] | None = None
    """
    The environment variables `loadout plan` read header values from, as
    `connector/NAME header H ← $VAR` (never their values).
    """
    target: str
    """
    The fingerprint of the configuration planned.
    """
    unchanged: int = Field(..., ge=0)
    """
    How many objects would stay as they are.
    """
    version: int = Field(..., ge=0)
    """
    The plan format; 1.
    """
    warnings: list[str]
    """
    What the plan could not compare (header values without a key or a value).
    """


class Diff(BaseModel):
    """
    Everything that differs between two contents; empty parts mean "unchanged".
    """

    breaking: bool
    """
    Whether any of `contract` is breaking.
    """
    channels: ChannelChanges
    contract: list[ContractChange]
    """
    Each tool change classified for callers (`docs/contracts.md`).
    """
    groups: list[ValueChange] | None = None
    """
    The carried groups whose members differ, as `tenant/group` with the sorted
    user ids before and after (`null`: no such group on that side).
    """
    identical: bool
    """
    Nothing differs.
    """
    identity: list[ValueChange]
    """
    The identity's fields that differ, by field name.
    """
    interaction_learning: TextChange | None = None
    model: list[ValueChange] | None = None
    """
    The model settings that differ, by dotted path (`parameters.temperature`,
    `channels.voice.model`); a response schema is one value.
    """
    operating_model: TextChange | None = None
    policy: TextChange | None = None
    soul: TextChange | None = None
    template: TemplateChange | None = None
    tools: ToolChanges


class LoadoutView1(BaseModel):
    """
    OpenAI Chat Completions function tools, strict mode.
    """

    agent: str
    format: Format1
    model: ServedModel | None = None
    prompt: PromptBody
    tools: list[OpenAiTool]


class LoadoutView2(BaseModel):
    """
    Anthropic Messages API tools.
    """

    agent: str
    format: Format2
    model: ServedModel | None = None
    prompt: PromptBody
    tools: list[AnthropicTool]


class LoadoutView3(BaseModel):
    """
    MCP tools, as loadout's MCP server lists them.
    """

    agent: str
    format: Format3
    model: ServedModel | None = None
    prompt: PromptBody
    tools: list[McpTool]


class LoadoutView(RootModel[LoadoutView1 | LoadoutView2 | LoadoutView3]):
    root: LoadoutView1 | LoadoutView2 | LoadoutView3
    """
    Prompt and tools in one response; `format` says which shape `tools` has, as
    in [`ToolsView`].
    """


class RevisionDiff(BaseModel):
    """
    Two revisions of an agent and what changed from the first to the second.
    """

    agent: str
    diff: Diff
    from_: int = Field(..., alias='from')
    """
    The revision compared from.
    """
    to: int
    """
    The revision compared to.
    """


class ConfigApplied(BaseModel):
    """
    What an apply did.
    """

    after: str
    """
    Its fingerprint after.
    """
    before: str
    """
    The instance's fingerprint before.
    """
    change_requests: list[ChangeRequestView]
    """
    Change requests opened for gated agents' `production`.
    """
    changes: list[ConfigChange]
    """
    The changes made (the plan it carried out).
    """
    unchanged: int = Field(..., ge=0)
