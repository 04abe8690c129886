"""Changes on a timeline: `Change` objects write to a named object at a simulated time (issue 36 item 2).

A platform engineer's "what if": the Spot pool loses half its nodes at 10:00, a node is drained for maintenance,
a ClusterQueue's quota is cut, a Job is suspended. Each Change is one write a user or an operator would make
(`kubectl patch` with its three patch types, `kubectl cordon / uncordon / drain / delete / scale`, a Job's
suspend), made through the store like any controller's write, so it is in history.jsonl, its Events in `get
events`, and every controller reacts to it as it would on a cluster. The Change's own status says what happened.
"""
