"""What a benchmark run produces: plain dataclasses, rendered by `bench.report`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.harness import TurnSample
from bench.offline_cpu import OfflineCpuRow


@dataclass
class TurnSummary:
    """Per-turn figures of one agent's conversations under the latency model."""

    agent: str
    turns: int
    wall_p50_ms: float
    wall_p95_ms: float
    rounds_p50: float
    rounds_max: int
    calls_mean: float
    calls_max: int
    prompt_tokens_mean: float
    prompt_tokens_max: int
    prompt_est_mean: float  # chars/4
    completion_tokens_mean: float
    tool_turns: int
    budget_skips: int
    speculative_discarded: int
    speculation_saved: int = 0  # node selections not made: the journey was below the threshold
    speculation_late: int = 0  # unpredicted journeys the turn entered anyway (a later round)
    completion_tokens_max: int = 0  # the largest turn's completion tokens
    prompt_per_call: float = 0.0  # over every counted call: tokens / calls
    completion_per_call: float = 0.0
    completion_max_call: int = 0  # the largest single answer


@dataclass
class OverheadSummary:
    """Engine overhead (zero-latency LLM) of one agent on one port set."""

    agent: str
    ports: str
    turns: int
    p50_ms: float
    p95_ms: float
    max_ms: float
    stages_p50_ms: dict[str, float]
    stages_p95_ms: dict[str, float]
    llm_self_p50_ms: float  # the fake LLM's own CPU per turn (excluded from the overhead)
    # reading the customer's values and grounding arguments: per turn, and its share of the
    # turn's overhead (the median of each turn's own share)
    values_p50_ms: float = 0.0
    values_p95_ms: float = 0.0
    values_share_p50: float = 0.0
    # detecting the language of the turn's messages (one message per benchmark turn)
    language_p50_ms: float = 0.0
    language_p95_ms: float = 0.0
    language_share_p50: float = 0.0


@dataclass
class ScaleRow:
    label: str
    shape: str  # bench.scale_agents: "mostly journey-scoped" or "all agent-wide"
    guidelines: int
    journeys: int
    global_guidelines: int
    snapshot_guidelines: int  # incl. journey conditions
    evaluated_mean: float  # guidelines the matcher saw per turn
    calls_mean: float
    rounds_max: int
    prompt_tokens_mean: float
    prompt_est_mean: float
    completion_tokens_mean: float
    critical_completion_mean: float  # completion tokens on the critical path
    ratio_vs_100: float  # prompt tokens vs the 100-guideline agent of the same shape
    overhead_p50_ms: dict[str, float] = field(default_factory=dict)  # port set → ms
    overhead_p95_ms: dict[str, float] = field(default_factory=dict)


@dataclass
class ReferenceRow:
    scenario: str
    description: str
    calls: int
    rounds: int
    prompt_tokens: int
    prompt_est: int
    completion_tokens: int
    wall_p50_ms: float
    calls_by_schema: dict[str, int]
    theirs_calls: str
    theirs_rounds: str
    theirs_prompt_tokens: str


@dataclass
class EmbeddingRow:
    vectors: int
    dimensions: int
    megabytes: float
    write_ms: float
    cold_load_ms: float  # download + parse, no disk cache
    revalidated_load_ms: float  # conditional GET (304) + disk read + parse
    warm_hit_ms: float  # this container already holds it
    topk_p50_ms: float
    topk_p95_ms: float


@dataclass
class ImportRow:
    module: str
    role: str
    status: str  # "ok" | "not present" | "skipped in this configuration" | "error: …"
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    cpu_median_ms: float | None = None  # process CPU time: what the import costs without contention
    runs: int = 0
    # Handlers only: the same import with no .pyc to load (every module compiled from source), as
    # in Lambda when the deployed package ships no bytecode: its files are read-only there.
    source_median_ms: float | None = None
    source_runs: int = 0
    heaviest: list[tuple[str, float]] = field(default_factory=list)  # (module, cumulative ms)


@dataclass
class FirstTurnRow:
    runs: int
    import_ms: float
    agent_ms: float
    first_turn_ms: float
    second_turn_ms: float
    status: str = "ok"


@dataclass
class ColdHandlerRow:
    """A cold Lambda container of the turn worker (`bench.cold_handler`): its init phase and the
    real handler's first invocation, medians over fresh processes (ms); then warm turns' CPU with
    and without the init phase's `gc.freeze()`."""

    runs: int
    init_ms: float  # the import of functions.worker and what it runs in a Lambda container
    invocation_ms: float  # the handler's first invocation, model time included
    model_ms: float  # the fake model server's busy time during it: left out of the total
    total_ms: float  # init + first invocation − model time: what the target limits
    init_cpu_ms: float  # the worker process's CPU in each (the servers run in another process)
    invocation_cpu_ms: float
    openai_in_invocation: bool  # whether any run's first invocation imported an openai module
    warm_turns: int = 0  # per container, after the cold one
    turn_cpu_p50_ms: float = 0.0  # worker process CPU per warm turn, init's gc.freeze kept
    turn_cpu_p95_ms: float = 0.0
    unfrozen_turn_cpu_p50_ms: float = 0.0  # the same containers' twins, unfrozen after init
    unfrozen_turn_cpu_p95_ms: float = 0.0
    full_pass_ms: float = 0.0  # CPU of one full collection after the warm turns, frozen
    unfrozen_full_pass_ms: float = 0.0  # …and unfrozen: what a full pass costs the turn it hits
    full_collections: int = 0  # automatic full collections during the warm turns, frozen
    unfrozen_full_collections: int = 0
    status: str = "ok"


@dataclass
class ColdTurnRow:
    """The first turn of a fresh worker process on the moto stack, each part's median (ms)."""

    runs: int
    parts_ms: dict[str, float]  # import, runtime, snapshot, vectors, session, turn, commit
    total_ms: float  # their sum: the cold turn without the LLM's own time
    llm_fake_ms: float  # the fake LLM's CPU, left out of the total
    llm_calls: int = 0
    status: str = "ok"
    # The same first turn through the real handler, in a Lambda container (`bench.cold_handler`).
    handler: ColdHandlerRow | None = None


@dataclass
class ThroughputRow:
    status: str  # "ok" | "pending: …"
    sessions: int = 0
    turns: int = 0
    seconds: float = 0.0
    turns_per_second: float = 0.0
    p50_ms: float = 0.0
    p95_ms: float = 0.0


@dataclass
class TargetResult:
    name: str
    limit: str
    measured: str
    status: str  # "PASS" | "MISS" | "PENDING"
    margin: str
    why: str = ""
    fix: str = ""


@dataclass
class ProfileRow:
    function: str
    calls: float  # per turn; a coroutine counts once per resumption
    own_ms: float
    cumulative_ms: float


@dataclass
class BenchResult:
    machine: dict[str, Any]
    config: dict[str, Any]
    started_at: str
    duration_s: float = 0.0
    tokenizer: str = ""
    turns: list[TurnSummary] = field(default_factory=list)
    overhead: list[OverheadSummary] = field(default_factory=list)
    scale: list[ScaleRow] = field(default_factory=list)
    reference: list[ReferenceRow] = field(default_factory=list)
    embeddings: list[EmbeddingRow] = field(default_factory=list)
    imports: list[ImportRow] = field(default_factory=list)
    first_turn: FirstTurnRow | None = None
    offline_cpu: OfflineCpuRow | None = None
    cold_turn: ColdTurnRow | None = None
    throughput: ThroughputRow | None = None
    targets: list[TargetResult] = field(default_factory=list)
    profile: list[ProfileRow] = field(default_factory=list)
    profile_label: str = ""
    samples: list[TurnSample] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
