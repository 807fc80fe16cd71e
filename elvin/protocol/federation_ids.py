"""The packet ids and protocol version of the Elvin Federation Protocol 1.0.

They live here, below ``elvin.federation``, so that the protocol's state
tables (``elvin.protocol.states``) can name federation packets without the
protocol layer importing the federation package (tests/unit/test_layering.py);
``elvin.federation.packets`` takes them from here.

Ack (65) is the federation's answer to a request (Avis's
``org.avis.federation.io.messages.Ack``); 65 is a SubAST code in the client
protocol, not a client packet id, so the two never clash.
"""

from __future__ import annotations

__all__ = ["ACK", "FED_CONN_RPLY", "FED_CONN_RQST", "FED_NOTIFY", "FED_SUB_REPLACE",
           "VERSION_MAJOR", "VERSION_MINOR"]

FED_CONN_RQST, FED_CONN_RPLY, FED_SUB_REPLACE, FED_NOTIFY = 192, 193, 194, 195
ACK = 65
VERSION_MAJOR, VERSION_MINOR = 1, 0
