"""Argument types shared by the `psp` subcommands, so a bad number reads the same everywhere."""

from __future__ import annotations

import argparse


def positive_int(value: str) -> int:
    """An argparse `type=` for counts and sizes: an integer of at least 1."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return number


def fraction(value: str) -> float:
    """An argparse `type=` for a similarity bound: a number in [-1, 1]."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
    if not -1.0 <= number <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between -1 and 1, got {value}")
    return number
