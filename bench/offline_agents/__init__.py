"""Agents the offline model was not written for, and their conversation tests (README.md here);
`bench.offline_agents.measure` runs them (`python -m bench offline-agents`)."""
