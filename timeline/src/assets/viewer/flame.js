// jtrace timeline viewer: the flame graph of what the view shows.
//
// `F` (or the bar's button) opens a panel with the off-CPU time of the
// view folded by recorded stack: the time window drawn, the lanes shown
// (the thread filter), or, with a method call pinned, that call's time
// on its thread. Each interval's causes are clipped to the selection as
// the state row lays them out. A click on a frame outlines, on the lanes,
// the intervals whose stack runs through it. CPU samples are not in the
// page: `jtrace flame` draws them (and scales short blocks' time).

const NO_STACK = '[no stack recorded]';
const FROW = 16;
// `var`: redraw() (draw.js) asks scheduleFlame() before this part has run.
var flameOpen = false, flameTimer = 0, flameTree = null, flameHi = null, flameSel = '', keepTree = null;
const fcv = $('fcv'), fctx = fcv.getContext('2d'), ftip = $('ftip');
const LIGHTC = CC.map((h) => {
  const mix = (at) => Math.round(parseInt(h.slice(at, at + 2), 16) * 0.45 + 255 * 0.55);
  return `rgb(${mix(1)},${mix(3)},${mix(5)})`;
});
const frameName = (f) => D.frames[f];

// Folds the selection: a tree of frames (root first) with each node's
// total by cause, and for each page stack its leaf node.
function foldView() {
  let from = vs, to = ve, lanesIn = lanes.filter((l) => l.th);
  flameSel = `the ${fmtDur(to - from)} drawn, ${lanesIn.length} threads shown`;
  // Per lane, the time ranges folded (null: the whole window).
  let ranges = () => null;
  if (pinned && pinned.kind === 'span') {
    from = Math.max(from, pinned.th.ss[pinned.j]);
    to = Math.min(to, pinned.th.se[pinned.j]);
    lanesIn = lanesIn.filter((l) => l.th === pinned.th);
    flameSel = `the pinned call of ${mname(pinned.th.spans.m[pinned.j])} on ${pinned.th.name}, within the view`;
  } else if (matched) {
    // The calls of the methods the search matches: each lane's matching
    // spans, nested ones merged, within the view.
    let calls = 0;
    const byLane = new Map();
    for (const l of lanesIn) {
      const th = l.th, sp = th.spans, out = [];
      for (let j = 0; j < sp.m.length; j++) {
        if (!matched[sp.m[j]] || th.se[j] <= from || th.ss[j] >= to) continue;
        calls++;
        const a = Math.max(th.ss[j], from), b = Math.min(th.se[j], to);
        const last = out[out.length - 1];
        if (last && a <= last[1]) last[1] = Math.max(last[1], b); else out.push([a, b]);
      }
      byLane.set(th, out);
    }
    ranges = (th) => byLane.get(th);
    flameSel = `the ${calls} calls in view of the methods matching "${$('search').value.trim()}"`;
  }

  const parent = [-1], name = [-1], kids = [new Map()], tot = [new Float64Array(NC_T)];
  const leafOf = new Map();
  const child = (p, nm) => {
    let c = kids[p].get(nm);
    if (c === undefined) {
      c = parent.length;
      kids[p].set(nm, c);
      parent.push(p); name.push(nm); kids.push(new Map()); tot.push(new Float64Array(NC_T));
    }
    return c;
  };
  const leaf = (q) => {
    let n = leafOf.get(q);
    if (n === undefined) {
      n = 0;
      if (q < 0) n = child(0, -1);
      else for (const f of D.stacks[q]) n = child(n, f);
      leafOf.set(q, n);
    }
    return n;
  };
  for (const l of lanesIn) {
    const th = l.th, of = th.offs;
    for (const [a, b] of ranges(th) || [[from, to]]) {
      let g = lbEnd(th.ge, null, th.nseg, a);
      for (; g < th.nseg && th.gs[g] < b; g++) {
        const ns = Math.min(th.ge[g], b) - Math.max(th.gs[g], a);
        if (ns <= 0) continue;
        const q = of.q ? of.q[th.gi[g]] : -1;
        for (let n = leaf(q); n >= 0; n = parent[n]) tot[n][th.gc[g]] += ns;
      }
    }
  }
  return { parent, name, kids, tot, leafOf };
}
const NC_T = CAUSES.length;

const nodeValue = (T, n) => T.tot[n].reduce((a, b) => a + b, 0);
function flameDepth(T) {
  let d = 0;
  const depth = new Int32Array(T.parent.length);
  for (let n = 1; n < T.parent.length; n++) { depth[n] = depth[T.parent[n]] + 1; if (depth[n] > d) d = depth[n]; }
  return d;
}

// Calls f(node, x, w, depth) for every frame at least 0.4 px wide.
function eachFrame(T, width, f) {
  const rootV = nodeValue(T, 0);
  if (!rootV) return;
  const scale = width / rootV;
  const stack = [[0, 0, 0]];
  while (stack.length) {
    const [n, x, d] = stack.pop();
    const w = nodeValue(T, n) * scale;
    if (w < 0.4) continue;
    f(n, x, w, d);
    let cx = x;
    const ks = [...T.kids[n].values()].sort((a, b) => nodeValue(T, b) - nodeValue(T, a));
    for (const c of ks) { stack.push([c, cx, d + 1]); cx += nodeValue(T, c) * scale; }
  }
}

function drawFlame() {
  const T = flameTree;
  const panel = $('flamePanel');
  const w = panel.clientWidth - 16;
  const h = Math.max(80, (flameDepth(T) + 1) * FROW + 4);
  const dp = window.devicePixelRatio || 1;
  fcv.width = Math.round(w * dp); fcv.height = Math.round(h * dp);
  fcv.style.width = w + 'px'; fcv.style.height = h + 'px';
  fctx.setTransform(dp, 0, 0, dp, 0, 0);
  fctx.clearRect(0, 0, w, h);
  fctx.font = '11px system-ui, sans-serif';
  const total = nodeValue(T, 0);
  $('flameHead').textContent = `flame graph of ${flameSel}: ${fmtDur(total)} off CPU by recorded stack (click a frame: its intervals outlined on the lanes; CPU samples: jtrace flame)`;
  eachFrame(T, w, (n, x, fw, d) => {
    const y = d * FROW;
    let cx = x;
    const v = nodeValue(T, n);
    for (let c = 0; c < NC_T; c++) {
      const t = T.tot[n][c];
      if (!t) continue;
      const cw = (t / v) * fw;
      fctx.fillStyle = LIGHTC[c]; fctx.fillRect(cx, y, cw + 0.5, FROW - 1);
      fctx.fillStyle = CC[c]; fctx.fillRect(cx, y + FROW - 4, cw + 0.5, 3);
      cx += cw;
    }
    if (flameHi && flameHi.node === n) { fctx.strokeStyle = PATH_COLOR; fctx.lineWidth = 2; fctx.strokeRect(x + 1, y + 1, fw - 2, FROW - 3); }
    if (fw > 28) {
      const nm = n === 0 ? 'all' : T.name[n] < 0 ? NO_STACK : frameName(T.name[n]);
      const max = Math.floor((fw - 6) / 6.2);
      fctx.fillStyle = '#111';
      fctx.fillText(nm.length > max ? nm.slice(0, Math.max(max - 1, 1)) + '…' : nm, x + 3, y + FROW - 5);
    }
  });
}

function flameAt(px, py) {
  let hit = -1;
  eachFrame(flameTree, fcv.clientWidth, (n, x, w, d) => {
    if (px >= x && px < x + w && py >= d * FROW && py < (d + 1) * FROW) hit = n;
  });
  return hit;
}
function flameLabel(n) {
  const T = flameTree;
  const nm = n === 0 ? 'all' : T.name[n] < 0 ? NO_STACK : frameName(T.name[n]);
  const lines = [nm, `off CPU: ${fmtDur(nodeValue(T, n))}`];
  for (let c = 0; c < NC_T; c++) if (T.tot[n][c]) lines.push(`  ${CAUSES[c]}: ${fmtDur(T.tot[n][c])}`);
  return lines.join('\n');
}

// The page stacks whose path runs through node n.
function stacksThrough(T, n) {
  const out = new Set();
  for (const [q, leafN] of T.leafOf) {
    for (let m = leafN; m >= 0; m = T.parent[m]) if (m === n) { out.add(q); break; }
  }
  return out;
}
function flameSelect(n) {
  flameHi = n < 0 ? null : { node: n, stacks: stacksThrough(flameTree, n) };
  drawFlame();
  redraw();
}

// The lanes' outlines of the selected frame's intervals (called by draw()).
function drawFlameHighlights() {
  if (!flameOpen || !flameHi) return;
  ctx.strokeStyle = PATH_COLOR; ctx.lineWidth = 2;
  for (const l of lanes) {
    if (!l.th || !l.th.offs.q) continue;
    const y0 = AXIS_H + l.y - scrollY, of = l.th.offs;
    if (y0 + l.h < AXIS_H || y0 > H) continue;
    let j = lbEnd(of.e, null, of.e.length, vs);
    for (; j < of.s.length && of.s[j] < ve; j++) {
      if (!flameHi.stacks.has(of.q[j])) continue;
      const x0 = Math.max(X(of.s[j]), LABEL_W), x1 = Math.min(X(of.e[j]), W);
      ctx.strokeRect(x0 - 1, y0 - 1, Math.max(x1 - x0, 1) + 2, STATE_H + 2);
    }
  }
  ctx.lineWidth = 1;
}

function refreshFlame() {
  flameTimer = 0;
  if (!flameOpen) return;
  const keep = flameHi;
  flameTree = foldView();
  // A selected frame stays selected if its path is still there.
  flameHi = null;
  if (keep) {
    const path = [];
    for (let m = keep.node; m > 0; m = keepTree.parent[m]) path.push(keepTree.name[m]);
    let n = 0;
    for (const nm of path.reverse()) { n = flameTree.kids[n].get(nm); if (n === undefined) break; }
    if (n !== undefined) flameHi = { node: n, stacks: stacksThrough(flameTree, n) };
  }
  keepTree = flameTree;
  drawFlame();
}
function scheduleFlame() {
  if (!flameOpen || flameTimer) return;
  flameTimer = setTimeout(refreshFlame, 120);
}
function toggleFlame(open) {
  flameOpen = open === undefined ? !flameOpen : open;
  $('flamePanel').hidden = !flameOpen;
  $('flameBtn').classList.toggle('on', flameOpen);
  if (flameOpen) refreshFlame(); else { flameHi = null; redraw(); }
}

$('flameBtn').addEventListener('click', () => toggleFlame());
window.addEventListener('keydown', (e) => {
  if (e.target && e.target.tagName === 'INPUT') return;
  if (e.key === 'f' || e.key === 'F') { toggleFlame(); e.preventDefault(); }
});
fcv.addEventListener('mousemove', (e) => {
  const n = flameAt(e.offsetX, e.offsetY);
  if (n < 0) { ftip.hidden = true; return; }
  ftip.textContent = flameLabel(n);
  ftip.hidden = false;
  ftip.style.left = Math.min(e.clientX + 12, window.innerWidth - ftip.offsetWidth - 6) + 'px';
  ftip.style.top = Math.max(0, e.clientY - ftip.offsetHeight - 10) + 'px';
});
fcv.addEventListener('mouseleave', () => { ftip.hidden = true; });
fcv.addEventListener('click', (e) => flameSelect(flameAt(e.offsetX, e.offsetY)));
