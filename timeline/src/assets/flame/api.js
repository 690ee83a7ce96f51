// jtrace flame graph viewer: state and a programmatic API for tests and
// benchmarks, then the first draw.

const perf = { parse_ms: T_PREP - T_START, nodes: MAIN.n };
function writeState() {
  $('state').textContent = JSON.stringify({ nodes: MAIN.n, draws, last_draw_ms: lastDrawMs, frames: view.framesDrawn, perf });
}

// Totals of the root by cause name, in profile k (0: the page's, or after).
function rootTotals(k) {
  const out = {};
  for (let c = 0; c < NC; c++) {
    const t = causeTotal(MAIN, k, 0, c);
    if (t) out[CAUSES[c]] = t;
  }
  return out;
}

window.jtraceFlame = {
  perf,
  nodes: () => view.T.n,
  // Distinct (stack, cause) pairs with own time: the collapsed lines.
  stacks(k = 0) {
    let n = 0;
    for (const v of OWN[k]) if (v) n += v.length / 2;
    return n;
  },
  totals: () => rootTotals(0),
  totalsBefore: () => (DIFF ? rootTotals(1) : null),
  rootValue: () => value(view.T, view.k, 0, view.sel),
  search(q) { setSearch(q); return matchedTotal(); },
  matchedText: () => $('matched').textContent,
  selectCause(name) { setCause(name === 'all' || name === 'off' ? name : String(CAUSES.indexOf(name))); return view.sel; },
  invert(on) { setInverted(on); return view.T.n; },
  zoomed: () => nameOf(view.T, view.zoom),
  zoomedValue: () => value(view.T, view.k, view.zoom, view.sel),
  locate,
  // The report's rows (report --html): kind, name, wall, cpu, off by cause.
  reportRows: () => reportRows,
  // The root's children in the graph shown, widest first.
  topFrames() {
    const T = view.T, out = [];
    for (let c = 1; c < T.end[0]; c = T.end[c]) out.push({ name: nameOf(T, c), value: value(T, view.k, c, view.sel) });
    return out.filter((f) => f.value > 0).sort((a, b) => b.value - a.value);
  },
  tooltip: () => (tip.hidden ? '' : tip.textContent),
  framesDrawn: () => view.framesDrawn,
  lastDrawMs: () => lastDrawMs,
  // Largest own-time changes of a diff.
  topChanges: (k) => topChanges(k).map((t) => ({ delta: t.delta, path: t.path })),
  // The largest change of any frame's total (0: the traces are alike).
  maxAbsDelta() {
    if (!DIFF) return 0;
    let m = 0;
    for (let i = 0; i < MAIN.n; i++) m = Math.max(m, Math.abs(value(MAIN, 0, i, ALL_SEL) - value(MAIN, 1, i, ALL_SEL)));
    return m;
  },
  // The time of the frames named exactly `name` (not nested in another), by cause.
  frameTotals(name) {
    const out = {};
    for (let i = 0; i < MAIN.n;) {
      if (nameOf(MAIN, i) === name) {
        for (let c = 0; c < NC; c++) {
          const t = causeTotal(MAIN, 0, i, c);
          if (t) out[CAUSES[c]] = (out[CAUSES[c]] || 0) + t;
        }
        i = MAIN.end[i];
      } else i++;
    }
    return out;
  },
};

refresh();
perf.first_draw_ms = lastDrawMs;
perf.first_paint_ms = performance.now();

// `#bench`: a fixed sequence of interactions, timed, into the state.
if (location.hash === '#bench') {
  const timed = (f) => { const t = performance.now(); f(); return performance.now() - t; };
  const b = {};
  let deep = 0;
  for (let d = 0; d < 8; d++) {
    let best = -1, bv = -1;
    for (let c = deep + 1; c < MAIN.end[deep]; c = MAIN.end[c]) {
      const v = value(MAIN, 0, c, ALL_SEL);
      if (v > bv) { bv = v; best = c; }
    }
    if (best < 0) break;
    deep = best;
  }
  b.full = timed(() => draw());
  b.zoom = timed(() => zoomTo(deep));
  b.zoom_depth = MAIN.depth[deep];
  b.unzoom = timed(() => zoomTo(0));
  b.search = timed(() => setSearch('m1'));
  b.matched = matchedTotal();
  b.tooltip_root = timed(() => describe(0));
  b.invert = timed(() => setInverted(true));
  b.inverted_nodes = view.T.n;
  b.invert_back = timed(() => setInverted(false));
  b.frames = view.framesDrawn;
  perf.bench = b;
  writeState();
}
