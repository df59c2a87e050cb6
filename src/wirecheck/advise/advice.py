"""Every strategy on every placement of G GPUs: does it fit, how fast, what sets it; the recommendation.

Memory: the model state of both accountings (training/memory_model.py) plus an activation estimate
(34 x tokens x d_model bytes per layer: bf16 activations without recomputation, Korthikanti et al.
2022, and the fp32 logits and their gradient, 8 x vocab bytes per token) plus, for a strategy that
shards the parameters, what it holds gathered (a whole bf16 model when it keeps forward's gather
for backward, else two blocks in flight). It fits when that total is within the GPU's memory.
The user's model is a GPT of that many parameters (vocab/shape.py shape_for_params); the step
model is advise/model.py with the fits of advise/fits.py. The recommendation (`Advice.choice`) is the
article's rule: DDP if it fits and is within the model's error of the fastest (profiles.yaml
`defaults.tie`), else the fastest with DDP's shortfall. The output adds the same job at micro-batch 1, 2, 4
and 8: forward and backward grow with the tokens, the collectives and the optimizer step do not, so the
recommendation and the wire's price change with it (at the article's Mistral-7B job on an H200 NVL node
DDP is within the error of FSDP at 1, 4 and 8 and 21 % behind at 2). Under the recommendation, `reasons`
gives the lines that say why, for the text and the report page alike: where DDP's shortfall comes from
(advise/shortfall.py) and, where DDP fits and still is not the advice, why that departs from the article's
rule and what to do (advise/rule.py).
Accounting: this suite's strategies (IMPLEMENTATION, what the fits were measured on) or the article's
(ARTICLE: its 2+2+8 model state and its collectives, advise/schedule.py), with the same fits.
"""

from __future__ import annotations

from dataclasses import dataclass

from wirecheck.advise.figures import PROFILES_FILE, tie_errors
from wirecheck.advise import rule, shortfall
from wirecheck.advise.model import Prediction, predict_strategy
from wirecheck.advise.sizes import short
from wirecheck.advise.slow_part import cost_line, slow_parts
from wirecheck.core.precision import precision as _precision
from wirecheck.node.placement import CLASS_FORCED_PCIE, NVSWITCH
from wirecheck.training.memory_model import ARTICLE, IMPLEMENTATION, predict as predict_state
from wirecheck.vocab.shape import block_params, shape_for_params
from wirecheck.vocab.strategies import NAMES, PARAMS, strategy as _strategy

VOCAB = 32000
DDP = "ddp"
OWN_FIT = "fitted on the node's runs"  # advise/fits.py's source of a fit from the node's own runs
ACTIVATION_BYTES = 34  # per token per d_model per layer, bf16 (twice in fp32), no recomputation


@dataclass(frozen=True)
class Option:
    strategy: str
    placement: object  # node.placement.Placement
    state_article: int
    state_implementation: int
    on_top: int  # activations and gathered parameters
    gpu_memory: int
    prediction: Prediction | None
    problem: str = ""  # why there is no prediction
    accounting: str = IMPLEMENTATION  # whose model state and collectives: this suite's or the article's

    @property
    def total(self) -> int:
        return (self.state_article if self.accounting == ARTICLE else self.state_implementation) + self.on_top

    @property
    def fits(self) -> bool:
        return self.total <= self.gpu_memory

    @property
    def user_choice(self) -> bool:
        """forced_pcie is the wire check's twin (NCCL's P2P off), not a placement a job asks for."""
        return self.placement.klass != CLASS_FORCED_PCIE


@dataclass
class Advice:
    figures: object
    n_params: int
    n_gpus: int
    seq_len: int
    micro_batch: int
    precision: str
    shape: dict
    fits: dict
    options: list[Option]
    notes: list[str]
    accounting: str = IMPLEMENTATION

    @property
    def ranked(self) -> list[Option]:
        ok = [o for o in self.options if o.fits and o.prediction and o.user_choice]
        return sorted(ok, key=lambda o: -o.prediction.tokens_per_s)

    def choice(self, ties: dict | None = None) -> "Choice | None":
        """The recommendation and its runner-up, by the article's rule: DDP if it fits and its predicted tokens/s
        is within the prediction's error of the fastest (DDP is simpler), else the fastest, with its margin.

        The error (profiles.yaml `defaults.tie`) is the one of the fits used: from the node's own runs, or
        the shipped fits of another node."""
        ranked = self.ranked
        if not ranked:
            return None
        ties = tie_errors() if ties is None else ties
        fastest = ranked[0]
        ddp = next((o for o in ranked if o.strategy == DDP), None)
        others = [o for o in ranked if o is not fastest]
        if fastest.strategy == DDP or ddp is None:
            return Choice(fastest, others[0] if others else None, "", None)
        own = all(str(getattr(self.fits.get(n), "source", "")).startswith(OWN_FIT) for n in (DDP, fastest.strategy))
        tie = ties["own_runs" if own else "shipped_fits"]
        margin = 1 - ddp.prediction.tokens_per_s / fastest.prediction.tokens_per_s  # DDP's shortfall
        whose = "the fits of this node's own runs" if own else "fits shipped from another node's runs"
        parts = shortfall.of(ddp, fastest)
        if margin <= tie.error:
            return Choice(ddp, fastest, f"within the model's error of {fastest.strategy} (DDP predicted {margin:.0%} "
                                        f"slower, the error {tie.error:.0%} with {whose}); DDP is simpler", tie, margin,
                          parts)
        return Choice(fastest, others[0],
                      f"DDP predicted {margin:.0%} slower, beyond the model's {tie.error:.0%} error with {whose}", tie,
                      margin, parts)


@dataclass(frozen=True)
class Choice:
    best: Option
    runner_up: Option | None
    why: str  # "" when the fastest is DDP or DDP does not fit
    tie: object  # figures.Tie, or None
    margin: float | None = None  # DDP's shortfall against the fastest, where the rule weighed it
    shortfall: shortfall.Shortfall | None = None  # where that shortfall comes from, where the rule weighed it


def _on_top(name: str, n_params: int, shape: dict, micro_batch: int, precision: str, accounting: str) -> int:
    tokens = micro_batch * shape["seq_len"]
    low = _precision(precision).model_bytes
    activations = ACTIVATION_BYTES * low / 2 * tokens * shape["d_model"] * shape["n_layer"] + 8 * VOCAB * tokens
    row = _strategy(name)
    gathered = 0
    if PARAMS in row.shards:
        keeps = row.defaults(shape).get("reshard_after_forward") is False and accounting != ARTICLE
        gathered = low * n_params if keeps else 2 * low * block_params(shape)
    return int(activations + gathered)


def advise(figures, n_params: int, n_gpus: int, seq_len: int, micro_batch: int, precision: str, fits: dict,
           accounting: str = IMPLEMENTATION) -> Advice:
    """`accounting`: IMPLEMENTATION predicts this suite's strategies (what the fits were measured on); ARTICLE
    the article's (advise/schedule.py: its model state, what fits, and its collectives), with the same fits."""
    shape = shape_for_params(n_params, seq_len, VOCAB)
    notes = []
    if accounting == ARTICLE:
        notes.append("the article's accounting: model state 2+2+8 B per parameter, every gradient in the precision's "
                     "bytes, ZeRO-1/2 reduce-scatter, ZeRO-3 and FSDP gather each block before forward and backward; "
                     "overhead and overlap as fitted on this suite's strategies")
    placements = figures.job_placements(n_gpus)
    if not placements:
        have = sorted({p.n_gpus for p in figures.placements if p.n_gpus > 1})
        raise ValueError(f"--gpus {n_gpus}: this node has no placement of {n_gpus} GPUs "
                         f"(it has {figures.gpu_count} GPUs; placements of {', '.join(map(str, have)) or 'none'})")
    tokens_gpu = micro_batch * seq_len
    compute = figures.compute
    if compute is not None and compute.precision != precision:
        notes.append(f"the one-GPU rate was measured in {compute.precision}, not {precision}: no step time predicted "
                     f"(give a record of {precision} runs)")
        compute = None
    compute_s = compute.step_s(n_params, tokens_gpu) if compute else None
    if compute is not None:
        notes.append(f"compute per step: the one-GPU step, {compute_s * 1e3:.0f} ms (forward, backward and the "
                     f"optimizer over all parameters); {compute.describe_optimizer(n_params)}")
    if compute_s is None and figures.compute is None:
        notes.append(f"no one-GPU rate for {figures.gpu_model}: no step time predicted "
                     "(a record with test_single_gpu_training or strategy runs gives one)")
    unmeasured = [name for name in NAMES if name not in fits]
    if unmeasured:  # a strategy row without runs yet (a new one): said here, predicted by no one
        notes.append(f"no measured runs of {', '.join(unmeasured)}: neither the runs given nor the shipped fits "
                     f"({PROFILES_FILE.name} defaults.fits) hold one, so no step time is predicted for "
                     f"{'it' if len(unmeasured) == 1 else 'them'}; run tests/test_strategies.py on a node and give "
                     "its record (--record)")
    options = []
    for name in NAMES:
        art = predict_state(name, n_params, n_gpus, ARTICLE, precision).total
        impl = predict_state(name, n_params, n_gpus, IMPLEMENTATION, precision).total
        on_top = _on_top(name, n_params, shape, micro_batch, precision, accounting)
        for p in placements:
            prediction, problem = None, ""
            if compute_s is not None and name in fits:
                try:
                    prediction = predict_strategy(figures, name, n_params, shape, precision, p.klass, n_gpus,
                                                  fits[name], tokens_gpu, accounting)
                except ValueError as exc:
                    problem = str(exc)
            elif compute_s is not None:
                problem = f"no fit for {name}"
            options.append(Option(name, p, art, impl, on_top, figures.gpu_memory, prediction, problem, accounting))
    return Advice(figures, n_params, n_gpus, seq_len, micro_batch, precision, shape, fits, options, notes, accounting)


def _gb(n: float) -> str:
    return f"{n / 1e9:.0f} GB"


def _pin(p) -> str:
    return f"CUDA_VISIBLE_DEVICES={p.cuda_visible_devices}"


def format_advice(a: Advice) -> str:
    f = a.figures
    s = a.shape
    lines = [f"advise: {short(a.n_params)} parameters ({s['n_layer']} layers, d_model {s['d_model']}), "
             f"{a.n_gpus} GPUs, micro-batch {a.micro_batch} x {a.seq_len} tokens per GPU, {a.precision}",
             ("predicted from " if f.kind == "record" else
              f"PREDICTED FROM A PROFILE'S {'PHYSICS' if f.physics else 'FIGURES'}, NOT THIS NODE: ")
             + f.description,
             f"GPU: {f.gpu_model}, {_gb(f.gpu_memory)}; compute: "
             + (f"{f.compute.flops_per_s / 1e12:.0f} TFLOP/s per GPU ({f.compute.source})" if f.compute else "unknown")]
    lines += a.notes
    lines.append(f"{'strategy':8} {'placement':34} {'state art/impl':>15} {'+act':>6} {'fits':>5} {'step ms':>8} "
                 f"{'tokens/s':>10}  what sets it")
    for o in a.options:
        pred = o.prediction
        fits = "yes" if o.fits else "NO"
        step = f"{pred.step_s * 1e3:.0f}" if pred else "-"
        tps = f"{pred.tokens_per_s:,.0f}" if pred else "-"
        why = pred.what_sets_it() if pred else o.problem
        if not o.fits:
            why = f"does not fit: needs {_gb(o.total)} of {_gb(o.gpu_memory)}; " + why
        name = o.placement.id + (" (host path)" if not o.user_choice else "")
        lines.append(f"{o.strategy:8} {name:34} {_gb(o.state_article):>7}/{_gb(o.state_implementation):>7} "
                     f"{_gb(o.on_top):>6} {fits:>5} {step:>8} {tps:>10}  {why}")
    lines += _placement_cost(a)
    swept = sweep(a)
    lines += _by_micro_batch(a, swept)
    choice = a.choice()
    if choice is None:
        fitting = [o for o in a.options if o.fits]
        lines.append("recommendation: none" + (" predicted (no one-GPU rate)" if fitting else
                                                f": no strategy fits {short(a.n_params)} parameters on "
                                                f"{a.n_gpus} x {_gb(f.gpu_memory)}; add GPUs or shrink the micro-batch"))
        if fitting:
            lines.append("fits: " + ", ".join(sorted({o.strategy for o in fitting})))
    else:
        best = choice.best
        others = f.alternatives(best.placement)
        where = ("NVSwitch: any GPUs do, placement does not matter" if _is_nvswitch(best)
                 else f"keeps the job on {best.placement.klass}"
                 + (f"; or {', '.join(_pin(p) for p in others)}" if others else ""))
        lines.append(f"recommendation: {best.strategy} on {best.placement.id}: {_pin(best.placement)} "
                     f"({best.prediction.tokens_per_s:,.0f} tokens/s predicted; {where})")
        if choice.why:
            lines.append(f"why {best.strategy}: {choice.why}")
        lines += reasons(a, choice, swept)
        second = choice.runner_up
        if second is not None:
            ratio = second.prediction.tokens_per_s / best.prediction.tokens_per_s
            lines.append(f"runner-up: {second.strategy} on {second.placement.id}: "
                         f"{second.prediction.tokens_per_s:,.0f} tokens/s, "
                         + (f"{ratio - 1:.0%} faster" if ratio > 1 else f"{1 - ratio:.0%} slower"))
        for part in slow_parts(f.verdicts):
            lines.append("slow part: " + cost_line(part, best.strategy.upper() if best.strategy == "ddp" else best.strategy,
                                                   best.prediction))
    lines.append("model: step = compute + overhead x collective bytes + communication - what hides under overlap x forward and "
                 "backward; "
                 "error on the 2x H200 runs: docs/commands.md#wirecheck-advise")
    return "\n".join(lines)


def _is_nvswitch(option) -> bool:
    return option.placement.klass == NVSWITCH


MICRO_BATCHES = (1, 2, 4, 8)  # what the other-micro-batch lines show, with the asked one


def _best_and_worst(a: Advice, user_only: bool) -> dict:
    """strategy -> (its fastest option, its slowest), for strategies predicted on two placements or more."""
    by: dict = {}
    for o in a.options:
        if o.prediction and (o.user_choice or not user_only):
            by.setdefault(o.strategy, []).append(o)
    return {name: (max(opts, key=lambda o: o.prediction.tokens_per_s), min(opts, key=lambda o: o.prediction.tokens_per_s))
            for name, opts in by.items() if len(opts) > 1}


def _slowdowns(a: Advice) -> dict:
    """strategy -> (worst placement class, its slowdown against the best), user placements only."""
    return {name: (worst.placement.klass, best.prediction.tokens_per_s / worst.prediction.tokens_per_s)
            for name, (best, worst) in _best_and_worst(a, user_only=True).items()}


def _choice_words(c: "Choice", a: Advice) -> str:
    """The recommendation in a few words, with DDP's shortfall where the rule weighed it."""
    text = f"{c.best.strategy} on {c.best.placement.klass}"
    if not c.why:
        unfit = c.best.strategy != DDP and any(o.strategy == DDP and not o.fits for o in a.options)
        return text + (" (DDP does not fit)" if unfit else "")
    if c.best.strategy == DDP:
        short = 1 - c.best.prediction.tokens_per_s / c.runner_up.prediction.tokens_per_s
        return text + f" (DDP {short:.0%} slower than {c.runner_up.strategy}, within the {c.tie.error:.0%} error)"
    return text + f" (DDP {c.margin:.0%} slower, beyond the {c.tie.error:.0%} error)"


def sweep(a: Advice) -> list[tuple[int, Advice, "Choice | None"]]:
    """The same job at micro-batch 1, 2, 4, 8 and the asked one: (micro-batch, its advice, its choice)."""
    out = []
    for mb in sorted(set(MICRO_BATCHES) | {a.micro_batch}):
        other = a if mb == a.micro_batch else advise(a.figures, a.n_params, a.n_gpus, a.seq_len, mb, a.precision,
                                                     a.fits, a.accounting)
        out.append((mb, other, other.choice()))
    return out


def reasons(a: Advice, choice: "Choice", swept=None) -> list[str]:
    """The lines under the recommendation that say why: where DDP's shortfall comes from (shortfall.py) and, where
    DDP fits and still is not the advice, why the node's figures part from the article's rule and what to do
    (rule.py). The text and the report page both show these. `swept`: sweep(a), made here if not given."""
    if choice is None or choice.shortfall is None:
        return []
    lines = [shortfall.line(choice.shortfall)]
    swept = sweep(a) if swept is None else swept
    departs = rule.departure(choice, a.micro_batch, [(mb, c) for mb, _, c in swept if mb != a.micro_batch])
    if departs is not None:
        lines.append(rule.line(departs))
    return lines


def _by_micro_batch(a: Advice, swept) -> list[str]:
    """The same job at other micro-batches: forward and backward grow with the tokens, the collectives and the
    optimizer step do not, so the recommendation and the wire's price can change with the micro-batch."""
    if not a.ranked:
        return []
    lines = []
    for mb, other, c in swept:
        if c is None:
            lines.append(f"  {mb}: no strategy fits")
            continue
        slow = _slowdowns(other)
        cost = ", ".join(f"{name} {x:.1f}x" for name, (_, x) in slow.items())
        klass = {k for k, _ in slow.values()}
        lines.append(f"  {mb}{' (asked)' if mb == a.micro_batch else ''}: {_choice_words(c, other)}"
                     + (f"; on {'/'.join(sorted(klass))}: {cost}" if cost else ""))
    return ["by micro-batch (forward and backward grow with it; the collectives and the optimizer step do not):"] + lines


def _placement_cost(a: Advice) -> list[str]:
    """Per strategy, how much slower its worst job placement is than its best (the wire's price)."""
    lines = []
    for name, (best, worst) in _best_and_worst(a, user_only=False).items():
        what = worst.placement.klass + ("" if worst.user_choice else " (the host path: NVLink lost)")
        lines.append(f"  {name}: {what} is {best.prediction.tokens_per_s / worst.prediction.tokens_per_s:.1f}x "
                     f"slower than {best.placement.klass}")
    return (["placement: the same job on each class of placement"] + lines) if lines else []
