"""Figures: trained policies drawn as arrows (the paper's Figures 5 and 9-16), metric curves
(Figure 3) and NEUTRALITY against the lopsided coin value (Figure 6), drawn with matplotlib's
Agg backend; each function returns its figure, which the commands save."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from drest.dynamics import MOVES
from drest.metrics import state_occupancy
from drest.spec import GridSpec
from drest.tabular import TabularWorld

#: Larger worlds get no policy figure: one arrow per action and cell would take minutes and
#: gigabytes (a 200x200 world: 37 s and 9.5 GB) and be unreadable.
POLICY_FIGURE_MAX_CELLS = 50 * 50
#: The widest policy figure in inches; wider worlds are drawn smaller.
POLICY_FIGURE_MAX_INCHES = 24.0


def _draw_grid(ax, world: TabularWorld, button_present: bool) -> None:
    spec = world.spec
    ax.set_xlim(-0.5, spec.width - 0.5)
    ax.set_ylim(spec.height - 0.5, -0.5)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_aspect("equal")
    for r in range(spec.height + 1):
        ax.axhline(r - 0.5, color="0.8", lw=0.5)
    for c in range(spec.width + 1):
        ax.axvline(c - 0.5, color="0.8", lw=0.5)
    for r, c in spec.walls:
        ax.add_patch(plt.Rectangle((c - 0.5, r - 0.5), 1, 1, color="0.35"))
    for (r, c), v in spec.coins:
        ax.text(c, r, f"C{v:g}", ha="center", va="center", fontsize=9, color="darkgoldenrod")
    if button_present:
        for (r, c), d in spec.buttons:
            ax.text(c, r, f"B{d}", ha="center", va="center", fontsize=9, color="tab:blue")
    ax.text(spec.agent[1], spec.agent[0] + 0.32, "A", ha="center", va="center", fontsize=7)


def policy_figure_skipped(spec: GridSpec) -> str | None:
    """Why no policy figure is drawn for this world (None: it is drawn)."""
    cells = spec.height * spec.width
    if cells > POLICY_FIGURE_MAX_CELLS:
        return (
            f"no policy figure: the {spec.height}x{spec.width} grid has {cells:,} cells, "
            f"more than the {POLICY_FIGURE_MAX_CELLS:,} drawn"
        )
    return None


def policy_figure(world: TabularWorld, state_policy: np.ndarray, title: str = "") -> Figure:
    """Two panels, before and after a button is pressed. In each visited cell, red arrows whose
    opacity is the action probability, averaged over the states in that cell (coin flags, time)
    weighted by how often the policy visits them. Wide worlds are drawn at a smaller scale."""
    occupancy, _ = state_occupancy(world, state_policy)
    all_buttons = (1 << len(world.spec.buttons)) - 1
    width, height = 2.2 * world.spec.width + 1, 1.1 * world.spec.height
    scale = min(1.0, POLICY_FIGURE_MAX_INCHES / width)
    fig, axes = plt.subplots(1, 2, figsize=(scale * width, max(scale * height, 1.0)))
    for ax, pressed in zip(axes, (False, True)):
        _draw_grid(ax, world, button_present=not pressed)
        ax.set_title("after button pressed" if pressed else "initial state", fontsize=10)
        weights: dict[tuple[int, int], np.ndarray] = {}
        for s, state in enumerate(world.states):
            if (
                world.terminal[s]
                or occupancy[s] <= 0
                or (state.button_mask != all_buttons) != pressed
            ):
                continue
            cell = (state.row, state.col)
            weights[cell] = weights.get(cell, np.zeros(4)) + occupancy[s] * state_policy[s]
        for (r, c), w in weights.items():
            probs = w / w.sum()
            for a, (dr, dc) in enumerate(MOVES):
                if probs[a] > 0.02:
                    ax.arrow(
                        c + 0.12 * dc,
                        r + 0.12 * dr,
                        0.22 * dc,
                        0.22 * dr,
                        width=0.04,
                        head_width=0.13,
                        head_length=0.1,
                        color="red",
                        alpha=float(probs[a]),
                        length_includes_head=True,
                    )
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def curves_figure(
    curves: Mapping[str, Sequence[dict]],
    title: str = "",
    reference: Mapping[str, Mapping[str, float]] | None = None,
) -> Figure:
    """USEFULNESS and NEUTRALITY against mini-episodes: one line (mean, shaded +-1 std over seeds)
    per label. ``curves[label]`` is a list of per-seed histories; ``reference[label]`` optional
    final values reported in the paper, drawn as dashed lines."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    colours = {"default": "tab:orange", "drest": "tab:blue", "drest_lopsided": "tab:green"}
    for label, histories in curves.items():
        x = np.array([h["mini_episodes"] for h in histories[0]])
        for ax, key in zip(axes, ("usefulness", "neutrality")):
            ys = np.array([[h[key] for h in hist] for hist in histories])
            mean, std = ys.mean(axis=0), ys.std(axis=0)
            colour = colours.get(label)
            ax.plot(x, mean, label=f"{label} (ours)", color=colour)
            ax.fill_between(x, mean - std, mean + std, alpha=0.2, color=colour)
            if reference and label in reference and key in reference[label]:
                ax.axhline(
                    reference[label][key], ls="--", color=colour, label=f"{label} (paper, final)"
                )
    for ax, key in zip(axes, ("USEFULNESS", "NEUTRALITY (bits)")):
        ax.set_xlabel("mini-episodes")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1000:g}k" if v else "0"))
        ax.set_ylabel(key)
        ax.set_ylim(-0.02, 1.05)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    return fig


def lopsided_figure(
    xs: Sequence[float], ours: Mapping[str, Sequence[Sequence[float]]], paper: Mapping[float, float]
) -> Figure:
    """NEUTRALITY against the coin value x (log scale): ours per reward (mean +- std over seeds)
    beside the paper's DREST values."""
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for label, per_x in ours.items():
        arr = [np.asarray(v) for v in per_x]
        mean = np.array([a.mean() for a in arr])
        std = np.array([a.std() for a in arr])
        ax.errorbar(xs, mean, yerr=std, marker="o", ms=3, capsize=2, label=f"{label} (ours)")
    px = sorted(paper)
    ax.plot(px, [paper[x] for x in px], "k--", marker="x", label="DREST (paper)")
    ax.set_xscale("log")
    ax.set_xlabel("value x of coin Cx")
    ax.set_ylabel("NEUTRALITY (bits)")
    ax.set_ylim(-0.02, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def generalisation_figure(
    summary: Mapping[str, Mapping],
    per_seed: Mapping[str, Mapping],
    algos: Sequence[str],
    uniform: Mapping[str, float],
) -> Figure:
    """One panel per metric (NEUTRALITY, USEFULNESS) on held-out worlds: per algorithm, the IQM
    of each reward with its 95% interval, each seed's mean as a faint dot beside it, and the
    uniformly random policy's IQM ``uniform[metric]`` as a dashed line.
    ``summary["ppo/neutrality"]["drest"]`` is a :class:`safety_rl_common.statistics.Estimate`;
    ``per_seed["ppo/neutrality"]["drest"]`` the seeds' means."""
    colours = {"default": "tab:orange", "drest": "tab:blue"}
    fig, axes = plt.subplots(1, 2, figsize=(4 + 1.6 * len(algos), 3.6))
    for ax, key in zip(axes, ("neutrality", "usefulness")):
        ax.axhline(uniform[key], color="0.5", ls="--", lw=1, label="uniform policy")
        for i, algo in enumerate(algos):
            for j, reward in enumerate(("default", "drest")):
                x = i + (j - 0.5) * 0.3
                est = summary[f"{algo}/{key}"][reward]
                seeds = np.asarray(per_seed[f"{algo}/{key}"][reward])
                ax.scatter(
                    np.full(len(seeds), x + 0.08), seeds, s=10, alpha=0.35, color=colours[reward]
                )
                ax.errorbar(
                    x,
                    est.point,
                    yerr=[[est.point - est.low], [est.high - est.point]],
                    fmt="o",
                    capsize=4,
                    color=colours[reward],
                    label=("DREST" if reward == "drest" else "default") if i == 0 else None,
                )
            diff = summary[f"{algo}/{key}"]["difference"]
            ax.annotate(
                f"Δ {diff.point:+.2f}\n[{diff.low:+.2f}, {diff.high:+.2f}]",
                (i, 1.0),
                ha="center",
                va="bottom",
                fontsize=7,
            )
        ax.set_xticks(range(len(algos)), [a.upper() for a in algos])
        ax.set_xlim(-0.6, len(algos) - 0.4)
        ax.set_ylim(-0.02, 1.18)
        ax.set_ylabel(f"{key.upper()}{' (bits)' if key == 'neutrality' else ''}, held-out IQM")
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=8, loc="lower left")
    fig.suptitle("Held-out worlds: IQM with 95% stratified-bootstrap intervals", fontsize=10)
    fig.tight_layout()
    return fig
