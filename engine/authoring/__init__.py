"""Authoring: the two ways to define an agent — the Python builder and the YAML/JSON document —
both compiling to one validated, content-versioned `AgentSnapshot`.

The names below are imported from their modules on first use (PEP 562), so that importing one
module of this package (`engine.authoring.document_text`, to read a document's text) does not
load the builders, the validation and the agent model with it: the management API imports it at
start, and publishes an agent only when asked to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.lazy_names import lazy_names

if TYPE_CHECKING:
    from engine.authoring.agent_builder import Agent, GuidelineOptions
    from engine.authoring.customer_dependent import derived_customer_dependent
    from engine.authoring.document_writer import dump_agent
    from engine.authoring.fields import field_shorthand, parse_field_shorthand
    from engine.authoring.ids import (
        default_canned_response_id,
        default_guideline_id,
        default_journey_id,
    )
    from engine.authoring.journey_builder import (
        END_JOURNEY,
        EndJourney,
        JourneyBuilder,
        JourneyState,
        NewState,
    )
    from engine.authoring.relatable import GuidelineBuilder
    from engine.authoring.serialized import agent_from_document, load_agent

# name → the module of this package that defines it
_EXPORTS = {
    "Agent": "agent_builder",
    "GuidelineOptions": "agent_builder",
    "derived_customer_dependent": "customer_dependent",
    "dump_agent": "document_writer",
    "field_shorthand": "fields",
    "parse_field_shorthand": "fields",
    "default_canned_response_id": "ids",
    "default_guideline_id": "ids",
    "default_journey_id": "ids",
    "END_JOURNEY": "journey_builder",
    "EndJourney": "journey_builder",
    "JourneyBuilder": "journey_builder",
    "JourneyState": "journey_builder",
    "NewState": "journey_builder",
    "GuidelineBuilder": "relatable",
    "agent_from_document": "serialized",
    "load_agent": "serialized",
}


__getattr__, __dir__ = lazy_names(
    __name__, {name: f"{__name__}.{module}" for name, module in _EXPORTS.items()}, globals()
)


__all__ = [
    "END_JOURNEY",
    "Agent",
    "EndJourney",
    "GuidelineBuilder",
    "GuidelineOptions",
    "JourneyBuilder",
    "JourneyState",
    "NewState",
    "agent_from_document",
    "default_canned_response_id",
    "default_guideline_id",
    "default_journey_id",
    "derived_customer_dependent",
    "dump_agent",
    "field_shorthand",
    "load_agent",
    "parse_field_shorthand",
]
