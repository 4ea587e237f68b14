"""The scale model (`bench.scale_model`, docs/capacity.md): whatever the limits, every message a
customer wrote is answered or counted lost, each conversation's replies come in order, and each
limit shows where the model says it binds. No timing is asserted: the model's own clock is
simulated."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from bench.scale import DEPLOYMENTS, safe_worker_cap
from bench.scale_model import Quotas, Service, Workload, binding, simulate

SMALL = Workload(200, messages=4, ramp_s=10.0, think_s=5.0)
GENEROUS = Quotas(api_rate=1e6, api_burst=1e6, worker_max_concurrency=1_000, send_rate=1e6)


def test_enough_of_everything_answers_every_message_in_order_and_nothing_binds() -> None:
    result = simulate(SMALL, GENEROUS)

    assert result.sent == 200 * 4
    assert result.replies == result.sent and result.lost == 0
    assert result.out_of_order == 0
    assert result.webhook_retries == result.model_429s == 0
    assert binding(result) == "none"
    assert 0 < result.percentile(0.5) <= result.percentile(0.99)


@pytest.mark.parametrize("seed", range(12))
def test_any_limits_lose_nothing_silently_and_keep_every_conversation_in_order(seed: int) -> None:
    """Random limits, from generous to starved, on random workloads: what was sent is answered
    or counted lost — never neither — and no conversation's replies overtake each other."""
    rng = random.Random(seed)
    quotas = Quotas(
        api_rate=rng.choice([5.0, 50.0, 1e6]),
        api_burst=rng.choice([5.0, 100.0]),
        lambda_concurrency=rng.choice([3, 50, 1_000]),
        worker_max_concurrency=rng.choice([1, 4, 50]),
        batch_size=rng.choice([1, 10]),
        model_rpm=rng.choice([60.0, 600.0, 1e6]),
        model_tpm=rng.choice([1e5, 1e9]),
        send_rate=rng.choice([1.0, 30.0]),
    )
    service = Service(
        backpressure=rng.choice(["defer", "fallback"]),
        max_receives=rng.choice([2, 8]),
        retry_after_s=rng.choice([(), (1.0,), (1.0, 60.0, 300.0)]),
    )
    workload = Workload(rng.randint(1, 120), messages=rng.randint(1, 5), seed=seed)

    result = simulate(workload, quotas, service)

    assert result.replies + result.lost == result.sent
    assert result.out_of_order == 0
    assert result.one_moment_lines <= result.sent  # at most one per message
    assert len(result.waits_s) == result.replies


def test_a_webhook_throttle_is_retried_by_the_platform_and_binds() -> None:
    result = simulate(SMALL, replace(GENEROUS, api_rate=15.0, api_burst=15.0))

    assert result.webhook_retries > 0 and result.lost == 0
    assert binding(result) == "the webhook API's throttle or Lambda's concurrency"


def test_a_platform_that_stops_retrying_loses_messages_and_they_are_counted() -> None:
    result = simulate(SMALL, Quotas(api_rate=1.0, api_burst=1.0), Service(retry_after_s=()))

    assert result.lost_webhook > 0
    assert result.replies + result.lost == result.sent


def test_the_workers_cap_queues_sessions_without_losing_or_reordering() -> None:
    result = simulate(SMALL, replace(GENEROUS, worker_max_concurrency=1))

    assert result.peak_workers == 1 and result.peak_queue > 1
    assert result.replies == result.sent and result.out_of_order == 0
    assert binding(result) == "the workers' concurrency (queue)"


def test_a_rate_limited_model_defers_turns_and_says_one_moment_at_most_once_per_message() -> None:
    quotas = replace(GENEROUS, model_rpm=300.0)
    result = simulate(SMALL, quotas, Service(max_receives=100))

    assert result.model_429s > 0 and result.deferrals == result.model_429s
    assert result.replies == result.sent and result.lost == 0 and result.fallback_replies == 0
    assert 0 < result.one_moment_lines <= result.sent
    assert binding(result) == "the model's rate limit (deferred turns)"


def test_a_deferral_past_the_receive_limit_is_dead_lettered_and_counted() -> None:
    result = simulate(SMALL, Quotas(model_rpm=60.0), Service(max_receives=2))

    assert result.dead_lettered > 0
    assert result.replies + result.lost == result.sent


def test_fallback_backpressure_answers_everything_at_once_but_not_what_was_asked() -> None:
    result = simulate(SMALL, replace(GENEROUS, model_rpm=300.0), Service(backpressure="fallback"))

    assert result.lost == 0 and result.replies == result.sent
    assert result.fallback_replies > 0 and result.deferrals == 0


def test_workers_capped_to_the_model_quota_never_hit_it() -> None:
    quotas = replace(GENEROUS, model_rpm=3_000.0, model_tpm=1e9)
    capped = replace(quotas, worker_max_concurrency=safe_worker_cap(quotas))

    result = simulate(Workload(2_000, messages=3, ramp_s=5.0, think_s=5.0), capped)

    assert result.model_429s == 0 and result.lost == 0
    assert result.peak_workers == capped.worker_max_concurrency


def test_the_same_seed_gives_the_same_run() -> None:
    first, second = simulate(SMALL), simulate(SMALL)

    assert first.waits_s == second.waits_s and first.end_s == second.end_s


def test_the_documented_deployments_are_the_ones_the_doc_describes() -> None:
    names = [d.name for d in DEPLOYMENTS]
    assert names[0] == "template defaults" and DEPLOYMENTS[0].quotas == Quotas()
    assert len(set(names)) == len(names)
