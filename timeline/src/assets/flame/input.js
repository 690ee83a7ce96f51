// jtrace flame graph viewer: the controls, the mouse and the keys.

$('title').textContent = document.title;
{
  // The legend: causes present, the frame kinds, what a diff's colours say.
  const lg = $('legend');
  const item = (colour, text) => {
    const s = document.createElement('span');
    const i = document.createElement('i');
    i.style.background = colour;
    s.append(i, text);
    lg.append(s);
  };
  if (DIFF) {
    item('rgb(255,75,75)', 'grew from before to after');
    item('rgb(75,75,255)', 'shrank');
    item('#d6d9de', 'no change');
  } else {
    for (let c = 0; c < NC; c++) {
      if (MAIN.mask[0] & (1 << c)) item(CC[c], CAUSES[c] + (c === CPU ? ' (sampled)' : ''));
    }
    for (const [, [text, colour]] of Object.entries(KINDS)) item(colour, text + ' (top strip)');
  }
  const notes = $('notes');
  const said = DIFF ? [`before: ${D.profiles[0]}`, `after: ${D.profiles[1]}`] : [];
  for (const n of said.concat(D.selection.map((s) => 'selection: ' + s), D.notes)) {
    const d = document.createElement('div');
    d.textContent = n;
    notes.append(d);
  }
  // The graph choice: all causes, then each cause present.
  const sel = $('cause');
  const opt = (value, text) => {
    const o = document.createElement('option');
    o.value = value;
    o.textContent = text;
    sel.append(o);
  };
  opt('all', 'all causes');
  if (MAIN.mask[0] & (ALL_SEL & ~(1 << CPU))) opt('off', 'off-CPU, all causes');
  for (let c = 0; c < NC; c++) if (MAIN.mask[0] & (1 << c)) opt(String(c), CAUSES[c]);
  $('widthl').hidden = !DIFF;
  $('colour').disabled = DIFF;
}

function setCause(v) {
  view.sel = v === 'all' ? ALL_SEL : v === 'off' ? (ALL_SEL & ~(1 << CPU)) >>> 0 : (1 << Number(v)) >>> 0;
  $('cause').value = v;
  if (value(view.T, view.k, view.zoom, view.sel) === 0) view.zoom = 0;
  refresh();
}
function setInverted(on) {
  view.T = on ? invertedTree() : MAIN;
  view.zoom = 0;
  $('invert').checked = on;
  refresh();
}
function setSearch(q) {
  view.search = q.toLowerCase();
  matchCache.clear();
  $('search').value = q;
  refresh();
}
function zoomTo(i) {
  view.zoom = i < 0 ? 0 : i;
  refresh();
}
function refresh() {
  const m = matchedTotal();
  const all = value(view.T, view.k, 0, view.sel);
  $('matched').textContent = m === null ? '' : `matched ${fmtNs(m)} (${all ? ((100 * m) / all).toFixed(2) : 0} %)`;
  if (DIFF) sidePanel();
  draw();
}

$('cause').addEventListener('change', (e) => setCause(e.target.value));
$('colour').addEventListener('change', (e) => { view.colour = e.target.value; refresh(); });
$('invert').addEventListener('change', (e) => setInverted(e.target.checked));
$('width').addEventListener('change', (e) => { view.k = e.target.value === 'before' ? 1 : 0; view.zoom = 0; refresh(); });
$('reset').addEventListener('click', () => zoomTo(0));
$('search').addEventListener('input', (e) => setSearch(e.target.value));

cv.addEventListener('mousemove', (e) => {
  const r = cv.getBoundingClientRect();
  const i = nodeAt(e.clientX - r.left, e.clientY - r.top);
  if (i < 0) {
    tip.hidden = true;
    return;
  }
  tip.textContent = describe(i);
  tip.hidden = false;
  const x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 6);
  const y = e.clientY + 16 + tip.offsetHeight > window.innerHeight ? e.clientY - tip.offsetHeight - 8 : e.clientY + 16;
  tip.style.left = Math.max(0, x) + 'px';
  tip.style.top = Math.max(0, y) + 'px';
  writeState();
});
cv.addEventListener('mouseleave', () => { tip.hidden = true; });
cv.addEventListener('click', (e) => {
  const r = cv.getBoundingClientRect();
  const i = nodeAt(e.clientX - r.left, e.clientY - r.top);
  if (i >= 0) zoomTo(i);
});
window.addEventListener('keydown', (e) => {
  if (e.target === $('search')) {
    if (e.key === 'Escape') $('search').blur();
    return;
  }
  if (e.target.tagName === 'SELECT') return;
  if (e.key === '/') {
    e.preventDefault();
    $('search').focus();
  } else if (e.key === 'Escape') {
    zoomTo(view.T.parent[view.zoom]);
  } else if (e.key === 'i' || e.key === 'I') {
    setInverted(view.T === MAIN);
  } else if (e.key === 'c' || e.key === 'C') {
    const s = $('cause');
    s.selectedIndex = (s.selectedIndex + 1) % s.options.length;
    setCause(s.value);
  }
});
window.addEventListener('resize', () => draw());

// A diff's biggest changes of own time (in the graph's causes), by node.
function topChanges(k) {
  const T = view.T, out = [];
  if (!DIFF) return out;
  for (let i = 0; i < T.n; i++) {
    let d = 0;
    for (let c = 0; c < NC; c++) {
      if (!(view.sel & (1 << c))) continue;
      d += causeOwn(T, 0, i, c) - causeOwn(T, 1, i, c);
    }
    if (d !== 0) out.push([i, d]);
  }
  out.sort((a, b) => Math.abs(b[1]) - Math.abs(a[1]));
  return out.slice(0, k).map(([i, d]) => ({ node: i, delta: d, path: ancestors(T, i).slice(1).map((j) => nameOf(T, j)) }));
}
let sideClosed = false;
function sidePanel() {
  const side = $('side');
  side.hidden = sideClosed;
  side.textContent = '';
  const h = document.createElement('h4');
  h.textContent = 'largest changes of own time (click: zoom) ';
  const close = document.createElement('button');
  close.type = 'button';
  close.textContent = '×';
  close.title = 'hide this list';
  close.addEventListener('click', () => { side.hidden = true; sideClosed = true; });
  h.append(close);
  side.append(h);
  for (const t of topChanges(12)) {
    const d = document.createElement('div');
    d.textContent = `${t.delta > 0 ? '+' : ''}${fmtNs(t.delta)}  ${t.path.slice(-3).join(' ← ')}`;
    d.title = t.path.join('\n');
    d.style.color = t.delta > 0 ? '#b71c1c' : '#0d47a1';
    d.addEventListener('click', () => zoomTo(t.node));
    side.append(d);
  }
}
