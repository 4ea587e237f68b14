"""Customer-dependent steps and guidelines: complete only once the customer did their part.

How authors write it (`CustomerDependentSpec`), and what the builder derives when they do not
spell it out: the customer's and the agent's side, worded from the instruction and the fields.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.authoring.construct import construct
from engine.authoring.fields import describe_fields
from engine.model import CollectedField, CustomerDependentAction

CustomerDependentSpec = CustomerDependentAction | Mapping[str, Any] | bool | None


def derived_customer_dependent(
    action: str | None, fields: Sequence[CollectedField]
) -> CustomerDependentAction:
    """What completes a step that waits for the customer, worded from its instruction and fields."""
    if fields:
        customer_action = f"The customer provided {describe_fields(fields)}"
    else:
        customer_action = "The customer gave the information the agent asked for"
    agent_action = action or f"Ask for {describe_fields(fields) or 'the information needed'}"
    return CustomerDependentAction(customer_action=customer_action, agent_action=agent_action)


def customer_dependent_action(
    spec: CustomerDependentSpec, action: str | None, fields: Sequence[CollectedField]
) -> CustomerDependentAction | None:
    """None → customer-dependent only if it collects values; True/False force it; an explicit
    `CustomerDependentAction` (or mapping) is taken as written."""
    if spec is None:
        return derived_customer_dependent(action, fields) if fields else None
    if isinstance(spec, bool):
        return derived_customer_dependent(action, fields) if spec else None
    if isinstance(spec, CustomerDependentAction):
        return spec
    return construct(CustomerDependentAction, "customer_dependent", **spec)
