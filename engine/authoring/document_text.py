"""An agent document's text (YAML or JSON) → data, within limits, for every way documents arrive
(`POST /agents`, `waypoint publish` / `validate`, `load_agent(path)`).

YAML aliases are references: `a: &a [x, x]`, `b: &b [*a, *a]`, … ten levels deep is a 563-byte
document that stands for 2^30 strings (the "billion laughs"). PyYAML composes it cheaply, but
whatever walks the result afterwards (validation, hashing, JSON) expands it and exhausts memory.
So before constructing anything, the composed node graph is measured as if every alias were
written out, and refused beyond `MAX_EXPANDED_NODES`; documents are also limited in bytes, in
aliases and in nesting depth. Each refusal names its limit.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from engine.authoring.document_syntax import describe_syntax_error
from engine.errors import InvalidAgentDefinition

if TYPE_CHECKING:
    import yaml

MAX_DOCUMENT_BYTES = 1024 * 1024
"""An agent document's size limit, in bytes of UTF-8 text."""
MAX_ALIASES = 100
"""How many YAML aliases (`*name`) a document may use."""
MAX_EXPANDED_NODES = 200_000
"""How many YAML nodes a document may stand for once every alias is written out. The largest
example agent is a few thousand."""

DocumentKind = Literal["yaml", "json"]


class DocumentTooLarge(InvalidAgentDefinition):
    """The document is over `MAX_DOCUMENT_BYTES` (HTTP 413)."""


class DocumentTooComplex(InvalidAgentDefinition):
    """The document's aliases or nesting go beyond the limits above (HTTP 400)."""


class _AliasBudgetSpent(Exception):
    pass


def _bounded_loader(text: str) -> Any:
    """A SafeLoader over `text` that counts the aliases it composes and stops past
    `MAX_ALIASES`. PyYAML is imported on the first YAML document, not with this module: the
    management API's cold start reads JSON and YAML bodies alike, and most turns none."""
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.aliases = 0

        def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_ALIASES:
                    raise _AliasBudgetSpent
            return super().compose_node(parent, index)

    return BoundedLoader(text)


def parse_document_text(text: str | bytes, kind: DocumentKind, where: str) -> Any:
    """The data of a YAML or JSON document. `where` names it in messages ("body", a path).

    Raises `DocumentTooLarge`, `DocumentTooComplex`, or `InvalidAgentDefinition` for text that
    is not valid YAML / JSON."""
    size = len(text.encode("utf-8") if isinstance(text, str) else text)
    if size > MAX_DOCUMENT_BYTES:
        raise DocumentTooLarge(
            [
                f"{where}: {size} bytes is over the {MAX_DOCUMENT_BYTES}-byte limit for agent "
                "documents; split the agent or shorten its texts"
            ]
        )
    yaml_error: type[Exception] = ValueError  # JSON errors are ValueErrors already
    if kind == "yaml":
        import yaml

        yaml_error = yaml.YAMLError
    try:
        decoded = text.decode("utf-8") if isinstance(text, bytes) else text
        return _parse_yaml(decoded, where) if kind == "yaml" else json.loads(decoded)
    except RecursionError:
        raise DocumentTooComplex(
            [f"{where}: the document is nested too deeply to read; flatten it"]
        ) from None
    except UnicodeDecodeError as error:
        raise InvalidAgentDefinition(
            [f"{where}: not UTF-8 text (byte {error.start}): save it as UTF-8"]
        ) from None
    except (ValueError, yaml_error) as error:
        # The file, line and column, the line itself and the likely cause (document_syntax).
        raise InvalidAgentDefinition([describe_syntax_error(error, decoded, kind, where)]) from None


def _parse_yaml(text: str, where: str) -> Any:
    """libyaml composes the node graph where PyYAML was built with it (its wheels are): a
    document reads five times faster. Whatever libyaml refuses is read again by the pure-Python
    parser, whose error (or result) is the one reported, so messages and marks do not depend on
    the build. Either way aliases are counted and the graph measured before anything is built."""
    import yaml

    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None:
        try:
            return _read_yaml(fast(text), where, count_aliases=True)
        except yaml.YAMLError:
            pass
    return _read_yaml(_bounded_loader(text), where, count_aliases=False)


def _read_yaml(loader: Any, where: str, *, count_aliases: bool) -> Any:
    """The document `loader` reads, within the limits. `count_aliases`: count them in the
    composed graph (a loader from `_bounded_loader` counts them while composing)."""
    try:
        try:
            node = loader.get_single_node()
        except _AliasBudgetSpent:
            raise _too_many_aliases(where) from None
        if node is None:
            return None
        if count_aliases and _alias_uses(node) > MAX_ALIASES:
            raise _too_many_aliases(where)
        _check_expansion(node, where)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _too_many_aliases(where: str) -> DocumentTooComplex:
    return DocumentTooComplex(
        [
            f"{where}: more than {MAX_ALIASES} YAML aliases (the alias limit); write the repeated parts out"
        ]
    )


def _alias_uses(root: yaml.Node) -> int:
    """How many times the composed graph refers to a node it holds already: its aliases (an
    anchor's node is composed once and shared by every `*name`)."""
    seen = {id(root)}
    pending = [root]
    uses = 0
    while pending:
        for child in _children(pending.pop()):
            if id(child) in seen:
                uses += 1
            else:
                seen.add(id(child))
                pending.append(child)
    return uses


def _check_expansion(root: yaml.Node, where: str) -> None:
    """Refuse a node graph that stands for more than `MAX_EXPANDED_NODES` nodes, or is cyclic.
    Shared nodes (aliases) are measured once and counted at every use."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def expanded(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise DocumentTooComplex(
                [f"{where}: a YAML alias refers to a node that contains it (a cycle)"]
            )
        open_nodes.add(key)
        total = 1
        for child in _children(node):
            total += expanded(child)
            if total > MAX_EXPANDED_NODES:
                raise DocumentTooComplex(
                    [
                        f"{where}: its YAML aliases expand to more than {MAX_EXPANDED_NODES} "
                        "nodes (the alias-expansion limit); write the repeated parts out or "
                        "use fewer aliases"
                    ]
                )
        open_nodes.discard(key)
        sizes[key] = total
        return total

    expanded(root)


def _children(node: yaml.Node) -> list[yaml.Node]:
    value = node.value  # a sequence's nodes, a mapping's (key, value) pairs, or a scalar's text
    if not isinstance(value, list):
        return []
    return [part for item in value for part in (item if isinstance(item, tuple) else (item,))]
