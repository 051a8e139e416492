"""The locked tiny example, shared by the Trainer guard's tests."""

from tests.integrations.trainer_guard_test import example, locked

__all__ = ["example", "locked"]
