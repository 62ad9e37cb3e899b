"""The chart of docs/benchmarks.md: startup overhead as horizontal bars (SVG).

One bar per command, ours in a darker colour, with the floor pgwrap's
startup target is set against (floor-musl) and that target (its factor
times the floor) as red lines; written beside the Markdown as
STEM-startup.svg.
"""
from .tools import is_ours


def chart(st, path, factor, fname):
    """Startup overhead as horizontal bars (SVG), ours in a darker colour."""
    base = st["direct"]["median"]
    rows = [(k, st[k]["median"] - base) for k in st if k != "direct"]
    top = max(v for _, v in rows) * 1.1
    floor = st[fname]["median"] - base
    bar_h, gap, left, width = 18, 6, 150, 460
    height = len(rows) * (bar_h + gap) + 40
    x = lambda v: left + v / top * width
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 70}" '
             f'height="{height}" font-family="sans-serif" font-size="12">',
             f'<text x="{left}" y="14">startup overhead over /bin/true, us (median)</text>']
    for i, (k, v) in enumerate(rows):
        y = 24 + i * (bar_h + gap)
        fill = "#2b5797" if is_ours(k) else "#9fb6d6"
        parts.append(f'<text x="{left - 6}" y="{y + 13}" text-anchor="end">{k}</text>')
        parts.append(f'<rect x="{left}" y="{y}" width="{x(v) - left:.1f}" height="{bar_h}" '
                     f'fill="{fill}"/>')
        parts.append(f'<text x="{x(v) + 4:.1f}" y="{y + 13}">{v:.0f}</text>')
    parts.append(f'<line x1="{x(floor):.1f}" y1="20" x2="{x(floor):.1f}" y2="{height - 10}" '
                 'stroke="#c00" stroke-dasharray="4 3"/>')
    parts.append(f'<line x1="{x(factor * floor):.1f}" y1="20" x2="{x(factor * floor):.1f}" '
                 f'y2="{height - 10}" stroke="#c00" stroke-dasharray="1 3"/>')
    parts.append(f'<text x="{x(factor * floor) + 3:.1f}" y="{height - 2}" fill="#c00">'
                 f'{fname}, {factor}x {fname}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")
