"""WAIT: callers of the Redis store hear back only once a replica has what their batch wrote,
so what a caller was told is stored survives its master's death (a failover).

WAIT counts the writes made on the connection it is sent on. RedisCommands puts it at the end
of each batch on one server or Sentinel, where a pipeline is one connection. A RedisCluster
pipeline is one connection per master (redis-py's ClusterNode.execute_pipeline), so there
`wait_on_every_master` makes each master's part of it end with WAIT, on that connection.
A master none of whose replicas confirmed is not waited for during LONE_PAUSE: its replica is
down, or it was just promoted and has none yet, and every batch would pay WAIT_MS otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, cast

from redis.asyncio.cluster import ClusterNode, NodesManager, PipelineCommand, RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

WAIT_MS = 500  # at most this long for a replica to confirm a batch's writes
LONE_PAUSE = 5.0  # seconds without WAIT on a master after none of its replicas confirmed


class ReplicaAcks:
    """How many replicas must confirm, and till when each master is known to have none that
    does (by name: "host:port" on Cluster, "" for the one master otherwise)."""

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas
        self._lone_until: dict[str, float] = {}

    def wait_command(self) -> tuple[str, int, int]:
        return ("WAIT", self.replicas, WAIT_MS)

    def due(self, master: str = "") -> bool:
        """Whether a batch sent to `master` now should end with WAIT."""
        if self.replicas <= 0:
            return False
        return asyncio.get_running_loop().time() >= self._lone_until.get(master, 0.0)

    def heard(self, reply: Any, master: str = "") -> None:
        """WAIT's reply: fewer replicas than asked (or an error, such as a user not allowed
        WAIT) means none to wait for, for a while."""
        if not isinstance(reply, int) or reply < self.replicas:
            self._lone_until[master] = asyncio.get_running_loop().time() + LONE_PAUSE


class CommandTable(Protocol):
    """The client's parser once it read the server's COMMAND table (redis-py's
    AsyncCommandsParser, which is not part of its public modules)."""

    commands: dict[str, Any]


def _stores_nothing(command: str, table: Mapping[str, Any]) -> bool:
    """The server's COMMAND table says the command changes no data: read-only, pub/sub, or
    about the connection (PING). Scripts (EVALSHA may write) and unknown commands do."""
    entry = table.get(command.lower())
    if not isinstance(entry, dict):
        return False
    flags = entry.get("flags", ())
    return (
        "readonly" in flags or "pubsub" in flags or "@connection" in entry.get("acl_categories", ())
    )


class _WaitingNode(ClusterNode):
    """A cluster master whose part of a pipeline ends with WAIT on the same connection when it
    holds a write. Callers see the replies they would without it: WAIT's is taken off."""

    __slots__ = ()
    acks: ClassVar[ReplicaAcks]
    parser: ClassVar[CommandTable]  # the client's, filled with the server's COMMAND

    async def execute_pipeline(self, commands: list[PipelineCommand]) -> bool:
        table = self.parser.commands
        if not self.acks.due(self.name) or all(
            _stores_nothing(str(c.args[0]), table) for c in commands
        ):
            return await super().execute_pipeline(commands)
        wait = PipelineCommand(len(commands), *self.acks.wait_command())
        await super().execute_pipeline([*commands, wait])
        if isinstance(wait.result, (RedisConnectionError, RedisTimeoutError)):
            # The master went away before a replica confirmed: what it wrote may go with it.
            # The commands count as lost, as when their own replies were (they are sent again
            # to the master that takes over, by RedisCommands or by redis-py's retry).
            for command in commands:
                if not isinstance(command.result, Exception):
                    command.result = wait.result
        else:
            self.acks.heard(wait.result, self.name)
        return any(isinstance(command.result, Exception) for command in commands)


class _WaitingNodes(NodesManager):
    """The cluster's node list, each node it learns of (at start, after a failover, a MOVED)
    made a _WaitingNode. redis-py builds nodes as ClusterNode and takes no class for them;
    every node enters its caches through set_nodes, so the class is changed there, in place
    (the subclass adds no slots, so the objects keep their layout)."""

    __slots__ = ()
    node_class: ClassVar[type[_WaitingNode]]

    def set_nodes(
        self,
        old: dict[str, ClusterNode],
        new: dict[str, ClusterNode],
        remove_old: bool = False,
    ) -> None:
        super().set_nodes(old, new, remove_old)
        self.adopt(old)

    def adopt(self, nodes: Mapping[str, ClusterNode]) -> None:
        for node in nodes.values():
            if not isinstance(node, self.node_class):
                node.__class__ = self.node_class


def wait_on_every_master(client: RedisCluster, replicas: int) -> ReplicaAcks:
    """Make each master's part of `client`'s pipelines that write end with WAIT `replicas`.
    A command that MOVED or ASK sent on to another master does not (redis-py sends it alone),
    nor would a MULTI/EXEC transaction (redis-py sends those outside execute_pipeline; the
    store runs none: its all-or-nothing writes are scripts)."""
    acks = ReplicaAcks(replicas)
    # Classes of this client's own: the nodes reach their client's settings through them.
    node_class = type(
        "WaitingClusterNode",
        (_WaitingNode,),
        {"__slots__": (), "acks": acks, "parser": client.commands_parser},
    )
    manager_class = type(
        "WaitingNodesManager", (_WaitingNodes,), {"__slots__": (), "node_class": node_class}
    )
    client.nodes_manager.__class__ = manager_class
    manager = cast(_WaitingNodes, client.nodes_manager)
    manager.adopt(manager.startup_nodes)
    manager.adopt(manager.nodes_cache)
    return acks
