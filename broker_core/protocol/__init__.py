"""The broker's binary wire protocol (documented in broker_core/PROTOCOL.md):
`frame` (the header, ops, codes), `codecs` (SEND, SEND_BATCH, answers, JSON
bodies), `pull` (PULL and its answer's head: the records follow as stored)."""

from broker_core.protocol.codecs import *  # noqa: F403
from broker_core.protocol.codecs import __all__ as _codecs
from broker_core.protocol.frame import *  # noqa: F403
from broker_core.protocol.frame import __all__ as _frame
from broker_core.protocol.pull import *  # noqa: F403
from broker_core.protocol.pull import __all__ as _pull

__all__ = [*_frame, *_codecs, *_pull]
