// jtrace flame graph viewer: state and drawing.
//
// The graph hangs from the root at the top (an icicle): one row per stack
// depth, each frame as wide as its time in the chosen graph (all causes,
// or one). With all causes a frame is split into its causes' colours; a
// strip on its top says what kind of code it is. A diff colours each
// frame by its change: growth red, shrink blue, no change grey.

const $ = (id) => document.getElementById(id);
const cv = $('cv'), ctx = cv.getContext('2d'), tip = $('tip'), main = $('main');
const ROW = 17;
const ALL_SEL = (2 ** NC - 1) >>> 0;
// Each cause's colour mixed 55 % with white: the fill under a frame's name.
const LIGHT = CC.map((h) => {
  const mix = (at) => Math.round(parseInt(h.slice(at, at + 2), 16) * 0.45 + 255 * 0.55);
  return `rgb(${mix(1)},${mix(3)},${mix(5)})`;
});

const view = {
  T: MAIN,
  sel: ALL_SEL, // causes in the graph (bit mask)
  colour: 'cause',
  zoom: 0, // the node the graph is zoomed to
  search: '',
  k: 0, // the profile widths are drawn from (0: after, 1: before)
};
let W = 0, H = 0, draws = 0, lastDrawMs = 0;
const matchCache = new Map();

function fmtNs(ns) {
  const a = Math.abs(ns);
  if (a >= 1e9) return (ns / 1e9).toFixed(a >= 1e11 ? 0 : 2) + ' s';
  if (a >= 1e6) return (ns / 1e6).toFixed(a >= 1e8 ? 0 : 2) + ' ms';
  if (a >= 1e3) return (ns / 1e3).toFixed(1) + ' µs';
  return Math.round(ns) + ' ns';
}

const nameOf = (T, i) => NAMES[T.name[i]];
function matches(T, i) {
  if (!view.search) return false;
  const id = T.name[i];
  let m = matchCache.get(id);
  if (m === undefined) {
    m = NAMES[id].toLowerCase().includes(view.search);
    matchCache.set(id, m);
  }
  return m;
}

function ancestors(T, i) {
  const a = [];
  for (let j = i; j >= 0; j = T.parent[j]) a.push(j);
  return a.reverse();
}

// Fill colour of a diff frame: its change relative to its larger side.
function diffColour(T, i) {
  const a = value(T, 0, i, view.sel), b = value(T, 1, i, view.sel);
  const d = a - b, big = Math.max(a, b);
  if (big === 0 || d === 0) return '#d6d9de';
  const r = Math.min(1, Math.abs(d) / big), l = Math.round(225 - 150 * Math.sqrt(r));
  return d > 0 ? `rgb(255,${l},${l})` : `rgb(${l},${l},255)`;
}

function resize() {
  const dpr = window.devicePixelRatio || 1;
  W = main.clientWidth - (main.scrollHeight > main.clientHeight ? 14 : 0);
  H = Math.max(main.clientHeight, (view.T.maxDepth + 2) * ROW);
  cv.width = Math.round(W * dpr);
  cv.height = Math.round(H * dpr);
  cv.style.width = W + 'px';
  cv.style.height = H + 'px';
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
}

function drawFrame(T, i, x, w, y, grey) {
  const k = view.k;
  if (DIFF) {
    ctx.fillStyle = diffColour(T, i);
    ctx.fillRect(x, y, w, ROW - 1);
  } else if (view.colour === 'kind') {
    ctx.fillStyle = kindOf(i, T)[1];
    ctx.fillRect(x, y, w, ROW - 1);
  } else {
    // Split by cause, in cause order: light fills (the name stays
    // legible), the causes' full colours along the bottom edge.
    const total = value(T, k, i, view.sel);
    let cx = x;
    for (let m = T.mask[i] & view.sel; m; m &= m - 1) {
      const c = 31 - Math.clz32(m & -m);
      const cw = (causeTotal(T, k, i, c) / total) * w;
      ctx.fillStyle = LIGHT[c];
      ctx.fillRect(cx, y, cw + 0.5, ROW - 1);
      ctx.fillStyle = CC[c];
      ctx.fillRect(cx, y + ROW - 4, cw + 0.5, 3);
      cx += cw;
    }
    if (w > 4) {
      ctx.fillStyle = kindOf(i, T)[1];
      ctx.fillRect(x, y, w, 3);
    }
  }
  if (grey) {
    ctx.fillStyle = 'rgba(255,255,255,.55)';
    ctx.fillRect(x, y, w, ROW - 1);
  }
  if (matches(T, i)) {
    ctx.strokeStyle = '#d500f9';
    ctx.lineWidth = 2;
    ctx.strokeRect(x + 1, y + 1, Math.max(w - 2, 1), ROW - 3);
  }
  if (w > 28) {
    ctx.fillStyle = '#111';
    const name = nameOf(T, i);
    const max = Math.floor((w - 6) / 6.2);
    ctx.fillText(name.length > max ? name.slice(0, Math.max(max - 1, 1)) + '…' : name, x + 3, y + ROW - 5);
  }
}

// Draws the subtree of i at (x, depth row); returns the frames drawn.
function drawSubtree(T, i, x, scale) {
  let n = 0;
  const stack = [[i, x]];
  while (stack.length) {
    const [j, jx] = stack.pop();
    const w = value(T, view.k, j, view.sel) * scale;
    if (w < 0.4) continue;
    drawFrame(T, j, jx, w, T.depth[j] * ROW, false);
    n++;
    let cx = jx;
    for (let c = j + 1; c < T.end[j]; c = T.end[c]) {
      const cw = value(T, view.k, c, view.sel) * scale;
      if (cw >= 0.4) stack.push([c, cx]);
      cx += cw;
    }
  }
  return n;
}

function draw() {
  const t0 = performance.now();
  resize();
  ctx.clearRect(0, 0, W, H);
  ctx.font = '11px system-ui, sans-serif';
  const T = view.T, z = view.zoom;
  const zv = value(T, view.k, z, view.sel);
  let frames = 0;
  // The zoomed frame's ancestors, full width and greyed.
  for (const a of ancestors(T, z)) {
    if (a === z) break;
    drawFrame(T, a, 0, W, T.depth[a] * ROW, true);
    frames++;
  }
  if (zv > 0) frames += drawSubtree(T, z, 0, W / zv);
  lastDrawMs = performance.now() - t0;
  draws++;
  view.framesDrawn = frames;
  writeState();
}

// The node under (x, y), canvas coordinates, or -1.
function nodeAt(x, y) {
  const T = view.T, z = view.zoom;
  const row = Math.floor(y / ROW);
  const chain = ancestors(T, z);
  if (row < chain.length - 1) return chain[row];
  const zv = value(T, view.k, z, view.sel);
  if (zv <= 0 || x < 0 || x > W) return -1;
  const scale = W / zv;
  let i = z, ix = 0;
  while (T.depth[i] < row) {
    let cx = ix, found = -1;
    for (let c = i + 1; c < T.end[i]; c = T.end[c]) {
      const cw = value(T, view.k, c, view.sel) * scale;
      if (x >= cx && x < cx + cw) { found = c; break; }
      cx += cw;
    }
    if (found < 0) return -1;
    i = found;
    ix = cx;
  }
  return T.depth[i] === row ? i : -1;
}

// Page position of the widest drawn frame whose name contains q, or null.
function locate(q) {
  const T = view.T, z = view.zoom;
  const zv = value(T, view.k, z, view.sel);
  if (zv <= 0) return null;
  const scale = W / zv;
  let best = null;
  const stack = [[z, 0]];
  while (stack.length) {
    const [j, jx] = stack.pop();
    const w = value(T, view.k, j, view.sel) * scale;
    if (w < 0.4) continue;
    if (nameOf(T, j).includes(q) && (!best || w > best.w)) best = { node: j, x: jx + w / 2, y: T.depth[j] * ROW + ROW / 2, w };
    let cx = jx;
    for (let c = j + 1; c < T.end[j]; c = T.end[c]) {
      stack.push([c, cx]);
      cx += value(T, view.k, c, view.sel) * scale;
    }
  }
  if (best) {
    const r = cv.getBoundingClientRect();
    best.pageX = r.left + best.x;
    best.pageY = r.top + best.y;
    best.name = nameOf(T, best.node);
  }
  return best;
}

// Who ended the waits under node i: [name, ns] by ns, largest first.
function wakersUnder(T, i) {
  const sum = new Map();
  for (let j = i; j < T.end[i]; j++) {
    const w = T.wak.get(j);
    if (!w) continue;
    for (let q = 0; q < w.length; q += 2) sum.set(w[q], (sum.get(w[q]) || 0) + w[q + 1]);
  }
  return [...sum].sort((a, b) => b[1] - a[1]).map(([id, ns]) => [D.wn[id], ns]);
}

// The tooltip's text for node i.
function describe(i) {
  const T = view.T;
  const name = nameOf(T, i);
  const lines = [name, 'kind: ' + kindOf(i, T)[0]];
  const src = name.match(/ \((\S+:\d+)\)$/);
  if (src) lines.push('source: ' + src[1]);
  const rootV = value(T, view.k, 0, view.sel);
  const v = value(T, view.k, i, view.sel);
  lines.push(`total: ${fmtNs(v)} (${rootV ? ((100 * v) / rootV).toFixed(2) : 0} % of the graph)`);
  const causeLine = (c, k) => {
    const t = causeTotal(T, k, i, c), o = causeOwn(T, k, i, c);
    const sampled = c === CPU && D.period_ns ? ` (≈ ${Math.round(t / D.period_ns)} samples × ${fmtNs(D.period_ns)})` : '';
    return `${CAUSES[c]}: ${fmtNs(t)}${o ? `, self ${fmtNs(o)}` : ''}${sampled}`;
  };
  for (let m = T.mask[i] & view.sel; m; m &= m - 1) {
    const c = 31 - Math.clz32(m & -m);
    if (DIFF) {
      const a = causeTotal(T, 0, i, c), b = causeTotal(T, 1, i, c);
      lines.push(`  ${CAUSES[c]}: before ${fmtNs(b)}, after ${fmtNs(a)}, change ${a >= b ? '+' : ''}${fmtNs(a - b)}`);
    } else {
      lines.push('  ' + causeLine(c, 0));
    }
  }
  if (name === D.scaled_frame) lines.push('scaled up from the thread\'s sampled short blocks of the same cause');
  const wk = wakersUnder(T, i);
  if (wk.length) {
    lines.push('woken by:');
    for (const [n, ns] of wk.slice(0, 6)) lines.push(`  ${n}: ${fmtNs(ns)}`);
    if (wk.length > 6) lines.push(`  … ${wk.length - 6} more`);
  }
  return lines.join('\n');
}

function matchedTotal() {
  const T = view.T;
  if (!view.search) return null;
  let s = 0;
  for (let i = 0; i < T.n;) {
    if (matches(T, i)) {
      s += value(T, view.k, i, view.sel);
      i = T.end[i];
    } else i++;
  }
  return s;
}
