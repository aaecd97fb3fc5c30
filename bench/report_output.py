"""Output helpers of bench/report.py: the Markdown documents (generated part between markers) and the charts."""

from __future__ import annotations

import os
import sys
import textwrap


def hbar_chart(path, title, series, labels, log=False):
    """One question per chart: horizontal bars (one group per label, one bar per series), labels at full length."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        print("matplotlib not installed: no PNG written", file=sys.stderr)
        return False
    wrapped = ["\n".join(textwrap.wrap(lab, 46)) for lab in labels]
    lines_per_label = max((w.count("\n") + 1 for w in wrapped), default=1)
    height = 1.2 + len(labels) * max(0.2 * len(series) + 0.1, 0.28 * lines_per_label + 0.15)
    fig, ax = plt.subplots(figsize=(9.5, height))
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    width = 0.8 / max(1, len(series))
    ys = range(len(labels))
    for i, (name, vals) in enumerate(series):
        pos = [y + i * width for y in ys]
        bars = ax.barh(pos, [v or 0 for v in vals], width, label=name, color=colors[i % len(colors)])
        for b, v in zip(bars, vals):
            if v:
                ax.text(b.get_width(), b.get_y() + b.get_height() / 2, f" {v:.0f}" if v >= 100 else f" {v:#.3g}",
                        va="center", fontsize=7)
    ax.set_yticks([y + width * (len(series) - 1) / 2 for y in ys])
    ax.set_yticklabels(wrapped, fontsize=8)
    ax.margins(y=0.02)
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
    # Room right of the longest bar for its value label.
    top = max((v for _, vals in series for v in vals if v), default=1)
    if log:
        ax.set_xlim(right=top * 1.8)
        ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    else:
        ax.set_xlim(0, top * 1.12)
    if len(series) > 1:  # above the bars, where it cannot cover one
        ax.set_title(title, fontsize=10, pad=22)
        ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(series), frameon=False)
    else:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


BEGIN, END = "<!-- report:begin -->", "<!-- report:end -->"


def write_doc(path, title, body):
    """Writes a generated Markdown body; in an existing document with both markers, replaces only what lies between
    them (the hand-written rest is kept), else writes the title and the body between markers."""
    text = open(path).read() if os.path.exists(path) else ""
    if BEGIN in text and END in text.split(BEGIN, 1)[1]:
        head, rest = text.split(BEGIN, 1)
        doc = head + BEGIN + "\n" + body + END + rest.split(END, 1)[1]
    else:
        doc = f"# {title}\n\n{BEGIN}\n{body}{END}\n"
    with open(path, "w") as f:
        f.write(doc)


def charts_markdown(out, charts):
    """Image lines for the charts (alt text, file name) that exist in out."""
    lines = []
    for alt, name in charts:
        if os.path.exists(os.path.join(out, name)):
            lines += ["", f"![{alt}]({name})"]
    return lines
