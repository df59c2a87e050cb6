"""After a failed run: which part. `suspects` reads a record's failures, `plan` lists the probes that
localize each, `probes` runs them (worker groups, NVML counters, the GPU load), `findings` names the
part with its evidence as verdicts of check `diagnosis`, `command` writes them to a record of their own.

May import: core, records, node, workers, measure, gpu, thresholds, checks (the package sits above
gpu, measure and checks and below cli). The worker side is `worker`.
"""
