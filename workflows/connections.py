"""Give a thread's database connection back to its pool while the thread waits on the network.

A worker runs many steps at once, one thread each, and most of a step's time is a wait on a
model, an embedding server or a tool server. Holding a connection through that wait would
need one connection per step in flight; given back, a process needs only as many as it has
steps reading or committing at the same moment, and its pool bounds that
(config/settings.py). The next query of the thread takes a connection from the pool again.

Called by whatever waits on a server, right before the wait: the guarded HTTP transport (models
and embeddings), the MCP client, a scripted actor's delay. A step that waits on nothing (a
scripted answer, the engine's decision) keeps its connection from its claim to its commit:
taking one from the pool costs a round trip, its health check.
"""

from __future__ import annotations

from django.db import connection


def release() -> None:
    """Hand this thread's pooled connection back to the pool, unless a transaction holds it.

    Without a pool (SQLite) there is nothing to share: the connection stays open.
    """
    if connection.connection is None or connection.in_atomic_block:
        return
    if getattr(connection, "pool", None) is None:
        return
    connection.close()
