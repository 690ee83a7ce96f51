// jtrace flame graph viewer: the page's data as trees, summed by cause.
//
// The viewer is self-contained: it reads the JSON embedded in the page,
// draws on one canvas and talks to no network. Its parts (this directory)
// share one function scope; flame.rs (`VIEWER`) inlines them in order.
//
// A tree is columns in preorder: parent, name, depth and `end` (one past
// the node's subtree, so a subtree is the range [i, end[i])). Time by
// cause is sparse: bit c of mask[i] says the subtree holds cause c, and
// its total is tot[off[i] + (number of lower bits set)]. Times are exact
// ns (doubles hold integers up to 2^53 ns, 104 days).

const T_START = performance.now();
const D = JSON.parse(document.getElementById('data').textContent);
const CAUSES = D.causes;
const NC = CAUSES.length;
const CPU = NC - 1;
const CAUSE_COLOR = {
  runqueue: '#e53935', monitor: '#8e24aa', wait: '#3949ab', park: '#1e88e5', sleep: '#c0ca33',
  gc: '#fb8c00', safepoint: '#ffb300', socket: '#00acc1', file: '#6d4c41', page_fault: '#d81b60',
  lock_native: '#5e35b1', syscall_other: '#546e7a', unknown: '#b0b0b0', tracer: '#212121',
  throttled: '#ff7043', steal: '#795548', cpu: '#43a047',
};
const CC = CAUSES.map((c) => CAUSE_COLOR[c] || '#888');
const NAMES = D.names;
const DIFF = !!D.diff;

function popcount(x) {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (((x + (x >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
}

// A tree from preorder columns: `parent` (-1 for the root), `name`, and
// each node's own time in each profile (`own[k][i]`: [cause, ns, …] or 0),
// `wak` (node → [waker, ns, …]).
function buildTree(parent, name, own, wak) {
  const n = parent.length;
  const depth = new Uint16Array(n), end = new Uint32Array(n), mask = new Uint32Array(n);
  let maxDepth = 0;
  for (let i = 1; i < n; i++) {
    depth[i] = depth[parent[i]] + 1;
    if (depth[i] > maxDepth) maxDepth = depth[i];
  }
  for (let i = n - 1; i >= 0; i--) {
    if (end[i] < i + 1) end[i] = i + 1;
    for (const o of own) {
      const v = o[i];
      if (v) for (let j = 0; j < v.length; j += 2) mask[i] |= 1 << v[j];
    }
    const p = parent[i];
    if (p >= 0) {
      mask[p] |= mask[i];
      if (end[p] < end[i]) end[p] = end[i];
    }
  }
  const off = new Uint32Array(n + 1);
  for (let i = 0; i < n; i++) off[i + 1] = off[i] + popcount(mask[i]);
  const slot = (i, c) => off[i] + popcount(mask[i] & ((1 << c) - 1));
  const tot = own.map((o) => {
    const t = new Float64Array(off[n]);
    for (let i = n - 1; i >= 0; i--) {
      const v = o[i];
      if (v) for (let j = 0; j < v.length; j += 2) t[slot(i, v[j])] += v[j + 1];
      const p = parent[i];
      if (p < 0) continue;
      for (let m = mask[i], k = off[i]; m; m &= m - 1, k++) {
        const c = 31 - Math.clz32(m & -m);
        t[slot(p, c)] += t[k];
      }
    }
    return t;
  });
  return { n, parent, name, depth, end, mask, off, tot, own, wak, maxDepth, slot };
}

// Total of node i in profile k over the causes in `sel` (a bit mask).
function value(T, k, i, sel) {
  let s = 0;
  const t = T.tot[k];
  for (let m = T.mask[i] & sel, all = T.mask[i]; m; m &= m - 1) {
    const c = 31 - Math.clz32(m & -m);
    s += t[T.off[i] + popcount(all & ((1 << c) - 1))];
  }
  return s;
}

// Node i's time of cause c in profile k (total or own).
function causeTotal(T, k, i, c) {
  return T.mask[i] & (1 << c) ? T.tot[k][T.slot(i, c)] : 0;
}
function causeOwn(T, k, i, c) {
  const v = T.own[k][i];
  if (!v) return 0;
  for (let j = 0; j < v.length; j += 2) if (v[j] === c) return v[j + 1];
  return 0;
}

// The profiles: the page's one (after), and the before one in a diff.
const OWN = DIFF ? [D.v, D.u] : [D.v];
const WAK = new Map(D.w.map(([node, list]) => [node, list]));
const MAIN = buildTree(Int32Array.from(D.p), Uint32Array.from(D.n), OWN, WAK);

// The inverted tree (callers): each node's own time put on the path from
// its frame up to the root's child, reversed; built when first asked for.
let INVERTED = null;
function invertedTree() {
  if (INVERTED) return INVERTED;
  const T = MAIN;
  const kids = [new Map()], iname = [0], iparent = [-1], iown = OWN.map(() => [0]), iwak = new Map();
  const child = (p, nm) => {
    let c = kids[p].get(nm);
    if (c === undefined) {
      c = iname.length;
      kids[p].set(nm, c);
      kids.push(new Map());
      iname.push(nm);
      iparent.push(p);
      for (const o of iown) o.push(0);
    }
    return c;
  };
  for (let i = 1; i < T.n; i++) {
    if (!OWN.some((o) => o[i]) && !T.wak.has(i)) continue;
    let c = 0;
    for (let j = i; j > 0; j = T.parent[j]) c = child(c, T.name[j]);
    OWN.forEach((o, k) => {
      const v = o[i];
      if (!v) return;
      const acc = iown[k][c] || (iown[k][c] = []);
      for (let j = 0; j < v.length; j += 2) {
        let at = -1;
        for (let q = 0; q < acc.length; q += 2) if (acc[q] === v[j]) at = q;
        if (at < 0) acc.push(v[j], v[j + 1]); else acc[at + 1] += v[j + 1];
      }
    });
    const w = T.wak.get(i);
    if (w) iwak.set(c, (iwak.get(c) || []).concat(w));
  }
  // Preorder, children by name.
  const order = [], stack = [0];
  while (stack.length) {
    const x = stack.pop();
    order.push(x);
    const ks = [...kids[x].values()].sort((a, b) => (NAMES[iname[b]] < NAMES[iname[a]] ? -1 : NAMES[iname[b]] > NAMES[iname[a]] ? 1 : 0));
    for (const k of ks) stack.push(k);
  }
  const pos = new Int32Array(order.length);
  order.forEach((old, i) => { pos[old] = i; });
  const parent = Int32Array.from(order, (old) => (iparent[old] < 0 ? -1 : pos[iparent[old]]));
  const name = Uint32Array.from(order, (old) => iname[old]);
  const own = iown.map((o) => order.map((old) => o[old] || 0));
  const wak = new Map();
  for (const [old, w] of iwak) wak.set(pos[old], w);
  INVERTED = buildTree(parent, name, own, wak);
  return INVERTED;
}

// What kind of code a frame is (its name's suffix, as async-profiler names them).
const KINDS = {
  '_[j]': ['Java, compiled', '#2e7d32'], '_[i]': ['Java, inlined', '#26a69a'],
  '_[0]': ['Java, interpreted', '#9ccc65'], '_[1]': ['Java, C1-compiled', '#66bb6a'],
  '_[k]': ['kernel', '#ef6c00'],
};
function kindOf(i, T) {
  const nm = NAMES[T.name[i]];
  if (i === 0) return ['all', '#90a4ae'];
  if (nm === D.scaled_frame) return ['scaled: stands for short blocks without a stack', '#bdbdbd'];
  if (nm === D.no_method_frame) return ['no traced method open, no stack', '#cfd8dc'];
  const m = nm.match(/_\[[jik01]\]$/);
  if (m) return KINDS[m[0]];
  if (/ \(\S+:\d+\)$/.test(nm)) return ['native, with its source line', '#c62828'];
  if (/ \[\d+\]$/.test(nm)) return ['thread', '#78909c'];
  return ['native code, or a traced Java method', '#e57373'];
}

const T_PREP = performance.now();
