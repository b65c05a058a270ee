#!/usr/bin/env python3
"""Plot the loss curves of `zrun PLAN train --loss-log FILE` runs as one SVG.

Each log has one line per optimizer step, `step<TAB>loss<TAB>lr` (zrun train --loss-log);
each file becomes one line of the plot, named in the legend by --label (in
order) or by the file's name. The plot has axes, "nice" ticks (1, 2 or 5 times
a power of ten), grid lines, a legend and a title. Standard library only.

    python3 scripts/plot_loss.py run1.log run2.log -o loss.svg \\
        --label "N=1" --label "N=4" --title "gpt2, AdamW 1e-2"

Lines that do not parse (a header, a blank line) are an error naming the file
and line, as is a log without steps; a non-finite loss is left out of its line
and reported on stderr.
"""
import argparse
import html
import math
import os
import sys

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf"]


def read_log(path):
    """[(step, loss)] of one --loss-log file."""
    points = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            fields = line.rstrip("\n").split("\t")
            try:
                if len(fields) != 3:
                    raise ValueError
                step, loss, _ = int(fields[0]), float(fields[1]), float(fields[2])
            except ValueError:
                sys.exit(f"plot_loss: error: {path}:{number}: expected `step<TAB>loss<TAB>lr`, "
                         f"got {line.rstrip()!r}")
            if not math.isfinite(loss):
                print(f"plot_loss: warning: {path}:{number}: loss {loss} left out",
                      file=sys.stderr)
                continue
            points.append((step, loss))
    if not points:
        sys.exit(f"plot_loss: error: {path}: no steps to plot")
    return points


def nice_ticks(low, high, target=6):
    """Tick values covering [low, high]: multiples of 1, 2 or 5 x 10^k."""
    if high <= low:
        pad = abs(low) * 0.05 or 0.5
        low, high = low - pad, high + pad
    raw = (high - low) / target
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    last = math.ceil(high / step) * step
    count = int(round((last - first) / step))
    return [first + i * step for i in range(count + 1)], step


def format_tick(value, step):
    decimals = max(0, -int(math.floor(math.log10(step)))) if step < 1 else 0
    text = f"{value:.{decimals}f}"
    return "0" if text.strip("-0.") == "" else text


def render(series, title, width, height):
    left, right, top, bottom = 70, 20, 40, 50
    plot_w, plot_h = width - left - right, height - top - bottom
    steps = [s for _, points in series for s, _ in points]
    losses = [l for _, points in series for _, l in points]
    x_ticks, x_step = nice_ticks(min(steps), max(steps))
    if x_step < 1:  # steps are integers: one tick per step
        x_ticks, x_step = list(range(min(steps), max(steps) + 1)), 1
        if len(x_ticks) == 1:
            x_ticks = [x_ticks[0] - 1, x_ticks[0], x_ticks[0] + 1]
    y_ticks, y_step = nice_ticks(min(losses), max(losses))
    x0, x1 = x_ticks[0], x_ticks[-1]
    y0, y1 = y_ticks[0], y_ticks[-1]

    def px(x):
        return left + (x - x0) / (x1 - x0) * plot_w

    def py(y):
        return top + plot_h - (y - y0) / (y1 - y0) * plot_h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    if title:
        out.append(f'<text x="{left + plot_w / 2:.1f}" y="22" text-anchor="middle" '
                   f'font-size="15">{html.escape(title)}</text>')
    for t in x_ticks:
        x = px(t)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" '
                   f'stroke="#e0e0e0"/>')
        out.append(f'<line x1="{x:.1f}" y1="{top + plot_h}" x2="{x:.1f}" '
                   f'y2="{top + plot_h + 5}" stroke="black"/>')
        out.append(f'<text x="{x:.1f}" y="{top + plot_h + 18}" text-anchor="middle">'
                   f'{format_tick(t, x_step)}</text>')
    for t in y_ticks:
        y = py(t)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" '
                   f'stroke="#e0e0e0"/>')
        out.append(f'<line x1="{left - 5}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}" '
                   f'stroke="black"/>')
        out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">'
                   f'{format_tick(t, y_step)}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" '
               f'stroke="black"/>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 12}" '
               f'text-anchor="middle">step</text>')
    out.append(f'<text x="18" y="{top + plot_h / 2:.1f}" text-anchor="middle" '
               f'transform="rotate(-90 18 {top + plot_h / 2:.1f})">loss</text>')
    for i, (label, points) in enumerate(series):
        color = COLORS[i % len(COLORS)]
        coords = " ".join(f"{px(s):.1f},{py(l):.1f}" for s, l in points)
        out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" '
                   f'stroke-width="2"/>')
        if len(points) <= 40:
            for s, l in points:
                out.append(f'<circle cx="{px(s):.1f}" cy="{py(l):.1f}" r="3" fill="{color}"/>')
    # Legend: top right, inside the plot.
    legend_w = 36 + 7.5 * max(len(label) for label, _ in series)
    lx, ly = left + plot_w - legend_w - 10, top + 10
    out.append(f'<rect x="{lx}" y="{ly}" width="{legend_w}" height="{8 + 18 * len(series)}" '
               f'fill="white" fill-opacity="0.9" stroke="#999"/>')
    for i, (label, _) in enumerate(series):
        color = COLORS[i % len(COLORS)]
        y = ly + 16 + 18 * i
        out.append(f'<line x1="{lx + 6}" y1="{y - 4}" x2="{lx + 22}" y2="{y - 4}" '
                   f'stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{lx + 26}" y="{y}">{html.escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="+", help="--loss-log files")
    parser.add_argument("-o", "--out", required=True, help="the .svg to write")
    parser.add_argument("--label", action="append", default=[],
                        help="legend entry per log, in order (default: file name)")
    parser.add_argument("--title", default="training loss")
    parser.add_argument("--width", type=int, default=720)
    parser.add_argument("--height", type=int, default=440)
    args = parser.parse_args()
    if len(args.label) > len(args.logs):
        parser.error(f"{len(args.label)} labels for {len(args.logs)} logs")
    labels = args.label + [os.path.basename(p) for p in args.logs[len(args.label):]]
    series = [(label, read_log(path)) for label, path in zip(labels, args.logs)]
    svg = render(series, args.title, args.width, args.height)
    temporary = args.out + ".tmp"
    with open(temporary, "w") as f:
        f.write(svg)
    os.replace(temporary, args.out)
    print(f"plot_loss: wrote {args.out} ({len(series)} curves, "
          f"{sum(len(p) for _, p in series)} points)")


if __name__ == "__main__":
    main()
