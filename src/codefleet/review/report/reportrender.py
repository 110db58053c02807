"""Drawing a `reportblocks.Report`: Markdown for a pull request, one self-contained HTML file.

Markdown uses what a pull request description renders: headings, tables,
fenced code, `<details>` for long output; the timeline has no Markdown form
and is left out there. The HTML is one file with its style inline, no
script, no font, no request to anywhere: it reads the same offline, in a mail
attachment or a CI artifact. Every string from the run (titles, paths,
output) is escaped; a `code span` in backticks is the only markup text carries.
Both renderings end in `safetext.terminal_safe`: a control character of the
run's text (the template has none) is shown as an escape, whether the file is
opened in a browser or `cat` in a terminal.
In Markdown, text outside code spans has every character Markdown or HTML
would act on backslash-escaped and its line breaks folded, and a fence is
longer than any run of backticks inside it.
"""

from __future__ import annotations

import html
import re

from codefleet.review.report.reportblocks import Block, Code, Facts, Para, Report, Table, Timeline
from codefleet.safetext import terminal_safe

__all__ = ["render_html", "render_markdown"]

_CODE_SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")  # single backticks: a longer run is text
# What Markdown (with GitHub's tables and strikethrough) or HTML could read as markup.
_MD_ACTIVE = re.compile(r"[\\`*_{}\[\]<>&|~#!]")
_BACKTICKS = re.compile(r"`+")


# -- Markdown --------------------------------------------------------------------------------


def _md_text(text: str, in_table: bool = False) -> str:
    """`text` on one line, rendering as itself: its code spans kept, everything else escaped."""
    flat = " ".join(text.split())
    parts, at = [], 0
    for span in _CODE_SPAN.finditer(flat):
        parts.append(_MD_ACTIVE.sub(r"\\\g<0>", flat[at : span.start()]))
        parts.append(span.group(0).replace("|", "\\|") if in_table else span.group(0))
        at = span.end()
    parts.append(_MD_ACTIVE.sub(r"\\\g<0>", flat[at:]))
    return "".join(parts)


def _md_cell(text: str) -> str:
    return _md_text(text, in_table=True) or " "


def _fence(text: str) -> str:
    """Backticks enough to fence `text`: one more than its longest run, at least three."""
    return "`" * max(3, 1 + max((len(run) for run in _BACKTICKS.findall(text)), default=0))


def _md_block(block: Block) -> str:
    match block:
        case Para(text=text, tone=tone):
            return f"**{_md_text(text)}**" if tone == "bad" else _md_text(text)
        case Facts(items=items):
            return "\n".join(f"- **{_md_text(k)}**: {_md_text(v)}" for k, v in items)
        case Table(columns=columns, rows=rows):
            head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns)
            body = "\n".join("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows)
            return f"{head}\n{body}"
        case Code(text=text, label=label):
            fence = _fence(text)
            return (
                f"<details><summary>{html.escape(label or 'output')}</summary>\n\n"
                f"{fence}text\n{text}\n{fence}\n\n</details>"
            )
        case Timeline():
            return ""
    raise TypeError(f"no Markdown for {block!r}")


def render_markdown(report: Report) -> str:
    parts = [f"## {report.title}: {report.verdict}"]
    for section in report.sections:
        blocks = [text for b in section.blocks if (text := _md_block(b))]
        if blocks:
            parts.append(f"### {section.title}\n\n" + "\n\n".join(blocks))
    parts.append(f"<sub>made by `codefleet report` at {report.generated_at}</sub>")
    return terminal_safe("\n\n".join(parts) + "\n")


# -- HTML ------------------------------------------------------------------------------------

STYLE = """
:root { --ok: #1a7f37; --bad: #cf222e; --warn: #bf8700; --veto: #e16f24; --ink: #1f2328;
  --muted: #59636e; --line: #d1d9e0; --soft: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
  margin: 0 auto; max-width: 1100px; padding: 28px 24px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; display: flex; align-items: center; gap: 12px; }
h2 { font-size: 18px; margin: 32px 0 10px; padding-bottom: 6px; border-bottom: 1px solid var(--line); }
.verdict { font-size: 14px; padding: 2px 10px; border-radius: 999px; color: #fff; }
.verdict.PASS { background: var(--ok); } .verdict.FAIL { background: var(--bad); }
.verdict.RUNNING { background: var(--warn); }
.stamp { color: var(--muted); font-size: 13px; margin: 0 0 8px; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 18px; margin: 0; }
dt { color: var(--muted); } dd { margin: 0; }
table { border-collapse: collapse; width: 100%; font-size: 14px; }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--soft); font-weight: 600; }
tr.ok td:first-child { box-shadow: inset 3px 0 var(--ok); }
tr.bad td:first-child { box-shadow: inset 3px 0 var(--bad); }
p.bad { color: var(--bad); font-weight: 600; }
code { font: 13px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: var(--soft);
  padding: 1px 4px; border-radius: 4px; }
pre { font: 12.5px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #0d1117;
  color: #e6edf3; padding: 12px 14px; border-radius: 6px; overflow-x: auto; margin: 6px 0 14px; }
figure { margin: 0; } figcaption { color: var(--muted); font-size: 13px; margin-top: 6px; }
svg text { font: 12px system-ui, sans-serif; fill: var(--ink); }
.legend span { display: inline-flex; align-items: center; gap: 6px; margin-right: 14px; }
.legend i { width: 12px; height: 12px; border-radius: 3px; display: inline-block; }
"""

OUTCOME_COLORS = {
    "succeeded": "#2da44e",
    "veto": "#e16f24",
    "verify_failed": "#d4a72c",
    "integration_failed": "#d4a72c",  # charged like verify_failed, coloured alike
    "running": "#0969da",
    "landing": "#bf3989",  # finished, waiting to land (its runner was free)
    "cancelled": "#8c959f",
}
FAILED_COLOR = "#cf222e"
LANE_H, BAR_H, LEFT, WIDTH = 34, 20, 96, 1040


def _inline(text: str) -> str:
    return _CODE_SPAN.sub(r"<code>\1</code>", html.escape(text))


def _html_table(block: Table) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in block.columns)
    rows = []
    for i, row in enumerate(block.rows):
        tone = block.tones[i] if i < len(block.tones) else ""
        cells = "".join(f"<td>{_inline(c)}</td>" for c in row)
        rows.append(f'<tr class="{tone}">{cells}</tr>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _timeline(block: Timeline) -> str:
    span = max(block.span_s, 1e-3)
    scale = (WIDTH - LEFT - 10) / span
    height = LANE_H * len(block.lanes) + 30
    lane_of = {name: i for i, (name, _) in enumerate(block.lanes)}
    parts = [
        f'<svg role="img" aria-label="attempts per runner over time" viewBox="0 0 {WIDTH} {height}" width="100%">'
    ]
    for i, (name, bars) in enumerate(block.lanes):
        y = i * LANE_H + 6
        parts.append(f'<text x="0" y="{y + 15}">{html.escape(name)}</text>')
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - 10}" y1="{y + BAR_H + 5}" y2="{y + BAR_H + 5}" stroke="#d1d9e0"/>'
        )
        for bar in bars:
            x, w = LEFT + bar.start_s * scale, max(2.0, (bar.end_s - bar.start_s) * scale)
            color = OUTCOME_COLORS.get(bar.outcome, FAILED_COLOR)
            label = f"{bar.task_id}·{bar.attempt}"
            parts.append(
                f"<g><title>{html.escape(f'{bar.task_id} attempt {bar.attempt}: {bar.outcome}')}</title>"
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{BAR_H}" rx="4" fill="{color}"/>'
                + (
                    f'<text x="{x + 4:.1f}" y="{y + 14}" style="fill:#fff">{html.escape(label)}</text>'
                    if w > 34
                    else ""
                )
                + "</g>"
            )
    for runner, at, path in block.vetoes:
        y = lane_of.get(runner, 0) * LANE_H + 6
        x = LEFT + at * scale
        parts.append(
            f"<g><title>{html.escape(f'veto: {runner} refused {path}')}</title>"
            f'<path d="M{x:.1f},{y - 3} l6,{BAR_H / 2 + 3} l-6,{BAR_H / 2 + 3} l-6,-{BAR_H / 2 + 3} z" '
            f'fill="#cf222e" stroke="#fff"/></g>'
        )
    axis_y = LANE_H * len(block.lanes) + 20
    for k in range(5):
        t = span * k / 4
        anchor = "end" if k == 4 else "middle"
        parts.append(
            f'<text x="{LEFT + t * scale:.1f}" y="{axis_y}" text-anchor="{anchor}" '
            f'style="fill:#59636e">{t:.2f} s</text>'
        )
    parts.append("</svg>")
    legend = "".join(
        f'<span><i style="background:{c}"></i>{html.escape(k.replace("_", " "))}</span>'
        for k, c in [*OUTCOME_COLORS.items(), ("failed", FAILED_COLOR)]
    )
    caption = f'<figcaption class="legend">{legend}<span>◆ refused write</span></figcaption>'
    return f"<figure>{''.join(parts)}{caption}</figure>"


def _html_block(block: Block) -> str:
    match block:
        case Para(text=text, tone=tone):
            return f'<p class="{tone}">{_inline(text)}</p>'
        case Facts(items=items):
            pairs = "".join(f"<dt>{html.escape(k)}</dt><dd>{_inline(v)}</dd>" for k, v in items)
            return f"<dl>{pairs}</dl>"
        case Table():
            return _html_table(block)
        case Code(text=text, label=label):
            caption = f"<figcaption>{html.escape(label)}</figcaption>" if label else ""
            return f"<figure><pre>{html.escape(text)}</pre>{caption}</figure>"
        case Timeline():
            return _timeline(block)
    raise TypeError(f"no HTML for {block!r}")


def render_html(report: Report) -> str:
    sections = "".join(
        f'<section id="{html.escape(s.key)}"><h2>{html.escape(s.title)}</h2>'
        + "".join(_html_block(b) for b in s.blocks)
        + "</section>"
        for s in report.sections
    )
    verdict = html.escape(report.verdict)
    return terminal_safe(
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(report.title)}: {verdict}</title>"
        f"<style>{STYLE}</style></head><body>"
        f'<h1>{html.escape(report.title)} <span class="verdict {verdict}">{verdict}</span></h1>'
        f'<p class="stamp">made by <code>codefleet report</code> at {html.escape(report.generated_at)}</p>'
        f"{sections}</body></html>\n"
    )
