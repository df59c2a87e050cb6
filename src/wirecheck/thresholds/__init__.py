"""thresholds.yaml, read and validated: the whole file and its lookups (`file`: Thresholds,
load), the YAML reader that keeps each value's path and line (`yaml_reader`), GPU-count tables
and limits (`tables`), and the copy-bandwidth (`copy_limits`), training (`training`) and per-GPU
load (`gpu_health`) sections, the `calibration`, `history` and drift rules (`baselines`), a file laid over
another by `extends:` (`extends`), the limits the checks declare they read (`declared`: a check's
Floor, Value or Section, read by the sections' loaders as data); limits no node could meet, refused at load (`plausible`), and every
limit a node would be held to (`listing`, for `wirecheck limits`), with what each catches on the recorded
noise (`sensitivity`: fixtures/resolution.yaml).

May import: core, vocab (the ops, strategies and placement classes its sections are keyed by), node,
workers (deadline rules), measure (the sweep specs). Never torch:
judge, report and fleet report load thresholds on machines without it.
"""
