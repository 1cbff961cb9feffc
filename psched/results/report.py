"""``report.html``: a self-contained visual report of an ``--out`` folder.

One HTML file with every figure inlined as a base64 PNG (no network, no script from
elsewhere): the trace and cluster named at the top, the provenance and warnings, the summary
table, the policies side by side (utility with the dual bound, completion times,
rejections), then per policy its executed schedule (Gantt chart), its utilisation over time
per pool and resource and, for a policy that reports price bounds (the OASiS family), the
price of each pool over time. Built from the files alone: ``psched report DIR`` rebuilds it.
"""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path
from typing import Any

from psched.results.report_data import RunFiles, load_run, mean_prices, usage_of

__all__ = ["REPORT_NAME", "render_report", "write_report"]

REPORT_NAME = "report.html"

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1200px;color:#222}
h1{font-size:1.4em} h2{font-size:1.15em;border-bottom:1px solid #ccc;margin-top:2em}
table{border-collapse:collapse;font-size:.8em;margin:.5em 0}
.wide{overflow-x:auto;max-width:100%}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}
th{background:#f3f3f3} td.l,th.l{text-align:left}
img.chart{max-width:100%;display:block;margin:.5em 0}
p.note{font-size:.85em;color:#555} .warn{color:#a04000}
"""

#: Columns of the report's summary table: (summary key, header, format).
_TABLE: tuple[tuple[str, str, str], ...] = (
    ("total_utility", "utility", ".1f"), ("dual_bound", "dual bound", ".1f"),
    ("dual_per_utility", "dual/util", ".3f"), ("admitted", "admit", "d"),
    ("rejected", "reject", "d"), ("completed", "done", "d"), ("unfinished", "unfin", "d"),
    ("jct_mean_h", "JCT mean (h)", ".2f"), ("jct_p99_h", "JCT p99 (h)", ".2f"),
    ("queueing_mean_h", "queue (h)", ".2f"), ("makespan_h", "makespan (h)", ".1f"),
    ("deadline_met_fraction", "deadline met", ".2f"), ("decision_ms_p50", "dec p50 (ms)", ".2f"),
    ("promised", "promised", "d"), ("kept", "kept", "d"), ("restated", "re-stated", "d"),
    ("missed", "missed", "d"), ("wasted_ws", "wasted (worker-slots)", ".1f"),
    ("background_ws", "background (worker-slots)", ".1f"),
)


def _img(png: bytes, alt: str, chart_id: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f'<img class="chart" id="{html.escape(chart_id)}" alt="{html.escape(alt)}" '
            f'src="data:image/png;base64,{data}">')


def _fmt(value: Any, spec: str) -> str:
    if value is None:
        return "-"
    try:
        return format(value, spec)
    except (TypeError, ValueError):
        return html.escape(str(value))


def _title(run: RunFiles) -> tuple[str, str]:
    p = run.summary["params"]
    source = p.get("trace") or (f"scenario {p['scenario']}" if p.get("scenario") else "jobs")
    cluster = (f"{p.get('worker_servers', '?')} worker + {p.get('ps_servers', '?')} PS servers "
               f"({p.get('cluster_source') or p.get('cluster') or 'cluster.json'})")
    return str(source), cluster


def _head(run: RunFiles) -> list[str]:
    source, cluster = _title(run)
    p = run.summary["params"]
    out = [f"<h1>psched report: {html.escape(os.path.basename(source))}</h1>",
           f"<p><b>Trace:</b> {html.escape(source)}<br><b>Cluster:</b> {html.escape(cluster)}"
           f"<br><b>Jobs:</b> {p.get('n_jobs', '?')}; <b>horizon:</b> {run.horizon} slots of "
           f"{run.slot_seconds:g} s</p>"]
    warns = run.summary.get("warnings") or []
    if warns:
        out.append("<ul>" + "".join(f'<li class="warn">warning: {html.escape(w)}</li>'
                                    for w in warns) + "</ul>")
    rows = [f"<tr><th class=l>policy</th>{''.join(f'<th>{h}</th>' for _, h, _ in _TABLE)}</tr>"]
    for name, pf in run.policies.items():
        cells = "".join(f"<td>{_fmt(pf.summary.get(k), f)}</td>" for k, _, f in _TABLE)
        rows.append(f"<tr><td class=l>{html.escape(name)}</td>{cells}</tr>")
    out.append(f"<div class=wide><table id=summary>{''.join(rows)}</table></div>")
    out.append("<p class=note>dual/util is the dual bound over the utility earned (the "
               "utility column, counted alike for every policy): an upper bound on OPT/ALG "
               "certified by the dual, not OPT/ALG itself.</p>")
    prov = run.summary.get("provenance") or {}
    if prov:
        items = "".join(f"<tr><td class=l>{html.escape(str(k))}</td><td class=l>"
                        f"{html.escape(str(v))}</td></tr>" for k, v in prov.items())
        out.append(f"<details><summary>Provenance</summary><table>{items}</table></details>")
    return out


def _policy_section(run: RunFiles, name: str, max_rects: int) -> list[str]:
    from psched.results import report_plots

    png = report_plots.png
    usage = usage_of(run, name)
    fig, note = report_plots.gantt(run, name, usage, max_rects=max_rects)
    out = [f"<h2>{html.escape(name)}</h2>",
           _img(png(fig), f"{name}: executed schedule", f"gantt-{name}"),
           f"<p class=note>{html.escape(note)}.</p>",
           _img(png(report_plots.utilisation(run, name, usage)), f"{name}: utilisation",
                f"util-{name}")]
    prices = mean_prices(run, name, usage)
    if prices is not None:
        out.append(_img(png(report_plots.prices(run, name, usage, prices)), f"{name}: prices",
                        f"prices-{name}"))
        out.append("<p class=note>Mean over the pool's servers of each server's price at the "
                   "usage executed in that slot"
                   + (f" (mean usage over {usage.bucket_slots} slots)"
                      if usage.bucket_slots > 1 else "") + ".</p>")
    return out


def render_report(run: RunFiles, *, max_rects: int = 40000) -> str:
    """The report's HTML text."""
    from psched.results.report_plots import comparison, jct_cdf, png

    source, cluster = _title(run)
    body = _head(run)
    body.append("<h2>Policies side by side</h2>")
    body.append(_img(png(comparison(run)), "policies side by side", "comparison"))
    body.append(_img(png(jct_cdf(run)), "completion-time CDF", "jct-cdf"))
    for name in run.policies:
        body.extend(_policy_section(run, name, max_rects))
    title = html.escape(f"psched report: {os.path.basename(source)} on {cluster}")
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            f"<title>{title}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def write_report(folder: str | os.PathLike[str], *, max_rects: int = 40000) -> Path:
    """(Re)write ``folder/report.html`` from the folder's files; return its path.

    The file is written beside as a temporary file and renamed, so a failure leaves the old
    report (or none) in place.
    """
    folder = Path(folder)
    text = render_report(load_run(folder), max_rects=max_rects)
    dest = folder / REPORT_NAME
    tmp = folder / f".{REPORT_NAME}.tmp-{os.getpid()}"
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest
