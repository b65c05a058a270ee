#!/usr/bin/env python3
"""Plot the JSON logs of examples/grpo.py and examples/dpo.py as SVG.

GRPO (--grpo LOG): the mean reward per iteration over every rank's
completions (the band: the lowest and highest completion's reward) above the
KL to the reference per iteration. DPO (--dpo LOG): the loss per step above
the reward margin per step. Each picture is hand-written SVG with the ticks of
scripts/plot_loss.py (standard library only, no matplotlib):

    python3 examples/make_rl_plots.py --grpo build/rl/grpo.json --dpo build/rl/dpo.json
        (writes docs/grpo-reward.svg and docs/dpo-margin.svg; --grpo-out, --dpo-out)
"""
import argparse
import html
import importlib.util
import json
import math
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "plot_loss", os.path.join(REPO, "scripts", "plot_loss.py"))
plot_loss = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plot_loss)
nice_ticks, format_tick, COLORS = plot_loss.nice_ticks, plot_loss.format_tick, plot_loss.COLORS


def x_ticks_of(xs):
    ticks, step = nice_ticks(min(xs), max(xs))
    if step < 1:  # integers: one tick per value
        ticks, step = list(range(min(xs), max(xs) + 1)), 1
        if len(ticks) == 1:
            ticks = [ticks[0] - 1, ticks[0], ticks[0] + 1]
    return ticks, step


def render(title, subtitle, x_label, panels, width=720, panel_height=230):
    """PANELS: [{"label": y label, "lines": [(legend, color, [(x, y)])],
    "band": None or (color, [(x, low, high)]), "band_label": text,
    "rules": [(y, text)], "legend": "top" or "bottom" (left)}], stacked
    with one x axis."""
    left, right, top, gap, bottom = 80, 20, 58, 30, 45
    plot_w = width - left - right
    height = top + len(panels) * panel_height + (len(panels) - 1) * gap + bottom
    xs = [x for p in panels for _, _, pts in p["lines"] for x, _ in pts]
    x_ticks, x_step = x_ticks_of(xs)
    x0, x1 = x_ticks[0], x_ticks[-1]

    def px(x):
        return left + (x - x0) / (x1 - x0) * plot_w

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left + plot_w / 2:.1f}" y="22" text-anchor="middle" '
           f'font-size="15">{html.escape(title)}</text>',
           f'<text x="{left + plot_w / 2:.1f}" y="42" text-anchor="middle" '
           f'fill="#444">{html.escape(subtitle)}</text>']
    for index, panel in enumerate(panels):
        ptop = top + index * (panel_height + gap)
        ys = [y for _, _, pts in panel["lines"] for _, y in pts]
        if panel.get("band"):
            ys += [v for _, lo, hi in panel["band"][1] for v in (lo, hi)]
        ys += [y for y, _ in panel.get("rules", [])]
        y_ticks, y_step = nice_ticks(min(ys), max(ys), target=4)
        y0, y1 = y_ticks[0], y_ticks[-1]

        def py(y, ptop=ptop, y0=y0, y1=y1):
            return ptop + panel_height - (y - y0) / (y1 - y0) * panel_height

        for t in x_ticks:
            x = px(t)
            out.append(f'<line x1="{x:.1f}" y1="{ptop}" x2="{x:.1f}" '
                       f'y2="{ptop + panel_height}" stroke="#e0e0e0"/>')
            out.append(f'<line x1="{x:.1f}" y1="{ptop + panel_height}" x2="{x:.1f}" '
                       f'y2="{ptop + panel_height + 5}" stroke="black"/>')
            if index == len(panels) - 1:
                out.append(f'<text x="{x:.1f}" y="{ptop + panel_height + 18}" '
                           f'text-anchor="middle">{format_tick(t, x_step)}</text>')
        for t in y_ticks:
            y = py(t)
            out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" '
                       f'stroke="#e0e0e0"/>')
            out.append(f'<line x1="{left - 5}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}" '
                       f'stroke="black"/>')
            out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">'
                       f'{format_tick(t, y_step)}</text>')
        if panel.get("band"):
            color, points = panel["band"]
            upper = [f"{px(x):.1f},{py(hi):.1f}" for x, _, hi in points]
            lower = [f"{px(x):.1f},{py(lo):.1f}" for x, lo, _ in reversed(points)]
            out.append(f'<polygon points="{" ".join(upper + lower)}" fill="{color}" '
                       f'fill-opacity="0.15" stroke="none"/>')
        for y, label in panel.get("rules", []):
            out.append(f'<line x1="{left}" y1="{py(y):.1f}" x2="{left + plot_w}" '
                       f'y2="{py(y):.1f}" stroke="#555" stroke-dasharray="5,4"/>')
            below = py(y) - ptop < 16  # no room above the line
            out.append(f'<text x="{left + plot_w - 4}" y="{py(y) + (13 if below else -4):.1f}" '
                       f'text-anchor="end" fill="#555">{html.escape(label)}</text>')
        out.append(f'<rect x="{left}" y="{ptop}" width="{plot_w}" height="{panel_height}" '
                   f'fill="none" stroke="black"/>')
        middle = ptop + panel_height / 2
        out.append(f'<text x="22" y="{middle:.1f}" text-anchor="middle" '
                   f'transform="rotate(-90 22 {middle:.1f})">{html.escape(panel["label"])}</text>')
        for _, color, points in panel["lines"]:
            coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
            out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" '
                       f'stroke-width="2"/>')
            if len(points) <= 60:
                for x, y in points:
                    out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" '
                               f'fill="{color}"/>')
        legend = [(name, color) for name, color, _ in panel["lines"]]
        if panel.get("band"):
            legend.append((panel["band_label"], panel["band"][0]))
        legend_w = 36 + 6.8 * max(len(name) for name, _ in legend)
        legend_h = 8 + 18 * len(legend)
        lx = left + 10
        ly = ptop + 10 if panel.get("legend", "top") == "top" else \
            ptop + panel_height - 10 - legend_h
        out.append(f'<rect x="{lx}" y="{ly}" width="{legend_w:.0f}" '
                   f'height="{legend_h}" fill="white" fill-opacity="0.9" '
                   f'stroke="#999"/>')
        for i, (name, color) in enumerate(legend):
            y = ly + 16 + 18 * i
            if panel.get("band") and i == len(legend) - 1:
                out.append(f'<rect x="{lx + 6}" y="{y - 9}" width="16" height="10" '
                           f'fill="{color}" fill-opacity="0.15"/>')
            else:
                out.append(f'<line x1="{lx + 6}" y1="{y - 4}" x2="{lx + 22}" y2="{y - 4}" '
                           f'stroke="{color}" stroke-width="2"/>')
            out.append(f'<text x="{lx + 26}" y="{y}">{html.escape(name)}</text>')
    last_bottom = top + len(panels) * panel_height + (len(panels) - 1) * gap
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{last_bottom + 38}" '
               f'text-anchor="middle">{html.escape(x_label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write(path, svg):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write(svg)
    os.replace(path + ".tmp", path)


def load(path, key):
    with open(path) as f:
        log = json.load(f)
    if not log.get(key):
        sys.exit(f"make_rl_plots: error: {path}: no {key} to plot")
    return log


def grpo_svg(log):
    config, rows = log["config"], log["iterations"]
    xs = [r["iteration"] for r in rows]
    title = f"GRPO on the tiny GPT-2: reward = share of {config['chars']!r} in the completion"
    subtitle = (f"{config['ranks']} ranks x {config['prompts_per_rank']} prompts x "
                f"{config['group']} completions of {config['completion_len']} bytes per "
                f"iteration, beta {config['beta']}, lr {config['lr']}")
    return render(title, subtitle, "iteration", [
        {"label": "reward", "lines": [("mean reward", COLORS[0],
                                       list(zip(xs, (r["reward"] for r in rows))))],
         "band": (COLORS[0], [(r["iteration"], r["reward_min"], r["reward_max"])
                              for r in rows]),
         "band_label": "lowest to highest completion"},
        {"label": "KL to reference", "lines": [
            (f"mean k3 KL per completion token (beta {config['beta']})", COLORS[1],
             list(zip(xs, (r["kl"] for r in rows))))]},
    ])


def dpo_svg(log):
    config, rows = log["config"], log["steps"]
    xs = [r["step"] for r in rows]
    title = "DPO on the tiny GPT-2: real text chosen over the same bytes shuffled"
    subtitle = (f"{config['ranks']} ranks x {config['pairs_per_rank']} pairs a step, "
                f"{config['prompt_len']} + {config['completion_len']} bytes a row, "
                f"beta {config['beta']}, lr {config['lr']}")
    if "held_out_before" in log and "held_out_after" in log:
        subtitle += (f"; held-out margin {log['held_out_before']['margin']:.2f} -> "
                     f"{log['held_out_after']['margin']:.2f}")
    return render(title, subtitle, "step", [
        {"label": "loss", "lines": [("loss (train_step)", COLORS[0],
                                     list(zip(xs, (r["loss"] for r in rows))))],
         "rules": [(math.log(2), "ln 2")], "legend": "bottom"},
        {"label": "reward margin", "lines": [
            ("beta ((pi_c - ref_c) - (pi_r - ref_r)), mean over pairs", COLORS[2],
             list(zip(xs, (r["margin"] for r in rows))))],
         "rules": [(0.0, "0")]},
    ])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grpo", help="examples/grpo.py --log file")
    parser.add_argument("--dpo", help="examples/dpo.py --log file")
    parser.add_argument("--grpo-out", default=os.path.join(REPO, "docs", "grpo-reward.svg"))
    parser.add_argument("--dpo-out", default=os.path.join(REPO, "docs", "dpo-margin.svg"))
    args = parser.parse_args()
    if not args.grpo and not args.dpo:
        parser.error("give --grpo LOG, --dpo LOG or both")
    if args.grpo:
        log = load(args.grpo, "iterations")
        write(args.grpo_out, grpo_svg(log))
        print(f"make_rl_plots: wrote {args.grpo_out} ({len(log['iterations'])} iterations)")
    if args.dpo:
        log = load(args.dpo, "steps")
        write(args.dpo_out, dpo_svg(log))
        print(f"make_rl_plots: wrote {args.dpo_out} ({len(log['steps'])} steps)")


if __name__ == "__main__":
    main()
