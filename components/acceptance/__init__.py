"""Cluster acceptance, the pure part: parse what `dcgmi diag` and nccl-tests print, judge each GPU node against
bandwidth floors and its peers, report in CTRF, name the nodes to quarantine, plan the waves and decide which
nodes a run must retest. Nothing here creates a resource; the Jobs and the Pulumi wiring come later
(docs/acceptance.md)."""
