"""The planner: device profiles, the cost model and the search over placements
(docs/planner.md)."""
