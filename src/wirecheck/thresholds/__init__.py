"""thresholds.yaml, read against what the checks declare: the YAML reader that keeps each value's file,
path and line and resolves `"*"` and `inherit:` (`yaml_reader`), `extends:` (`extends`), typed models read
generically (`fields`), a limit and its tables (`limits`: Limit, Table), the kinds a check declares and their
registry (`declared`: Table, Floor, Rule, Value), the run settings (`settings`), the one loader and resolver
(`file`: Thresholds, load_thresholds), the calibration, history and drift rules (`baselines`), limits no node
could meet, refused (`plausible`), the JSON Schema from the loader's reads (`schema`), and every limit a node
would be held to (`listing`, for `wirecheck limits`), with what each catches on the recorded noise
(`sensitivity`: fixtures/pytest_wirecheck/resolution.yaml).

May import: core, vocab (the ops, strategies and placement classes tables are keyed by), node, workers
(deadline rules), measure (the sweep specs). Never torch: judge, report and fleet report load thresholds on
machines without it.
"""
