"""Reading a SAM / CloudFormation template (`template.yaml`) as plain data.

Short tags (!Ref, !Sub, !GetAtt …) are expanded to their long JSON form, so the local stack
(`infra.aws.local_stack`) and the tests read the template like CloudFormation does.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from infra.aws.stack_files import stack_file

TEMPLATE_ENV = "WAYPOINT_TEMPLATE"
DEFAULT_TEMPLATE = stack_file("template.yaml")  # the checkout's, or the wheel's copy

TABLE = "AWS::DynamoDB::Table"
BUCKET = "AWS::S3::Bucket"
QUEUE = "AWS::SQS::Queue"
SECRET = "AWS::SecretsManager::Secret"


# libyaml's parser where PyYAML was built with it (its wheels are): the template is 1,300 lines,
# 70 ms to read in pure Python and 8 ms with libyaml — the local stack reads it for every test
# stack and every `waypoint serve`.
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class CloudFormationLoader(_SafeLoader):  # type: ignore[misc]  # no PyYAML stubs
    """A YAML loader that turns CloudFormation short tags (!Ref, !Sub, !GetAtt …) into their
    long JSON form ({"Ref": …}, {"Fn::Sub": …}, {"Fn::GetAtt": [resource, attribute]})."""


def _construct_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    elif isinstance(node, yaml.MappingNode):
        value = loader.construct_mapping(node, deep=True)
    else:
        raise yaml.constructor.ConstructorError(
            None,
            None,
            f"!{suffix} on an unexpected YAML node ({type(node).__name__})",
            node.start_mark,
        )
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    key = suffix if suffix in ("Ref", "Condition") else f"Fn::{suffix}"
    return {key: value}


CloudFormationLoader.add_multi_constructor("!", _construct_tag)


def template_path() -> Path:
    """`WAYPOINT_TEMPLATE`, else Waypoint's own template.yaml (checkout or wheel)."""
    return Path(os.environ.get(TEMPLATE_ENV) or DEFAULT_TEMPLATE)


def load_template(path: str | Path | None = None) -> dict[str, Any]:
    """The template as plain data, short tags expanded: a copy of its own for each caller. A
    file read before and not changed since (same size and modification time) is not parsed
    again."""
    file = Path(path or template_path()).resolve()
    stat = file.stat()
    key = (str(file), stat.st_mtime_ns, stat.st_size)
    parsed = _parsed.get(key)
    if parsed is None:
        with open(file, encoding="utf-8") as f:
            parsed = yaml.load(f, Loader=CloudFormationLoader)
        if len(_parsed) >= 8:  # edited templates replace what was read of them before
            _parsed.clear()
        _parsed[key] = parsed
    return copy.deepcopy(parsed)


_parsed: dict[tuple[str, int, int], Any] = {}


def declared_resources(template: Mapping[str, Any], *types: str) -> dict[str, dict[str, Any]]:
    """Logical id → resource, for the resources of the given types, in template order."""
    resources: dict[str, dict[str, Any]] = template.get("Resources", {})
    return {lid: res for lid, res in resources.items() if res.get("Type") in types}
