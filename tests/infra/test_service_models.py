"""The shared botocore session reads its models through `infra.aws.service_models`: the same data
as botocore's stock loader, for the services and files Waypoint reads, and the same error for a
service that does not exist."""

from __future__ import annotations

from collections import OrderedDict

import pytest
from botocore.exceptions import DataNotFoundError, UnknownServiceError
from botocore.loaders import Loader, create_loader

from infra.aws.clients import shared_session
from infra.aws.service_models import ServiceModelLoader, service_model_loader

SERVICES = (
    "dynamodb",
    "s3",
    "sqs",
    "ssm",
    "secretsmanager",
    "lambda",
    "stepfunctions",
    "bedrock-runtime",
)
MODEL_TYPES = ("service-2", "endpoint-rule-set-1", "paginators-1", "waiters-2")


def _plain(value: object) -> object:
    """`value` with every OrderedDict a dict: what the stock loader returns, order aside."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_model_is_what_botocores_loader_reads(service: str) -> None:
    stock, ours = Loader(), ServiceModelLoader()
    for type_name in MODEL_TYPES:
        try:
            expected = stock.load_service_model(service, type_name)
        except DataNotFoundError:
            with pytest.raises(DataNotFoundError):
                ours.load_service_model(service, type_name)
            continue
        loaded = ours.load_service_model(service, type_name)
        assert loaded == _plain(expected), (service, type_name)
        assert list(loaded) == list(expected)  # the same order
        assert not isinstance(loaded, OrderedDict)
    latest = stock.determine_latest_version(service, "service-2")
    assert ours.load_service_model(service, "service-2", latest) == _plain(
        stock.load_service_model(service, "service-2", latest)
    )


def test_botocores_own_data_files_read_the_same() -> None:
    stock, ours = Loader(), ServiceModelLoader()
    for name in ("endpoints", "partitions", "_retry", "sdk-default-configuration"):
        assert ours.load_data(name) == _plain(stock.load_data(name)), name


def test_an_unknown_service_is_botocores_error_naming_every_service() -> None:
    with pytest.raises(UnknownServiceError) as raised:
        ServiceModelLoader().load_service_model("no-such-service", "service-2")
    assert "dynamodb" in str(raised.value) and "no-such-service" in str(raised.value)


def test_an_unknown_api_version_is_not_found() -> None:
    with pytest.raises(DataNotFoundError):
        ServiceModelLoader().load_service_model("dynamodb", "service-2", "1999-01-01")


def test_the_search_paths_are_botocores_for_the_same_data_path(tmp_path: object) -> None:
    for data_path in (None, f"{tmp_path}:~/models"):
        assert service_model_loader(data_path).search_paths == create_loader(data_path).search_paths


def test_the_shared_session_reads_through_it() -> None:
    assert isinstance(shared_session().get_component("data_loader"), ServiceModelLoader)
