"""Signals the runner sends, for the apps above it, which it must not import (triggers)."""

from __future__ import annotations

from django.dispatch import Signal

# Sent once the transaction that stored some of a run's events has committed (from
# `runner.events.push_on_commit`, the one place they are committed), with `run_id` and
# `events`: the RunEvent rows, numbered. A receiver must be quick, and its errors are logged,
# never raised into the step that committed.
run_events_committed = Signal()
