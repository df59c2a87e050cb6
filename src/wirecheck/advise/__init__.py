"""What this node's wires do to a user's job: `wirecheck advise`, from the node's own records.

- `sizes`: a parameter count as people read it (7.24B);
- `curves`: a collective's busbw against size, interpolated between the recorded sizes;
- `figures`: what the prediction reads from records (curves per placement class, one GPU alone,
  strategy runs), and what the two sources share;
- `profile_figures`: what it reads from a thresholds.yaml profile instead: its measured figures
  (`profiles.yaml`, each with its source), else its physics (the wire x a measured share, peak x MFU);
- `schedule`: each strategy's collectives per step, from its row of the strategies table;
- `model`: the step-time model, its per-strategy fit and the prediction;
- `validation`: the model against the recorded runs, with its error per strategy;
- `slow_part`: what a slow GPU or link costs every synchronous data-parallel step;
- `slow_part_costs`: each slow part of a node's records priced on its best placement's step;
- `shortfall`: where DDP's step falls behind the fastest strategy's, term by term of the model;
- `rule`: where the advice departs from the article's rule (DDP when it fits), by what and what to do, in one line;
- `advice`: every strategy on every placement of G GPUs, the recommendation, the text.

No torch. May import core, vocab, records, node, measure, training, thresholds; report and cli import it.
"""
