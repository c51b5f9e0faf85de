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

logger = logging.getLogger("flwr")
log = logger.log

#: ``extra`` of a log record that a quiet simulation leaves out (a detail, not progress).
DETAIL = {"fedcluster_detail": True}
