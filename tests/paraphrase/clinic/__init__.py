"""A physiotherapy clinic's booking agent, for the paraphrase suite (dates, an enum, a fork)."""

from pathlib import Path

AGENT_PATH = Path(__file__).with_name("agent.yaml")
