// jtrace timeline viewer. Self-contained: reads the JSON embedded in the
// page, draws on one canvas, talks to no network.
//
// Layout: one lane per thread; its top row is the thread state (running, or
// off CPU coloured by cause), the rows under it the method spans by depth.
// Drawing is level-of-detail: in every row, items narrower than a pixel are
// merged into a 1-pixel mark and the rest of that pixel is skipped by binary
// search, so a frame costs O(rows x pixels x log n), not O(events).
// GC and safepoint windows are translucent bands across every lane.
(() => {
  'use strict';
  const T_START = performance.now();
  const D = JSON.parse(document.getElementById('data').textContent);
  const T_PARSED = performance.now();

  const CAUSES = D.causes;
  const RUNNING = '#43a047';
  const CAUSE_COLOR = {
    runqueue: '#e53935', monitor: '#8e24aa', wait: '#3949ab', park: '#1e88e5', sleep: '#c0ca33',
    gc: '#fb8c00', safepoint: '#ffb300', socket: '#00acc1', file: '#6d4c41', page_fault: '#d81b60',
    lock_native: '#5e35b1', syscall_other: '#546e7a', unknown: '#b0b0b0',
  };
  const CC = CAUSES.map((c) => CAUSE_COLOR[c] || '#888');
  const RQ = CAUSES.indexOf('runqueue');
  const hexA = (h, a) => `rgba(${parseInt(h.slice(1, 3), 16)},${parseInt(h.slice(3, 5), 16)},${parseInt(h.slice(5, 7), 16)},${a})`;
  const BAND = CC.map((c) => hexA(c, 0.22)), BAND_EDGE = CC.map((c) => hexA(c, 0.75));

  const ROW = 15, STATE_H = 14, LANE_GAP = 7, LABEL_W = 240, AXIS_H = 24, GROUP_H = 20;
  const GROUPS = ['Application threads', 'JVM threads', 'Native threads'];

  // ---- formatting ---------------------------------------------------------
  function fmtDur(ns) {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + ' s';
    if (a >= 1e6) return (ns / 1e6).toFixed(3) + ' ms';
    if (a >= 1e3) return (ns / 1e3).toFixed(a >= 1e5 ? 1 : 3) + ' µs';
    return Math.round(ns) + ' ns';
  }
  function fmtTick(t, step) {
    if (step >= 1e9) return (t / 1e9).toFixed(Math.max(0, -Math.floor(Math.log10(step / 1e9)))) + ' s';
    if (step >= 1e6) return (t / 1e6).toFixed(Math.max(0, -Math.floor(Math.log10(step / 1e6)))) + ' ms';
    if (step >= 1e3) return (t / 1e3).toFixed(Math.max(0, -Math.floor(Math.log10(step / 1e3)))) + ' µs';
    return Math.round(t) + ' ns';
  }
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
  const mname = (m) => D.methods[m][0] + '.' + D.methods[m][1];
  const shortClass = (c) => c.slice(c.lastIndexOf('.') + 1);

  // ---- data preparation: typed arrays, rows by depth, cause segments -------
  // JVM-wide stops (GC, safepoints), by start; drawn across all lanes.
  const WIN = D.windows || [];
  const ws = Float64Array.from(WIN, (w) => w.s), we = Float64Array.from(WIN, (w) => w.e);
  // Ends are not sorted when windows overlap; the running maximum is, and
  // it is what the binary search for the first visible window needs.
  const weMax = new Float64Array(WIN.length);
  for (let i = 0, m = -Infinity; i < WIN.length; i++) { m = Math.max(m, we[i]); weMax[i] = m; }
  const WINC = new Set(WIN.map((w) => w.c));
  // First window that may end after t (by the running maximum of ends).
  function firstWindow(t) {
    let lo = 0, hi = WIN.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (weMax[mid] > t) hi = mid; else lo = mid + 1; }
    return lo;
  }
  function windowOverlapping(c, pid, s, e) {
    for (let i = firstWindow(s); i < WIN.length && ws[i] < e; i++) if (WIN[i].c === c && WIN[i].pid === pid && we[i] > s) return i;
    return -1;
  }
  const byTid = new Map();
  let nEvents = 0;
  for (const th of D.threads) {
    byTid.set(th.tid, th);
    const sp = th.spans, n = sp.s.length;
    th.ss = new Float64Array(n);
    th.se = new Float64Array(n);
    let maxZ = -1;
    for (let i = 0; i < n; i++) {
      th.ss[i] = sp.s[i];
      th.se[i] = sp.s[i] + sp.d[i];
      if (sp.z[i] > maxZ) maxZ = sp.z[i];
    }
    // Spans come sorted by entry; at one depth they do not overlap, so each
    // row is sorted by start and by end.
    const counts = new Int32Array(maxZ + 1);
    for (let i = 0; i < n; i++) counts[sp.z[i]]++;
    th.rows = Array.from(counts, (c) => new Int32Array(c));
    const fill = new Int32Array(maxZ + 1);
    for (let i = 0; i < n; i++) { const z = sp.z[i]; th.rows[z][fill[z]++] = i; }
    // Off-CPU intervals become segments by cause: blocked causes first,
    // runqueue (wakeup to switch-in) last, as the merge attributes them;
    // a GC/safepoint part sits where the JVM's windows overlap the blocked
    // part (the merge counts exactly that overlap), the other blocked causes
    // around it (see layoutWindowed).
    const of = th.offs, m = of.s.length;
    let nseg = 0;
    const windowed = new Map();
    for (let j = 0; j < m; j++) {
      const k = of.k[j];
      if (!k) continue;
      const segs = WINC.size ? layoutWindowed(th.pid, of.s[j], k) : null;
      if (segs) windowed.set(j, segs);
      nseg += segs ? segs.length / 3 : k.length / 2;
    }
    th.gs = new Float64Array(nseg); th.ge = new Float64Array(nseg);
    th.gc = new Uint8Array(nseg); th.gi = new Int32Array(nseg);
    let g = 0;
    for (let j = 0; j < m; j++) {
      const k = of.k[j];
      if (!k) continue;
      {
        const segs = windowed.get(j);
        if (segs) {
          for (let q = 0; q < segs.length; q += 3) { th.gs[g] = segs[q]; th.ge[g] = segs[q + 1]; th.gc[g] = segs[q + 2]; th.gi[g] = j; g++; }
          continue;
        }
      }
      let t = of.s[j];
      for (let pass = 0; pass < 2; pass++) {
        for (let q = 0; q < k.length; q += 2) {
          if ((k[q] === RQ) !== (pass === 1)) continue;
          th.gs[g] = t; t += k[q + 1]; th.ge[g] = t; th.gc[g] = k[q]; th.gi[g] = j; g++;
        }
      }
    }
    th.nseg = g;
    th.depth = maxZ + 1;
    nEvents += n + m;
  }
  // Segments [start, end, cause, ...] of an interval from s with the sparse
  // split k whose GC/safepoint parts lie in windows of its JVM, or null.
  // Same rule as cause_segments_in in export.rs: each window cause (column
  // order) takes the free parts of its windows' overlaps, the other blocked
  // causes fill the rest in order, runqueue last.
  function layoutWindowed(pid, s, k) {
    let sumB = 0, rq = 0;
    for (let q = 0; q < k.length; q += 2) if (k[q] === RQ) rq = k[q + 1]; else sumB += k[q + 1];
    const bEnd = s + sumB;
    let res = []; // [start, end, cause], disjoint, by start
    const placed = new Set();
    for (let wq = 0; wq < k.length; wq += 2) {
      const c = k[wq];
      if (c === RQ || !WINC.has(c)) continue;
      const slots = [];
      let left = k[wq + 1];
      for (let i = firstWindow(s); i < WIN.length && ws[i] < bEnd && left > 0; i++) {
        if (WIN[i].c !== c || WIN[i].pid !== pid || we[i] <= s) continue;
        // Free parts of the overlap.
        let t = Math.max(ws[i], s);
        const b = Math.min(we[i], bEnd);
        for (let r = 0; r <= res.length && left > 0 && t < b; r++) {
          const ra = r < res.length ? res[r][0] : b, rb = r < res.length ? res[r][1] : b;
          if (rb <= t) continue;
          const e = Math.min(ra, b);
          if (e > t) { const n = Math.min(e - t, left); slots.push([t, t + n, c]); left -= n; }
          t = Math.max(t, rb);
        }
      }
      if (slots.length && left === 0) { res = res.concat(slots).sort((x, y) => x[0] - y[0]); placed.add(c); }
    }
    if (!res.length) return null;
    const out = [];
    for (const r of res) out.push(r[0], r[1], r[2]);
    let t = s, si = 0;
    for (let q = 0; q < k.length; q += 2) {
      if (k[q] === RQ || placed.has(k[q])) continue;
      let n = k[q + 1];
      while (n > 0) {
        while (si < res.length && t >= res[si][0]) { t = Math.max(t, res[si][1]); si++; }
        const p = Math.min(n, (si < res.length ? res[si][0] : bEnd) - t);
        if (p <= 0) break;
        out.push(t, t + p, k[q]); t += p; n -= p;
      }
    }
    if (rq) out.push(bEnd, bEnd + rq, RQ);
    const idx = [];
    for (let q = 0; q < out.length; q += 3) idx.push(q);
    idx.sort((x, y) => out[x] - out[y]);
    return idx.flatMap((q) => [out[q], out[q + 1], out[q + 2]]);
  }
  const T_PREP = performance.now();

  // Method colours: a stable hue per method.
  function hash(s) { let h = 2166136261; for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); } return h >>> 0; }
  const MCOL = D.methods.map((m) => {
    const h = hash(m[0] + '.' + m[1]) % 360, l = 64 + (hash(m[1]) % 12);
    return `hsl(${h},58%,${l}%)`;
  });
  let matched = null; // Uint8Array by method when searching
  // Search hits in time order for "find next": thread index and span index.
  let hitT = null, hitTh = null, hitJ = null, hitPos = -1;

  // ---- DOM ---------------------------------------------------------------
  const $ = (id) => document.getElementById(id);
  const cv = $('cv'), ctx = cv.getContext('2d'), tip = $('tip'), pin = $('pin'), main = $('main');
  $('title').textContent = D.title;
  $('title').title = D.command;
  const summary = () =>
    `pid ${D.pid} · ${D.threads.length} threads · ${fmtDur(D.duration)} · started ${D.start_date}` +
    (matched ? ` · ${searchCount} matching spans` + (hitPos >= 0 ? ` · match ${hitPos + 1}/${searchCount}` : '') : '');
  let searchCount = 0;
  $('summary').textContent = summary();
  $('legend').innerHTML = [`<span><i style="background:${RUNNING}"></i>running</span>`]
    .concat(CAUSES.map((c, i) => `<span><i style="background:${CC[i]}"></i>${esc(c)}</span>`))
    .concat([...new Set(WIN.map((w) => w.c))].map((c) => {
      const n = WIN.filter((w) => w.c === c).length;
      return `<span class="band" title="the JVM stopped every Java thread"><i style="background:${BAND[c]};border-color:${BAND_EDGE[c]}"></i>${esc(WIN.find((w) => w.c === c).kind)} window, all threads (${n})</span>`;
    }))
    .concat(['<span style="color:#667">· method spans below each thread, coloured by method</span>'])
    .join('');
  const warnings = [];
  if (D.lost_kernel || D.lost_jvm) warnings.push(`events lost: kernel ${D.lost_kernel}, JVM ${D.lost_jvm}; figures near the losses may be wrong`);
  for (const p of D.problems) warnings.push(p);
  if (warnings.length) { $('warn').hidden = false; $('warn').textContent = '⚠ ' + warnings.join(' · '); }

  // ---- view state ----------------------------------------------------------
  let W = 0, H = 0, dpr = 1;
  let vs = 0, ve = Math.max(D.duration, 1000);
  let scrollY = 0;
  let lanes = [], totalH = 0;
  let hover = null, pinned = null;
  let filterText = '';
  let lastDrawMs = 0, draws = 0;
  const FULL = () => [-D.duration * 0.005, Math.max(D.duration, 1000) * 1.005];
  [vs, ve] = FULL();
  // `#view=START,END` (ns since the trace start) opens on that window
  // (`jtrace timeline --png --window` uses it).
  function viewFromHash() {
    const m = /(?:^#|&)view=(-?[\d.]+),(-?[\d.]+)/.exec(location.hash);
    if (m && +m[2] > +m[1]) { vs = +m[1]; ve = +m[2]; return true; }
    return false;
  }
  viewFromHash();
  window.addEventListener('hashchange', () => { if (viewFromHash()) redraw(); });
  let bandsDrawn = [], ticks = [];

  function layout() {
    lanes = [];
    let y = 0, group = -1;
    const f = filterText.toLowerCase();
    for (const th of D.threads) {
      if (f && !(th.name.toLowerCase().includes(f) || String(th.tid).includes(f) || th.comm.toLowerCase().includes(f))) continue;
      if (th.kind !== group) { group = th.kind; lanes.push({ group, y, h: GROUP_H }); y += GROUP_H; }
      // Room for the two label lines even without spans.
      const h = Math.max(STATE_H + 1 + th.depth * ROW, 30) + LANE_GAP;
      lanes.push({ th, y, h });
      y += h;
    }
    totalH = y;
    clampScroll();
  }
  function clampScroll() { scrollY = Math.max(0, Math.min(scrollY, Math.max(0, totalH - (H - AXIS_H) + 20))); }
  function laneOf(tid) { return lanes.find((l) => l.th && l.th.tid === tid); }

  const k = () => (W - LABEL_W) / (ve - vs);
  const X = (t) => LABEL_W + (t - vs) * k();
  const T = (x) => vs + (x - LABEL_W) / k();

  function resize() {
    const r = main.getBoundingClientRect();
    main.style.top = main.offsetTop + 'px';
    const top = $('bar').offsetHeight + $('legend').offsetHeight + ($('warn').hidden ? 0 : $('warn').offsetHeight);
    main.style.top = top + 'px';
    dpr = window.devicePixelRatio || 1;
    W = Math.max(LABEL_W + 50, main.clientWidth || r.width);
    H = Math.max(100, window.innerHeight - top);
    cv.width = Math.round(W * dpr); cv.height = Math.round(H * dpr);
    cv.style.height = H + 'px';
    clampScroll();
  }

  // ---- binary searches over a row (idx = indices into starts/ends, or null)
  function lbEnd(ends, idx, n, t) { // first i with end > t
    let lo = 0, hi = n;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (ends[idx ? idx[mid] : mid] > t) hi = mid; else lo = mid + 1; }
    return lo;
  }
  function lbStart(starts, idx, n, t, lo) { // first i >= lo with start >= t
    let hi = n;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (starts[idx ? idx[mid] : mid] >= t) hi = mid; else lo = mid + 1; }
    return lo;
  }

  let charW = 6.6;
  // Adjacent marks of one colour are batched into one rectangle.
  let runX = 0, runW = 0, runC = '', runY = 0, runH = 0;
  function flushRun() {
    if (runW > 0) { ctx.fillStyle = runC; ctx.fillRect(runX, runY, runW, runH); }
    runW = 0;
  }
  function mark(x, w, c, y, h) {
    if (runW > 0 && c === runC && x <= runX + runW + 0.01 && y === runY) { runW = Math.max(runW, x + w - runX); return; }
    flushRun();
    runX = x; runW = w; runC = c; runY = y; runH = h;
  }
  function drawRow(starts, ends, idx, n, y, h, colorOf, labelOf) {
    const kk = k();
    let i = lbEnd(ends, idx, n, vs);
    while (i < n) {
      const j = idx ? idx[i] : i;
      const s = starts[j];
      if (s >= ve) break;
      let x0 = LABEL_W + (s - vs) * kk, x1 = LABEL_W + (ends[j] - vs) * kk;
      const c = colorOf(j);
      if (x1 - x0 < 1) {
        // Level of detail: one mark for this pixel, skip what else starts in it.
        const px = Math.floor(x0);
        mark(px, 1, c, y, h);
        const tNext = vs + (px + 1 - LABEL_W) / kk;
        let r = lbStart(starts, idx, n, tNext, i + 1);
        if (r - 1 > i && ends[idx ? idx[r - 1] : r - 1] > tNext) r = r - 1;
        i = r;
        continue;
      }
      x0 = Math.max(x0, LABEL_W - 1); x1 = Math.min(x1, W + 1);
      mark(x0, x1 - x0, c, y, h);
      if (labelOf && x1 - x0 > 24) {
        const text = labelOf(j), room = Math.floor((x1 - x0 - 6) / charW);
        if (room >= 2) {
          flushRun();
          ctx.fillStyle = '#111';
          ctx.fillText(text.length > room ? text.slice(0, room - 1) + '…' : text, x0 + 3, y + h - 3.5);
        }
      }
      i++;
    }
    flushRun();
  }

  function drawLane(l, y0) {
    const th = l.th, sp = th.spans;
    // State row: running over the thread's life, off-CPU segments on top.
    const a = Math.max(X(th.first), LABEL_W), b = Math.min(X(th.last), W);
    if (b > a) { ctx.fillStyle = RUNNING; ctx.fillRect(a, y0, Math.max(1, b - a), STATE_H); }
    drawRow(th.gs, th.ge, null, th.nseg, y0, STATE_H, (g) => CC[th.gc[g]], null);
    // Method rows.
    const dim = matched;
    const col = dim ? (j) => (matched[sp.m[j]] ? '#ff6d00' : '#e4e6ea') : (j) => MCOL[sp.m[j]];
    const label = (j) => { const m = D.methods[sp.m[j]]; return shortClass(m[0]) + '.' + m[1]; };
    for (let d = 0; d < th.depth; d++) {
      const r = th.rows[d];
      drawRow(th.ss, th.se, r, r.length, y0 + STATE_H + 1 + d * ROW, ROW - 1, col, label);
    }
  }

  function itemRect(it) {
    const l = laneOf(it.th.tid);
    if (!l) return null;
    const y0 = AXIS_H + l.y - scrollY;
    if (it.kind === 'span') {
      const j = it.j;
      return [X(it.th.ss[j]), y0 + STATE_H + 1 + it.th.spans.z[j] * ROW, Math.max(1, X(it.th.se[j]) - X(it.th.ss[j])), ROW - 1];
    }
    if (it.kind === 'off') {
      const of = it.th.offs;
      return [X(of.s[it.j]), y0, Math.max(1, X(of.e[it.j]) - X(of.s[it.j])), STATE_H];
    }
    if (it.kind === 'run') return [X(it.s), y0, Math.max(1, X(it.e) - X(it.s)), STATE_H];
    return null;
  }
  function windowRect(j) { const x = X(ws[j]); return [x, AXIS_H, Math.max(2, X(we[j]) - x), H - AXIS_H]; }

  function drawAxis() {
    ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, W, AXIS_H);
    ctx.strokeStyle = '#c9cfd8'; ctx.beginPath(); ctx.moveTo(0, AXIS_H - 0.5); ctx.lineTo(W, AXIS_H - 0.5); ctx.stroke();
    const nsPerPx = (ve - vs) / (W - LABEL_W);
    const raw = nsPerPx * 90, p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = raw / p < 2 ? 2 * p : raw / p < 5 ? 5 * p : 10 * p;
    ctx.fillStyle = '#334'; ctx.font = '11px system-ui, sans-serif';
    ctx.strokeStyle = '#eceff3';
    ticks = [];
    for (let t = Math.ceil(vs / step) * step; t < ve; t += step) {
      const x = Math.round(X(t)) + 0.5;
      if (x < LABEL_W) continue;
      ctx.beginPath(); ctx.moveTo(x, AXIS_H - 6); ctx.lineTo(x, AXIS_H); ctx.strokeStyle = '#889'; ctx.stroke();
      ctx.fillText(fmtTick(t, step), x + 3, AXIS_H - 9);
      ticks.push(fmtTick(t, step));
    }
    // Windows on the axis too: a solid strip to hover for their details.
    for (const b of bandsDrawn) { ctx.fillStyle = BAND_EDGE[WIN[b.i].c]; ctx.fillRect(b.x0, AXIS_H - 5, b.x1 - b.x0, 5); }
    ctx.fillStyle = '#f3f5f8'; ctx.fillRect(0, 0, LABEL_W, AXIS_H);
    ctx.fillStyle = '#334';
    ctx.fillText('window ' + fmtDur(ve - vs), 8, AXIS_H - 9);
  }

  function draw() {
    const t1 = performance.now();
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    ctx.font = '10px ui-monospace, Menlo, Consolas, monospace';
    charW = ctx.measureText('MMMMMMMMMM').width / 10;
    // Grid lines under everything.
    ctx.save();
    ctx.beginPath(); ctx.rect(LABEL_W, AXIS_H, W - LABEL_W, H - AXIS_H); ctx.clip();
    for (const l of lanes) {
      const y0 = AXIS_H + l.y - scrollY;
      if (y0 + l.h < AXIS_H || y0 > H) continue;
      if (l.th) drawLane(l, y0);
    }
    drawWindows();
    // Hovered/pinned item outline, and its waker.
    for (const l of lanes) l.waker = false;
    for (const it of [pinned, hover]) {
      if (!it) continue;
      const r = it.kind === 'window' ? windowRect(it.j) : itemRect(it);
      if (r) { ctx.strokeStyle = it === pinned ? '#0d47a1' : '#000'; ctx.lineWidth = 2; ctx.strokeRect(r[0] - 1, r[1] - 1, r[2] + 2, r[3] + 2); ctx.lineWidth = 1; }
      drawWaker(it);
    }
    ctx.restore();
    // Labels and group headers.
    ctx.font = '12px system-ui, sans-serif';
    for (const l of lanes) {
      const y0 = AXIS_H + l.y - scrollY;
      if (y0 + l.h < AXIS_H || y0 > H) continue;
      if (!l.th) {
        ctx.fillStyle = '#e9edf3'; ctx.fillRect(0, y0, W, GROUP_H - 2);
        ctx.fillStyle = '#334'; ctx.font = 'bold 12px system-ui, sans-serif';
        ctx.fillText(GROUPS[l.group], 8, y0 + 13); ctx.font = '12px system-ui, sans-serif';
        continue;
      }
      const th = l.th;
      ctx.fillStyle = l.waker ? '#fff59d' : '#fafbfc'; ctx.fillRect(0, y0, LABEL_W - 4, l.h - LANE_GAP);
      ctx.fillStyle = '#1d2330';
      let name = th.name || th.comm || '?';
      const maxc = 28;
      if (name.length > maxc) name = name.slice(0, maxc - 1) + '…';
      ctx.fillText(name, 8, y0 + 12);
      ctx.fillStyle = '#667';
      ctx.fillText(`tid ${th.tid} · CPU ${fmtDur(th.cpu)}`, 8, y0 + 26);
      ctx.strokeStyle = '#e3e7ee'; ctx.beginPath(); ctx.moveTo(0, y0 + l.h - 0.5); ctx.lineTo(W, y0 + l.h - 0.5); ctx.stroke();
    }
    drawAxis();
    lastDrawMs = performance.now() - t1;
    draws++;
    writeState();
  }

  // GC/safepoint windows: translucent bands over every lane, at least 2 px
  // wide so a short pause stays visible when zoomed out; at most one band
  // starts per pixel.
  function drawWindows() {
    bandsDrawn = [];
    const kk = k();
    let lastPx = -1;
    for (let i = firstWindow(vs); i < WIN.length && ws[i] < ve; i++) {
      if (we[i] <= vs) continue;
      let x0 = Math.max(LABEL_W + (ws[i] - vs) * kk, LABEL_W - 1), x1 = Math.min(LABEL_W + (we[i] - vs) * kk, W + 1);
      if (Math.floor(x0) === lastPx && x1 - x0 < 2) continue;
      lastPx = Math.floor(x0);
      if (x1 - x0 < 2) x1 = x0 + 2;
      const c = WIN[i].c;
      ctx.fillStyle = BAND[c]; ctx.fillRect(x0, AXIS_H, x1 - x0, H - AXIS_H);
      ctx.fillStyle = BAND_EDGE[c]; ctx.fillRect(x0, AXIS_H, 1, H - AXIS_H); ctx.fillRect(x1 - 1, AXIS_H, 1, H - AXIS_H);
      bandsDrawn.push({ i, x0, x1 });
    }
  }

  function drawWaker(it) {
    if (!it || it.kind !== 'off') return;
    const of = it.th.offs, w = of.w[it.j];
    if (w < 0) return;
    const wl = laneOf(w), me = laneOf(it.th.tid);
    const x = X(of.wt[it.j]);
    if (!wl || !me) return;
    wl.waker = true;
    const ya = AXIS_H + wl.y - scrollY, yb = AXIS_H + me.y - scrollY;
    ctx.fillStyle = 'rgba(255, 235, 59, 0.35)'; ctx.fillRect(LABEL_W, ya, W - LABEL_W, wl.h - LANE_GAP);
    ctx.strokeStyle = '#000'; ctx.lineWidth = 2;
    ctx.beginPath(); ctx.moveTo(x, ya + STATE_H / 2); ctx.lineTo(x, yb + STATE_H / 2); ctx.stroke();
    ctx.beginPath(); ctx.arc(x, ya + STATE_H / 2, 4, 0, 2 * Math.PI); ctx.fillStyle = '#000'; ctx.fill();
    const dir = yb > ya ? -1 : 1, yt = yb + STATE_H / 2;
    ctx.beginPath(); ctx.moveTo(x, yt); ctx.lineTo(x - 5, yt + 8 * dir); ctx.lineTo(x + 5, yt + 8 * dir); ctx.closePath(); ctx.fill();
    ctx.lineWidth = 1;
  }

  let pendingFrame = false;
  function redraw() {
    if (pendingFrame) return;
    pendingFrame = true;
    requestAnimationFrame(() => { pendingFrame = false; draw(); });
  }

  // ---- hit testing and details ---------------------------------------------
  function find(starts, ends, idx, n, t, tol) {
    let r = lbStart(starts, idx, n, t + tol, 0) - 1;
    let best = -1, bestD = Infinity;
    for (let q = r; q >= 0 && q >= r - 2; q--) {
      const j = idx ? idx[q] : q;
      const s = starts[j], e = ends[j];
      const dd = t < s ? s - t : t > e ? t - e : 0;
      if (dd <= tol && dd < bestD) { best = j; bestD = dd; }
    }
    return best;
  }

  // The window under x (the shortest, if they overlap), or -1.
  function windowAt(mx) {
    const t = T(mx), tol = 2 / k();
    let best = -1;
    for (let i = firstWindow(t - tol); i < WIN.length && ws[i] <= t + tol; i++) {
      if (we[i] + tol < t) continue;
      if (best < 0 || we[i] - ws[i] < we[best] - ws[best]) best = i;
    }
    return best;
  }
  function hit(mx, my) {
    const it = hitItem(mx, my);
    if (it || mx < LABEL_W) return it;
    const w = windowAt(mx);
    return w >= 0 ? { kind: 'window', j: w } : null;
  }
  function hitItem(mx, my) {
    if (my < AXIS_H) return null;
    const y = my - AXIS_H + scrollY;
    const l = lanes.find((l) => y >= l.y && y < l.y + l.h);
    if (!l || !l.th) return null;
    const th = l.th, t = T(mx), tol = 2 / k();
    if (mx < LABEL_W) return { kind: 'thread', th };
    const ry = y - l.y;
    if (ry < STATE_H) {
      const g = find(th.gs, th.ge, null, th.nseg, t, tol);
      if (g >= 0) return { kind: 'off', th, j: th.gi[g], cause: th.gc[g] };
      if (t >= th.first && t <= th.last) {
        // Running: between the surrounding off-CPU intervals.
        const of = th.offs;
        const r = lbStart(of.s, null, of.s.length, t, 0);
        return { kind: 'run', th, s: r > 0 ? Math.max(th.first, of.e[r - 1]) : th.first, e: r < of.s.length ? Math.min(th.last, of.s[r]) : th.last };
      }
      return null;
    }
    const d = Math.floor((ry - STATE_H - 1) / ROW);
    if (d < 0 || d >= th.depth) return null;
    const r = th.rows[d];
    const j = find(th.ss, th.se, r, r.length, t, tol);
    return j >= 0 ? { kind: 'span', th, j } : null;
  }

  const same = (a, b) => a === b || (a && b && a.kind === b.kind && a.th === b.th && a.j === b.j && a.s === b.s);
  const tname = (tid) => { const t = byTid.get(tid); return t ? `${t.name} [${tid}]` : `tid ${tid} (not traced)`; };
  function causeRows(sparse) {
    let h = '';
    if (!sparse) return h;
    const rows = [];
    for (let q = 0; q < sparse.length; q += 2) rows.push([sparse[q], sparse[q + 1]]);
    rows.sort((a, b) => b[1] - a[1]);
    for (const [c, ns] of rows) h += `<div><i class="sw" style="background:${CC[c]}"></i>${esc(CAUSES[c])}</div><div>${fmtDur(ns)}</div>`;
    return h;
  }
  function enclosing(th, t) {
    // Innermost span open at t, for "in method" of an off-CPU interval.
    for (let d = th.depth - 1; d >= 0; d--) {
      const r = th.rows[d];
      const j = find(th.ss, th.se, r, r.length, t, 0);
      if (j >= 0 && th.ss[j] <= t && th.se[j] >= t) return j;
    }
    return -1;
  }

  // The longest off-CPU interval of th inside [s, e] (bounded work per hover).
  function longestOff(th, s, e) {
    const of = th.offs, n = of.s.length;
    let best = -1;
    for (let j = lbStart(of.s, null, n, s, 0), q = 0; j < n && of.s[j] < e && q < 200000; j++, q++) {
      if (of.e[j] <= e && (best < 0 || of.e[j] - of.s[j] > of.e[best] - of.s[best])) best = j;
    }
    return best;
  }
  function mainCause(of, j) {
    const k = of.k[j];
    let c = -1, v = -1;
    if (k) for (let q = 0; q < k.length; q += 2) if (k[q + 1] > v) { v = k[q + 1]; c = k[q]; }
    return c;
  }
  function windowDetails(j) {
    const w = WIN[j];
    // Who was stopped: time of each thread off CPU for this cause inside it.
    let n = 0, tot = 0;
    for (const th of D.threads) {
      let any = false;
      for (let g = lbEnd(th.ge, null, th.nseg, w.s); g < th.nseg && th.gs[g] < w.e; g++) {
        if (th.gc[g] !== w.c) continue;
        tot += Math.min(th.ge[g], w.e) - Math.max(th.gs[g], w.s);
        any = true;
      }
      if (any) n++;
    }
    return `<b>${esc(w.kind)} #${w.n}</b> — JVM-wide stop of every Java thread of pid ${w.pid}` +
      `<div class="kv"><div>start</div><div>+${fmtDur(w.s)}</div><div>duration</div><div>${fmtDur(w.e - w.s)}${w.open ? ' (no end recorded)' : ''}</div>` +
      `<div>threads off CPU for ${esc(CAUSES[w.c])}</div><div>${n}</div><div>their ${esc(CAUSES[w.c])} time</div><div>${fmtDur(tot)}</div></div>`;
  }

  function longestBlock(th, s, e) {
    const b = longestOff(th, s, e);
    if (b < 0) return '';
    const of = th.offs, c = mainCause(of, b), ev = D.strings[of.x[b]];
    return `<div class="evi">longest off CPU: ${fmtDur(of.e[b] - of.s[b])}${c >= 0 ? ' ' + esc(CAUSES[c]) : ''}` +
      `${ev ? ' — ' + esc(ev) : ''}${of.w[b] >= 0 ? ', woken by ' + esc(tname(of.w[b])) : ''}</div>`;
  }
  // The JVM windows that took part of an off-CPU interval.
  function stoppedBy(th, of, j) {
    const k = of.k[j];
    let h = '';
    if (k) for (let q = 0; q < k.length; q += 2) {
      if (k[q] === RQ || !WINC.has(k[q])) continue;
      const wi = windowOverlapping(k[q], th.pid, of.s[j], of.e[j]);
      if (wi >= 0) h += `<div class="evi">stopped by ${esc(WIN[wi].kind)} #${WIN[wi].n} (${fmtDur(we[wi] - ws[wi])}) for ${fmtDur(k[q + 1])}</div>`;
    }
    return h;
  }
  // What the waker was doing at the wakeup: its innermost traced method.
  function wakerMethod(tid, t) {
    const wth = byTid.get(tid);
    if (!wth) return '';
    const e = enclosing(wth, t);
    return e >= 0 ? mname(wth.spans.m[e]) : 'no traced method';
  }

  function details(it) {
    if (it.kind === 'window') return windowDetails(it.j);
    const th = it.th;
    const who = `${esc(th.name)} [${th.tid}]`;
    if (it.kind === 'span') {
      const sp = th.spans, j = it.j, m = D.methods[sp.m[j]];
      const off = sp.d[j] - sp.c[j], f = sp.f[j];
      const flags = [f & 1 ? 'threw an exception' : '', f & 2 ? 'no exit recorded' : '', f & 4 ? 'recursive (nested in itself)' : ''].filter(Boolean);
      return `<b>${esc(m[0])}.${esc(m[1])}</b> <span style="color:#667">${esc(m[2])}</span><br>thread ${who}, depth ${sp.z[j]}` +
        `<div class="kv"><div>start</div><div>+${fmtDur(sp.s[j])}</div><div>wall</div><div>${fmtDur(sp.d[j])}</div>` +
        `<div>CPU</div><div>${fmtDur(sp.c[j])}</div><div>off CPU</div><div>${fmtDur(off)}</div>${causeRows(sp.o[j])}` +
        `<div>switches</div><div>${sp.v[j]} vol / ${sp.i[j]} invol</div></div>` + (flags.length ? `<div>${flags.join(', ')}</div>` : '') +
        longestBlock(th, th.ss[j], th.se[j]);
    }
    if (it.kind === 'off') {
      const of = th.offs, j = it.j;
      const how = of.p[j] === 1 ? 'preempted (involuntary switch)' : of.p[j] === 2 ? 'still off CPU at its last event' : 'blocked (voluntary switch)';
      const e = enclosing(th, of.s[j]);
      const ev = D.strings[of.x[j]];
      let h = `<b>off CPU: ${esc(CAUSES[it.cause])}</b> — ${how}<br>thread ${who}` +
        (e >= 0 ? `<br>in <b>${esc(mname(th.spans.m[e]))}</b>` : '<br>outside traced methods') +
        (ev ? `<div class="evi">${esc(ev)}</div>` : '') + stoppedBy(th, of, j) +
        `<div class="kv"><div>switch-out</div><div>+${fmtDur(of.s[j])}</div><div>off CPU</div><div>${fmtDur(of.e[j] - of.s[j])}</div>${causeRows(of.k[j])}`;
      if (of.w[j] >= 0) {
        const wm = wakerMethod(of.w[j], of.wt[j]);
        h += `<div>woken by</div><div>${esc(tname(of.w[j]))}</div>` + (wm ? `<div>waker was in</div><div>${esc(wm)}</div>` : '') +
          `<div>wakeup at</div><div>+${fmtDur(of.wt[j])}</div>`;
      }
      return h + '</div>';
    }
    if (it.kind === 'run') {
      return `<b>running</b><br>thread ${who}<div class="kv"><div>from</div><div>+${fmtDur(it.s)}</div><div>for</div><div>${fmtDur(it.e - it.s)}</div></div>`;
    }
    const offT = th.off.reduce((a, b) => a + b, 0);
    let rows = '';
    th.off.forEach((ns, c) => { if (ns) rows += `<div><i class="sw" style="background:${CC[c]}"></i>${esc(CAUSES[c])}</div><div>${fmtDur(ns)}</div>`; });
    return `<b>${who}</b> ${['application', 'JVM', 'native'][th.kind]} thread${th.daemon ? ', daemon' : ''}${th.group ? ', group ' + esc(th.group) : ''}` +
      `<div class="kv"><div>wall</div><div>${fmtDur(th.wall)}</div><div>CPU</div><div>${fmtDur(th.cpu)}</div><div>off CPU</div><div>${fmtDur(offT)}</div>${rows}` +
      `<div>switches</div><div>${th.vol} vol / ${th.invol} invol</div><div>spans</div><div>${th.spans.s.length}</div></div>` +
      (th.anomalies ? `<div>⚠ ${th.anomalies} inconsistent events (lost events?)</div>` : '');
  }

  function showTip(it, mx, my) {
    if (!it) { tip.hidden = true; return; }
    tip.innerHTML = details(it);
    tip.hidden = false;
    const r = cv.getBoundingClientRect();
    let x = r.left + mx + 14, y = r.top + my + 14;
    const tw = tip.offsetWidth, tH = tip.offsetHeight;
    if (x + tw > window.innerWidth - 4) x = Math.max(4, r.left + mx - tw - 14);
    if (y + tH > window.innerHeight - 4) y = Math.max(4, r.top + my - tH - 14);
    tip.style.left = x + 'px'; tip.style.top = y + 'px';
  }

  // ---- interaction -------------------------------------------------------
  function zoomAt(factor, x) {
    const t = T(x);
    let span = (ve - vs) * factor;
    span = Math.max(50, Math.min(span, Math.max(D.duration, 1000) * 4));
    vs = t - (x - LABEL_W) / (W - LABEL_W) * span;
    ve = vs + span;
    redraw();
  }
  function pan(dxPx) { const dt = dxPx / k(); vs += dt; ve += dt; redraw(); }

  let drag = null, lastMouse = null;
  cv.addEventListener('wheel', (e) => {
    e.preventDefault();
    const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? H : 1;
    const dx = e.deltaX * unit, dy = e.deltaY * unit;
    if (e.shiftKey) { scrollY += dy || dx; clampScroll(); redraw(); }
    else if (Math.abs(dx) > Math.abs(dy)) pan(dx);
    else zoomAt(Math.exp(dy * 0.002), e.offsetX);
    hover = null; tip.hidden = true;
  }, { passive: false });
  cv.addEventListener('mousedown', (e) => { drag = { x: e.offsetX, y: e.offsetY, moved: false }; });
  window.addEventListener('mouseup', (e) => {
    if (drag && !drag.moved && e.target === cv) {
      const it = hit(e.offsetX, e.offsetY);
      pinned = it && !same(it, pinned) ? it : null;
      if (pinned) { pin.innerHTML = details(pinned) + '<div style="color:#889;margin-top:4px">pinned · Esc to close</div>'; pin.hidden = false; } else pin.hidden = true;
      redraw();
    }
    drag = null; cv.classList.remove('drag');
  });
  cv.addEventListener('mousemove', (e) => {
    lastMouse = [e.offsetX, e.offsetY];
    if (drag) {
      const dx = e.offsetX - drag.x, dy = e.offsetY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 2) { drag.moved = true; cv.classList.add('drag'); }
      if (drag.moved) {
        pan(-dx); scrollY -= dy; clampScroll();
        drag.x = e.offsetX; drag.y = e.offsetY; tip.hidden = true; hover = null; return;
      }
    }
    const it = hit(e.offsetX, e.offsetY);
    if (!same(it, hover)) { hover = it; redraw(); }
    showTip(it, e.offsetX, e.offsetY);
  });
  cv.addEventListener('mouseleave', () => { hover = null; tip.hidden = true; redraw(); });
  window.addEventListener('keydown', (e) => {
    if (e.target && e.target.tagName === 'INPUT') {
      if (e.key === 'Escape') e.target.blur();
      if (e.key === 'Enter' && e.target.id === 'search') {
        // Apply a search still waiting for its debounce, then move.
        if (searchTimer) { clearTimeout(searchTimer); searchTimer = 0; setSearch(e.target.value); }
        findNext(e.shiftKey ? -1 : 1);
        e.preventDefault();
      }
      return;
    }
    const cx = lastMouse ? lastMouse[0] : LABEL_W + (W - LABEL_W) / 2, w = W - LABEL_W;
    switch (e.key) {
      case 'w': case 'W': case '+': case '=': zoomAt(0.7, cx); break;
      case 's': case 'S': case '-': case '_': zoomAt(1 / 0.7, cx); break;
      case 'a': case 'A': case 'ArrowLeft': pan(-w * 0.15); break;
      case 'd': case 'D': case 'ArrowRight': pan(w * 0.15); break;
      case 'ArrowUp': scrollY -= 60; clampScroll(); redraw(); break;
      case 'ArrowDown': scrollY += 60; clampScroll(); redraw(); break;
      case 'PageUp': scrollY -= H * 0.8; clampScroll(); redraw(); break;
      case 'PageDown': scrollY += H * 0.8; clampScroll(); redraw(); break;
      case '0': case 'Home': [vs, ve] = FULL(); redraw(); break;
      case 'n': findNext(1); break;
      case 'N': case 'p': findNext(-1); break;
      case 'Escape': pinned = null; pin.hidden = true; redraw(); break;
      default: return;
    }
    e.preventDefault();
  });
  let searchTimer = 0;
  $('search').addEventListener('input', (e) => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => { searchTimer = 0; setSearch(e.target.value); }, 120);
  });
  $('next').addEventListener('click', () => findNext(1));
  $('prev').addEventListener('click', () => findNext(-1));
  $('filter').addEventListener('input', (e) => { filterText = e.target.value.trim(); layout(); redraw(); });
  window.addEventListener('resize', () => { resize(); redraw(); });

  function setSearch(q) {
    q = q.trim().toLowerCase();
    if (!q) { matched = null; } else {
      matched = new Uint8Array(D.methods.length);
      D.methods.forEach((m, i) => { if ((m[0] + '.' + m[1] + m[2]).toLowerCase().includes(q)) matched[i] = 1; });
    }
    searchCount = 0;
    hitT = hitTh = hitJ = null; hitPos = -1;
    if (matched) for (const th of D.threads) for (const m of th.spans.m) searchCount += matched[m];
    $('summary').textContent = summary();
    redraw();
  }

  // ---- find next/previous match ---------------------------------------------
  // All matching spans in time order (built on the first move of a search).
  function buildHits() {
    const idx = [], t = [];
    D.threads.forEach((th, ti) => {
      const m = th.spans.m;
      for (let j = 0; j < m.length; j++) if (matched[m[j]]) { idx.push(ti, j); t.push(th.ss[j]); }
    });
    const order = Uint32Array.from(t.keys()).sort((a, b) => t[a] - t[b] || idx[2 * a] - idx[2 * b]);
    hitT = new Float64Array(order.length); hitTh = new Uint32Array(order.length); hitJ = new Uint32Array(order.length);
    order.forEach((o, q) => { hitT[q] = t[o]; hitTh[q] = idx[2 * o]; hitJ[q] = idx[2 * o + 1]; });
  }
  // Moves to the next (dir 1) or previous (-1) match after the current one,
  // or after the middle of the view; skips threads the filter hides; wraps.
  function findNext(dir) {
    if (!matched) return null;
    if (!hitT) buildHits();
    const n = hitT.length;
    if (!n) return null;
    let p = hitPos;
    if (p < 0) {
      const mid = (vs + ve) / 2;
      let lo = 0, hi = n;
      while (lo < hi) { const m = (lo + hi) >> 1; if (hitT[m] >= mid) hi = m; else lo = m + 1; }
      p = dir > 0 ? lo - 1 : lo;
    }
    const shown = new Set(lanes.filter((l) => l.th).map((l) => l.th.tid));
    for (let step = 0; step < n; step++) {
      p = ((p + dir) % n + n) % n;
      const th = D.threads[hitTh[p]];
      if (!shown.has(th.tid)) continue;
      hitPos = p;
      goTo({ kind: 'span', th, j: hitJ[p] });
      return pinned;
    }
    return null;
  }
  // Brings a span into view (zooming so it is readable), scrolls to its
  // lane, and pins its details.
  function goTo(it) {
    const th = it.th, s = th.ss[it.j], e = th.se[it.j], d = Math.max(e - s, 1);
    let span = ve - vs;
    const px = d * (W - LABEL_W) / span;
    if (px < 4 || d > span * 0.8) span = Math.max(d * 3, 1000);
    vs = (s + e) / 2 - span / 2; ve = vs + span;
    const l = laneOf(th.tid);
    if (l) {
      const y = l.y + STATE_H + 1 + th.spans.z[it.j] * ROW;
      if (y < scrollY || y + ROW > scrollY + H - AXIS_H) { scrollY = l.y - 40; clampScroll(); }
    }
    pinned = it;
    pin.innerHTML = details(it) + '<div style="color:#889;margin-top:4px">match ' + (hitPos + 1) + '/' + searchCount + ' · n / Enter: next · N / Shift+Enter: previous · Esc to close</div>';
    pin.hidden = false;
    $('summary').textContent = summary();
    redraw();
  }

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
    locateOff(q) {
      let best = null;
      for (const l of lanes) {
        if (!l.th) continue;
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
  draw();
  perf.first_draw_ms = lastDrawMs;
  perf.first_paint_ms = performance.now(); // since navigation start
  requestAnimationFrame(() => { perf.first_frame_ms = performance.now(); writeState(); });
  if (location.hash === '#bench') { perf.bench = window.jtrace.bench(); writeState(); }
  window.jtrace.ready = true;
})();
