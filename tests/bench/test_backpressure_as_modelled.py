"""The scale model's `defer` mode (`bench.scale_model`) is the worker as built
(`functions.worker_backpressure`, template.yaml), and `python -m bench scale --safe-cap` gives
the template's WorkerMaxConcurrency for a model quota (docs/capacity.md, docs/deploy.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.scale import DEFAULTS, main, safe_worker_cap
from bench.scale_model import Quotas, Service
from functions.worker_backpressure import DEFER_BASE_SECONDS, DEFER_CAP_SECONDS
from infra.aws.cfn_template import load_template
from infra.runtime_settings import RuntimeSettings


def test_the_simulation_defers_turns_the_way_the_worker_does() -> None:
    modelled, template = Service(), load_template()
    queue = template["Resources"]["TurnQueue"]["Properties"]
    assert modelled.backpressure == RuntimeSettings().on_model_rate_limit == "defer"
    assert (modelled.defer_s, modelled.defer_cap_s) == (DEFER_BASE_SECONDS, DEFER_CAP_SECONDS)
    assert modelled.max_receives == queue["RedrivePolicy"]["maxReceiveCount"]
    assert modelled.one_moment_after_s == RuntimeSettings().one_moment_after_seconds
    assert (
        Quotas().worker_max_concurrency == template["Parameters"]["WorkerMaxConcurrency"]["Default"]
    )


@pytest.mark.parametrize(("rpm", "tpm"), [(60_000, 150_000_000), (10_000, 10_000_000)])
def test_safe_cap_prints_the_worker_cap_a_model_quota_sustains(
    rpm: int, tpm: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--safe-cap", str(rpm), str(tpm)]) == 0

    expected = safe_worker_cap(replace(DEFAULTS, model_rpm=rpm, model_tpm=tpm))
    assert capsys.readouterr().out.strip() == f"WorkerMaxConcurrency={expected}"


def test_safe_cap_stays_within_what_the_event_source_mapping_accepts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["--safe-cap", "60", "60000"])  # a tiny quota: still 2, the mapping's minimum
    main(["--safe-cap", "10000000", "1e12"])  # a huge one: 1,000, its maximum
    assert capsys.readouterr().out.split() == [
        "WorkerMaxConcurrency=2",
        "WorkerMaxConcurrency=1000",
    ]
