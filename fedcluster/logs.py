"""The log every part of fedcluster writes to.

Flower's runtimes (SuperExec, SuperNode, simulation) give the ``"flwr"`` logger
its console handler and format, so fedcluster's lines go there too and appear
in one stream with Flower's. The logger is taken by name, which needs no
Flower import: code that runs without Flower (the in-memory federation, the
estimator) logs to it as well. Until Flower is imported (which sets the level
to DEBUG and adds a handler) the logger passes on only warnings, to Python's
last-resort handler; a program that wants the progress lines sets its level and
adds a handler.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger("flwr")
log = logger.log

#: ``extra`` of a log record that a quiet simulation leaves out (a detail, not progress).
DETAIL = {"fedcluster_detail": True}


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: "1 round", "3 rounds", "0 rounds"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def use_colour(stream: object) -> bool:
    """Whether text for ``stream`` may carry ANSI colour codes.

    Only a terminal shows them; in a redirected log or a pipe they are noise.
    ``NO_COLOR`` (https://no-color.org), set to anything but empty, turns them off.
    """
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream (Flower's handler keeps the one it was imported with)
        return False


def colour_only_on_a_terminal() -> None:
    """Make Flower's console handler (which our lines go through) colour only on a terminal.

    Flower colours its level names whatever its stream is; call this once
    Flower is imported, in a process whose console output is ours.
    """
    from flwr.common.logger import console_handler, update_console_handler

    update_console_handler(colored=use_colour(console_handler.stream))


class _FlowerLike(logging.Formatter):
    """Flower's console format without colour ("INFO :      round 1/..."), so that a run
    without Flower reads as one with it."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname} : {' ' * (8 - len(record.levelname))} {record.getMessage()}"


@contextmanager
def progress_lines(verbose: bool) -> Iterator[None]:
    """Print fedcluster's log lines on standard error while a run goes on without Flower.

    The in-memory backend of ``fedcluster simulate`` imports no Flower, whose
    console handler would otherwise print them (see above); its details (the
    list of settings) only when ``verbose``, as a quiet simulation does. The
    logger is left as it was found.
    """
    handler = logging.StreamHandler()
    handler.setFormatter(_FlowerLike())
    if not verbose:
        handler.addFilter(lambda record: not getattr(record, "fedcluster_detail", False))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
