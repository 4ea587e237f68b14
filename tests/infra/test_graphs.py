"""Journey graphs (infra/graphs): every step and transition drawn with its kind, conditions
and `requires`; a turn's position and walks marked; whatever an agent document says escaped;
the same agent always drawn alike (golden files in tests/snapshots/graph_*.txt).

After an intended change to the drawings, regenerate and review:
    WAYPOINT_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/infra/test_graphs.py
    waypoint graph examples/banking/agent.yaml --journey transfer -o docs/img/bank-transfer.svg
and paste `waypoint graph examples/banking/agent.yaml --journey transfer` into the Mermaid block
of docs/authoring.md ("Seeing your journeys")."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from engine.authoring import load_agent
from engine.model import AgentSnapshot
from examples.banking import load as load_bank
from examples.pizza import load as load_pizza
from infra.graphs import (
    UnknownJourney,
    UnknownStep,
    agent_mermaid,
    agent_svg,
    journey_mermaid,
    journey_svg,
    walk_taken,
)
from infra.graphs.elements import journey_drawing
from tests.engine.pipeline_kit import outputs_under_hash_seeds
from tests.golden import assert_snapshot

SVG = "{http://www.w3.org/2000/svg}"


def groups(svg: str, css: str) -> list[ET.Element]:
    """Every <g> whose class list holds `css` (parsing also proves the document well-formed)."""
    root = ET.fromstring(svg)
    return [g for g in root.iter(f"{SVG}g") if css in g.get("class", "").split()]


def classes(element: ET.Element) -> set[str]:
    return set(element.get("class", "").split())


def texts(element: ET.Element) -> str:
    return " ".join("".join(t.itertext()) for t in element.iter(f"{SVG}text"))


@pytest.fixture(scope="module")
def bank() -> AgentSnapshot:
    return load_bank()


# --------------------------------------------------------------------------------------------------
# Golden drawings of the examples


def test_the_banking_agent_is_drawn_as_its_golden_svg_and_mermaid(bank: AgentSnapshot) -> None:
    assert_snapshot("graph_bank_agent_svg", agent_svg(bank))
    assert_snapshot("graph_bank_agent_mermaid", agent_mermaid(bank))


def test_a_turn_on_the_transfer_journey_is_drawn_as_its_golden_svg_and_mermaid(
    bank: AgentSnapshot,
) -> None:
    walk: dict[str, Any] = {
        "current": "enough",
        "proposed": ("check", "enough", "insufficient"),
        "kept": ("check", "enough"),
    }
    assert_snapshot("graph_bank_transfer_turn_svg", journey_svg(bank, "transfer", **walk))
    assert_snapshot("graph_bank_transfer_turn_mermaid", journey_mermaid(bank, "transfer", **walk))


def test_the_pizza_agent_is_drawn_as_its_golden_svg_and_mermaid() -> None:
    pizza = load_pizza()
    assert_snapshot("graph_pizza_agent_svg", agent_svg(pizza))
    assert_snapshot("graph_pizza_agent_mermaid", agent_mermaid(pizza))


def test_drawings_do_not_depend_on_hash_order() -> None:
    script = (
        "from examples.banking import load\n"
        "from infra.graphs import agent_svg, agent_mermaid\n"
        "a = load()\n"
        "print(agent_svg(a)); print(agent_mermaid(a))\n"
    )
    assert len(outputs_under_hash_seeds(script, ["0", "1", "4242"])) == 1


# --------------------------------------------------------------------------------------------------
# Structure


@pytest.mark.parametrize("journey_id", ["stock", "authenticate", "balance", "transfer"])
def test_every_step_and_transition_of_a_journey_is_drawn(
    bank: AgentSnapshot, journey_id: str
) -> None:
    journey = bank.journey(journey_id)
    svg = journey_svg(bank, journey_id)
    nodes = {g.get("data-step"): g for g in groups(svg, "wp-node")}
    assert set(nodes) == {n.id for n in journey.nodes} | {"END"}
    for node in journey.nodes:
        expected = "wp-start" if node.id == journey.root_id else f"wp-{node.kind.value}"
        assert expected in classes(nodes[node.id]), node.id
        assert node.id == journey.root_id or node.id in texts(nodes[node.id])
    assert "wp-end" in classes(nodes["END"])

    drawn = [(g.get("data-source"), g.get("data-target"), g) for g in groups(svg, "wp-edge")]
    declared = [(e.source, e.target or "END", e.condition) for e in journey.edges]
    failures = [(n.id, n.on_failure) for n in journey.nodes if n.on_failure]
    assert [(s, t) for s, t, _ in drawn] == [(s, t) for s, t, _ in declared] + failures
    for (_, _, condition), (_, _, group) in zip(declared, drawn, strict=False):
        title = group.find(f"{SVG}title")
        assert (title.text if title is not None else None) == condition
    for _, _, group in drawn[len(declared) :]:
        assert "wp-failure" in classes(group)


def test_shapes_differ_by_kind(bank: AgentSnapshot) -> None:
    nodes = {g.get("data-step"): g for g in groups(journey_svg(bank, "transfer"), "wp-node")}
    shape = {step: [child.tag.removeprefix(SVG) for child in g] for step, g in nodes.items()}
    assert "polygon" in shape["enough"]  # a fork: a diamond
    assert shape["check"].count("line") == 2 and "rect" in shape["check"]  # a tool: side bars
    assert "rect" in shape["ask_amount"] and "line" not in shape["ask_amount"]
    assert shape["root"].count("circle") == 1 and shape["END"].count("circle") == 2


def test_requires_shows_on_the_journey_and_as_arrows_between_journeys(
    bank: AgentSnapshot,
) -> None:
    (transfer,) = groups(journey_svg(bank, "transfer"), "wp-journey")
    assert transfer.get("data-requires") == "authenticate balance"
    assert "requires Authentication (authenticate), Account balance (balance)" in texts(transfer)

    whole = agent_svg(bank)
    arrows = {
        (g.get("data-source"), g.get("data-target")) for g in groups(whole, "wp-requires-edge")
    }
    assert arrows == {
        ("balance", "authenticate"),
        ("transfer", "authenticate"),
        ("transfer", "balance"),
    }
    assert [g.get("data-journey") for g in groups(whole, "wp-journey")] == [
        "stock", "authenticate", "balance", "transfer",
    ]  # fmt: skip
    mermaid = agent_mermaid(bank)
    assert 'j4 -.->|"requires"| j2' in mermaid and 'j4 -.->|"requires"| j3' in mermaid
    assert 'j3 -.->|"requires"| j2' in mermaid


def test_the_current_step_and_the_walks_are_marked(bank: AgentSnapshot) -> None:
    svg = journey_svg(
        bank,
        "transfer",
        current="enough",
        proposed=["check", "enough", "insufficient"],
        kept=["check", "enough"],
    )
    nodes = {g.get("data-step"): classes(g) for g in groups(svg, "wp-node")}
    assert [s for s, c in nodes.items() if "wp-current" in c] == ["enough"]
    assert {s for s, c in nodes.items() if "wp-proposed" in c} == {
        "check",
        "enough",
        "insufficient",
    }
    assert {s for s, c in nodes.items() if "wp-kept" in c} == {"check", "enough"}
    edges = {
        (g.get("data-source"), g.get("data-target")): classes(g) for g in groups(svg, "wp-edge")
    }
    assert {e for e, c in edges.items() if "wp-proposed" in c} == {
        ("check", "enough"),
        ("enough", "insufficient"),
    }
    assert {e for e, c in edges.items() if "wp-kept" in c} == {("check", "enough")}
    # a walk that ends the journey marks the edge into the end node
    ended = journey_svg(bank, "stock", kept=["find_price", "END"])
    edges = {
        (g.get("data-source"), g.get("data-target")): classes(g) for g in groups(ended, "wp-edge")
    }
    assert "wp-kept" in edges[("find_price", "END")]


def test_mermaid_marks_the_same_steps_and_links(bank: AgentSnapshot) -> None:
    text = journey_mermaid(
        bank, "transfer", current="enough", proposed=["check", "enough"], kept=["check"]
    )
    ids = {
        step: f"s{n}"
        for n, step in enumerate(d.step for d in journey_drawing(bank, "transfer").nodes)
    }
    assert f"class {ids['enough']} wpCurrent" in text
    assert f"class {ids['check']},{ids['enough']} wpProposed" in text
    assert f"class {ids['check']} wpKept" in text
    links = [ln.strip() for ln in text.splitlines() if "-->" in ln or "-.->" in ln]
    check_to_enough = links.index(f"{ids['check']} --> {ids['enough']}")
    assert f"linkStyle {check_to_enough} stroke:#e67e22" in text


def test_an_unknown_journey_or_step_is_named(bank: AgentSnapshot) -> None:
    with pytest.raises(
        UnknownJourney, match="agent 'bank' has no journey 'loans'; its journeys: stock"
    ):
        journey_svg(bank, "loans")
    with pytest.raises(UnknownStep, match="journey 'transfer' has no step 'ask_pin'"):
        journey_svg(bank, "transfer", current="ask_pin")
    with pytest.raises(UnknownStep, match="has no step 'nowhere'"):
        journey_mermaid(bank, "transfer", proposed=["check", "nowhere"])
    with pytest.raises(UnknownStep, match="has no step 'END'"):
        journey_svg(bank, "transfer", current="END")  # the end is no step to stand at


# --------------------------------------------------------------------------------------------------
# Hostile agent documents

HOSTILE = '<script>alert("x")</script> & </text><g onload="steal()">'


def hostile_agent() -> AgentSnapshot:
    return load_agent(
        {
            "agent": {"id": "hostile", "name": f"Evil %%{{init: {{}}}}%% {HOSTILE}"},
            "journeys": [
                {
                    "id": "trap",
                    "title": f"Trap {HOSTILE}",
                    "conditions": ["The customer asks"],
                    "states": [
                        {"id": "ask", "chat": f"Say {HOSTILE}"},
                        {"id": "choose", "fork": f"Which? {HOSTILE}"},
                        {"id": "done", "chat": "Say bye"},
                    ],
                    "transitions": [
                        {"from": "root", "to": "ask"},
                        {"from": "ask", "to": "choose", "when": f'The customer said "|{HOSTILE}|"'},
                        {"from": "choose", "to": "done", "when": "Yes #quot; `x` <b>"},
                        {
                            "from": "done",
                            "to": "ask",
                            "when": "%%{init: {'securityLevel': 'loose'}}%% again",
                        },
                        {"from": "choose", "to": "ask", "when": "No\u0001 control"},
                        {"from": "done", "to": "END"},
                    ],
                }
            ],
        }
    )


def test_conditions_and_titles_cannot_inject_markup_into_the_svg() -> None:
    agent = hostile_agent()
    for svg in (journey_svg(agent, "trap", current="ask"), agent_svg(agent)):
        root = ET.fromstring(svg)  # well-formed: nothing closed early, no raw control character
        tags = {el.tag.removeprefix(SVG) for el in root.iter()}
        assert "script" not in tags and "<script" not in svg
        assert not any(any(a.startswith("on") for a in el.attrib) for el in root.iter())
        assert "alert" in svg  # drawn as text, escaped
    edge = next(
        g for g in groups(journey_svg(agent, "trap"), "wp-edge") if g.get("data-target") == "choose"
    )
    title = edge.find(f"{SVG}title")
    assert title is not None and title.text == f'The customer said "|{HOSTILE}|"'


def test_conditions_cannot_break_out_of_a_mermaid_label() -> None:
    text = journey_mermaid(hostile_agent(), "trap")
    for line in text.splitlines()[4:]:
        labels = re.findall(r'"([^"]*)"', line)
        for label in labels:  # nothing inside a label that Mermaid reads as syntax or markup
            assert not set(label.replace("<br/>", "")) & set("<>&|`")
    assert "#lt;script#gt;" in text and "#quot;" in text and "#124;" in text
    assert "#35;quot;" in text  # an author's own "#quot;" stays text, not a quote
    assert "\u0001" not in text
    assert "%%" not in text and "%%" not in agent_mermaid(hostile_agent())  # no directive
    assert text.count('"') % 2 == 0


def test_a_self_loop_and_an_unreachable_step_are_still_drawn() -> None:
    agent = load_agent(
        {
            "agent": {"id": "loops", "name": "Loops"},
            "journeys": [
                {
                    "id": "spin",
                    "title": "Spin",
                    "conditions": ["The customer asks"],
                    "states": [
                        {"id": "ask", "chat": "Ask again", "collects": {"answer": "str"}},
                        {"id": "done", "chat": "Say bye"},
                    ],
                    "transitions": [
                        {"from": "root", "to": "ask"},
                        {"from": "ask", "to": "ask", "when": "The customer said nothing useful"},
                        {"from": "ask", "to": "done", "when": "The customer answered"},
                        {"from": "done", "to": "END"},
                    ],
                }
            ],
        }
    )
    svg = journey_svg(agent, "spin")
    loops = [g for g in groups(svg, "wp-edge") if g.get("data-source") == g.get("data-target")]
    assert len(loops) == 1 and loops[0].find(f"{SVG}path") is not None


# --------------------------------------------------------------------------------------------------
# The documentation shows what the renderer draws

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_documented_drawings_are_what_the_renderer_draws_now(bank: AgentSnapshot) -> None:
    """docs/authoring.md's Mermaid block and docs/img/bank-transfer.svg are the command's output;
    regenerate them with the commands the section shows when the renderer changes."""
    authoring = (DOCS / "authoring.md").read_text(encoding="utf-8")
    marker = "<!-- graph: waypoint graph examples/banking/agent.yaml --journey transfer -->\n"
    block = authoring.split(marker, 1)[1].split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert block == journey_mermaid(bank, "transfer")
    image = (DOCS / "img" / "bank-transfer.svg").read_text(encoding="utf-8")
    assert image == journey_svg(bank, "transfer")


@pytest.mark.parametrize(
    ("previous", "new", "walk"),
    [
        ([], ["ask"], ("root", "ask")),  # entered: from the entry point
        (["ask"], ["ask", "check", "fork"], ("ask", "check", "fork")),
        (["a", "b"], ["a", "b", "c", None], ("b", "c", "END")),  # completed
        (["a", "b"], ["a", "b"], ()),  # stayed: nothing walked
        (["a", None], ["a", None, "a"], ("root", "a")),  # a new run after an earlier one
        (["x", "y"], ["p", "q"], ("root", "p", "q")),  # rewritten (a migration): its run
    ],
)
def test_the_walk_a_traced_turn_took_is_read_from_its_paths(
    previous: list[str | None], new: list[str | None], walk: tuple[str, ...]
) -> None:
    assert walk_taken(previous, new, "root") == walk
