"""The intermediate representation shared by all compiler passes."""

from offlow.ir.graph import (
    BodyFacts,
    Cache,
    CacheOps,
    Channel,
    Edge,
    Graph,
    Node,
    PortSpec,
    Queue,
    QueueChannel,
    QueueSpec,
    Segment,
    SharedTable,
)
from offlow.ir.types import Field

__all__ = [
    "BodyFacts", "Cache", "CacheOps", "Channel", "Edge", "Field", "Graph", "Node", "PortSpec",
    "Queue", "QueueChannel", "QueueSpec", "Segment", "SharedTable",
]
