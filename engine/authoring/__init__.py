"""Authoring: the two ways to define an agent — the Python builder and the YAML/JSON document —
both compiling to one validated, content-versioned `AgentSnapshot`."""

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
