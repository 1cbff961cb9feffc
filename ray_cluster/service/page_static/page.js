"use strict";
// The live page of a psched service: it long-polls /api/state and draws the document as SVG
// (no library, no request beyond this origin). See ray_cluster/service/page.py for the
// document's fields.
(() => {
  const query = new URLSearchParams(location.search);
  const token = query.get("token") || sessionStorage.getItem("psched-token") || "";
  if (query.get("token")) {
    sessionStorage.setItem("psched-token", token);
    history.replaceState(null, "", location.pathname); // the token leaves the address bar
  }
  const headers = token ? { Authorization: "token " + token } : {};
  // the report's palette (matplotlib tab10 then Dark2): a job has the same colour everywhere
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22", "#17becf", "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e",
    "#e6ab02", "#a6761d", "#666666"];
  // one colour per resource of the document (gpu, cpu, memory, storage, bandwidth)
  const RES_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];
  const NS = "http://www.w3.org/2000/svg";
  const KIND = ["ran", "runs now", "planned"];
  const $ = (id) => document.getElementById(id);
  let changes = -1;
  let last = null;
  let skew = 0; // server clock minus ours, ms

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const colour = (i) => PALETTE[i % PALETTE.length];
  const fmt = (v, d = 2) => (v === null || v === undefined ? "" : Number(v).toFixed(d));
  const show = (v) => (v === null || v === undefined ? "" : String(v));

  function el(tag, attrs = {}, parent = null, text = null) {
    const e = tag.startsWith("svg:") ? document.createElementNS(NS, tag.slice(4))
      : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== null) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  function setConn(ok, text) {
    const c = $("conn");
    c.textContent = text;
    c.className = "conn " + (ok ? "ok" : "bad");
  }

  async function poll() {
    for (;;) {
      let r;
      try {
        r = await fetch(`/api/state?after=${changes}`, { headers, cache: "no-store" });
      } catch (err) {
        setConn(false, "service unreachable; retrying");
        await sleep(2000);
        continue;
      }
      if (r.status === 401) {
        setConn(false, "token refused");
        $("error").hidden = false;
        $("error").textContent = "The token was refused: open the address 'psched page --dir DIR' prints.";
        await sleep(5000);
        continue;
      }
      if (!r.ok) {
        setConn(false, `HTTP ${r.status}; retrying`);
        await sleep(2000);
        continue;
      }
      const doc = await r.json();
      skew = doc.now * 1000 - Date.now();
      if (doc.changes !== changes) {
        changes = doc.changes;
        last = doc;
        render(doc);
      }
      setConn(true, "live");
    }
  }

  function render(d) {
    const s = d.service;
    $("policy").textContent = s.policy;
    $("slot").textContent = s.slot;
    $("phase").textContent = `(${s.phase})`;
    $("slotlen").textContent = s.slot_seconds;
    const b = s.boundary_ms;
    $("boundary").textContent = b.n ? `${fmt(b.last, 1)} ms (p50 ${fmt(b.p50, 1)}, p99 ${fmt(b.p99, 1)} over ${b.n})` : "-";
    const err = $("error");
    err.hidden = !s.error && s.running;
    err.textContent = s.error ? `service error: ${s.error}` : (s.running ? "" : "the service's loop has stopped");
    jobsTable(d);
    gantt(d);
    lines($("util"), d, d.usage, { title: "pool", max: 1, log: false, unit: "share" });
    const priced = d.prices !== null;
    $("prices-note").textContent = priced ? "At the usage that ran and, ahead, the usage planned."
      : `Policy ${s.policy} sets no prices (the OASiS family does).`;
    $("prices").replaceChildren();
    if (priced) lines($("prices"), d, d.prices, { title: "pool", log: true, unit: "price" });
    eventsTable(d);
  }

  function jobsTable(d) {
    const body = $("jobs").querySelector("tbody");
    body.replaceChildren();
    const counts = d.counts;
    d.jobs.forEach((j) => {
      const tr = el("tr", { "data-job": j.job_id }, body);
      const name = el("td", { class: "l job" }, tr);
      el("span", { class: "swatch" }, name).style.background = colour(j.seq);
      name.appendChild(document.createTextNode(j.job_id));
      const st = el("td", { class: "l state" }, tr);
      el("span", { class: `st st-${j.state}` }, st, j.state);
      el("td", { class: "l decision" }, tr, j.decision);
      el("td", { class: "arrival" }, tr, show(j.arrival));
      const prom = el("td", { class: "promise" }, tr, show(j.promised));
      if (j.restated) prom.title = `re-stated ${j.restated}x, first promised slot ${j.first_promise}`;
      el("td", { class: "plan" }, tr, show(j.planned_completion));
      el("td", { class: "end" }, tr, show(j.completion));
      const prog = el("td", { class: "l progress" }, tr);
      const frac = j.work ? Math.min(1, j.done / j.work) : 0;
      el("i", {}, el("span", { class: "bar" }, prog)).style.width = `${(100 * frac).toFixed(1)}%`;
      prog.appendChild(document.createTextNode(`${fmt(j.done, 1)} / ${j.work}`));
      el("td", { class: "wps" }, tr, `${j.workers}/${j.ps}`);
      el("td", { class: "utility" }, tr, fmt(j.utility, 3));
      el("td", { class: "l loss" }, tr, j.loss || "");
      el("td", { class: "speed" }, tr, j.speed == null ? "" : fmt(j.speed, 2));
    });
    const listed = Object.values(counts).reduce((a, b) => a + b, 0);
    $("counts").textContent = Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(", ") +
      (listed > d.jobs.length ? ` (${d.jobs.length} listed: those in the chart, the live ones, the latest others)` : "");
  }

  // -- the schedule ----------------------------------------------------------------------------
  const LEFT = 150, RIGHT = 16, TOP = 24, WIDTH = 1180;
  const LEGEND = 14; // a line chart's legend row, above the "now" label

  function xScale(d) {
    const [first, end] = d.window;
    const w = (WIDTH - LEFT - RIGHT) / Math.max(1, end - first);
    return { x: (s) => LEFT + (s - first) * w, w, first, end };
  }

  function slotAxis(svg, d, sx, top, bottom) {
    const span = sx.end - sx.first;
    const step = [1, 2, 5, 10, 20, 25, 50, 100, 200, 500].find((k) => span / k <= 16) || 1000;
    for (let s = Math.ceil(sx.first / step) * step; s <= sx.end; s += step) {
      el("svg:line", { class: "grid", x1: sx.x(s), x2: sx.x(s), y1: top, y2: bottom }, svg);
      el("svg:text", { x: sx.x(s), y: bottom + 13, "text-anchor": "middle" }, svg, String(s));
    }
    el("svg:text", { x: (LEFT + WIDTH) / 2, y: bottom + 27, "text-anchor": "middle" }, svg,
      `slot (1 slot = ${d.service.slot_seconds} s)`);
    const t = d.service.slot;
    const ahead = d.service.phase === "run" ? t + 1 : t;
    if (ahead < sx.end) {
      el("svg:rect", { class: "ahead", x: sx.x(ahead), y: top, width: sx.x(sx.end) - sx.x(ahead),
        height: bottom - top }, svg);
    }
    el("svg:rect", { class: "now", x: sx.x(t), y: top, width: sx.w, height: bottom - top }, svg);
    el("svg:line", { class: "nowline", x1: sx.x(t), x2: sx.x(t), y1: top - 6, y2: bottom }, svg);
    // above the plot, below any legend row; right-aligned where it would leave the chart
    const right = sx.x(t) + 90 > WIDTH - RIGHT;
    el("svg:text", { x: right ? sx.x(t) - 3 : sx.x(t) + 3, y: top - 8, id: "now-label",
      class: "now-label", "text-anchor": right ? "end" : "start" }, svg, `now: slot ${t}`);
  }

  function gantt(d) {
    const box = $("gantt");
    box.replaceChildren();
    const order = d.servers.map((s, i) => i).sort((a, b) =>
      (d.servers[a].pool === "worker" ? 0 : 1) - (d.servers[b].pool === "worker" ? 0 : 1) || a - b);
    const row = new Map(order.map((h, r) => [h, r]));
    const ROW = 26, bottom = TOP + ROW * order.length;
    const svg = el("svg:svg", { width: WIDTH, height: bottom + 34, id: "gantt-svg" }, box);
    const sx = xScale(d);
    slotAxis(svg, d, sx, TOP, bottom);
    order.forEach((h, r) => {
      const s = d.servers[h];
      const label = el("svg:text", { x: LEFT - 6, y: TOP + r * ROW + ROW / 2 + 4,
        "text-anchor": "end", class: "server" }, svg,
        s.label.length > 22 ? s.label.slice(0, 21) + "…" : s.label);
      el("svg:title", {}, label, `${s.label}: server ${s.id}`);
    });
    const nWorkers = order.filter((h) => d.servers[h].pool === "worker").length;
    el("svg:line", { class: "pooldiv", x1: LEFT, x2: WIDTH - RIGHT, y1: TOP + nWorkers * ROW,
      y2: TOP + nWorkers * ROW }, svg);
    const stack = new Map();
    for (const [slot, job, server, role, count, kind] of d.cells) {
      const j = d.jobs[job];
      const cap = d.servers[server].capacity;
      const dem = j.demand ? j.demand[role] : cap.map(() => 0);
      const share = Math.min(1, count * Math.max(0, ...dem.map((v, r) => (cap[r] > 0 ? v / cap[r] : 0))));
      const key = `${slot}:${server}`;
      const below = stack.get(key) || 0;
      stack.set(key, below + share);
      const h = (ROW - 4) * Math.min(share, Math.max(0, 1 - below));
      if (h <= 0) continue;
      const y = TOP + row.get(server) * ROW + 2 + (ROW - 4) * Math.min(1, below);
      const rect = el("svg:rect", { x: sx.x(slot) + 0.5, y, width: Math.max(1, sx.w - 1), height: h,
        fill: colour(j.seq), "fill-opacity": [1, 1, 0.35][kind] * (role ? 0.55 : 1),
        stroke: kind === 2 ? colour(j.seq) : "none", "stroke-dasharray": kind === 2 ? "3 2" : "",
        class: `cell k${kind}`, "data-job": j.job_id, "data-slot": slot }, svg);
      el("svg:title", {}, rect, `${j.job_id}: ${count} ${role ? "PS" : "worker(s)"} on ${d.servers[server].id}, slot ${slot} (${KIND[kind]})`);
    }
    const ran = d.cells.filter((c) => c[5] < 2).length, planned = d.cells.length - ran;
    $("gantt-note").textContent = `Slots ${d.window[0]}–${d.window[1] - 1} (up to 40 back, the plans ahead up to 80, at most 5,000 placements: nearest the current slot first): ` +
      `${ran} container placements ran or run now (solid), ${planned} planned ahead (pale, dashed; ` +
      `shaded region). Height = share of the server (dominant resource); PS paler; colour = job.`;
  }

  // -- utilisation and prices --------------------------------------------------------------------
  function lines(box, d, series, opt) {
    box.replaceChildren();
    for (const pool of ["worker", "ps"]) {
      const rows = series[pool];
      if (!rows) continue;
      const H = 150, top = TOP + LEGEND, bottom = top + H;
      const svg = el("svg:svg", { width: WIDTH, height: bottom + 34, id: `${opt.unit}-${pool}` }, box);
      const sx = xScale(d);
      slotAxis(svg, d, sx, top, bottom);
      const vals = rows.flat().filter((v) => v !== null && (!opt.log || v > 0));
      let lo = 0, hi = opt.max || Math.max(1e-9, ...vals);
      if (opt.log) {
        lo = Math.log10(Math.min(...vals, hi));
        hi = Math.log10(Math.max(...vals, 1e-300));
        if (hi - lo < 1e-9) { lo -= 0.5; hi += 0.5; }
      }
      const y = (v) => bottom - (H * ((opt.log ? Math.log10(v) : v) - lo)) / (hi - lo);
      for (const f of [0, 0.5, 1]) {
        const v = opt.log ? 10 ** (lo + f * (hi - lo)) : lo + f * (hi - lo);
        el("svg:line", { class: "grid", x1: LEFT, x2: WIDTH - RIGHT, y1: y(v), y2: y(v) }, svg);
        el("svg:text", { x: LEFT - 6, y: y(v) + 4, "text-anchor": "end" }, svg,
          opt.log ? v.toPrecision(2) : v.toFixed(1));
      }
      el("svg:text", { x: LEFT, y: 12, class: "legend-title" }, svg, `${pool === "ps" ? "PS" : "worker"} pool`);
      let shown = 0; // legend entries so far: one per resource the pool has
      d.resources.forEach((res, r) => {
        const cap = d.servers.filter((s) => s.pool === pool).reduce((a, s) => a + s.capacity[r], 0);
        if (!(cap > 0)) return;
        let path = "";
        rows.forEach((row, i) => {
          const v = row[r];
          if (v === null || (opt.log && v <= 0)) return;
          const s = d.window[0] + i;
          path += `${path ? "L" : "M"}${sx.x(s)},${y(v)}L${sx.x(s + 1)},${y(v)}`;
        });
        if (path) {
          el("svg:path", { d: path, fill: "none", stroke: RES_COLOURS[r], "stroke-width": 1.6,
            class: `series res-${res}` }, svg);
        }
        // the series' colour: set as a style, which the stylesheet's text colour cannot override
        el("svg:text", { x: LEFT + 90 + 130 * shown++, y: 12, class: `legend res-${res}` }, svg,
          `— ${res}`).style.fill = RES_COLOURS[r];
      });
    }
  }

  function eventsTable(d) {
    const body = $("events").querySelector("tbody");
    body.replaceChildren();
    for (const e of d.events) {
      const tr = el("tr", {}, body);
      el("td", { class: "l" }, tr, new Date(e.at * 1000).toLocaleTimeString());
      el("td", {}, tr, show(e.slot));
      el("td", { class: "l" }, tr, e.job);
      el("td", { class: "l" }, tr, e.kind);
      el("td", { class: "l info" }, tr, e.info);
    }
  }

  setInterval(() => { // how long the slot in progress has run
    if (!last) return;
    const s = last.service;
    const c = $("clock");
    if (s.phase === "run" && s.slot_started > 0) {
      const ran = (Date.now() + skew) / 1000 - s.slot_started;
      c.textContent = `running ${Math.max(0, ran).toFixed(0)} s of ${s.slot_seconds} s`;
    } else {
      c.textContent = s.phase === "wait" ? "waiting for the boundary" : "";
    }
  }, 500);

  poll();
})();
