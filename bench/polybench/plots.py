"""The PNG plots of RESULTS.md: C's acquire waits and its utilisation against W."""

from __future__ import annotations

from pathlib import Path

from .measure import HOLD_US
from .peers import label
from .workers import status


def plot(out: Path, c: dict, workers: list) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    contenders = []
    for (_, lang, contender) in c:
        if (lang, contender) not in contenders:
            contenders.append((lang, contender))
    styles = {"rust": "-", "python": "--", "node": ":", "java": "-."}
    palette = plt.get_cmap("tab20").colors
    colours = {key: palette[index % len(palette)] for index, key in enumerate(contenders)}

    figure, axes = plt.subplots(1, len(workers), figsize=(6 * len(workers) + 2.5, 5),
                                squeeze=False)
    for axis, count in zip(axes[0], workers):
        for lang, contender in contenders:
            row = c.get((count, lang, contender))
            if not row or status(row["run"]) or not row.get("waits"):
                continue
            waits = sorted(max(w / 1000, 0.001) for w in row["waits"])
            fractions = [(i + 1) / len(waits) for i in range(len(waits))]
            axis.step(waits, fractions, where="post", linestyle=styles[lang],
                      color=colours[(lang, contender)], label=label(lang, contender))
        axis.axvline((count - 1) * HOLD_US / 1000, color="grey", linewidth=0.8)
        axis.set_xscale("log")
        axis.set_xlabel("acquire wait (ms, log)")
        axis.set_ylabel("fraction of acquisitions ≤ x")
        axis.set_title(f"W = {count} (grey: (W−1) × hold)")
        axis.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, fontsize=8, loc="center right")
    figure.suptitle("C: distribution of acquire waits per contender")
    figure.tight_layout(rect=(0, 0, 0.86, 1))
    figure.savefig(out / "wait_distribution.png", dpi=90)
    plt.close(figure)

    figure, axis = plt.subplots(figsize=(8, 5))
    for lang, contender in contenders:
        points = [(count, c[(count, lang, contender)]["utilisation"]) for count in workers
                  if (count, lang, contender) in c and not status(c[(count, lang, contender)]["run"])]
        if points:
            axis.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                      linestyle=styles[lang], color=colours[(lang, contender)],
                      label=label(lang, contender))
    axis.axhline(0.9, color="grey", linewidth=0.8)
    axis.set_xscale("log", base=2)
    axis.set_xticks(workers, [str(w) for w in workers])
    axis.set_ylim(0, 1.05)
    axis.set_xlabel("W (worker processes on one lock)")
    axis.set_ylabel("utilisation (hold time / wall time)")
    axis.set_title("C: lock utilisation against W (grey: 0.90 target)")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=7, loc="lower left")
    figure.tight_layout()
    figure.savefig(out / "utilisation.png", dpi=90)
    plt.close(figure)
