"""Changed versions of the banking concierge, as a publisher would make them mid-conversation:
journeys removed, steps renamed or reordered, tools renamed — each a real, validated agent."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import yaml

from engine.authoring import load_agent
from engine.model import AgentSnapshot
from examples.banking import AGENT_PATH


def bank_document() -> dict[str, Any]:
    with open(AGENT_PATH, encoding="utf-8") as f:
        document: dict[str, Any] = yaml.safe_load(f)
    return document


def _journey(doc: dict[str, Any], journey_id: str) -> dict[str, Any]:
    return next(j for j in doc["journeys"] if j["id"] == journey_id)


def without_journey(journey_id: str) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        doc["journeys"] = [j for j in doc["journeys"] if j["id"] != journey_id]
        for j in doc["journeys"]:
            j["requires"] = [r for r in j.get("requires", []) if r != journey_id]
        doc["canned_responses"] = [
            r
            for r in doc.get("canned_responses", [])
            if not any(t.startswith(f"node:{journey_id}:") for t in r.get("tags", []))
        ]

    return change


def rename_step(journey_id: str, old: str, new: str) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        journey = _journey(doc, journey_id)
        for state in journey["states"]:
            if state["id"] == old:
                state["id"] = new
            if state.get("on_failure") == old:
                state["on_failure"] = new
        for t in journey["transitions"]:
            t["from"] = new if t["from"] == old else t["from"]
            t["to"] = new if t["to"] == old else t["to"]
        for response in doc.get("canned_responses", []):
            response["tags"] = [
                f"node:{journey_id}:{new}" if t == f"node:{journey_id}:{old}" else t
                for t in response.get("tags", [])
            ]

    return change


def reorder_transfer_questions(doc: dict[str, Any]) -> None:
    """Ask the amount before the destination."""
    journey = _journey(doc, "transfer")
    journey["transitions"] = [
        {"from": "root", "to": "ask_amount"},
        {"from": "ask_amount", "to": "ask_destination", "when": "The customer gave an amount"},
        {
            "from": "ask_destination",
            "to": "check",
            "when": "The customer gave the destination account ID",
        },
        *[t for t in journey["transitions"] if t["from"] not in {"root", "ask_destination"}][1:],
    ]


def rename_tool(old: str, new: str) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        for tool in doc["tools"]:
            if tool["name"] == old:
                tool["name"] = new
        for journey in doc["journeys"]:
            for state in journey["states"]:
                if state.get("tool") == old:
                    state["tool"] = new

    return change


def migrate(
    journey_id: str, steps: dict[str, str], from_version: str | None = None
) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        migration: dict[str, Any] = {"journey": journey_id, "steps": steps}
        if from_version:
            migration["from_version"] = from_version
        doc.setdefault("migrations", []).append(migration)

    return change


def secrets_undeclared(doc: dict[str, Any]) -> None:
    """The author drops every secret declaration: `password: secret` becomes a plain string
    field, and no tool parameter is secret any more."""
    for journey in doc["journeys"]:
        for state in journey["states"]:
            if state.get("collects") == {"password": "secret"}:
                state["collects"] = {"password": "str"}
    for tool in doc["tools"]:
        for parameter in tool.get("parameters", []):
            parameter.pop("secret", None)


def greeting_changed(doc: dict[str, Any]) -> None:
    doc["guidelines"][0]["action"] += " Be brief."


def changed_bank(*changes: Callable[[dict[str, Any]], None]) -> AgentSnapshot:
    """The concierge with `changes` applied to its document, loaded and validated."""
    doc = copy.deepcopy(bank_document())
    for change in changes:
        change(doc)
    return load_agent(doc)
