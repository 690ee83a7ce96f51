// jtrace timeline viewer: the page's data, made ready to draw.
//
// The viewer is self-contained: it reads the JSON embedded in the page,
// draws on one canvas and talks to no network. Its parts (this directory)
// share one function scope; html.rs (`VIEWER`) inlines them in the order
// they run, so a part uses what the parts before it define.
//
// Layout: one lane per thread; its top row is the thread state (running, or
// off CPU coloured by cause), the rows under it the method spans by depth.
// GC and safepoint windows are translucent bands across every lane.

const T_START = performance.now();
const D = JSON.parse(document.getElementById('data').textContent);
const T_PARSED = performance.now();

const CAUSES = D.causes;
const RUNNING = '#43a047';
// Time no kernel data covers (the kernel stream ended early): neither
// running nor a cause.
const NOT_COVERED = '#cfd3d9';
const CAUSE_COLOR = {
  runqueue: '#e53935', monitor: '#8e24aa', wait: '#3949ab', park: '#1e88e5', sleep: '#c0ca33',
  gc: '#fb8c00', safepoint: '#ffb300', socket: '#00acc1', file: '#6d4c41', page_fault: '#d81b60',
  lock_native: '#5e35b1', syscall_other: '#546e7a', unknown: '#b0b0b0', tracer: '#212121',
  throttled: '#ff7043', steal: '#795548',
};
const CC = CAUSES.map((c) => CAUSE_COLOR[c] || '#888');
const RQ = CAUSES.indexOf('runqueue');
const hexA = (h, a) => `rgba(${parseInt(h.slice(1, 3), 16)},${parseInt(h.slice(3, 5), 16)},${parseInt(h.slice(5, 7), 16)},${a})`;
const BAND = CC.map((c) => hexA(c, 0.22)), BAND_EDGE = CC.map((c) => hexA(c, 0.75));

const ROW = 15, STATE_H = 14, LANE_GAP = 7, LABEL_W = 240, AXIS_H = 24, GROUP_H = 20;
const GROUPS = ['Application threads', 'JVM threads', 'Native threads'];
// Processes: with several, lanes are grouped by process, then by kind.
const PROCS = new Map((D.processes || []).map((p) => [p.pid, p]));
const MULTI_PROC = PROCS.size > 1 || [...PROCS.values()].some((p) => p.container);
function procLabel(pid) {
  const p = PROCS.get(pid);
  return (p && p.container ? `${p.container} · ` : '') + `pid ${pid}` + (p && p.command ? ` · ${p.command}` : '') +
    (p && p.jvm ? ' (JVM)' : '');
}
// Critical paths to highlight (jtrace timeline --why), and the one shown.
const PATHS = D.paths || [];
let pathSel = PATHS.length ? 0 : -1;
const PATH_COLOR = '#d500f9';

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
// The causes windows stand for (gc, safepoint): the parts they can explain.
const WINC = new Set(WIN.map((w) => w.c));
// First window that may end after t (by the running maximum of ends).
function firstWindow(t) {
  let lo = 0, hi = WIN.length;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (weMax[mid] > t) hi = mid; else lo = mid + 1; }
  return lo;
}
// The first window of cause c of JVM pid that overlaps [s, e), or -1.
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
  // Off-CPU intervals become segments by cause. The page lays them out
  // (segments.rs): the pieces [cause, ns, ...] of k, or of g where a JVM
  // window moved a GC/safepoint part, follow each other from the switch-out.
  const of = th.offs, m = of.s.length;
  const placed = new Map(of.g);
  const pieces = (j) => placed.get(j) || of.k[j];
  let nseg = 0;
  for (let j = 0; j < m; j++) { const p = pieces(j); if (p) nseg += p.length / 2; }
  th.gs = new Float64Array(nseg); th.ge = new Float64Array(nseg);
  th.gc = new Uint8Array(nseg); th.gi = new Int32Array(nseg);
  let g = 0;
  for (let j = 0; j < m; j++) {
    const p = pieces(j);
    if (!p) continue;
    let t = of.s[j];
    for (let q = 0; q < p.length; q += 2) { th.gs[g] = t; t += p[q + 1]; th.ge[g] = t; th.gc[g] = p[q]; th.gi[g] = j; g++; }
  }
  th.nseg = g;
  th.depth = maxZ + 1;
  nEvents += n + m;
}
const T_PREP = performance.now();
