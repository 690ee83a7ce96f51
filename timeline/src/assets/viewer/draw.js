// jtrace timeline viewer: the header, the view state and drawing. Drawing
// is level-of-detail: in every row, items narrower than a pixel are merged
// into a 1-pixel mark and the rest of that pixel is skipped by binary
// search, so a frame costs O(rows x pixels x log n), not O(events).

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
const ANY_UNCOVERED = D.threads.some((th) => th.ucov !== undefined);
$('legend').innerHTML = [`<span><i style="background:${RUNNING}"></i>running</span>`]
  .concat(ANY_UNCOVERED ? [`<span title="after the kernel stream ended: neither running nor a cause"><i style="background:${NOT_COVERED}"></i>not covered (no kernel data)</span>`] : [])
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
// A page of part of a trace (`--window`) opens on that part.
const FULL = () => D.window
  ? [D.window[0] - (D.window[1] - D.window[0]) * 0.005, D.window[1] + (D.window[1] - D.window[0]) * 0.005]
  : [-D.duration * 0.005, Math.max(D.duration, 1000) * 1.005];
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
  let y = 0, group = -1, gpid = -1;
  const f = filterText.toLowerCase();
  for (const th of D.threads) {
    if (f && !(th.name.toLowerCase().includes(f) || String(th.tid).includes(f) || th.comm.toLowerCase().includes(f))) continue;
    if (th.kind !== group || th.pid !== gpid) {
      group = th.kind; gpid = th.pid;
      lanes.push({ group, pid: th.pid, y, h: GROUP_H }); y += GROUP_H;
    }
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
  // State row: running over the thread's covered life, off-CPU segments on
  // top; what no kernel data covers, grey.
  const covered = th.ucov !== undefined ? th.ucov : th.last;
  const a = Math.max(X(th.first), LABEL_W), b = Math.min(X(covered), W);
  if (b > a) { ctx.fillStyle = RUNNING; ctx.fillRect(a, y0, Math.max(1, b - a), STATE_H); }
  const u = Math.max(X(covered), LABEL_W), v = Math.min(X(th.last), W);
  if (v > u) { ctx.fillStyle = NOT_COVERED; ctx.fillRect(u, y0, Math.max(1, v - u), STATE_H); }
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
  if (it.kind === 'run' || it.kind === 'uncov') return [X(it.s), y0, Math.max(1, X(it.e) - X(it.s)), STATE_H];
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
  drawPath();
  drawFlameHighlights();
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
      ctx.fillText(MULTI_PROC ? `${procLabel(l.pid)} — ${GROUPS[l.group]}` : GROUPS[l.group], 8, y0 + 13);
      ctx.font = '12px system-ui, sans-serif';
      continue;
    }
    const th = l.th;
    ctx.fillStyle = l.waker ? '#fff59d' : '#fafbfc'; ctx.fillRect(0, y0, LABEL_W - 4, l.h - LANE_GAP);
    ctx.fillStyle = '#1d2330';
    let name = th.name || th.comm || '?';
    const maxc = 28;
    if (name.length > maxc) name = name.slice(0, maxc - 1) + '…';
    // A virtual thread is indented under its carrier.
    const x = th.vid != null ? 20 : 8;
    ctx.fillText(name, x, y0 + 12);
    ctx.fillStyle = '#667';
    ctx.fillText((th.vid != null ? `virtual #${th.vid}` : th.unmatched ? `ns tid ${th.nstid} · NOT PAIRED` : `tid ${th.tid}` + (th.nstid != null ? ` (ns ${th.nstid})` : '')) + (MULTI_PROC ? ` · pid ${th.pid}` : '') + ` · CPU ${fmtDur(th.cpu)}`, x, y0 + 26, LABEL_W - 6 - x);
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

// The selected critical path: its segments outlined on their lanes' state
// rows (a bar above them), each hop's stretch dashed on the waiting lane,
// with a dashed line to the blocker's lane at its start and an arrow back
// at the wakeup that ended it.
let pathDrawn = { segments: 0, lanes: [] };
function drawPath() {
  pathDrawn = { segments: 0, lanes: [] };
  if (pathSel < 0) return;
  const p = PATHS[pathSel], sg = p.seg, n = sg[0].length, seen = new Set();
  ctx.strokeStyle = PATH_COLOR; ctx.fillStyle = PATH_COLOR; ctx.lineWidth = 2;
  for (let j = 0; j < n; j++) {
    if (sg[2][j] < vs || sg[1][j] > ve) continue;
    const l = laneOf(sg[0][j]);
    if (!l) continue;
    const y0 = AXIS_H + l.y - scrollY;
    if (y0 + l.h < AXIS_H || y0 > H) continue;
    const x0 = X(sg[1][j]), w = Math.max(1, X(sg[2][j]) - x0);
    ctx.strokeRect(x0, y0 - 1, w, STATE_H + 2);
    ctx.fillRect(x0, y0 - 4, w, 3);
    pathDrawn.segments++;
    seen.add(sg[0][j]);
  }
  const hp = p.hop;
  for (let j = 0; j < hp[0].length; j++) {
    const a = laneOf(hp[0][j]), b = laneOf(hp[1][j]);
    if (!a || !b) continue;
    const ya = AXIS_H + a.y - scrollY + STATE_H / 2, yb = AXIS_H + b.y - scrollY + STATE_H / 2;
    const xs = X(hp[2][j]), xe = X(hp[3][j]);
    ctx.setLineDash([4, 3]);
    // The waiter's stretch the blocker's doing replaces.
    ctx.strokeRect(xs, ya - STATE_H / 2 - 1, Math.max(1, xe - xs), STATE_H + 2);
    ctx.beginPath(); ctx.moveTo(xs, ya); ctx.lineTo(xs, yb); ctx.stroke();
    ctx.setLineDash([]);
    ctx.beginPath(); ctx.moveTo(xe, yb); ctx.lineTo(xe, ya); ctx.stroke();
    const dir = ya > yb ? -1 : 1;
    ctx.beginPath(); ctx.moveTo(xe, ya); ctx.lineTo(xe - 5, ya - 8 * dir); ctx.lineTo(xe + 5, ya - 8 * dir); ctx.closePath(); ctx.fill();
  }
  ctx.lineWidth = 1;
  pathDrawn.lanes = [...seen];
}
// Shows path i (-1: none), zoomed to its invocation.
function selectPath(i) {
  pathSel = i;
  const sel = $('paths');
  if (sel) sel.value = String(i);
  if (i >= 0) {
    const p = PATHS[i], pad = Math.max(p.d * 0.05, 1000);
    vs = p.s - pad; ve = p.s + p.d + pad;
    const l = laneOf(p.tid);
    if (l && (l.y < scrollY || l.y > scrollY + H - AXIS_H - 40)) { scrollY = l.y - 40; clampScroll(); }
  }
  redraw();
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
  scheduleFlame();
  if (pendingFrame) return;
  pendingFrame = true;
  requestAnimationFrame(() => { pendingFrame = false; draw(); });
}
