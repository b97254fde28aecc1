"""Errors that psp-hf raises for bad input."""


class PSPInputError(ValueError):
    """Bad user input (a file, a line or an argument); the message names where."""
