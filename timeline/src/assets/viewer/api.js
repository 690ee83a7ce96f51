// jtrace timeline viewer: state and a programmatic API for tests and
// benchmarks, then the first draw.

// ---- state for tests and benchmarks ---------------------------------------
const perf = { parse_ms: T_PARSED - T_START, prep_ms: T_PREP - T_PARSED, events: nEvents };
function writeState() {
  $('state').textContent = JSON.stringify({
    lanes: lanes.filter((l) => l.th).length, view: [vs, ve], draws, last_draw_ms: lastDrawMs, perf,
    tip: tip.hidden ? '' : tip.textContent,
  });
}

// Programmatic access for tests (real mouse events are still what they send).
window.jtrace = {
  perf,
  // The view's flame graph: open or close it; its totals by cause.
  flame(open) { toggleFlame(open); return open ? this.flameTotals() : null; },
  flameTotals() {
    if (!flameTree) return null;
    const out = {};
    CAUSES.forEach((c, i) => { if (flameTree.tot[0][i]) out[c] = flameTree.tot[0][i]; });
    return out;
  },
  flameSelection: () => flameSel,
  // Names of the frames the panel draws.
  flameFrames() {
    const out = [];
    eachFrame(flameTree, fcv.clientWidth, (n) => { if (n > 0 && flameTree.name[n] >= 0) out.push(frameName(flameTree.name[n])); });
    return out;
  },
  // Selects the widest frame named `name` (-1: none); the outlined intervals.
  flameClick(name) {
    let best = -1, bw = 0;
    eachFrame(flameTree, fcv.clientWidth, (n, x, w) => {
      if (n > 0 && flameTree.name[n] >= 0 && frameName(flameTree.name[n]) === name && w > bw) { best = n; bw = w; }
    });
    flameSelect(best);
    return best;
  },
  flameOutlined() {
    if (!flameHi) return [];
    const out = [];
    for (const l of lanes) {
      if (!l.th) continue;
      const of = l.th.offs;
      for (let j = 0; j < of.s.length; j++) if (flameHi.stacks.has(of.q[j]) && of.e[j] > vs && of.s[j] < ve) out.push({ tid: l.th.tid, j, stack: D.stacks[of.q[j]].map(frameName) });
    }
    return out;
  },
  lanes: () => lanes.filter((l) => l.th).map((l) => ({ tid: l.th.tid, name: l.th.name, y: AXIS_H + l.y - scrollY, h: l.h })),
  view: () => ({ start: vs, end: ve }),
  lastDrawMs: () => lastDrawMs,
  tooltip: () => (tip.hidden ? '' : tip.textContent),
  // Canvas-relative and page coordinates of the widest visible span of a
  // method (substring match on Class.method), or null.
  locate(q) {
    let best = null;
    for (const l of lanes) {
      if (!l.th) continue;
      const th = l.th, sp = th.spans;
      for (let j = 0; j < sp.s.length; j++) {
        if (!mname(sp.m[j]).includes(q)) continue;
        const x0 = Math.max(X(th.ss[j]), LABEL_W), x1 = Math.min(X(th.se[j]), W);
        const y = AXIS_H + l.y - scrollY + STATE_H + 1 + sp.z[j] * ROW + ROW / 2;
        if (x1 - x0 < 2 || y < AXIS_H || y > H) continue;
        if (!best || x1 - x0 > best.w) best = { x: (x0 + x1) / 2, y, w: x1 - x0, method: mname(sp.m[j]), tid: th.tid };
      }
    }
    if (best) { const r = cv.getBoundingClientRect(); best.pageX = r.left + best.x; best.pageY = r.top + best.y; }
    return best;
  },
  // Page coordinates of the widest visible off-CPU interval whose waker
  // has a lane, or null.
  locateWoken() {
    let best = null;
    for (const l of lanes) {
      if (!l.th) continue;
      const of = l.th.offs;
      for (let j = 0; j < of.s.length; j++) {
        if (of.w[j] < 0 || of.w[j] === l.th.tid || !laneOf(of.w[j])) continue;
        const x0 = Math.max(X(of.s[j]), LABEL_W), x1 = Math.min(X(of.e[j]), W), y = AXIS_H + l.y - scrollY + STATE_H / 2;
        if (x1 - x0 < 2 || y < AXIS_H || y > H) continue;
        if (!best || x1 - x0 > best.w) best = { x: (x0 + x1) / 2, y, w: x1 - x0, tid: l.th.tid, waker: of.w[j] };
      }
    }
    if (best) { const r = cv.getBoundingClientRect(); best.pageX = r.left + best.x; best.pageY = r.top + best.y; }
    return best;
  },
  // Page coordinates of the widest visible off-CPU interval whose
  // evidence text (or cause name) contains q, or null.
  // The widest visible off-CPU interval whose evidence contains q (or of
  // cause q), on the lane of thread `name` if given.
  locateOff(q, name) {
    let best = null;
    for (const l of lanes) {
      if (!l.th || (name !== undefined && l.th.name !== name)) continue;
      const of = l.th.offs;
      for (let j = 0; j < of.s.length; j++) {
        const c = mainCause(of, j);
        if (!(D.strings[of.x[j]].includes(q) || (c >= 0 && CAUSES[c] === q))) continue;
        const x0 = Math.max(X(of.s[j]), LABEL_W), x1 = Math.min(X(of.e[j]), W), y = AXIS_H + l.y - scrollY + STATE_H / 2;
        if (x1 - x0 < 2 || y < AXIS_H || y > H) continue;
        if (!best || x1 - x0 > best.w) best = { x: (x0 + x1) / 2, y, w: x1 - x0, tid: l.th.tid, evidence: D.strings[of.x[j]] };
      }
    }
    if (best) { const r = cv.getBoundingClientRect(); best.pageX = r.left + best.x; best.pageY = r.top + best.y; }
    return best;
  },
  // GC/safepoint bands of the last frame: kind, number, canvas x range.
  bands: () => bandsDrawn.map((b) => ({ kind: WIN[b.i].kind, n: WIN[b.i].n, x0: b.x0, x1: b.x1, top: cv.getBoundingClientRect().top })),
  windows: () => WIN.length,
  // A thread's state segments as laid out: [[start, end, cause], ...].
  segments(tid) {
    const th = byTid.get(tid);
    const out = [];
    for (let g = 0; g < th.nseg; g++) out.push([th.gs[g], th.ge[g], th.gc[g]]);
    return out;
  },
  // Labels of the time axis as last drawn.
  ticks: () => ticks.slice(),
  // The pinned item (e.g. the current search match), or null.
  pinned: () => (pinned && pinned.kind === 'span' ? { tid: pinned.th.tid, method: mname(pinned.th.spans.m[pinned.j]), start: pinned.th.ss[pinned.j], match: hitPos + 1 } : null),
  // The critical paths (--why), the one shown, and what the last frame drew of it.
  paths: () => PATHS.map((p) => p.label),
  selectPath: (i) => { selectPath(i); draw(); return pathDrawn; },
  pathDrawn: () => pathDrawn,
  // Group headers of the lanes, as drawn.
  groups: () => lanes.filter((l) => !l.th).map((l) => (MULTI_PROC ? `${procLabel(l.pid)} — ${GROUPS[l.group]}` : GROUPS[l.group])),
  // Lanes highlighted as the waker of the hovered/pinned interval.
  wakerLanes: () => lanes.filter((l) => l.waker).map((l) => l.th.tid),
  // Times a zoom sequence (for benchmarks): returns ms per draw.
  bench() {
    const out = {}, cx = LABEL_W + (W - LABEL_W) / 2;
    const t = () => { const a = performance.now(); draw(); return performance.now() - a; };
    [vs, ve] = FULL(); out.full = t();
    zoomAt(0.1, cx); out.zoom10 = t();
    zoomAt(0.01, cx); out.zoom1000 = t();
    pan(200); out.pan = t();
    [vs, ve] = FULL(); out.full_again = t();
    // Search over every span, the first "find next" (sorts the matches),
    // then the next one, and the details of the widest span and interval.
    let a = performance.now();
    setSearch(D.methods.length ? D.methods[D.methods.length - 1][1] : '');
    out.search = performance.now() - a;
    a = performance.now(); findNext(1); out.find_first = performance.now() - a;
    a = performance.now(); findNext(1); out.find_next = performance.now() - a;
    out.matches = searchCount;
    setSearch(''); pinned = null; pin.hidden = true;
    [vs, ve] = FULL();
    const th = D.threads[0];
    a = performance.now();
    if (th && th.spans.s.length) details({ kind: 'span', th, j: 0 });
    if (th && th.offs.s.length) details({ kind: 'off', th, j: 0, cause: th.gc[0] });
    if (WIN.length) details({ kind: 'window', j: 0 });
    out.details = performance.now() - a;
    out.full_with_bands = t();
    out.bands = bandsDrawn.length;
    return out;
  },
};

resize();
layout();
// Open on the slowest critical path (unless the URL asks for a window).
if (pathSel >= 0 && !/view=/.test(location.hash)) selectPath(pathSel);
draw();
perf.first_draw_ms = lastDrawMs;
perf.first_paint_ms = performance.now(); // since navigation start
requestAnimationFrame(() => { perf.first_frame_ms = performance.now(); writeState(); });
if (location.hash === '#bench') { perf.bench = window.jtrace.bench(); writeState(); }
window.jtrace.ready = true;
