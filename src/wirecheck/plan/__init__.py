"""The time model (`wirecheck plan`): how long a level of the suite takes on a topology, before it runs.

- `costs`: the unit costs (fixtures/pytest_wirecheck/unit_costs.yaml, made by scripts/unit_costs.py from recorded
  runs): a worker group's start, a collective size, a benchmark round, an NCCL path probe, a strategy
  run, the GPU load's phases, each with its source;
- `collect`: which tests run, from the real suite collected in a subprocess (`pytest --collect-only
  --level L --simulate TOPO`), so the plan never drifts from what runs; or from a recorded run;
- `model`: walks those tests in run order as the session would (a measurement made by the first test
  that needs it, a worker group started when the placement changes) and prices each, per group
  (test function x placement class x GPU count);
- `table`: the plan as text and as JSON.

May import: core, vocab, records, node, measure (the sweep's calls per size), thresholds. Never torch, never pytest
(the suite is collected by a pytest subprocess).
"""
