"""How the shared botocore session reads its data files: the same models, for less of a cold start.

Creating the worker's DynamoDB and S3 clients reads their service models and endpoint rules
and botocore's endpoint data (~4 MB of JSON), and two habits of botocore's stock `Loader` cost
a cold container ≈ 50 ms of CPU it need not pay:

- `JSONFileLoader` parses every file with `object_pairs_hook=OrderedDict`: 56 ms for those five
  files against 21 ms into plain dicts (S3's service model alone: 29 ms against 6). A dict keeps
  its insertion order (Python 3.7+), and botocore uses no operation only an `OrderedDict` has on
  what it loads (no `move_to_end`, `popitem`, order-sensitive equality between two of them).
- `load_service_model` lists every service directory botocore ships (≈ 420, each listed again
  for the model type) to check that the one asked for exists, once per model type. Asked about
  one service, `ServiceModelLoader` looks in that service's directories only; one that does not
  exist is left to botocore's own method, which raises its `UnknownServiceError` naming them all.

tests/infra/test_service_models.py checks that both loaders return equal data for the services
and files Waypoint reads.
"""

from __future__ import annotations

import json
import os
from typing import Any

from botocore.exceptions import DataNotFoundError
from botocore.loaders import JSONFileLoader, Loader, instance_cache


class DictJSONFileLoader(JSONFileLoader):  # type: ignore[misc]
    """botocore's JSON file loader, parsing into plain dicts (see the module)."""

    def _load_file(self, full_path: str, open_method: Any) -> Any:
        if not os.path.isfile(full_path):
            return None
        with open_method(full_path, "rb") as file:
            payload = file.read().decode("utf-8")
        return json.loads(payload)


class ServiceModelLoader(Loader):  # type: ignore[misc]
    """botocore's `Loader`, looking up a service model in that service's directories only."""

    FILE_LOADER_CLASS = DictJSONFileLoader

    @instance_cache  # type: ignore[untyped-decorator]
    def load_service_model(
        self, service_name: str, type_name: str, api_version: str | None = None
    ) -> Any:
        try:
            versions = self.list_api_versions(service_name, type_name)
        except DataNotFoundError:
            versions = []
        if not versions:  # unknown: botocore's own method raises its error, naming every service
            return super().load_service_model(service_name, type_name, api_version)
        if api_version is None:
            api_version = max(versions)  # botocore's `determine_latest_version`
        model = self.load_data(os.path.join(service_name, api_version, type_name))
        extras = self._find_extras(service_name, type_name, api_version)
        self._extras_processor.process(model, extras)
        return model


def service_model_loader(data_path: str | None = None) -> ServiceModelLoader:
    """The loader for a session whose `data_path` setting (`AWS_DATA_PATH`) is `data_path`, with
    the search paths botocore's `create_loader` gives it."""
    if data_path is None:
        return ServiceModelLoader()
    paths = [os.path.expanduser(os.path.expandvars(p)) for p in data_path.split(os.pathsep)]
    return ServiceModelLoader(extra_search_paths=paths)


def use_service_model_loader(session: Any) -> None:
    """Make `session` (a botocore session, before it created a client) read through
    `ServiceModelLoader`."""
    session.register_component(
        "data_loader", service_model_loader(session.get_config_variable("data_path"))
    )


__all__ = [
    "DictJSONFileLoader",
    "ServiceModelLoader",
    "service_model_loader",
    "use_service_model_loader",
]
